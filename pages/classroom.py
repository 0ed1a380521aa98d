"""Classroom: the instructor's console. Each action is one call into ``Classroom``, which checks
the role itself: a student who reaches this page sees a message, and the engine refuses them."""
from __future__ import annotations

import functools

import streamlit as st

from cifarlab.core.safe_text import md_escape
from cifarlab.lab import classroom as words
from cifarlab.lab.train_form import knob_fields, knob_value, widget_value
from cifarlab.serve.classroom.model import ClassLimits
from pages import classroom_parts as parts
from pages.classroom_parts import experiment, live, presenter
from ui.data import queue
from ui import messages, train_form
from ui.language import call_or_show, lang, translator
from ui.nav import lesson, presenting
from ui.signin import person

t = translator()
K = "cls_"            # widget keys: cls_code, cls_p_epochs, cls_l_epochs, ...


# ------------------------------------------------------------------------------- the class
act = functools.partial(parts.act, K + "msg")   # an engine call from a callback, refusal kept


def _create() -> None:
    info = act(cr.create_class, st.session_state.get(K + "title", ""),
               done=lambda i: t("classroom.created", code=i.code))
    if info is not None:
        st.session_state[K + "code"] = info.code
        st.session_state[K + "title"] = ""


def create_form(expanded: bool) -> None:
    with st.expander(t("classroom.create_title"), expanded=expanded, icon=":material/add:"):
        with st.form(K + "create", border=False):
            st.text_input(t("classroom.title_label"), key=K + "title", max_chars=200,
                          placeholder=t("classroom.title_placeholder"))
            st.form_submit_button(t("classroom.create_button"), on_click=_create,
                                  key=K + "create_btn", type="primary")


def class_header(info) -> None:
    link = parts.join_link(info.code)
    left, right = st.columns([3, 1])
    with left:
        st.markdown(f"#### {md_escape(info.title)}")
        st.markdown(f"{t('classroom.code_caption')}: **`{info.code}`** · "
                    + t("classroom.members", n=info.members))
        st.caption(t("classroom.join_link"), help=t("classroom.join_link_help"))
        st.code(link, language=None, wrap_lines=True)
        st.toggle(t("classroom.open_toggle"), value=info.is_open, key=K + f"open_{info.code}",
                  on_change=_toggle_open, args=(info.code,))
    right.image(words.qr_png(link), width=180, alt=t("classroom.qr_alt", code=info.code))


def _toggle_open(code: str) -> None:
    act(cr.set_open, code, bool(st.session_state.get(K + f"open_{code}")))


# ------------------------------------------------------------------------------ the preset
FIELDS = knob_fields()


def _load_preset(info) -> None:
    """Fill the preset's widgets from the class (another class chosen, or another language)."""
    ss, values = st.session_state, {f.name: f.default for f in FIELDS} | dict(info.preset)
    for f in FIELDS:
        ss[K + "p_" + f.name] = widget_value(f.knob.kind, values[f.name], lang())
        ss[K + "l_" + f.name] = f.name in info.locked
    ss[K + "seen"] = (info.code, info.version, lang())


def _push(code: str) -> None:
    ss = st.session_state
    typed = {f.name: knob_value(f.knob.kind, ss.get(K + "p_" + f.name)) for f in FIELDS}
    info = act(cr.push_preset, code, typed, [f.name for f in FIELDS if ss.get(K + "l_" + f.name)],
               ss[K + "seen"][1], done=lambda i: t("classroom.preset.pushed", version=i.version))
    # refused as stale: the values typed stay, and a second push overwrites the other change
    ss[K + "seen"] = (code, (info or cr.get_class(person(), code)).version, lang())


def knob_box(f) -> None:
    k, label = f.knob, t(f.knob.label)
    options = (["auto"] + queue().devices() if k.kind == "device" else  # in words, as on Train
               list(k.choices) if k.kind == "choice" else [])
    train_form.knob_input(k.kind, label, {v: words.shown(v, lang(), f.name) for v in options},
                          int(k.step), key=K + "p_" + f.name)
    # no help icon: beside one, a long label was cut off ("Lock Learning rate sched…")
    st.checkbox(t("classroom.preset.lock", knob=label), key=K + "l_" + f.name)
    if f.name == "seed":
        st.caption(t("classroom.preset.seed_note"))


