"""The decoded data set (once per process) and the job queue; a failure said, the page stops."""
from __future__ import annotations

import functools
import os
import sys

import streamlit as st

from cifarlab.errors import STORE_DOWN_CODES, STORE_DOWN_KEY, STORE_UNREACHABLE, CifarLabError
from ui.language import lang, pct, t


@st.cache_resource(show_spinner=False, max_entries=2)
def _load_data(source: str | None, cache: str | None):
    # the arguments are only the cache key: a changed CIFARLAB_DATA is never served old images
    from cifarlab.core import data

    return data.load()


@functools.lru_cache(maxsize=4)
def _decode_with_a_progress_bar(source: str | None, cache: str | None) -> None:
    """The first visit decodes every image once (tens of seconds): a bar says how far. Once per
    process and setting (the arguments are the key): checking the cache hashes the archive."""
    from cifarlab.core import data

    if data.is_cached():
        return
    bar = st.sidebar.progress(0.0, text=t("common.decoding"))  # in view wherever one scrolls

    def show(line: str) -> None:
        fraction = getattr(line, "fraction", None)
        if fraction is not None:
            bar.progress(fraction, text=t("common.decoding_pct", pct=pct(fraction, 0)))

    try:
        data.load(on_progress=show)
    except BaseException:   # a failed decode says why below; a bar stuck part-way would not
        bar.empty()
        raise
    # left full, not emptied: an emptied element keeps the sidebar drawn, empty, on a later page
    # that has none (the projector); the next rerun clears the bar
    bar.progress(1.0, text=t("common.decoded"))


def data_setting() -> tuple[str | None, str | None]:
    return os.environ.get("CIFARLAB_DATA"), os.environ.get("CIFARLAB_CACHE")


def get_data():
    try:
        _decode_with_a_progress_bar(*data_setting())
        with st.spinner(t("common.loading_data")):
            return _load_data(*data_setting())
    except CifarLabError as err:
        st.error(t("errors.data_unavailable", reason=err.text(lang())))
        st.stop()


def loading_notice():
    """"Loading" while torch is still to be imported (tens of seconds); the caller empties it."""
    box = st.empty()
    if "torch" not in sys.modules:
        box.status(t("loading.lab"), state="running")
    return box


def store_may_be_down(fn):
    """``fn`` (a page, a fragment), saying so when the run store cannot be reached."""
    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CifarLabError as err:
            if err.code != STORE_UNREACHABLE:
                raise
            st.warning(t(STORE_DOWN_KEY), icon=":material/cloud_off:")
    return guarded


def queue():
    from cifarlab.serve import queue as jobs

    try:
        q = jobs.get_queue()
    except CifarLabError as err:
        # the database down: no host or port (the host's log has them)
        down = err.code in STORE_DOWN_CODES
        st.error(t(STORE_DOWN_KEY) if down else err.text(lang()),
                 icon=":material/cloud_off:" if down else None)
        st.stop()
    notice = q.store_notice()   # the run store was damaged at start and recovered: say so once
    if notice is not None and not st.session_state.get("store_notice_seen"):
        st.session_state["store_notice_seen"] = True
        st.warning(notice.text(lang()), icon=":material/restore:")
    return q
