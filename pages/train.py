"""Train: the tutorial's training loop on the server, live.

Knobs (with presets) → ``JobQueue.submit`` → a worker process trains while this page follows the
run in the run store: the loss curve, a progress bar with the time left, images per second, the
data-wait vs compute split, the place in the queue. The live part is a fragment that reruns
about once a second while the run is queued or running, and not at all afterwards. The page
always looks the session's runs up in the store, so a reload, another page and back, or a second
tab with the same ``?sid=`` finds the run again.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from cifarlab.serve import queue as jobs
from cifarlab.lab import tables
from cifarlab.lab import train as trainview
from cifarlab import i18n
from cifarlab.core.config import PRESETS, Limits
from cifarlab.errors import CifarLabError
from pages.common import lesson, owner_id, session_id, show_error, translator
from pages.common import queue as common_queue

t = translator()
POLL_S = 1.0          # the live view's refresh while a run is queued or running
FLASH_S = 5.0         # how long the message after pressing Train stays
MAX_POINTS = 2000     # at most this many points on the loss chart
KEEP_VIEWS = 4        # runs whose loaded losses/events this session keeps
ROOT = Path(__file__).resolve().parents[1]
K = "train_"          # widget keys: train_epochs, train_lr, ...


def get_queue() -> jobs.JobQueue:
    """The server's one JobQueue (``jobs.get_queue()``: a process-wide singleton, made again if
    it was shut down); a bad hosting setting is shown as its message."""
    return common_queue()


@st.cache_resource(show_spinner=False)
def _device_ids() -> list[str]:
    from cifarlab.core.devices import list_devices

    return [d.id for d in list_devices()]


# ------------------------------------------------------------------------------ formatting

def fmt_duration(seconds: float | None) -> str:
    parts = trainview.duration_parts(seconds)
    return " ".join(t(f"units.{unit}", n=n) for unit, n in parts) if parts else "–"


def fmt_pct(x: float | None) -> str:
    return i18n.percent(x, t.lang) if x is not None else "–"


def fmt_int(n: int | None) -> str:
    return i18n.number(int(n), t.lang) if n is not None else "–"


def status_text(run, position: int | None) -> str:
    if run.status == "queued":
        return t("status.queued", n=position or 1)
    if run.status == "running" and run.cancel_requested:
        return t("status.cancelling")
    return t(f"status.{run.status}")


def run_label(run) -> str:
    c = run.config or {}
    subset = c.get("train_subset")
    when = time.strftime("%H:%M:%S", time.localtime(run.created_at))
    summary = t("train.run_summary", epochs=c.get("epochs", "?"), batch=c.get("batch_size", "?"),
                lr=c.get("lr", 0), images=fmt_int(subset) if subset else fmt_int(
                    jobs.FULL_TRAIN_IMAGES))
    status = t("status.in_queue") if run.status == "queued" else t(f"status.{run.status}")
    return f"{when} · {status} · {summary}"


# ------------------------------------------------------------------------------ the knobs
# The knobs come from the config's schema (``core.config.knobs``): a field added there appears
# here. Number widgets have no min/max of Streamlit's own: its range message is English and
# keeps the old value, so bounds are checked by ``core.config.validate`` and said in our words.

def limits() -> Limits:
    """This server's limits for one run (the queue checks the same ones on submit)."""
    return dataclasses.replace(get_queue().settings.limits(), devices=tuple(_device_ids()))


def _values() -> dict:
    ss = st.session_state
    values = {}
    for f in trainview.knob_fields():
        v = ss.get(K + f.name)
        if f.knob.kind == "int" and isinstance(v, float) and v.is_integer():
            v = int(v)
        elif f.knob.kind == "float" and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        values[f.name] = v
    return values


def _fit(knob: str, value):
    """A preset's value inside this server's hosting limits."""
    s = get_queue().settings
    if knob == "epochs":
        return min(value, s.max_epochs)
    if knob == "train_subset" and value is not None:
        return min(value, s.max_train_images)
    return value


def _forget_message() -> None:
    """A changed knob makes the last Train message old news."""
    st.session_state.pop(K + "submit_msg", None)
    st.session_state[K + "submit_field"] = None


