"""A callback's message, kept in the session for the rerun it precedes and shown once there."""
from __future__ import annotations

import streamlit as st

from ui.language import error_text


def keep(key: str, kind: str, body) -> None:
    """``kind``: an ``st`` call's name ("error": ``body`` may be the exception itself)."""
    st.session_state[key] = (kind, body)


def show(key: str, once: bool = True, **kwargs) -> None:
    """The kept message; ``once=False``: shown until the next ``keep`` (a poll's)."""
    msg = st.session_state.pop(key, None) if once else st.session_state.get(key)
    if msg is not None:
        kind, body = msg
        if kind == "error":
            st.error(error_text(body) if isinstance(body, Exception) else body)
        elif body is not None:
            getattr(st, kind)(body, **kwargs)
