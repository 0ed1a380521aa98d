"""Train: the form, and the run followed live in a fragment on Streamlit's own timer."""
from __future__ import annotations

import time
from functools import partial

import streamlit as st

from cifarlab.errors import CifarLabError
from cifarlab.lab import train as trainview, train_live as words
from cifarlab.serve import queue as jobs
from pages.train_parts import form as train_settings, lr_finder
from ui import messages, train_form
from ui.data import queue as get_queue, store_may_be_down
from ui.internals import set_fragment_interval
from ui.language import pct, translator
from ui.session import session_id

t = translator()
K = "train_"          # this page's keys; the knobs' are ui/train_form.py's
POLL_S, IDLE_POLL_S = 2.0, 10.0   # the live view's refresh: a run queued or running; none


def _cancel(run_id: str) -> None:
    """Stop: a callback, so the status drawn right after the click is already the new one."""
    try:
        get_queue().cancel(session_id(), run_id)
    except CifarLabError as err:
        messages.keep(K + "cancel_error", "error", err)


def show_charts(view: trainview.RunView, run, stamp) -> None:
    left, right = st.columns([3, 2])
    fig = words.loss_chart(view, stamp, t.lang)
    if fig is None:
        left.caption(f"**{t('train.loss_curve')}**: {t('train.no_losses_yet')}")
    else:
        left.plotly_chart(fig, key=K + "loss_chart", alt=t("a11y.train_loss_chart"))
        caption, printed = words.chart_texts(
            view, int((run.config or {}).get("log_every") or 2000), t.lang)
        left.caption(caption)
        if printed:
            left.expander(t("train.running_loss")).code(printed, language=None)
    fig, caption = words.split_chart(view, run, stamp, t.lang)
    if fig is None:
        right.caption(f"**{t('train.data_wait_vs_compute')}**: {t('train.split_pending')}")
    else:
        right.plotly_chart(fig, key=K + "split_chart", config={"displayModeBar": False},
                           alt=t("a11y.split_chart"))
        right.caption(caption)


def show_result(run, view: trainview.RunView) -> None:
    result = run.result or {}
    acc = result.get("test_accuracy")
    acc = (view.eval or {}).get("accuracy") if acc is None else acc
    if acc is None:
        return
    st.metric(t("train.accuracy_final") if run.status == "done" else t("train.accuracy_partial"),
              pct(acc))
    st.caption(words.result_lines(result, t.lang))
    # each class's accuracy: on Results, beside the tutorial's and with the confusion matrix
    st.page_link("pages/results.py", label=t("train.see_results"), icon=":material/insights:")
    st.page_link("pages/runs.py", label=t("train.see_runs"), icon=":material/compare_arrows:")


def show_inside(view) -> None:
    """Each layer's gradients, opened by itself when a signal needs the student's eye."""
    if not view.inside:
        return
    warnings = words.signal_texts(view.inside, t.lang)
    for text in warnings:
        st.warning(text, icon=":material/monitor_heart:")
    with st.expander(t("train.inside.title"), expanded=bool(warnings),
                     icon=":material/monitor_heart:"):
        st.caption(t("train.inside.intro"))
        fig = view.memoized("inside", (len(view.inside), t.lang),
                            lambda _: words.grad_figure(view.inside, t.lang))
        st.plotly_chart(fig, key="train_inside_chart", config={"displayModeBar": False},
                        alt=t("a11y.grad_chart"))
        st.dataframe(words.latest_table(view.inside, t.lang), hide_index=True)


def show_run(queue: jobs.JobQueue, sid: str, run) -> None:
    # four runs' losses and events kept; at most 600 points on a loss chart (wider than it is)
    views = st.session_state.setdefault(K + "views", trainview.RunViews(4, 600))
    view, prog = views.of(run.id), trainview.progress_info(run.progress)
    view.update(partial(queue.events, sid, run.id), partial(queue.losses, sid, run.id),
                step=None if run.finished else prog["step"])
    stamp = view.chart_stamp(time.monotonic(), 2.0, final=run.finished)   # figures every 2 s
    phase = trainview.phase(run, view)
    position = queue.queue_position(run.id) if phase == "queued" else None
    st.markdown(f"**{t('status.status')}:** {words.status_text(run, position, t.lang)}"
                + (f" · {t('common.device')}: `{run.device}`" if run.device else ""))
    if run.active and queue.can_control(sid, run):
        st.button(t("train.cancel"), key=K + "cancel", icon=":material/stop:",
                  disabled=run.cancel_requested, on_click=_cancel, args=(run.id,))
    messages.show(K + "cancel_error")
    note = words.run_note(run, phase, t.lang)
    if note is not None:
        getattr(st, note[0])(note[1], icon=f":material/{note[2]}:")
    if phase == "queued":
        return
    if run.status == "running" and prog["total"]:
        bar, line = words.progress_lines(prog, run.progress, run.waited_s, t.lang)
        st.progress(prog["fraction"], text=bar)
        st.caption(line)
    if run.finished:
        show_result(run, view)
    show_charts(view, run, stamp)
    show_inside(view)
    if view.epochs:   # full width: in a narrow column its last columns were cut off
        st.table(view.memoized("epochs", (len(view.epochs), t.lang),
                               lambda _: words.epochs_table(view.epochs, t.lang)),
                 hide_index=True)


def live(sid: str) -> None:
    trainview.freeze_long_lived()  # a poll's garbage collection must not walk torch & co
    queue = get_queue()
    runs = queue.runs(sid, kind="train")[:50]
    set_fragment_interval(trainview.poll_interval(runs, POLL_S, IDLE_POLL_S))
    if not runs:
        st.info(t("train.no_run"))
        return
    by_id, ss = {r.id: r for r in runs}, st.session_state
    # a run's label changes only with its status or name: made once each, not once per poll
    made = ss.get(K + "labels", {})
    labels = ss[K + "labels"] = {
        (r.id, r.status, r.name, t.lang): made.get((r.id, r.status, r.name, t.lang))
        or words.run_label(r, t.lang, jobs.FULL_TRAIN_IMAGES) for r in runs}
    ss[K + "run_select"] = trainview.pick_run(runs, ss.get(K + "run_select"))
    selected = st.selectbox(t("train.choose_run"), list(by_id), key=K + "run_select",
                            format_func=lambda rid: labels[rid, by_id[rid].status,
                                                           by_id[rid].name, t.lang])
    show_run(queue, sid, by_id[selected])


st.title(t("nav.train"))
queue, sid = get_queue(), session_id()
form = train_form.get()
train_settings.settings(form, queue)   # the tutorial's knobs and Train first
lr_finder.show(form)                        # a short lr sweep on those settings

st.divider()
# the interval follows the state: set here at each full run, by the fragment at each poll
interval = trainview.poll_interval(queue.runs(sid, kind="train")[:50], POLL_S, IDLE_POLL_S)
st.fragment(store_may_be_down(live), run_every=interval)(sid)
# last: on a phone Train stays within reach, and a run's live view comes right under it
train_settings.lesson_section()
