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
from functools import partial
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from cifarlab.serve import queue as jobs
from cifarlab.lab import tables
from cifarlab.lab import train as trainview
from cifarlab import i18n
from cifarlab.core.config import PRESETS, Limits
from cifarlab.errors import CifarLabError
from pages.classroom_parts import student as classroom_student
from pages.common import (dur, lesson, num, owner_id, pct, session_id, set_fragment_interval,
                          show_error, translator)
from pages.common import queue as common_queue

t = translator()
POLL_S = 2.0          # the live view's refresh while a run is queued or running (see below)
FLASH_S = 5.0         # how long the message after pressing Train stays
MAX_POINTS = 600      # at most this many points on the loss chart (wider than it is)
KEEP_VIEWS = 4        # runs whose loaded losses/events this session keeps
ROOT = Path(__file__).resolve().parents[1]
K = "train_"          # widget keys: train_epochs, train_lr, ...


def get_queue() -> jobs.JobQueue:
    """The server's one JobQueue (``jobs.get_queue()``: a process-wide singleton, made again if
    it was shut down); a bad hosting setting is shown as its message."""
    return common_queue()


@st.cache_resource(show_spinner=False)
def _device_ids() -> list[str]:
    """Where a run can go: this machine's devices, or the cluster's when Ray runs the runs."""
    return get_queue().devices()


# ------------------------------------------------------------------------------ formatting

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
    return " · ".join(([run.name] if run.name else []) + [when, status, summary])


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
        elif f.knob.kind == "float" and isinstance(v, str):
            # a text box (see knob_widget): kept as typed when it is no number, so the
            # config's own check names the field in the student's language
            parsed = i18n.parse_decimal(v)
            v = v if parsed is None else parsed
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
        st.session_state[K + knob] = _shown(knob, _fit(knob, value))


FLOAT_KNOBS = {f.name for f in trainview.knob_fields() if f.knob.kind == "float"}


def _shown(knob: str, value):
    """A knob's value as its widget holds it: decimals as text in the student's notation."""
    if knob in FLOAT_KNOBS and isinstance(value, (int, float)):
        return i18n.number(float(value), t.lang)
    return value



def _init_state() -> None:
    ss = st.session_state
    if K + "epochs" not in ss:
        for f in trainview.knob_fields():
            ss[K + f.name] = _shown(f.name, f.default)
        for knob, value in trainview.preset_values("tutorial").items():
            ss[K + knob] = _shown(knob, _fit(knob, value))
    if ss.get(K + "float_lang") != t.lang:   # the language changed: rewrite the decimals in it
        ss[K + "float_lang"] = t.lang
        for knob in FLOAT_KNOBS:
            value = ss.get(K + knob)
            parsed = i18n.parse_decimal(value) if isinstance(value, str) else value
            if parsed is not None:
                ss[K + knob] = _shown(knob, parsed)
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
        run_id = queue.submit(session_id(), trainview.CONFIG(**values), owner=owner_id(),
                              name=ss.get(K + "name") or None)
    except CifarLabError as err:
        ss[K + "submit_msg"] = ("error", err.text(t.lang))
        if err.field in values:
            ss[K + "submit_field"] = err.field
        return
    ss[K + "submit_msg"] = ("success", t("train.started"))
    ss[K + "run_select"] = run_id
    ss[K + "name"] = ""   # the next run gets its own name


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


def _on_cuda(device) -> bool:
    """The chosen device is a CUDA GPU ("auto" picks the first one when there is one)."""
    ids = _device_ids()
    return str(device).startswith("cuda") or (device == "auto" and any(
        d.startswith("cuda") for d in ids))


