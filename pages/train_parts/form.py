"""The Train page's settings (the knobs' widget keys are ui/train_form.py's) and its lesson."""
from __future__ import annotations

import time

import streamlit as st

from cifarlab.core.config import PRESETS
from cifarlab.errors import CifarLabError
from cifarlab.lab import eta
from pages.classroom_parts import student as classroom_student
from ui import train_form
from ui.data import queue as get_queue
from ui.language import lang, t
from ui.nav import lesson
from ui.session import session_id
from ui.signin import owner_id

K = "train_"          # the page's keys; the knobs' are ui/train_form.py's
PER_ROW = 3           # preset buttons and knobs in a row


def _forget_message() -> None:   # a changed knob makes the last Train message old news
    st.session_state.pop(K + "submit_msg", None)


def _flash(kind: str, text: str, field: str | None = None) -> None:
    st.session_state[K + "submit_msg"] = (kind, text, field, time.monotonic())


def _apply_preset(name: str) -> None:
    """A preset button's callback (the class's locked knobs stay; the page says which)."""
    _forget_message()
    st.session_state[K + "preset_kept"] = train_form.get().apply_preset(name)


def _submit() -> None:
    form, ss = train_form.get(), st.session_state
    config = form.config()
    if config is None:
        return _flash("error", t("train.config_errors"))
    try:
        run_id = get_queue().submit(session_id(), config, name=ss.get(K + "name") or None,
                                    owner=owner_id())
    except CifarLabError as err:   # beside its widget when it names one
        return _flash("error", err.text(lang()), form.refused(err.field))
    _flash("success", t("train.started"))
    ss[K + "run_select"] = run_id
    ss[K + "name"] = ""   # the next run gets its own name


def current_message() -> tuple | None:
    """What pressing Train said, for 5 s (past the rerun that queued -> running makes)."""
    msg = st.session_state.get(K + "submit_msg")
    if msg is not None and time.monotonic() - msg[3] > 5.0:
        st.session_state.pop(K + "submit_msg", None)
        return None
    return msg


def presets(form) -> None:
    """The presets, PER_ROW a row (six in one were cut off); in a class, the class's own first."""
    current = form.preset_name()
    names = (["class"] if form.class_values() else []) + list(PRESETS)
    st.markdown(f"**{t('train.preset')}**", help=t("train.preset_help"))
    for row in range(0, len(names), PER_ROW):
        for col, name in zip(st.columns(PER_ROW), names[row:row + PER_ROW]):
            col.button(t(f"train.preset_{name}"), key=K + "preset_" + name, wrap=True,
                       on_click=_apply_preset, args=(name,), width="stretch",
                       type="primary" if name == current else "secondary")
    st.caption(t(f"train.preset_{current}_help") if current else t("train.custom"))
    kept = st.session_state.pop(K + "preset_kept", ())
    if kept:
        labels = {w.name: w.label for w in form.widgets()}
        st.info(t("train.preset_kept", knobs=", ".join(labels.get(k, k) for k in kept)),
                icon=":material/lock:")


def knobs(widgets) -> None:
    for row in range(0, len(widgets), PER_ROW):
        for col, w in zip(st.columns(PER_ROW), widgets[row:row + PER_ROW]):
            with col:
                train_form.widget(w, _forget_message)


def lesson_section() -> None:
    """The training loop's lesson: open on the first visit, afterwards as the student left it."""
    ss = st.session_state
    if not ss.get(K + "lesson_seen"):
        ss[K + "lesson_seen"] = ss[K + "lesson"] = True
    with st.expander(t("lesson.title") + ": " + t("nav.train"), key=K + "lesson",
                     on_change="rerun", icon=":material/school:"):
        lesson("training")
    with st.expander(t("lesson.title") + ": " + t("train.val_lesson"), key=K + "val_lesson",
                     icon=":material/school:"):
        lesson("validation")


def settings(form, queue) -> None:
    msg = current_message()
    st.subheader(t("train.settings_title"))
    classroom_student.pushed(form, t)   # the class's values and locks, with its banner
    train_form.link_problems(form)
    train_form.show(form)
    presets(form)
    widgets = form.widgets()
    knobs([w for w in widgets if not w.advanced])
    st.text_input(t("train.run_name"), key=K + "name", max_chars=100,
                  help=t("train.run_name_help"), placeholder=t("train.run_name_placeholder"))
    st.button(t("train.start"), key=K + "start", type="primary", on_click=_submit,
              icon=":material/play_arrow:")
    config = form.config()   # always one line here (the fragment below keeps its place)
    st.caption("" if config is None else eta.text(eta.for_form(
        config, queue.device_for(config.device), queue.measured_speeds(),
        queue.runs(session_id(), kind="train")[:50]), lang()))
    with st.container():  # one place, shown or empty: the fragment below keeps its place
        if msg is not None:   # a refusal (the class's rules, a lock, a limit) beside Train
            (st.error if msg[0] == "error" else st.success)(msg[1])
            if msg[0] == "error":
                for p in form.problems().values():
                    st.markdown(f"- {p.text(lang())}")
    with train_form.advanced(form, t("train.advanced"), msg[2] if msg else None):
        st.caption(t("train.advanced_help"))
        knobs([w for w in widgets if w.advanced])
    train_form.share(form)
    limits = queue.settings
    st.caption(t("train.limits", epochs=t("counts.epochs", n=limits.max_epochs),
                 images=t("counts.train_images", n=limits.max_train_images),
                 runs=t("counts.runs", n=limits.max_per_owner)))