def preset_form(info) -> None:
    st.caption(t("classroom.preset.help"))
    with st.form(K + "preset", border=False):
        columns, per_col = st.columns(3), -(-len(FIELDS) // 3)
        for i, f in enumerate(FIELDS):
            with columns[i // per_col]:
                knob_box(f)
        st.form_submit_button(t("classroom.preset.push"), on_click=_push, args=(info.code,),
                              key=K + "push_btn", type="primary", icon=":material/send:")


# ------------------------------------------------------------------------------ the limits
def _save_limits(code: str) -> None:
    ss = st.session_state
    devices = ss.get(K + "lim_devices")
    info = act(cr.set_limits, code, ClassLimits(
        ss.get(K + "lim_epochs"), ss.get(K + "lim_images"), tuple(devices) if devices else None,
        ss.get(K + "lim_runs")), ss[K + "seen"][1],
        done=lambda i: t("classroom.limits.saved", version=i.version))
    if info is not None:
        ss[K + "seen"] = (info.code, info.version, lang())


def limits_form(info) -> None:
    lim = info.limits
    st.caption(t("classroom.limits.help"))
    with st.form(K + "limits", border=False):
        a, b, c, d = st.columns(4)
        a.number_input(t("classroom.limits.epochs"), value=lim.max_epochs, step=1,
                       format="%d", key=K + "lim_epochs")
        b.number_input(t("classroom.limits.images"), value=lim.max_train_images, step=500,
                       format="%d", key=K + "lim_images")
        c.multiselect(t("classroom.limits.devices"), queue().devices(),
                      default=[x for x in (lim.devices or ()) if x in queue().devices()],
                      key=K + "lim_devices", help=t("classroom.limits.devices_help"))
        d.number_input(t("classroom.limits.runs"), value=lim.max_runs_per_student, step=1,
                       format="%d", key=K + "lim_runs")
        st.form_submit_button(t("classroom.limits.save"), on_click=_save_limits, key=K + "lim_btn",
                              args=(info.code,))


# ------------------------------------------------------------------------------------ page
me = person()
cr = parts.classroom()
if not me.instructor:
    st.title(t("nav.classroom"))
    st.warning(t("classroom.instructors_only"), icon=":material/lock:")
    st.stop()

if presenting(me.instructor):   # app.py drew no sidebar: nothing personal on the projector
    presenter.view(cr, me, st.query_params.get(words.CODE_PARAM))
    st.stop()

st.title(t("nav.classroom"))
st.caption(t("classroom.intro"))
with st.expander(t("lesson.title") + ": " + t("nav.classroom"), expanded=False):
    lesson("classroom")
with st.container():   # there on every run (shown or empty), so that nothing below it moves
    messages.show(K + "msg")
classes = call_or_show(cr.my_classes, me)
if classes is None:
    st.stop()
create_form(expanded=not classes)
if not classes:
    st.info(t("classroom.no_classes"))
    st.stop()

by_code = {c.code: c for c in classes}
if st.session_state.get(K + "code") not in by_code:
    st.session_state[K + "code"] = classes[0].code
info = by_code[st.selectbox(t("classroom.choose_class"), list(by_code), key=K + "code",
                            format_func=lambda c: t("classroom.class_option",
                                                    title=by_code[c].title, code=c))]
class_header(info)

# the preset form's values and the class version every form's stale check sends
if st.session_state.get(K + "seen", (None,))[0] != info.code or \
        st.session_state[K + "seen"][2] != lang():
    _load_preset(info)

# keyed: the tab stays when a message comes or goes; only the open tab polls, forms are in each
board_tab, preset_tab, limits_tab, challenge_tab, experiment_tab = st.tabs([
    t("classroom.board.title"), t("classroom.preset.title"), t("classroom.limits.title"),
    t("classroom.challenge.title"), t("classroom.experiment.title")], key=K + "tabs",
    on_change="rerun")
if board_tab.open:
    with board_tab:
        live.board_section(cr, me, info.code)
with preset_tab:
    preset_form(info)
with limits_tab:
    limits_form(info)
with challenge_tab:
    live.challenge_section(cr, me, info, boards_shown=challenge_tab.open)
with experiment_tab:
    experiment.console(cr, me, info, picture_shown=experiment_tab.open)
