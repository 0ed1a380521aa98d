"""A job's outcome recorded even while the run store's database restarts: the worker keeps
what it could not write and tries again (``JobContext.flush`` keeps the batch)."""
from __future__ import annotations

import sys
import time
from typing import Any

from cifarlab.errors import JobError
from cifarlab.serve.store import RunStore

SETTLE_PATIENCE_S = 600.0    # how long a finished run waits for an unreachable store


def settle(store: RunStore, ctx: Any, status: str, fields: dict,
           patience_s: float = SETTLE_PATIENCE_S) -> None:
    """Record the outcome (and what is still buffered); while the store cannot be reached
    (its database restarting) try again every second, for up to ``patience_s``."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            if ctx.flush(force=True):
                store.set_status(ctx.run_id, status, only_from=["running"], **fields)
                return
        except JobError as err:
            if err.code != "serve.store.unreachable":
                raise
        if time.monotonic() > deadline:
            print(f"cifarlab worker: run {ctx.run_id}: the run store stayed unreachable; its "
                  f"outcome ({status}) could not be recorded", file=sys.stderr, flush=True)
            return
        time.sleep(1.0)