def _apply_preset(name: str) -> None:
    """A preset button's callback. Buttons fire only when clicked: a preset applies only when
    the student chose it (a selectbox whose value the server had changed could fire again from
    a browser that had not heard of the change yet, and reset every knob under a Train click)."""
    _forget_message()
    for knob, value in trainview.preset_values(name).items():
        st.session_state[K + knob] = _fit(knob, value)


def _init_state() -> None:
    ss = st.session_state
    if K + "epochs" not in ss:
        for f in trainview.knob_fields():
            ss[K + f.name] = f.default
        for knob, value in trainview.preset_values("tutorial").items():
            ss[K + knob] = _fit(knob, value)
    if ss.get(K + "device") not in ["auto"] + _device_ids():
        ss[K + "device"] = "auto"


def _submit() -> None:
    """The Train button's callback: check, submit, remember the new run (or say why not)."""
    ss = st.session_state
    queue = get_queue()
    values = _values()
    problems = trainview.check(values, limits(), jobs.FULL_TRAIN_IMAGES)
    ss[K + "submit_field"] = None
    ss[K + "submit_at"] = time.monotonic()
    if problems:
        ss[K + "submit_msg"] = ("error", t("train.config_errors"))
        return
    try:
        run_id = queue.submit(session_id(), trainview.CONFIG(**values), owner=owner_id())
    except CifarLabError as err:
        ss[K + "submit_msg"] = ("error", err.text(t.lang))
        if err.field in values:
            ss[K + "submit_field"] = err.field
        return
    ss[K + "submit_msg"] = ("success", t("train.started"))
    ss[K + "run_select"] = run_id


def current_message() -> tuple[str, str] | None:
    """What pressing Train said ("started", or why not), for ``FLASH_S`` seconds: it must
    outlive the rerun that the run's first status change (queued -> running) causes at once."""
    ss = st.session_state
    msg = ss.get(K + "submit_msg")
    if msg is not None and time.monotonic() - ss.get(K + "submit_at", 0.0) > FLASH_S:
        ss.pop(K + "submit_msg", None)
        ss[K + "submit_field"] = None
        msg = None
    return msg


def _field_messages(field: str, problems: dict) -> None:
    ss = st.session_state
    p = problems.get(field)
    if p is not None:
        st.error(p.text(t.lang), icon=":material/error:")
    elif ss.get(K + "submit_field") == field and ss.get(K + "submit_msg"):
        st.error(ss[K + "submit_msg"][1], icon=":material/error:")


def _choice_label(name: str, value) -> str:
    key = f"common.{name}_{value}"
    return t(key) if key in i18n.catalog(t.lang) else str(value)


def knob_widget(f, values: dict) -> None:
    """One knob's widget, chosen by its kind in the schema."""
    k, key, s = f.knob, K + f.name, get_queue().settings
    label, help_text = t(k.label), t(k.help)
    if f.name == "epochs":
        help_text += " " + t("train.epochs_limit_help", n=s.max_epochs)
    if f.name == "train_subset":
        help_text += " " + t("train.subset_limit_help", n=s.max_train_images)
    common = dict(key=key, on_change=_forget_message, help=help_text)
    if k.kind == "device":
        st.selectbox(label, ["auto"] + _device_ids(), format_func=lambda d: (
            t("common.device_auto") if d == "auto" else d), **common)
    elif k.kind == "choice":
        st.radio(label, list(k.choices), format_func=lambda v: _choice_label(f.name, v), **common)
    elif k.kind == "bool":
        st.toggle(label, **common)
    elif k.kind == "float":
        st.number_input(label, step=float(k.step), format="%g", **common)
    else:
        extra = {}
        if k.optional:
            extra["placeholder"] = t("common.train_subset_all", n=min(
                jobs.FULL_TRAIN_IMAGES, s.max_train_images)) if f.name == "train_subset" else ""
        disabled = f.name == "num_workers" and values.get("pipeline") == "fast"
        st.number_input(label, step=int(k.step), format="%d", disabled=disabled, **extra,
                        **common)
        if disabled:
            st.caption(t("train.num_workers_fast"))


