"""The student's language, and what is written in it: the translator, numbers, errors."""
from __future__ import annotations

import logging

import streamlit as st

from cifarlab import i18n
from cifarlab.errors import CifarLabError
from ui.internals import ensure_app_frame
from ui.session import cookie

LANG_COOKIE = "cifarlab_lang"   # the language across an identity provider's round trip
CHOSEN_KEY = "lang_chosen"      # the person named the language (the switch, or ?lang=)
log = logging.getLogger("cifarlab.pages")


def lang() -> str:
    """The one named (``?lang=``, or the cookie a sign-in round trip keeps), else the browser's."""
    if "lang" not in st.session_state:
        named = st.query_params.get("lang") or cookie(LANG_COOKIE)
        if named:
            choose(named)
        else:
            st.session_state["lang"] = i18n.normalize_lang(st.context.locale)
    return st.session_state["lang"]


def choose(code: str) -> None:
    st.session_state["lang"] = i18n.normalize_lang(code)
    st.session_state[CHOSEN_KEY] = True


def url_lang() -> dict[str, str]:
    """``{"lang": code}`` for this person's URLs when they chose it, else nothing."""
    return {"lang": lang()} if st.session_state.get(CHOSEN_KEY) else {}


def _switched(key: str) -> None:
    picked = st.session_state.get(key)
    if picked in i18n.LANGUAGES:   # a segmented control clicked twice picks nothing
        choose(picked)


def language_switch(key: str, *, compact: bool = False) -> None:
    """A select box, or ``compact`` buttons (Home's: a phone hides the sidebar)."""
    st.session_state[key] = lang()
    label = (":material/translate: " if compact else "") + t("sidebar.language")
    (st.segmented_control if compact else st.selectbox)(
        label, list(i18n.LANGUAGES), key=key, format_func=i18n.LANGUAGES.__getitem__,
        on_change=_switched, args=(key,))


def translator():
    """``t`` in the current language; every page starts with it, so it checks the app's frame."""
    ensure_app_frame()
    return i18n.translator(lang())


def t(key: str, /, **kwargs) -> str:
    return i18n.t(key, lang(), **kwargs)


def num(value, digits: int | None = None) -> str:
    return i18n.number(value, lang(), digits)


def pct(fraction, digits: int = 1) -> str:
    return i18n.percent(fraction, lang(), digits)


def dur(seconds) -> str:
    return i18n.duration(seconds, lang())


def error_text(err: Exception) -> str:
    """A CifarLabError in the student's words; else one sentence (details can hold paths)."""
    if isinstance(err, CifarLabError):
        return err.text(lang())
    log.error("unexpected error on a page", exc_info=err)
    return t("errors.unexpected_plain")


def show_error(err: Exception, **kwargs) -> None:
    st.error(error_text(err), **kwargs)


def call_or_show(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except CifarLabError as err:
        show_error(err)
        return None
