"""The class experiment: the console's form, and its picture (console, projector, Home)."""
from __future__ import annotations

import streamlit as st

from cifarlab.errors import CifarLabError
from cifarlab.lab import classroom as words
from cifarlab.lab.train_form import knob_fields
from cifarlab.serve.classroom.model import MAX_VALUES
from pages.classroom_parts import act, classroom
from ui import messages
from ui.language import lang, show_error, t

K = "cls_ex_"
REFRESH_S = 3.0
FIELDS = knob_fields()


def _set(code: str, clear: bool) -> None:
    """The Set and Stop buttons' callback."""
    ss = st.session_state
    info = act(K + "msg", classroom().set_experiment, code,
               None if clear else ss.get(K + "knob"), ss.get(K + "values") or "",
               expected_version=ss.get("cls_seen", (None, None))[1],
               done=lambda i: t("classroom.experiment.stopped") if clear else
               t("classroom.experiment.started", version=i.version))
    if info is not None:
        ss["cls_seen"] = (info.code, info.version, lang())   # the preset form's version too


def console(cr, me, info, picture_shown: bool = True) -> None:
    """The console's tab: the form, and the picture when ``picture_shown`` (it polls)."""
    ex = info.experiment   # the form opens with the running one (else lr: a class's first)
    st.session_state.setdefault(K + "knob", ex.knob if ex else "lr")
    if ex is not None:
        st.session_state.setdefault(K + "values", words.values_text(ex, lang()))
    st.caption(t("classroom.experiment.help"))
    messages.show(K + "msg")
    labels = {f.name: t(f.knob.label) for f in FIELDS}
    with st.form(K + "form", border=False):
        a, b = st.columns([1, 2])
        a.selectbox(t("classroom.experiment.knob"), list(labels), key=K + "knob",
                    format_func=labels.get)
        b.text_input(t("classroom.experiment.values"), key=K + "values", max_chars=300,
                     placeholder="0.0001; 0.001; 0.01; 0.1; 1",
                     help=t("classroom.experiment.values_help", n=MAX_VALUES))
        st.form_submit_button(t("classroom.experiment.start"), on_click=_set, type="primary",
                              args=(info.code, False), key=K + "start",
                              icon=":material/science:")
    if info.experiment is None:
        st.caption(t("classroom.experiment.none"))
        return
    st.button(t("classroom.experiment.stop"), on_click=_set, key=K + "stop",
              args=(info.code, True), icon=":material/stop_circle:")
    if picture_shown:
        picture(cr, me, info.code)


def picture(cr, me, code: str | None, height: int = 640, font: int | None = None) -> None:
    """The class's picture and its CSV."""

    @st.fragment(run_every=REFRESH_S)
    def draw() -> None:
        try:
            view = cr.experiment(me, code)
        except CifarLabError as err:   # said alone: "no experiment" under it would contradict it
            show_error(err)
            return
        if view is None:
            st.info(t("classroom.experiment.none"))
            return
        knob = view.experiment.knob
        label = words.knob_label(knob, lang())
        values = ", ".join(words.shown(v, lang(), knob) for v in view.experiment.values)
        st.markdown(t("classroom.experiment.compares", knob=label, values=values))
        if not any(r.steps or r.accuracy is not None for r in view.rows):
            st.info(t("classroom.experiment.empty"))
        else:
            fig = words.experiment_figure(view, lang(), height, font)
            name = f"{code or 'class'}-{view.experiment.knob}"
            st.plotly_chart(fig, width="stretch", key=K + "chart", theme=None,
                            alt=t("a11y.experiment_chart", knob=label),
                            config={"displaylogo": False, "toImageButtonOptions": {
                                "format": "png", "filename": name, "scale": 2}})
            st.caption(t("classroom.experiment.png_hint"))
            st.download_button(t("classroom.experiment.csv"), words.experiment_csv(view),
                               file_name=f"{name}.csv", mime="text/csv", key=K + "csv",
                               icon=":material/download:", on_click="ignore")

    draw()
