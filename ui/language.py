"""The student's language, and what is written in it: the translator, numbers, errors.
"""
from __future__ import annotations

import logging

import streamlit as st

from cifarlab import i18n
from cifarlab.errors import CifarLabError
from ui.internals import ensure_app_frame
from ui.session import cookie

LANG_COOKIE = "cifarlab_lang"   # the language across an identity provider's round trip
log = logging.getLogger("cifarlab.pages")


def lang() -> str:
    """The current language: the sidebar choice, first taken from ``?lang=`` in the URL (else
    the cookie the sign-in buttons leave: a provider sends the browser back without it)."""
    if "lang" not in st.session_state:
        st.session_state["lang"] = i18n.normalize_lang(
            st.query_params.get("lang") or cookie(LANG_COOKIE) or i18n.DEFAULT)
    return st.session_state["lang"]


def translator():
    """``t(key, **kwargs)`` in the current language (``t.lang`` names it). Name it ``t`` in
    pages (the catalog test scans for ``t("...")`` keys). Every page starts with it, so it also
    checks that the page runs inside the app's frame."""
    ensure_app_frame()
    return i18n.translator(lang())


def t(key: str, /, **kwargs) -> str:
    return i18n.t(key, lang(), **kwargs)


def num(value, digits: int | None = None) -> str:
    """A number in the page's language: ``num(50000)`` -> "50.000" in Spanish; None -> "–"."""
    return "–" if value is None else i18n.number(value, lang(), digits)


def pct(fraction, digits: int = 1) -> str:
    """A fraction as a percentage in the page's language: ``pct(0.553)`` -> "55,3 %"."""
    return "–" if fraction is None else i18n.percent(fraction, lang(), digits)


def dur(seconds) -> str:
    """A duration in the page's language: "0,25 s", "3 min 5 s"."""
    return "–" if seconds is None else i18n.duration(seconds, lang())


def localize(fig):
    """A plotly figure whose numbers (ticks, hover, bar labels) use the language's decimal
    and group symbols (the engines' figures come localized already)."""
    fig.update_layout(separators=i18n.separators(lang()))
    return fig


def error_text(err: Exception) -> str:
    """A CifarLabError in the student's language; anything else as one plain sentence (its
    details go to the server's log, never to the page: they can hold server paths)."""
    if isinstance(err, CifarLabError):
        return err.text(lang())
    log.error("unexpected error on a page", exc_info=err)
    return t("errors.unexpected_plain")


def show_error(err: Exception, **kwargs) -> None:
    st.error(error_text(err), **kwargs)
