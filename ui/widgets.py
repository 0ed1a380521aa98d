"""Number boxes that answer in the student's language, a measurement kept, a chart's click."""
from __future__ import annotations

import streamlit as st

from cifarlab import i18n
from cifarlab.errors import CifarLabError
from ui.language import lang, show_error, t


def checked_number(where, label: str, lo, hi, value, *, key: str, step=1, help=None,
                   persist_state=None):
    """None with our message when empty or out of range (Streamlit's bounds answer in English)."""
    got = where.number_input(label, value=value, step=step, key=key, help=help,
                             persist_state=persist_state)
    if got is None or not lo <= got <= hi:
        where.error(t("common.out_of_range", lo=lo, hi=hi))
        return None
    return got


def decimal_box(where, label: str, lo: float, hi: float, value: float, *, key: str,
                help=None) -> float | None:
    """A decimal read with either mark (a number box turns "0,5" into 5); None with our message."""
    if key not in st.session_state:
        st.session_state[key] = i18n.number(float(value), lang())
    got = i18n.parse_decimal(where.text_input(label, key=key, help=help, max_chars=24))
    if got is None or not lo <= got <= hi:
        where.error(t("common.out_of_range", lo=lo, hi=hi))
        return None
    return got


def measured(key: str, measure, disabled: bool = False):
    """``measure()``'s result, run by a Measure button and kept; None before, or while disabled."""
    if st.button(t("common.measure"), key=key + "_run", type="primary", disabled=disabled):
        with st.spinner(t("common.measuring")):
            try:
                st.session_state[key + "_result"] = measure()
            except (CifarLabError, RuntimeError, OSError) as err:
                show_error(err)
    return None if disabled else st.session_state.get(key + "_result")


def clicked_points(event) -> list:
    selection = getattr(event, "selection", None) or {}
    points = selection.get("points", []) if hasattr(selection, "get") else []
    return [p for p in points if hasattr(p, "get")]


def clicked_cell(event) -> tuple[int, int] | None:
    cells = [(int(p["y"]), int(p["x"])) for p in clicked_points(event)
             if isinstance(p.get("x"), (int, float)) and isinstance(p.get("y"), (int, float))]
    return cells[-1] if cells else None