def knob_widget(f, values: dict, lock: str | None = None) -> None:
    """One knob's widget, chosen by its kind in the schema (disabled when the class locked it:
    ``lock`` is the reason)."""
    k, key, s = f.knob, K + f.name, get_queue().settings
    if f.name == "cuda_graphs" and not _on_cuda(values.get("device")):
        st.session_state[key] = False  # only on a CUDA device; hidden, it stays off
        return
    label, help_text = t(k.label), t(k.help) + (f" {lock}" if lock else "")
    if f.name == "epochs":
        help_text += " " + t("train.epochs_limit_help", n=s.max_epochs)
    if f.name == "train_subset":
        help_text += " " + t("train.subset_limit_help", n=s.max_train_images)
    common = dict(key=key, on_change=_forget_message, help=help_text, disabled=bool(lock))
    if k.kind == "device":
        st.selectbox(label, ["auto"] + _device_ids(), format_func=lambda d: (
            t("common.device_auto") if d == "auto" else d), **common)
    elif k.kind == "choice":
        st.radio(label, list(k.choices), format_func=lambda v: _choice_label(f.name, v), **common)
    elif k.kind == "bool":
        st.toggle(label, **common)
    elif k.kind == "float":
        # A text box, not st.number_input: the browser's number box turns a Spanish "0,01"
        # into 1 without a word. Here both marks work (i18n.parse_decimal) and a bad value
        # stays as typed, with the config's message beside it.
        st.text_input(label, max_chars=24, **common)
    else:
        extra = {}
        if k.optional:
            extra["placeholder"] = t("common.train_subset_all", n=min(
                jobs.FULL_TRAIN_IMAGES, s.max_train_images)) if f.name == "train_subset" else ""
        fast = f.name == "num_workers" and values.get("pipeline") == "fast"
        st.number_input(label, step=int(k.step), format="%d", **extra,
                        **(common | {"disabled": fast or bool(lock)}))
        if fast:
            st.caption(t("train.num_workers_fast"))


def knobs(queue: jobs.JobQueue) -> dict:
    s = queue.settings
    _init_state()
    locks = classroom_student.pushed(K, _shown, t)   # the class's pushed values, locked knobs
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
                knob_widget(f, values, locks.get(f.name))
                _field_messages(f.name, problems)
    for field, p in problems.items():  # anything not next to a widget
        if field not in {f.name for f in fields}:
            st.error(p.text(t.lang))
    st.caption(t("train.limits", epochs=s.max_epochs, images=s.max_train_images,
                 runs=s.max_per_owner))
    return problems


def estimate_line(queue: jobs.JobQueue, problems: dict) -> str:
    """How long the typed run should take, from this server's measured speed."""
    if problems:
        return ""
    guess = trainview.estimate_seconds(trainview.CONFIG(**_values()), queue.train_images(),
                                       queue.measured_speeds())
    if guess is None:
        return t("train.estimate_unknown")
    return t("train.estimate_exact" if guess["exact"] else "train.estimate_rough",
             time=dur(guess["seconds"]))


# ---------------------------------------------------------------------------- the live view
# One fragment draws every state of the session's runs (none yet, queued, running, finished),
# the run selector with each run's status included. It polls on Streamlit's own timer
# (run_every) and never reruns the whole page: a status change is drawn by the fragment
# itself, so no st.rerun() races that timer (their collisions froze pages under load). A
# poll reads only new rows (RunView.update), and a figure is rebuilt only when its data
# changed, at most every CHART_S seconds while the run trains (RunView.chart_stamp); in
# between the fragment sends the figure it built last. Numbers: docs/benchmarks.md, section 7.

IDLE_POLL_S = 10.0    # the refresh when no run of this session is queued or running
CHART_S = 2.0         # figures are rebuilt at most this often while a run trains


def _view(run_id: str) -> trainview.RunView:
    views = st.session_state.setdefault(K + "views", {})
    if run_id not in views:
        for old in list(views)[:max(0, len(views) - KEEP_VIEWS + 1)]:
            views.pop(old, None)
        views[run_id] = trainview.RunView(MAX_POINTS)
    return views[run_id]


def _layout(**kw) -> dict:
    """A figure layout without plotly's template: Streamlit's theme is applied in the browser
    anyway, and its Python template is most of what a figure costs to send (and to keep)."""
    # the title on the left and the legend on the right, each on its own line of the top margin
    if isinstance(kw.get("title"), dict):
        kw["title"] = dict(x=0.01, xanchor="left", **kw["title"])
    return dict(template="none", margin=dict(l=10, r=10, t=64, b=10),
                separators=i18n.separators(t.lang),
                legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="right", x=1),
                **kw)


