"""The two places that reach into Streamlit's internals (its version is pinned in
requirements.txt); each does nothing where those internals are not found."""
from __future__ import annotations

import streamlit as st


def set_fragment_interval(seconds: float | None) -> bool:
    """Change how often the running fragment polls, from inside it: True if it was asked.

    ``st.fragment(run_every=...)`` fixes the interval when the whole page runs; changing it
    otherwise takes an ``st.rerun()`` of the page, and reruns from inside a polling fragment
    collided with its timer under load (pages froze). The browser keeps one timer per fragment
    and replaces it when told a new interval (an ``auto_rerun`` message, the one run_every
    sends), so this sends that message for the fragment running now. Without the internals it
    does nothing, and the fragment keeps the interval the page gave it."""
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
    """Make sure this run came through app.py's navigation (app.py sets ``_app_frame``).

    While a folder called ``pages/`` exists, a fresh server's first script run uses Streamlit's
    legacy folder-based multipage mode (until ``st.navigation`` is first called). A first visit
    straight to a page's URL would then run that page alone: no language switch, file names in
    the sidebar. A page reached that way turns the legacy mode off and reruns through app.py.
    """
    if not st.session_state.get("_app_frame"):
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False
        st.rerun()
