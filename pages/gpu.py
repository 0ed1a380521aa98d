"""CPU vs GPU: time the same training step on every device, batch size by batch size.

Widgets -> a timing job through the job queue (``lab.job_request``: the devices it holds) ->
rows arriving live -> a ``SweepResult`` (from the run, an upload or docs/gpu-results) -> the
lab's sentences, tables and figure data -> plotly figures. Everything from a file reaches
Markdown escaped (the lab's ``md``).
"""
from __future__ import annotations

import time

from datetime import datetime
from pathlib import Path

import plotly.express as px
import streamlit as st

from cifarlab import i18n
from cifarlab.core.devices import list_devices
from cifarlab.errors import CifarLabError
from cifarlab.lab import gpu as lab
from pages.common import (checked_number, decimal_box, lang, lesson, owner_id, queue as job_queue,
                          series_style, session_id, translator)

t = translator()
L = lang()
BATCH_OPTIONS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
WIDTH_OPTIONS = [1, 2, 4, 8]
LIVE_EVERY_S = 1.0
STAR = dict(symbol="star", size=18, color="gold", line=dict(color="black", width=1))


def show_error(err: Exception, key: str | None = None) -> None:
    text = lab.error_text(err, L)
    st.error(t(key, message=text) if key else text)


@st.cache_data(max_entries=4, show_spinner=False)
def recorded_results(stamp: tuple) -> list:
    """docs/gpu-results, read again when a file there changes (``stamp``)."""
    return lab.recorded_results(stamp[0])


st.title(t("gpu.title"))
st.caption(t("gpu.intro"))
with st.expander(t("lesson.title"), expanded=False):
    lesson("gpu")

devices_here = list_devices()
has_accelerator = any(d.kind != "cpu" for d in devices_here)
has_cuda = any(d.kind == "cuda" for d in devices_here)   # the "GPU, graphed" series needs one
recorded = recorded_results(lab.recordings_stamp())
queue = job_queue()
session = session_id()

if not has_accelerator:
    with st.container(border=True):
        st.markdown(f"**{t('gpu.no_gpu')}**")
        st.markdown(t("gpu.no_gpu_body"))
        st.markdown(t("gpu.no_gpu_recorded") if recorded else t("gpu.no_gpu_none_recorded"))
        st.markdown(t("gpu.graphs_needs_gpu"))

# -- what to measure ----------------------------------------------------------------------
st.header(t("gpu.settings_title"))
ids = [d.id for d in devices_here]
names = {d.id: d.name for d in devices_here}
c1, c2 = st.columns([2, 3])
chosen_devices = c1.pills(t("gpu.devices"), ids, default=ids, key="gpu_devices",
                          selection_mode="multi", help=t("gpu.devices_help"),
                          format_func=lambda d: f"{d} · {names[d]}")
batch_sizes = c2.pills(t("gpu.batch_sizes"), BATCH_OPTIONS, key="gpu_batches",
                       default=[4, 64, 256] + ([1024] if has_accelerator else []),
                       selection_mode="multi", help=t("gpu.batch_sizes_help"))
c1, c2 = st.columns([1, 2])
widths = c1.pills(t("gpu.widths"), WIDTH_OPTIONS, default=[1], key="gpu_widths",
                  selection_mode="multi", help=t("gpu.widths_help"))
pipelines = c2.pills(t("gpu.pipelines"), ["fast", "tutorial"], default=["fast", "tutorial"],
                     key="gpu_pipelines", selection_mode="multi", help=t("gpu.pipelines_help"),
                     format_func=lambda p: t(f"gpu.pipeline_{p}"))
c1, c2 = st.columns([1, 3])
repeats = checked_number(c1, t("gpu.repeats"), 1, 10, 3, key="gpu_repeats",
                         help=t("gpu.repeats_help"))
with c2.expander(t("gpu.advanced")):
    a1, a2, a3, a4, a5 = st.columns(5)
    steps = checked_number(a1, t("gpu.steps"), 1, 500, 20, step=5, key="gpu_steps",
                           help=t("gpu.steps_help"))
    warmup = checked_number(a2, t("gpu.warmup"), 0, 50, 3, key="gpu_warmup",
                            help=t("gpu.warmup_help"))
    max_seconds = decimal_box(a3, t("gpu.max_seconds"), 0.2, 60.0, 1.0,
                              key="gpu_max_seconds", help=t("gpu.max_seconds_help"))
    workers = checked_number(a4, t("common.num_workers"), 0, 8, 2, key="gpu_num_workers",
                             help=t("common.num_workers_help"))
    do_breakdown = a5.checkbox(t("gpu.breakdown"), value=True, key="gpu_breakdown",
                               help=t("gpu.breakdown_help"))
