"""The two places that reach into Streamlit's internals (its version is pinned in
requirements.txt); each does nothing where those internals are not found."""
from __future__ import annotations

import streamlit as st


def set_fragment_interval(seconds: float | None) -> bool:
    """Change how often the running fragment polls, from inside it: True if it was asked.

    Otherwise only an ``st.rerun()`` of the page changes it, and reruns from inside a polling
    fragment collided with its timer under load (pages froze). This sends the browser the
    ``auto_rerun`` message run_every sends, for the fragment running now."""
    if not seconds:
        return False
    try:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        from streamlit.runtime.scriptrunner_utils.script_run_context import (ThreadState,
                                                                              get_script_run_ctx)

        ctx, fragment_id = get_script_run_ctx(), ThreadState.get().fragment_id
    except (ImportError, AttributeError, RuntimeError):
        return False
    if ctx is None or not fragment_id:
        return False
    msg = ForwardMsg()
    msg.auto_rerun.interval = float(seconds)
    msg.auto_rerun.fragment_id = fragment_id
    ctx.enqueue(msg)
    return True


def ensure_app_frame() -> None:
    """Make sure this run came through app.py's navigation (app.py sets ``_app_frame``): a
    fresh server's first visit straight to a page's URL runs it alone, in Streamlit's legacy
    ``pages/`` mode (no language switch); such a page turns that mode off and reruns."""
    if not st.session_state.get("_app_frame"):
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False
        st.rerun()