def knobs(queue: jobs.JobQueue) -> dict:
    s = queue.settings
    _init_state()
    values = _values()
    current = trainview.matching_preset(values)
    st.markdown(f"**{t('train.preset')}**", help=t("train.preset_help"))
    cols = st.columns(len(PRESETS))
    for col, name in zip(cols, PRESETS):
        col.button(t(f"train.preset_{name}"), key=K + "preset_" + name, on_click=_apply_preset,
                   args=(name,), width="stretch",
                   type="primary" if name == current else "secondary")
    st.caption(t(f"train.preset_{current}_help") if current else t("train.custom"))

    problems = trainview.check(values, limits(), jobs.FULL_TRAIN_IMAGES)
    fields = trainview.knob_fields()
    per_col = -(-len(fields) // 3)
    for col, chunk in zip(st.columns(3), (fields[i:i + per_col]
                                          for i in range(0, len(fields), per_col))):
        with col:
            for f in chunk:
                knob_widget(f, values)
                _field_messages(f.name, problems)
    for field, p in problems.items():  # anything not next to a widget
        if field not in {f.name for f in fields}:
            st.error(p.text(t.lang))
    st.caption(t("train.limits", epochs=s.max_epochs, images=s.max_train_images,
                 runs=s.max_per_owner))
    return problems


# ---------------------------------------------------------------------------- the live view

def _view(run_id: str) -> trainview.RunView:
    views = st.session_state.setdefault(K + "views", {})
    if run_id not in views:
        for old in list(views)[:max(0, len(views) - KEEP_VIEWS + 1)]:
            views.pop(old, None)
        views[run_id] = trainview.RunView(MAX_POINTS)
    return views[run_id]


def loss_figure(chart: dict) -> go.Figure:
    fig = go.Figure()
    name = (t("train.chart_step_loss_mean", n=chart["stride"]) if chart["stride"] > 1
            else t("train.chart_step_loss"))
    fig.add_trace(go.Scatter(x=chart["steps"], y=chart["losses"], mode="lines", name=name,
                               line=dict(width=1, color="#7f9fbf")))
    if chart["running_steps"]:
        fig.add_trace(go.Scatter(x=chart["running_steps"], y=chart["running_losses"],
                                 mode="lines+markers", name=t("train.running_loss"),
                                 line=dict(width=2, color="#ff4b4b")))
    for i, step in enumerate(chart["epoch_marks"], 1):
        fig.add_vline(x=step, line_dash="dot", line_color="#888",
                      annotation_text=t("train.chart_epoch_end", n=i),
                      annotation_position="top left")
    fig.update_layout(height=360, margin=dict(l=10, r=10, t=30, b=10),
                      xaxis_title=t("common.step"), yaxis_title=t("common.loss"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
                      uirevision="loss")
    return fig


def split_figure(split: dict) -> go.Figure:
    fig = go.Figure()
    for label, key, color in ((t("train.data_wait"), "data_wait_s", "#f0a202"),
                              (t("train.compute"), "compute_s", "#3d7dca")):
        value = split[key]
        fig.add_trace(go.Bar(y=[""], x=[value], orientation="h", name=label,
                             marker_color=color, text=[fmt_duration(value)],
                             textposition="inside"))
    fig.update_layout(barmode="stack", height=140, margin=dict(l=10, r=10, t=10, b=10),
                      xaxis_title=t("common.time") + " (s)", showlegend=True,
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    return fig


def show_split(view: trainview.RunView, result: dict | None,
               progress: dict | None = None) -> None:
    st.markdown(f"**{t('train.data_wait_vs_compute')}**")
    split = trainview.time_split(view.epochs, result, progress)
    if split is None:
        st.caption(t("train.split_pending"))
        return
    st.plotly_chart(split_figure(split), width="stretch", key=K + "split_chart",
                    config={"displayModeBar": False})
    st.caption(t("train.split_caption", share=fmt_pct(split["data_share"])))
    st.caption(t("train.data_bound") if split["data_share"] > 0.5 else t("train.compute_bound"))


def show_chart(view: trainview.RunView, config: dict) -> None:
    chart = view.chart()
    st.markdown(f"**{t('train.loss_curve')}**")
    if not chart["steps"]:
        st.caption(t("train.no_losses_yet"))
        return
    st.plotly_chart(loss_figure(chart), width="stretch", key=K + "loss_chart")
    st.caption(t("train.chart_caption"))
    log_every = int(config.get("log_every") or 2000)
    if view.running:
        lines = "\n".join(t("train.running_loss_line", epoch=r["epoch"], i=f"{r['i']:5d}",
                            loss=f"{r['loss']:.3f}") for r in view.running)
        with st.expander(t("train.running_loss"), expanded=False):
            st.code(lines, language=None)
    elif view.steps_per_epoch and view.steps_per_epoch < log_every:
        st.caption(t("train.running_loss_none", n=fmt_int(log_every),
                     steps=fmt_int(view.steps_per_epoch)))


def show_epochs(view: trainview.RunView) -> None:
    if not view.epochs:
        return
    rows = [{t("train.epoch_col"): e.get("epoch"),
             t("train.mean_loss_col"): None if e.get("mean_loss") is None
             else round(float(e["mean_loss"]), 4),
             t("train.seconds_col"): round(float(e.get("seconds") or 0), 1),
             t("train.ips_col"): round(float(e.get("images_per_second") or 0)),
             t("common.accuracy"): fmt_pct(e.get("accuracy"))}
            for e in view.epochs]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key=K + "epochs_table")


def show_result(run, view: trainview.RunView) -> None:
    result = run.result or {}
    acc = result.get("test_accuracy")
    if acc is None and view.eval:
        acc = view.eval.get("accuracy")
    if run.status == "done":
        st.success(t("train.finished"), icon=":material/check_circle:")
    elif run.status == "cancelled":
        if result:
            prog = trainview.progress_info(run.progress)
            st.warning(t("train.cancelled_partial", step=fmt_int(result.get("steps")),
                         total=fmt_int(prog["total"])), icon=":material/stop_circle:")
        else:
            st.warning(t("train.cancelled_queued"), icon=":material/stop_circle:")
    if acc is not None:
        label = t("train.accuracy_final") if run.status == "done" else t("train.accuracy_partial")
        m1, m2, m3 = st.columns(3)
        m1.metric(label, fmt_pct(acc))
        m2.metric(t("train.train_time"), fmt_duration(result.get("train_seconds")))
        m3.metric(t("train.ips_col"), fmt_int(int(result.get("images_per_second") or 0)))
        st.caption(t("train.chance"))
        rows = trainview.per_class_rows(result.get("per_class_accuracy")
                                        or (view.eval or {}).get("per_class_accuracy"))
        if rows:
            st.markdown(f"**{t('train.per_class_title')}**")
            names = [t(f"classes.{c}") if c in _CLASSES else c for c, _ in rows]
            values = [100 * a for _, a in rows]
            fig = go.Figure(go.Bar(x=names, y=values, marker_color="#3d7dca",
                                   text=[f"{v:.0f} %" for v in values], textposition="outside"))
            fig.add_hline(y=10, line_dash="dot", line_color="#888")
            fig.update_layout(height=300, margin=dict(l=10, r=10, t=20, b=10),
                              yaxis_title=t("common.accuracy") + " (%)", yaxis_range=[0, 112])
            st.plotly_chart(fig, width="stretch", key=K + "per_class_chart")
            with st.expander(t("a11y.show_table")):   # the chart's numbers, for screen readers
                st.dataframe(tables.per_class_table(rows, t.lang), hide_index=True)
            best = max(rows, key=lambda r: r[1])
            worst = min(rows, key=lambda r: r[1])
            st.caption(t("train.best_worst", best=names[rows.index(best)],
                         best_acc=fmt_pct(best[1]), worst=names[rows.index(worst)],
                         worst_acc=fmt_pct(worst[1])))
        l1, l2 = st.columns(2)
        with l1:
            page_link("pages/results.py", t("train.see_results"), ":material/insights:")
        with l2:
            page_link("pages/runs.py", t("train.see_runs"), ":material/compare_arrows:")


def page_link(path: str, label: str, icon: str) -> None:
    """A link to another page of the lab (left out while that page does not exist yet)."""
    if (ROOT / path).is_file():
        st.page_link(path, label=label, icon=icon)


_CLASSES = set(("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                "truck"))


def live(run_id: str, status_at_render: str) -> None:
    """The live part of the page (a fragment): status, progress, chart, split, result.

    When the run's status changes (queued -> running -> finished) the whole page reruns once:
    the run selector shows the new status, and once the run is over the polling stops."""
    queue = get_queue()
    sid = session_id()
    try:   # every read through the queue, checked against this browser's session
        run = queue.get(sid, run_id)
    except CifarLabError:
        run = None
    if run is None:
        st.info(t("errors.run_not_found"))
        return
    view = _view(run_id)
    view.add_events(queue.events(sid, run_id, since_seq=view.last_seq))
    view.add_losses(*queue.losses(sid, run_id, since_step=view.last_step))
    if run.status != status_at_render:
        st.rerun()  # the whole page (see above)

    position = queue.queue_position(run_id) if run.status == "queued" else None
    head, button = st.columns([3, 2], vertical_alignment="center")
    head.markdown(f"**{t('status.status')}:** {status_text(run, position)}"
                  + (f" · {t('common.device')}: `{run.device}`" if run.device else ""))
    if run.active and queue.can_control(session_id(), run):
        if button.button(t("train.cancel"), key=K + "cancel", icon=":material/stop:",
                         disabled=run.cancel_requested):
            try:
                queue.cancel(session_id(), run_id)
            except CifarLabError as err:
                show_error(err)
            run = queue.get(sid, run_id)
            if run.status != status_at_render:  # a queued run is cancelled at once
                st.rerun()
    prog = trainview.progress_info(run.progress)
    training_over = run.status == "running" and (
        (view.epochs and not view.epochs[-1].get("complete", True))
        or (prog["total"] and prog["step"] >= prog["total"]))
    if training_over:
        st.info(t("train.evaluating"), icon=":material/fact_check:")
    elif run.status == "running" and run.cancel_requested:
        st.info(t("train.cancel_requested"), icon=":material/hourglass_top:")

    config = run.config or {}
    if run.status == "queued":
        st.info(t("train.queue_position", n=position or 1) + "  \n" + t("train.queue_wait"),
                icon=":material/schedule:")
        return
    if run.status == "running":
        if prog["total"]:
            eta = (t("train.eta", time=fmt_duration(prog["eta_s"])) if prog["eta_s"] is not None
                   else t("train.eta_unknown"))
            st.progress(prog["fraction"], text=t("train.progress", step=fmt_int(prog["step"]),
                                                 total=fmt_int(prog["total"])) + " · " + eta)
            m1, m2, m3 = st.columns(3)
            m1.metric(t("common.images_per_second"), fmt_int(int(prog["images_per_second"])))
            m2.metric(t("common.elapsed"), fmt_duration(prog["elapsed_s"]))
            m3.metric(t("train.eta_title"), fmt_duration(prog["eta_s"]))
        else:
            st.info(t("train.starting"), icon=":material/hourglass_top:")
        if run.waited_s and run.waited_s >= 1:
            st.caption(t("train.waited", time=fmt_duration(run.waited_s)))
    if run.status in ("failed", "interrupted"):
        st.error(t("train.failed_reason", reason=run.error or t(f"status.{run.status}")))

    if run.finished:
        show_result(run, view)
    left, right = st.columns([3, 2])
    with left:
        show_chart(view, config)
    with right:
        show_split(view, run.result if run.finished else None, run.progress)
        show_epochs(view)


# ------------------------------------------------------------------------------------ page

st.title(t("nav.train"))
with st.expander(t("lesson.title") + ": " + t("nav.train"), expanded=False):
    lesson("training")

queue = get_queue()

sid = session_id()
st.subheader(t("train.settings_title"))
msg = current_message()
problems = knobs(queue)

st.button(t("train.start"), key=K + "start", type="primary", on_click=_submit,
          icon=":material/play_arrow:")
if msg is not None and st.session_state.get(K + "submit_field") is None:
    (st.error if msg[0] == "error" else st.success)(msg[1])
    if msg[0] == "error" and problems:
        for field, p in problems.items():
            st.markdown(f"- {p.text(t.lang)}")

st.divider()
runs = queue.runs(sid, kind="train")[:50]
if not runs:
    st.info(t("train.no_run"))
    st.stop()

by_id = {r.id: r for r in runs}
st.session_state[K + "run_select"] = trainview.pick_run(runs, st.session_state.get(K + "run_select"))
selected = st.selectbox(t("train.choose_run"), list(by_id), key=K + "run_select",
                        format_func=lambda rid: run_label(by_id[rid]))
run = by_id[selected]
st.fragment(live, run_every=POLL_S if run.active else None)(selected, run.status)