graphed = has_cuda and c2.checkbox(t("gpu.graphed_option"), value=True, key="gpu_graphed",
                                   help=t("gpu.graphed_option_help"))

config = None
if not (chosen_devices and batch_sizes and widths and pipelines):
    st.warning(t("gpu.pick_something"))
elif None in (repeats, steps, warmup, max_seconds, workers):
    pass                      # the box in question says why: no plan, nothing to run
else:
    try:
        config = lab.SweepConfig(devices=tuple(chosen_devices), batch_sizes=tuple(batch_sizes),
                                 widths=tuple(widths), pipelines=tuple(pipelines),
                                 steps=int(steps), warmup=int(warmup), repeats=int(repeats),
                                 max_seconds=float(max_seconds), num_workers=int(workers),
                                 breakdown=bool(do_breakdown), graphed=bool(graphed))
        passes = len(config.breakdown_passes(list(chosen_devices)))
        st.caption(t("gpu.plan_passes" if passes else "gpu.plan", passes=passes,
                     points=len(config.points(list(chosen_devices))),
                     devices=", ".join(chosen_devices), budget=float(max_seconds),
                     total=i18n.duration(lab.estimate_seconds(config, list(chosen_devices)), L)))
    except CifarLabError as err:
        show_error(err)

if "gpu_run_id" not in st.session_state:  # a reload: this session's latest timing, if any
    mine = [r for r in queue.runs(session, kind="timing") if r.session == session]
    if mine:
        latest = max(mine, key=lambda r: r.created_at)
        st.session_state["gpu_run_id"] = st.session_state["gpu_run_seen"] = latest.id
run = None
if st.session_state.get("gpu_run_id"):
    try:
        run = queue.get(session, st.session_state["gpu_run_id"])
    except CifarLabError:
        st.session_state.pop("gpu_run_id", None)

if st.button(t("gpu.run"), type="primary", key="gpu_run", help=t("gpu.run_help"),
             disabled=config is None or (run is not None and run.active)):
    try:  # the lab says which devices the run holds (the CPU and the accelerators it times)
        st.session_state["gpu_run_id"] = queue.submit_job(session, owner=owner_id(),
                                                          **lab.job_request(config))
        run = queue.get(session, st.session_state["gpu_run_id"])
    except CifarLabError as err:
        show_error(err, "gpu.queue_failed")


def rows_so_far(rid: str) -> list[dict]:
    return [e.data for e in queue.events(session, rid, kinds=["timing_row"])]


if run is not None and run.active:
    @st.fragment(run_every=LIVE_EVERY_S)
    def live_panel(rid: str) -> None:
        current = queue.get(session, rid)
        if current.finished:
            st.rerun()  # the whole page: the result appears below
        st.header(t("gpu.live_title"))
        cfg = lab.SweepConfig.from_dict(current.config)
        total, rows = len(cfg.points(list(cfg.devices))), rows_so_far(rid)
        if current.status == "queued":
            st.info(t("gpu.queued", device=current.device, n=queue.queue_position(rid) or 1))
        elif not rows and current.started_at is None:
            st.info(t("gpu.starting"))
        else:
            if current.waited_s is not None and current.waited_s >= 1.0:
                st.warning(t("gpu.waited", seconds=i18n.duration(current.waited_s, L),
                             device=current.device))
            elif current.waited_s is not None:
                st.caption(t("gpu.no_wait"))
            st.info(t("gpu.running", devices=", ".join(cfg.devices), done=len(rows), total=total)
                    if len(rows) < total else t("gpu.running_breakdown", total=total))
            st.progress(min(1.0, len(rows) / max(1, total)))
            left = lab.time_left(cfg, len(rows), time.time() - (current.started_at or time.time()),
                                 list(cfg.devices))
            if left is not None:
                st.caption(t("gpu.time_left", time=i18n.duration(left, L)))
        if rows:
            st.dataframe(lab.rows_table(rows, L), hide_index=True, key="gpu_live_rows")
        if st.button(t("common.cancel"), key="gpu_cancel"):
            queue.cancel(session, rid)

    live_panel(run.id)
elif run is not None and run.finished:
    if st.session_state.get("gpu_run_seen") != run.id:
        st.session_state["gpu_run_seen"] = run.id
        st.session_state["gpu_pending_source"] = "run"
    if run.status == "failed":
        st.error(t("gpu.failed", message=lab.md(run.error_text(L) if run.error else "?")))
        if rows := rows_so_far(run.id):
            st.dataframe(lab.rows_table(rows, L), hide_index=True)
    elif run.status in ("cancelled", "interrupted"):
        st.warning(t("gpu.cancelled"))