def loss_figure(chart: dict, old: tuple | None = None) -> tuple:
    """(layout, figure). Last poll's figure is updated in place while its layout still fits
    (language, traces, epoch lines, stride): setting two arrays costs a fraction of a new
    figure (no add_vline either: it alone costs more than all the rest)."""
    layout_key = (t.lang, bool(chart["running_steps"]), tuple(chart["epoch_marks"]),
                  chart["stride"])
    running = (np.asarray(chart["running_steps"], dtype=np.int32),
               np.asarray(chart["running_losses"], dtype=np.float32))
    if old is not None and old[0] == layout_key:
        fig = old[1]
        with fig.batch_update():
            fig.data[0].x, fig.data[0].y = chart["steps"], chart["losses"]
            if chart["running_steps"]:
                fig.data[1].x, fig.data[1].y = running
        return old
    name = (t("train.chart_step_loss_mean", n=chart["stride"]) if chart["stride"] > 1
            else t("train.chart_step_loss"))
    data = [go.Scatter(x=chart["steps"], y=chart["losses"], mode="lines", name=name,
                       line=dict(width=1, color="#7f9fbf"))]
    if chart["running_steps"]:
        data.append(go.Scatter(x=running[0], y=running[1], mode="lines+markers",
                               name=t("train.running_loss"), line=dict(width=2, color="#ff4b4b")))
    marks = chart["epoch_marks"]
    shapes = [dict(type="line", x0=x, x1=x, xref="x", y0=0, y1=1, yref="y domain",
                   line=dict(dash="dot", color="#888", width=1)) for x in marks]
    notes = [dict(x=x, xref="x", y=1, yref="y domain", text=t("train.chart_epoch_end", n=i),
                  showarrow=False, xanchor="right", yanchor="top")
             for i, x in enumerate(marks, 1)]
    return layout_key, go.Figure(data=data, layout=_layout(
        title=dict(text=t("train.loss_curve")), height=380, xaxis_title=t("common.step"),
        yaxis_title=t("common.loss"), uirevision="loss", shapes=shapes, annotations=notes))


def split_figure(split: dict, old: tuple | None = None) -> tuple:
    """(language, figure): a stacked bar, updated in place like the loss chart."""
    values = (split["data_wait_s"], split["compute_s"])
    if old is not None and old[0] == t.lang:
        with old[1].batch_update():
            for bar, value in zip(old[1].data, values):
                bar.x, bar.text = (value,), (dur(value),)
        return old
    bars = [go.Bar(y=[""], x=[value], orientation="h", name=label, marker_color=color,
                   text=[dur(value)], textposition="inside")
            for value, label, color in zip(values, (t("train.data_wait"), t("train.compute")),
                                           ("#f0a202", "#3d7dca"))]
    return t.lang, go.Figure(data=bars, layout=_layout(
        title=dict(text=t("train.data_wait_vs_compute")), barmode="stack", height=214,
        xaxis_title=t("common.time") + " (s)", showlegend=True))


def per_class_figure(names: list[str], rows: list[tuple[str, float]]) -> go.Figure:
    values = [100 * a for _, a in rows]
    return go.Figure(
        data=[go.Bar(x=names, y=values, marker_color="#3d7dca", textposition="outside",
                     text=[pct(a) for _, a in rows])],
        layout=_layout(title=dict(text=t("train.per_class_title")), height=320,
                       yaxis_range=[0, 112], yaxis_title=t("common.accuracy") + " (%)",
                       shapes=[dict(type="line", xref="paper", x0=0, x1=1, y0=10, y1=10,
                                    line=dict(dash="dot", color="#888", width=1))]))


# Each element a poll sends costs the server about a millisecond, the browser's connection
# included: the live view says what it has to in few of them (titles inside the figures, one
# caption where there were three metrics).

def show_split(view: trainview.RunView, run, stamp) -> None:
    def build(old):
        split = trainview.time_split(view.epochs, run.result if run.finished else None,
                                     run.progress)
        return split, split_figure(split, old and old[1]) if split else None

    split, fig = view.memoized("split", (stamp, run.finished, t.lang), build)
    if split is None:
        st.caption(f"**{t('train.data_wait_vs_compute')}**: {t('train.split_pending')}")
        return
    st.plotly_chart(fig[1], width="stretch", key=K + "split_chart",
                    config={"displayModeBar": False})
    st.caption(t("train.split_caption", share=pct(split["data_share"])) + "  \n"
               + (t("train.data_bound") if split["data_share"] > 0.5 else t("train.compute_bound")))


def show_chart(view: trainview.RunView, config: dict, stamp) -> None:
    if not view.series.count:
        st.caption(f"**{t('train.loss_curve')}**: {t('train.no_losses_yet')}")
        return
    _, fig = view.memoized("loss", (stamp, t.lang), lambda old: loss_figure(view.chart(), old))
    st.plotly_chart(fig, width="stretch", key=K + "loss_chart")
    log_every = int(config.get("log_every") or 2000)
    caption = t("train.chart_caption")
    if not view.running and view.steps_per_epoch and view.steps_per_epoch < log_every:
        caption += "  \n" + t("train.running_loss_none", n=log_every, steps=view.steps_per_epoch)
    st.caption(caption)
    if view.running:
        lines = "\n".join(t("train.running_loss_line", epoch=r["epoch"], i=f"{r['i']:5d}",
                            loss=f"{r['loss']:.3f}") for r in view.running)
        with st.expander(t("train.running_loss"), expanded=False):
            st.code(lines, language=None)


