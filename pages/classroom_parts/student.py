"""What a student sees of their class: Home's ``join_box``, and Train's ``pushed`` values."""
from __future__ import annotations

import streamlit as st

from cifarlab.lab import classroom as words
from cifarlab.serve.classroom.model import StudentView
from pages.classroom_parts import act, classroom, experiment
from ui import language, messages, session, signin

def student_view() -> StudentView | None:
    """The student's class as the engine shows it to them (None when in none), once per run."""
    return language.call_or_show(lambda: classroom().student_view(signin.person()))


def _join(t) -> None:
    """The Join button's callback: the engine checks the code, the nickname and the rate."""
    ss = st.session_state
    if act("class_join_msg", classroom().join, ss.get("class_join_code", ""),
           ss.get("class_join_nickname", ""), session.session_id(),
           done=lambda m: t("classroom.join.joined", title=m.title, nickname=m.nickname)):
        st.query_params.pop(words.CODE_PARAM, None)


def join_box(t, view: StudentView | None) -> None:
    """Home's "join a class" box, or the class banner with a Leave button once joined."""
    ss = st.session_state
    if view is None:
        link_code = st.query_params.get(words.CODE_PARAM)
        if link_code and "class_join_code" not in ss:
            ss["class_join_code"] = str(link_code)[:40]
        with st.container(border=True):
            st.markdown(f"**{t('classroom.join.title')}**", help=t("classroom.join.help"))
            with st.form("class_join", border=False, enter_to_submit=True):
                left, right = st.columns(2)
                left.text_input(t("classroom.join.code"), key="class_join_code", max_chars=40,
                                placeholder="K7M-4PX")
                # more than the engine's 24: a longer nickname gets the engine's message
                right.text_input(t("classroom.join.nickname"), key="class_join_nickname",
                                 max_chars=600, help=t("classroom.join.nickname_help"))
                st.form_submit_button(t("classroom.join.button"), on_click=_join, args=(t,),
                                      key="class_join_btn",
                                      type="primary", icon=":material/login:")
    else:
        banner(t, view)
        st.button(t("classroom.join.leave"), key="class_leave", on_click=act,
                  args=("class_join_msg", classroom().leave),
                  kwargs={"done": lambda _: t("classroom.join.left")}, icon=":material/logout:")
        if view.experiment is not None:   # where the student's runs sit in the class's
            with st.expander(t("classroom.experiment.title"), expanded=True,
                             icon=":material/science:"):
                experiment.picture(classroom(), signin.person(), view.membership.code)
    messages.show("class_join_msg")


def banner(t, view: StudentView) -> None:
    """The class, the knobs it locked, the challenge's goal and the student's place."""
    m = view.membership
    lines = [t("classroom.banner.class", title=m.title, nickname=m.nickname)]
    if view.locked:   # only these are fixed: the other knobs are the student's to change
        lines.append(t("classroom.banner.locked", knobs=", ".join(
            words.knob_label(k, language.lang()) for k in view.locked)))
    if view.experiment is not None:
        knob = view.experiment.knob
        lines.append(t("classroom.banner.experiment", knob=words.knob_label(knob, language.lang()),
                       value=words.shown(view.preset.get(knob), language.lang(), knob)))
    ch = view.challenge
    if ch is not None:
        lines.append(t("classroom.banner.goal", goal=words.goal_text(ch.goal, language.lang())))
        if not ch.is_open:
            lines.append(t("classroom.banner.revealed"))
        elif view.rank is not None:
            lines.append(t("classroom.banner.rank", rank=view.rank, n=view.ranked))
        else:
            lines.append(t("classroom.banner.unranked"))
    st.info("  \n".join(lines), icon=":material/groups:")


def pushed(form, t) -> None:
    """The Train page's hook: the class's banner, and its values (the pushed knobs, the
    student's own seed) and locked knobs into the Train form (``TrainForm.apply_class``)."""
    view = student_view()
    if view is None:
        form.apply_class(None)
        return
    banner(t, view)
    reason = t("errors.class.locked_reason", title=view.membership.title)
    form.apply_class(view.values, {knob: reason for knob in view.locked},
                     (view.membership.code, view.version))