# -- which result to show -------------------------------------------------------------------
st.header(t("gpu.results_title"))
sources: dict[str, tuple[str, object]] = {}
if run is not None and run.finished and run.result and run.result.get("rows"):
    try:
        started = datetime.fromtimestamp(run.started_at or run.created_at).strftime("%H:%M:%S")
        sources["run"] = (t("gpu.source_run", time=started), lab.SweepResult.from_dict(run.result))
    except CifarLabError as err:
        show_error(err)
with st.expander(t("gpu.load_title"), expanded=not has_accelerator or bool(recorded)):
    upload = st.file_uploader(t("gpu.upload"), key="gpu_upload", help=t("gpu.upload_help"),
                              on_change=lambda: st.session_state.update(
                                  gpu_pending_source="upload"))
    if upload is not None:
        try:
            sources["upload"] = (t("gpu.source_upload", name=upload.name),  # an option: text
                                 lab.load_upload(upload.name, upload.getvalue()))
        except CifarLabError as err:
            show_error(err)
for res in recorded:
    sources[f"rec:{Path(res.source).name}"] = (lab.source_label(res, L), res)

shown = None
if not sources:
    st.info(t("gpu.no_result"))
else:
    options = list(sources)
    want = st.session_state.pop("gpu_pending_source", None)
    if want in options:
        st.session_state["gpu_source"] = want
    if st.session_state.get("gpu_source") not in options:
        st.session_state["gpu_source"] = options[0]
    choice = st.selectbox(t("gpu.source"), options, key="gpu_source",
                          format_func=lambda k: sources[k][0])
    shown = sources[choice][1]


# -- one result: where it was measured, the tutorial's point, the charts, the table ---------

def log_axes(fig, y_title: str, **y):
    fig.update_xaxes(type="log", title=t("gpu.axis_batch"), tickvals=BATCH_OPTIONS)
    fig.update_yaxes(type="log", title=y_title, **y)
    fig.update_layout(height=420, margin=dict(t=20, b=40), legend=dict(orientation="h", y=-0.2),
                      legend_title_text="")
    return fig


def throughput_figure(res, pipeline: str):
    df = lab.throughput_frame(res, pipeline, L)
    fig = px.line(df, x="batch_size", y="images_per_s", **series_style("series"), markers=True,
                  error_y="plus", error_y_minus="minus", hover_data={"step_ms": ":.3f"})
    tut = lab.tutorial_points(res)
    if not tut.empty:
        fig.add_scatter(x=tut["batch_size"], y=tut["images_per_s"], mode="markers+text",
                        marker=STAR, name=t("gpu.tut_marker"), text=tut["device"],
                        textposition="middle left")
    return log_axes(fig, t("gpu.axis_ips"), dtick=1, tickformat="~s")


def speedup_figure(res, pipeline: str):
    df = lab.speedup_frame(res, pipeline, L)
    fig = px.line(df, x="batch_size", y="speedup", **series_style("series"), markers=True)
    cross, tut = lab.crossover_frame(res, pipeline), df[df["tutorial"]]
    if not cross.empty:
        fig.add_scatter(x=cross["estimate"], y=[1.0] * len(cross), mode="markers+text",
                        name=t("gpu.crossover_marker"), text=cross["label"],
                        marker=dict(symbol="diamond", size=14, color="crimson"),
                        textposition="top center")
    if not tut.empty:
        fig.add_scatter(x=tut["batch_size"], y=tut["speedup"], mode="markers", marker=STAR,
                        name=t("gpu.tut_marker"))
    fig.add_hline(y=1.0, line_dash="dot", line_color="grey")
    fig.add_annotation(text=t("gpu.cpu_line"), x=1, xref="paper", y=0, yref="y",  # log10(1)
                       showarrow=False, xanchor="right", yanchor="bottom", font=dict(color="grey"))
    return log_axes(fig, t("gpu.axis_speedup"),
                    tickvals=[0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500])


def breakdown_section(res) -> None:
    choices = lab.breakdown_choices(res)
    if not choices:
        st.info(t("gpu.no_breakdown"))
        return
    b1, b2, b3 = st.columns(3)
    devs = list(choices)
    dev = b1.radio(t("gpu.device_col"), devs, horizontal=True, key="gpu_breakdown_device",
                   index=len(devs) - 1)
    method = b2.radio(t("gpu.breakdown_method"), choices[dev], horizontal=True,
                      key="gpu_breakdown_method", format_func=lambda m: t(f"gpu.breakdown_{m}"))
    scale = b3.radio(t("gpu.breakdown_scale"), ["ms", "share"], horizontal=True,
                     key="gpu_breakdown_scale", format_func=lambda s: t(f"gpu.breakdown_{s}"))
    df = lab.breakdown_frame(res, dev, method, scale == "share", L)
    fig = px.bar(df, x="bar", y="value", color="phase",
                 color_discrete_sequence=list(lab.PHASE_COLORS))
    fig.update_layout(height=420, margin=dict(t=20, b=40), legend=dict(orientation="h", y=-0.35),
                      legend_title_text="", xaxis_title="")
    fig.update_yaxes(title=t("gpu.axis_share") if scale == "share" else t("gpu.axis_ms"))
    st.plotly_chart(fig, key="gpu_breakdown_chart", alt=t("a11y.breakdown_chart"))
    st.caption(t("gpu.breakdown_caption"))


