"""The session's ``TrainForm`` and its widgets (keys ``train_<knob>``: only this module's)."""
from __future__ import annotations

import dataclasses
from urllib.parse import urlencode

import streamlit as st

from cifarlab.lab.train_form import TrainForm, Widget
from cifarlab.serve import queue as jobs
from ui.data import queue
from ui.language import lang, t

PREFIX = "train_"                 # the widgets' keys: train_epochs, train_lr, ...
KEY, SHOWN = "train_form", "train_form_shown"   # the form; the revision the widgets show
LINK_PROBLEMS = "train_form_link_problems"       # what the opened link set that was refused
ADVANCED, ADVANCED_WAS = "train_form_advanced", "train_form_advanced_was"


@st.cache_resource(show_spinner=False)
def device_ids() -> list[str]:
    return queue().devices()


def get() -> TrainForm:
    """The session's form, the widgets' values taken in while they show its latest revision."""
    ss = st.session_state
    limits = dataclasses.replace(queue().settings.limits(), devices=tuple(device_ids()))
    form = ss.get(KEY)
    if form is None:   # a first visit: the link's experiment, if it has one
        form = ss[KEY] = TrainForm(lang(), limits, jobs.FULL_TRAIN_IMAGES)
        ss[LINK_PROBLEMS] = form.from_link(st.query_params.to_dict())
    else:
        form.limits = limits
        if ss.get(SHOWN) == form.revision:
            form.take({n: ss[PREFIX + n] for n in form.names if PREFIX + n in ss})
        form.set_lang(lang())
    show(form)
    return form


def show(form: TrainForm) -> None:
    """Put the form's values into the widgets' state (before they are drawn)."""
    ss = st.session_state
    for name in form.names:
        if PREFIX + name not in ss or ss[PREFIX + name] != form.shown(name):
            ss[PREFIX + name] = form.shown(name)
    ss[SHOWN] = form.revision


def link_problems(form: TrainForm) -> None:
    problems = st.session_state.get(LINK_PROBLEMS)
    if problems:
        st.warning("\n".join([t("train.link.problems")] + [f"- {p.text(form.lang)}"
                                                            for p in problems]),
                   icon=":material/link_off:")


def share(form: TrainForm) -> None:
    query = urlencode(form.link())
    with st.popover(t("train.link.share"), icon=":material/link:"):
        st.caption(t("train.link.share_help"))
        st.code((st.context.url or "").split("?")[0] + ("?" + query if query else ""),
                language=None, wrap_lines=True)


def knob_input(kind: str, label: str, labels: dict | None = None, step: int = 1, **common):
    """A knob's input by its kind (``labels``: a choice's options and their words)."""
    if labels:   # a choice's words are long: radio labels wrap where a select box cut them off
        return (st.selectbox if kind == "device" else st.radio)(
            label, list(labels), format_func=labels.get, **common)
    if kind == "bool":
        return st.toggle(label, **common)
    if kind == "float":   # text: a browser's number box turns a Spanish "0,01" into 1
        return st.text_input(label, max_chars=24, **common)
    return st.number_input(label, step=step, format="%d", **common)


def widget(w: Widget, on_change) -> None:
    knob_input(w.kind, w.label, dict(zip(w.options, w.option_labels)), w.step,
               key=PREFIX + w.name, on_change=on_change, help=w.help, disabled=w.disabled,
               **({"placeholder": w.placeholder} if w.kind == "int" else {}))
    if w.note:
        st.caption(w.note)
    if w.problem:
        st.error(w.problem, icon=":material/error:")


def advanced(form: TrainForm, label: str, refused: str | None = None):
    """Opened when one of its knobs comes to differ from the tutorial's, never closed by us."""
    ss = st.session_state
    changed = set(form.advanced_changed()) | ({refused} & set(form.advanced))
    if ADVANCED not in ss or changed - ss.get(ADVANCED_WAS, set()):
        ss[ADVANCED] = bool(changed)
    ss[ADVANCED_WAS] = changed
    return st.expander(label, key=ADVANCED, on_change="rerun", icon=":material/tune:")