def show_epochs(view: trainview.RunView) -> None:
    """The epochs as a small table (markdown: a data frame costs more to send every poll)."""
    if not view.epochs:
        return

    def table(_old) -> str:
        head = (t("train.epoch_col"), t("train.mean_loss_col"), t("train.seconds_col"),
                t("train.ips_col"), t("common.accuracy"))
        rows = [(str(e.get("epoch")),
                 "–" if e.get("mean_loss") is None else num(round(float(e["mean_loss"]), 4)),
                 num(round(float(e.get("seconds") or 0), 1)),
                 num(round(float(e.get("images_per_second") or 0))), pct(e.get("accuracy")))
                for e in view.epochs]
        return "\n".join(["| " + " | ".join(head) + " |", "|---:" * len(head) + "|"]
                         + ["| " + " | ".join(r) + " |" for r in rows])

    st.markdown(view.memoized("epochs", (len(view.epochs), t.lang), table))


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
            st.warning(t("train.cancelled_partial", step=result.get("steps") or 0,
                         total=prog["total"] or 0), icon=":material/stop_circle:")
        else:
            st.warning(t("train.cancelled_queued"), icon=":material/stop_circle:")
    if acc is None:
        return
    label = t("train.accuracy_final") if run.status == "done" else t("train.accuracy_partial")
    st.metric(label, pct(acc))
    lines = [f"{t('train.train_time')}: {dur(result.get('train_seconds'))} · "
             f"{t('train.ips_col')}: {num(round(result.get('images_per_second') or 0))}",
             t("train.chance")]
    rows = trainview.per_class_rows(result.get("per_class_accuracy")
                                    or (view.eval or {}).get("per_class_accuracy"))
    if rows:
        names = [t(f"classes.{c}") if c in _CLASSES else c for c, _ in rows]
        best, worst = max(rows, key=lambda r: r[1]), min(rows, key=lambda r: r[1])
        lines.append(t("train.best_worst", best=names[rows.index(best)], best_acc=pct(best[1]),
                       worst=names[rows.index(worst)], worst_acc=pct(worst[1])))
    st.caption("  \n".join(lines))
    if rows:
        fig = view.memoized("per_class", (run.status, t.lang),
                            lambda old: per_class_figure(names, rows))
        st.plotly_chart(fig, width="stretch", key=K + "per_class_chart")
        with st.expander(t("a11y.show_table")):   # the chart's numbers, for screen readers
            st.dataframe(tables.per_class_table(rows, t.lang), hide_index=True)
    page_link("pages/results.py", t("train.see_results"), ":material/insights:")
    page_link("pages/runs.py", t("train.see_runs"), ":material/compare_arrows:")


def page_link(path: str, label: str, icon: str) -> None:
    """A link to another page of the lab (left out while that page does not exist yet)."""
    if (ROOT / path).is_file():
        st.page_link(path, label=label, icon=icon)


