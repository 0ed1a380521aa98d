"""The classroom page's parts (not pages), and what they share."""
from __future__ import annotations

import streamlit as st

from cifarlab.errors import CifarLabError
from cifarlab.lab import classroom as words
from cifarlab.serve.classroom.facade import Classroom, get_classroom
from ui import data, messages, signin


def classroom() -> Classroom:
    """The server's one Classroom, on the queue's run store."""
    return get_classroom(data.queue())


def join_link(code: str) -> str:
    return words.join_link(getattr(st.context, "url", None), code)


def act(key: str, call, *args, done=None, **kwargs):
    """A callback's engine call as the signed-in person: its refusal kept under ``key`` (to
    show with ``messages.show``), or ``done(result)``'s words; None when refused."""
    try:
        result = call(signin.person(), *args, **kwargs)
    except CifarLabError as err:
        messages.keep(key, "error", err)
        return None
    if done is not None:
        messages.keep(key, "success", done(result))
    return result
