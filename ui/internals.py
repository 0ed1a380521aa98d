"""The two reaches into Streamlit's internals (pinned); each does nothing where they are missing."""
from __future__ import annotations

import streamlit as st


def set_fragment_interval(seconds: float | None) -> None:
    """The running fragment's poll interval, from inside it (an ``st.rerun()`` froze pages)."""
    try:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
        from streamlit.runtime.scriptrunner_utils.script_run_context import (ThreadState,
                                                                              get_script_run_ctx)

        ctx, fragment_id = get_script_run_ctx(), ThreadState.get().fragment_id
    except (ImportError, AttributeError, RuntimeError):
        return
    if seconds and ctx is not None and fragment_id:
        msg = ForwardMsg()
        msg.auto_rerun.interval = float(seconds)
        msg.auto_rerun.fragment_id = fragment_id
        ctx.enqueue(msg)


def ensure_app_frame() -> None:
    """A first visit straight to a page's URL runs it in legacy ``pages/`` mode: leave it, rerun."""
    if not st.session_state.get("_app_frame"):
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False
        st.rerun()
