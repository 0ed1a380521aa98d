"""CPU vs GPU: a timing job's rows live, then a result (the run's, an upload or a recording)."""
from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import streamlit as st

from cifarlab.core.devices import list_devices
from cifarlab.errors import CifarLabError
from cifarlab.lab.gpu import charts, report, results
from cifarlab.lab.gpu.config import SweepConfig, job_request
from pages.gpu_parts import result
from ui.data import queue as job_queue
from ui.language import translator
from ui.nav import lesson
from ui.session import session_id
from ui.signin import owner_id
from ui.widgets import checked_number, decimal_box

t = translator()
L = t.lang


@st.cache_data(max_entries=4, show_spinner=False)
def recorded_results(stamp: tuple) -> list:
    """docs/gpu-results, read again when a file there changes (``stamp``)."""
    return results.recorded_results(stamp[0])


st.title(t("gpu.title"))
st.caption(t("gpu.intro"))
with st.expander(t("lesson.title"), expanded=False):
    lesson("gpu")

devices_here = list_devices()
has_accelerator = any(d.kind != "cpu" for d in devices_here)
has_cuda = any(d.kind == "cuda" for d in devices_here)   # the "GPU, graphed" series needs one
recorded = recorded_results(results.recordings_stamp())
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
batch_sizes = c2.pills(t("gpu.batch_sizes"), charts.BATCH_TICKS, key="gpu_batches",
                       default=[4, 64, 256] + ([1024] if has_accelerator else []),
                       selection_mode="multi", help=t("gpu.batch_sizes_help"))
c1, c2 = st.columns([1, 2])
widths = c1.pills(t("gpu.widths"), [1, 2, 4, 8], default=[1], key="gpu_widths",
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
else:   # every value comes from a widget that keeps it in range
    config = SweepConfig(devices=chosen_devices, batch_sizes=batch_sizes, widths=widths,
                         pipelines=pipelines, steps=steps, warmup=warmup, repeats=repeats,
                         max_seconds=max_seconds, num_workers=workers, breakdown=do_breakdown,
                         graphed=graphed)
    st.caption(report.plan_text(config, L))

if "gpu_run_id" not in st.session_state:  # a reload: this session's latest timing, if any
    latest = next((r for r in queue.runs(session, kind="timing") if r.session == session), None)
    if latest:   # runs come newest first
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
                                                          **job_request(config))
        run = queue.get(session, st.session_state["gpu_run_id"])
    except CifarLabError as err:
        st.error(t("gpu.queue_failed", message=report.error_text(err, L)))


def rows_so_far(rid: str) -> list[dict]:
    return [e.data for e in queue.events(session, rid, kinds=["timing_row"])]


if run is not None and run.active:
    @st.fragment(run_every=1.0)
    def live_panel(rid: str) -> None:
        current = queue.get(session, rid)
        if current.finished:
            st.rerun()  # the whole page: the result appears below
        st.header(t("gpu.live_title"))
        rows = rows_so_far(rid)
        lines, done = report.live_lines(current, rows, queue.queue_position(rid), time.time(), L)
        for kind, text in lines:
            getattr(st, kind)(text)
        if done is not None:
            st.progress(done)
        if rows:
            st.dataframe(report.rows_table(rows, L), hide_index=True, key="gpu_live_rows")
        if st.button(t("common.cancel"), key="gpu_cancel"):
            queue.cancel(session, rid)

    live_panel(run.id)
elif run is not None and run.finished:
    if st.session_state.get("gpu_run_seen") != run.id:
        st.session_state["gpu_run_seen"] = run.id
        st.session_state["gpu_pending_source"] = "run"
    if run.status == "failed":
        st.error(t("gpu.failed", message=report.md(run.error_text(L) if run.error else "?")))
        if rows := rows_so_far(run.id):
            st.dataframe(report.rows_table(rows, L), hide_index=True)
    elif run.status in ("cancelled", "interrupted"):
        st.warning(t("gpu.cancelled"))

# -- which result to show -------------------------------------------------------------------
st.header(t("gpu.results_title"))
sources: dict[str, tuple[str, object]] = {}
if run is not None and run.finished and run.result and run.result.get("rows"):
    started = datetime.fromtimestamp(run.started_at or run.created_at).strftime("%H:%M:%S")
    sources["run"] = (t("gpu.source_run", time=started), results.SweepResult.from_dict(run.result))
with st.expander(t("gpu.load_title"), expanded=not has_accelerator or bool(recorded)):
    upload = st.file_uploader(t("gpu.upload"), key="gpu_upload", help=t("gpu.upload_help"),
                              max_upload_size=results.UPLOADER_MB,
                              on_change=lambda: st.session_state.update(
                                  gpu_pending_source="upload"))
    if upload is not None:
        try:
            sources["upload"] = (t("gpu.source_upload", name=upload.name),  # an option: text
                                 results.load_upload(upload.name, upload.getvalue()))
        except CifarLabError as err:
            st.error(report.error_text(err, L))
for res in recorded:
    sources[f"rec:{Path(res.source).name}"] = (report.source_label(res, L), res)

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
    result.show(sources[choice][1], recorded, t, queue.measured_speeds())
