"""The Train page's learning-rate finder: a queued sweep, its curve, the suggested lr."""
from __future__ import annotations

import streamlit as st

from cifarlab import i18n
from cifarlab.core import lr_finder as engine
from cifarlab.errors import CifarLabError
from cifarlab.lab import train_lr_finder as finder
from ui import messages, train_form
from ui.data import queue as get_queue
from ui.language import lang, t
from ui.nav import lesson
from ui.session import session_id
from ui.signin import owner_id

K = "train_lrf_"      # this part's keys


def _start() -> None:
    ss = st.session_state
    config = train_form.get().config()
    sweep, problems = finder.read(ss.get(K + "steps"), ss.get(K + "lo"), ss.get(K + "hi"))
    if config is None or problems:
        ss[K + "msg"] = ("error", t("train.lr_find.fix_settings") if config is None else
                         next(iter(problems.values())).text(lang()))
        return
    try:
        get_queue().submit(session_id(), config, owner=owner_id(), sweep=sweep)
    except CifarLabError as err:   # the owner's limits, the queue's room, the class's rules
        ss[K + "msg"] = ("error", err.text(lang()))


def _use(lr: float) -> None:
    """"Use this learning rate" (drawn disabled while a class locks the lr)."""
    train_form.get().apply_preset({"lr": lr})
    messages.keep(K + "msg", "success", t("train.lr_find.used", lr=i18n.number(lr, lang())))


def _boxes() -> dict | None:
    for key, value in (("lo", engine.LR_MIN), ("hi", engine.LR_MAX)):
        st.session_state.setdefault(K + key, i18n.number(value, lang()))
    c1, c2, c3 = st.columns(3)
    steps = c1.number_input(t("train.lr_find.steps"), value=engine.STEPS, step=10, format="%d",
                            key=K + "steps", help=t("train.lr_find.steps_help",
                                                    lo=engine.MIN_STEPS, hi=engine.MAX_STEPS))
    lo = c2.text_input(t("train.lr_find.lr_from"), key=K + "lo", max_chars=24,
                       help=t("train.lr_find.lr_from_help"))
    hi = c3.text_input(t("train.lr_find.lr_to"), key=K + "hi", max_chars=24,
                       help=t("train.lr_find.lr_to_help", hi=engine.LR_HI))
    sweep, problems = finder.read(steps, lo, hi)
    for col, field in ((c1, "lr_find_steps"), (c2, "lr_find_range")):
        if field in problems:
            col.error(problems[field].text(lang()), icon=":material/error:")
    return sweep


def _progress(sid: str, run_id: str) -> None:
    """A queued or running sweep; the whole page again once it has finished."""
    run = get_queue().get(sid, run_id)
    if run.finished:
        st.rerun()
    prog = run.progress or {}
    if run.status == "queued" or not prog.get("total_steps"):
        st.info(t("train.lr_find.queued"), icon=":material/hourglass_top:")
    else:
        st.progress(prog["step"] / prog["total_steps"], text=t(
            "train.lr_find.progress", step=prog["step"], total=prog["total_steps"]))


def _result(form, run) -> None:
    result = run.result or {}
    if not result.get("lrs"):
        if run.status == "failed":
            st.error(t("train.lr_find.failed", message=run.error_text(lang()) if run.error
                       else "?"))
        return
    st.plotly_chart(finder.figure(result, lang()), key=K + "chart",
                    config={"displayModeBar": False}, alt=t("a11y.lr_finder_chart"))
    for line in finder.summary(result, lang()):
        st.markdown(line)
    with st.expander(t("train.lr_find.table")):   # the chart's numbers, for screen readers
        st.dataframe(finder.table(result, lang()), hide_index=True)
    lr = finder.suggested(result)
    if lr is None:
        return
    lock = form.locks.get("lr")
    st.button(t("train.lr_find.use", lr=i18n.number(lr, lang())), key=K + "use",
              on_click=_use, args=(lr,), disabled=bool(lock), icon=":material/done:",
              help=t("train.lr_find.use_help"))
    if lock:
        st.caption(t("train.lr_find.locked", reason=lock))


def show(form) -> None:
    queue, sid = get_queue(), session_id()
    run = next(iter(queue.runs(sid, kind="lr_find", limit=1)), None)     # the newest sweep
    with st.expander(t("train.lr_find.title"), expanded=run is not None,
                     icon=":material/query_stats:"):
        st.caption(t("train.lr_find.intro"))
        sweep = _boxes()
        config_ok = form.config() is not None
        st.button(t("train.lr_find.start"), key=K + "start", on_click=_start,
                  disabled=sweep is None or not config_ok or (run is not None and run.active),
                  icon=":material/play_arrow:")
        if not config_ok:
            st.caption(t("train.lr_find.fix_settings"))
        messages.show(K + "msg")
        if run is not None and run.active:
            st.fragment(_progress, run_every=1.0)(sid, run.id)
        elif run is not None:
            _result(form, run)
    with st.expander(t("lesson.title") + ": " + t("train.lr_find.lesson"),
                     icon=":material/school:"):
        lesson("lr_finder")
