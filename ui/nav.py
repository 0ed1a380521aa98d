"""The pages in teaching order, their lessons and links, and the URL's state across pages."""
from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from cifarlab import i18n
from ui.language import lang, t, url_lang
from ui.session import session_id, signed_in

# Page id -> file, in teaching order. The id is the URL path (the same in every language).
PAGES = [
    ("home", "pages/home.py", ":material/school:"),
    ("tensors", "pages/tensors.py", ":material/view_in_ar:"),
    ("data", "pages/data.py", ":material/photo_library:"),
    ("network", "pages/network.py", ":material/hub:"),
    ("loss", "pages/loss.py", ":material/trending_down:"),
    ("train", "pages/train.py", ":material/model_training:"),
    ("results", "pages/results.py", ":material/insights:"),
    ("inside", "pages/inside.py", ":material/neurology:"),
    ("runs", "pages/runs.py", ":material/compare_arrows:"),
    ("gpu", "pages/gpu.py", ":material/speed:"),
    ("speed", "pages/speed.py", ":material/bolt:"),
]
INSTRUCTOR_PAGES = [("classroom", "pages/classroom.py", ":material/groups:")]
PRESENTER = ("view", "presenter")   # the classroom's projector view: ?view=presenter&class=CODE


def presenting(instructor: bool) -> bool:
    """An instructor's projector view: no sidebar, no session id in the URL the room reads."""
    return instructor and st.query_params.get(PRESENTER[0]) == PRESENTER[1]


def lesson(name: str) -> None:
    """A lesson's text in the current language, with the tutorial's lines it explains if any."""
    st.markdown(i18n.lesson(name, lang()))
    code = i18n.code_snippet(name)
    if code is None:
        return
    with st.expander(t("lesson.code_title")):
        st.code(code)


def lesson_links(current: str) -> None:
    """"Previous / next lesson" links under every page, in the syllabus's order (PAGES)."""
    ids = [pid for pid, _, _ in PAGES]
    if current not in ids:
        return
    i = ids.index(current)
    st.divider()
    for col, j, word in zip(st.columns(2), (i - 1, i + 1), ("nav.previous", "nav.next")):
        if 0 <= j < len(PAGES):
            pid, path, icon = PAGES[j]
            col.page_link(path, label=t(word, page=t(f"nav.{pid}")), icon=icon)


def url_state() -> dict[str, str]:
    return url_lang() | ({} if signed_in() else {"sid": session_id()})


def resume_link() -> str:
    """This session's own link (relative): open it on another device to see the same runs."""
    return "?" + urlencode({"sid": session_id(), **url_lang()})
