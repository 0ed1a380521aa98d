"""``streamlit run server.py``: app.py in ``st.App``, the job queue started with the server."""
from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager

import streamlit as st

log = logging.getLogger("cifarlab.server")


def start_queue():
    """The job queue with its dispatcher running, or None (a wrong hosting setting, logged)."""
    from cifarlab.errors import CifarLabError
    from cifarlab.serve import queue as jobs

    try:
        queue = jobs.get_queue()
    except CifarLabError as err:
        log.error("cifarlab: the job queue did not start: %s", err)
        return None
    log.info("cifarlab: the job queue runs (%d queued)", queue.store.counts()["queued"])
    return queue


@asynccontextmanager
async def lifespan(_app):
    queue = await asyncio.to_thread(start_queue)
    yield
    if queue is not None:
        await asyncio.to_thread(queue.shutdown)


app = st.App("app.py", lifespan=lifespan)