_CLASSES = set(("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                "truck"))


def _cancel(run_id: str) -> None:
    """The Stop button's callback: it runs before the fragment draws, so the status drawn
    right after the click is already the new one."""
    try:
        get_queue().cancel(session_id(), run_id)
    except CifarLabError as err:
        st.session_state[K + "cancel_error"] = err


def show_progress(run, prog: dict) -> None:
    if not prog["total"]:
        st.info(t("train.starting"), icon=":material/hourglass_top:")
        return
    eta = (t("train.eta", time=dur(prog["eta_s"])) if prog["eta_s"] is not None
           else t("train.eta_unknown"))
    st.progress(prog["fraction"], text=t("train.progress", step=prog["step"],
                                         total=prog["total"]) + " · " + eta)
    line = (f"{t('common.images_per_second')}: {num(round(prog['images_per_second']))} · "
            f"{t('common.elapsed')}: {dur(prog['elapsed_s'])}")
    if run.waited_s and run.waited_s >= 1:
        line += " · " + t("train.waited", time=dur(run.waited_s))
    st.caption(line)


def show_run(queue: jobs.JobQueue, sid: str, run) -> None:
    """One run, whatever its state: status, progress, result, loss chart, split, epochs."""
    view = _view(run.id)
    prog = trainview.progress_info(run.progress)
    view.update(partial(queue.events, sid, run.id), partial(queue.losses, sid, run.id),
                step=None if run.finished else prog["step"])
    stamp = view.chart_stamp(time.monotonic(), CHART_S, final=run.finished)
    phase = trainview.phase(run, view, run.progress)

    position = queue.queue_position(run.id) if phase == "queued" else None
    st.markdown(f"**{t('status.status')}:** {status_text(run, position)}"
                + (f" · {t('common.device')}: `{run.device}`" if run.device else ""))
    if run.active and queue.can_control(sid, run):
        st.button(t("train.cancel"), key=K + "cancel", icon=":material/stop:",
                  disabled=run.cancel_requested, on_click=_cancel, args=(run.id,))
    err = st.session_state.pop(K + "cancel_error", None)
    if err is not None:
        show_error(err)
    if phase == "evaluating":
        st.info(t("train.evaluating"), icon=":material/fact_check:")
    elif phase == "cancelling":
        st.info(t("train.cancel_requested"), icon=":material/hourglass_top:")
    if phase == "queued":
        st.info(t("train.queue_position", n=position or 1) + "  \n" + t("train.queue_wait"),
                icon=":material/schedule:")
        return
    if run.status == "running":
        show_progress(run, prog)
    if run.status in ("failed", "interrupted"):
        why = run.error_text(t.lang) or t(f"status.{run.status}")   # in the student's language
        st.error(t("train.failed_reason", reason=why))
    if run.finished:
        show_result(run, view)
    left, right = st.columns([3, 2])
    with left:
        show_chart(view, run.config or {}, stamp)
    with right:
        show_split(view, run, stamp)
    show_epochs(view)   # full width: in the narrow column its last columns were cut off


def live(sid: str) -> None:
    """The live part of the page (a fragment): the session's runs, and the chosen one."""
    trainview.freeze_long_lived()  # a poll's garbage collection must not walk torch & co
    queue = get_queue()
    runs = queue.runs(sid, kind="train")[:50]
    # once a second while a run is queued or running, slowly once they are all over
    set_fragment_interval(trainview.poll_interval(runs, POLL_S, IDLE_POLL_S))
    if not runs:
        st.info(t("train.no_run"))
        return
    by_id = {r.id: r for r in runs}
    ss = st.session_state
    # a run's label changes only with its status or name: made once each, not once per poll
    made = ss.get(K + "labels", {})
    labels = ss[K + "labels"] = {(r.id, r.status, r.name, t.lang):
                                 made.get((r.id, r.status, r.name, t.lang)) or run_label(r)
                                 for r in runs}
    ss[K + "run_select"] = trainview.pick_run(runs, ss.get(K + "run_select"))
    selected = st.selectbox(t("train.choose_run"), list(by_id), key=K + "run_select",
                            format_func=lambda rid: labels[rid, by_id[rid].status,
                                                           by_id[rid].name, t.lang])
    show_run(queue, sid, by_id[selected])


# ------------------------------------------------------------------------------------ page

st.title(t("nav.train"))
with st.expander(t("lesson.title") + ": " + t("nav.train"), expanded=False):
    lesson("training")

queue = get_queue()

sid = session_id()
st.subheader(t("train.settings_title"))
msg = current_message()
problems = knobs(queue)

st.text_input(t("train.run_name"), key=K + "name", max_chars=100, help=t("train.run_name_help"),
              placeholder=t("train.run_name_placeholder"))
st.button(t("train.start"), key=K + "start", type="primary", on_click=_submit,
          icon=":material/play_arrow:")
st.caption(estimate_line(queue, problems))  # always one line here (the fragment keeps its place)
with st.container():  # one place, shown or empty: the fragment below keeps its id (its place)
    if msg is not None and st.session_state.get(K + "submit_field") is None:
        (st.error if msg[0] == "error" else st.success)(msg[1])
        if msg[0] == "error" and problems:
            for field, p in problems.items():
                st.markdown(f"- {p.text(t.lang)}")

st.divider()
# The interval follows the state: set here at each full run (pressing Train is one), and by
# the fragment itself at each poll (set_fragment_interval), so a page left on a finished run
# polls every IDLE_POLL_S seconds, not every second.
interval = trainview.poll_interval(queue.runs(sid, kind="train")[:50],
                                   POLL_S, IDLE_POLL_S)
st.fragment(live, run_every=interval)(sid)