def show_result(res) -> None:
    where = lab.provenance(res, L)
    if where["elsewhere"]:
        st.warning(f"**{where['label']}** — {t('gpu.recorded_elsewhere_body')}",
                   icon=":material/public:")
    else:
        st.success(where["label"], icon=":material/computer:")
    if where["busy"]:
        st.warning(where["busy"], icon=":material/warning:")
    with st.expander(t("gpu.hardware_title"), expanded=where["elsewhere"]):
        st.table(lab.hardware_table(res, L).set_index(t("gpu.hw_item")))
    st.caption(t("gpu.timing_note"))

    st.markdown(f"### :material/star: {t('gpu.tutorial_title')}")
    lines = lab.tutorial_lines(res, L)
    if not lines:
        st.info(t("gpu.tut_missing"))
    for line in lines:
        st.markdown(line)

    measured = list(dict.fromkeys(r["pipeline"] for r in res.ok_rows()))
    if not measured:
        return
    pipe = st.radio(t("gpu.chart_pipeline"), measured, horizontal=True, key="gpu_chart_pipeline",
                    index=measured.index("fast") if "fast" in measured else 0,
                    format_func=lambda p: t(f"gpu.pipeline_{p}"))
    st.markdown(f"### {t('gpu.throughput_title')}")
    st.plotly_chart(throughput_figure(res, pipe), key="gpu_throughput_chart",
                    alt=t("a11y.throughput_chart"))
    st.caption(t("gpu.throughput_caption"))

    st.markdown(f"### {t('gpu.speedup_title')}")
    if any(r["device"] != "cpu" for r in res.ok_rows()):
        st.plotly_chart(speedup_figure(res, pipe), key="gpu_speedup_chart",
                        alt=t("a11y.speedup_chart"))
        st.caption(t("gpu.speedup_caption"))
        for line in lab.crossover_lines(res, pipe, L):
            st.markdown("- " + line)
    else:
        st.info(t("gpu.no_speedup"))
        st.markdown(f"#### {t('gpu.would_add_title')}")
        for kind, text in lab.would_add_lines(res, recorded, L):
            getattr(st, kind)(text)

    st.markdown(f"### {t('gpu.graphs_title')}")
    st.markdown(t("gpu.graphs_body"))
    gains = lab.graph_gain_lines(res, L)
    for line in gains:
        st.markdown("- " + line)
    if not gains:
        st.info(t("gpu.graphs_none") if has_cuda or res.recorded_elsewhere
                else t("gpu.graphs_needs_gpu"))

    st.markdown(f"### {t('gpu.breakdown_title')}")
    breakdown_section(res)

    st.markdown(f"### {t('gpu.pipelines_title')}")
    if {"fast", "tutorial"} <= set(measured):
        width = min(r["width"] for r in res.ok_rows())
        df = lab.pipelines_frame(res, width, L)
        fig = px.line(df, x="batch_size", y="images_per_s", color="series", markers=True)
        tutorial = set(df.loc[df["pipeline"] == "tutorial", "series"])
        fig.for_each_trace(lambda tr: tr.update(line_dash="dot" if tr.name in tutorial else "solid"))
        st.plotly_chart(log_axes(fig, t("gpu.axis_ips"), dtick=1, tickformat="~s"),
                        key="gpu_pipelines_chart", alt=t("a11y.pipelines_chart"))
        st.caption(t("gpu.pipelines_caption"))
        for line in lab.pipeline_gain_lines(res, width, L):
            st.markdown("- " + line)
    else:
        st.info(t("gpu.pipelines_need_both"))

    st.markdown(f"### {t('gpu.table_title')}")
    st.dataframe(lab.rows_table(res.rows, L), hide_index=True, key="gpu_result_rows")

    st.markdown(f"### {t('gpu.save_title')}")
    stem = lab.download_stem(res)
    d1, d2 = st.columns(2)
    d1.download_button(t("gpu.download_csv"), res.to_csv(), file_name=f"{stem}.csv",
                       mime="text/csv", key="gpu_download_csv", on_click="ignore")
    d2.download_button(t("gpu.download_json"), res.to_json(), file_name=f"{stem}.json",
                       mime="application/json", key="gpu_download_json", on_click="ignore")


if shown is not None:
    show_result(shown)
