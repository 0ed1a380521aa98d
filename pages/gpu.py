"""CPU vs GPU: time the same training step on every device, batch size by batch size.

Widgets -> a timing job through the job queue (exclusive on its device) -> rows arriving live
from the run's ``timing_row`` events -> a ``cifarlab.lab.gpu.SweepResult`` -> plotly figures of
throughput, speed-up and crossover (``timing.speedups``/``crossover``), the phase breakdown and
the two pipelines. Results save as CSV/JSON and load from an upload or docs/gpu-results.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from cifarlab.lab import gpu as timing
from cifarlab.core.devices import list_devices
from cifarlab.errors import CifarLabError
from pages.common import lang, lesson, queue as job_queue, session_id, show_error, translator

t = translator()

BATCH_OPTIONS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
WIDTH_OPTIONS = [1, 2, 4, 8]
LIVE_EVERY_S = 1.0
PHASE_COLORS = {"data": "#9e9e9e", "h2d": "#ff7f0e", "forward": "#1f77b4", "backward": "#2ca02c",
                "optimizer": "#d62728"}
STAR = dict(symbol="star", size=18, color="gold", line=dict(color="black", width=1))


# ----------------------------------------------------------------------------- small helpers

def num(x: float | None, digits: int = 0) -> str:
    """A number with thousands separators in the page's language (1,234.5 / 1.234,5)."""
    if x is None:
        return "–"
    text = f"{x:,.{digits}f}"
    if lang() in ("es", "pt"):
        text = text.replace(",", "\0").replace(".", ",").replace("\0", ".")
    return text


def times(x: float | None) -> str:
    """A speed-up factor: 2 significant digits below 10, whole numbers above."""
    if x is None:
        return "–"
    return num(x, 2 if x < 10 else 1 if x < 100 else 0)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return t("units.seconds", n=num(seconds, 1))
    return t("units.minutes", n=num(seconds / 60, 1))


def pipeline_name(p: str) -> str:
    return {"fast": t("gpu.pipeline_fast"), "tutorial": t("gpu.pipeline_tutorial")}.get(p, p)


def phase_names() -> dict[str, str]:
    return {"data": t("gpu.phase_data"), "h2d": t("gpu.phase_h2d"),
            "forward": t("gpu.phase_forward"), "backward": t("gpu.phase_backward"),
            "optimizer": t("gpu.phase_optimizer")}


def result_problem(res: timing.SweepResult) -> str | None:
    """What makes a loaded result unusable here (None when it is fine)."""
    if not res.rows:
        return t("gpu.no_rows")
    for i, r in enumerate(res.rows, start=1):
        if not (r["device"] and r["pipeline"] and r["batch_size"] and r["width"]):
            return t("gpu.bad_rows", n=i)
        if not r["error"] and not (r["images_per_s"] and r["images_per_s"] > 0
                                   and r["step_ms"] is not None):
            return t("gpu.bad_rows", n=i)
    return None


def parse_upload(name: str, data: bytes) -> timing.SweepResult:
    """A SweepResult from an uploaded file; CifarLabError with a clear message otherwise."""
    suffix = Path(name).suffix.lower()
    if suffix not in (".json", ".csv"):
        raise CifarLabError(t("gpu.upload_bad_type", name=name))
    try:
        if suffix == ".json":
            res = timing.SweepResult.from_json_text(data, source=name)
        else:
            res = timing.SweepResult.from_csv_text(data, source=name)
    except CifarLabError as err:
        raise CifarLabError(t("gpu.upload_bad", name=name,
                              reason=str(err).removeprefix(f"{name}: "))) from None
    except (UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as err:
        raise CifarLabError(t("gpu.upload_bad", name=name,
                              reason=f"{type(err).__name__}: {str(err)[:200]}")) from None
    problem = result_problem(res)
    if problem:
        raise CifarLabError(t("gpu.upload_bad", name=name, reason=problem))
    return res


@st.cache_data(max_entries=4, show_spinner=False)
def _recorded(directory: str, stamp: tuple) -> list[dict]:
    return [r.to_dict() | {"_source": r.source} for r in timing.recorded_results(directory)]


def recorded_results() -> list[timing.SweepResult]:
    """The results in docs/gpu-results (newest first); [] when the folder is empty or missing."""
    folder = Path(timing.RESULTS_DIR)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    stamp = tuple((p.name, p.stat().st_mtime_ns) for p in files)
    out = []
    for d in _recorded(str(folder), stamp):
        res = timing.SweepResult.from_dict(d, source=d["_source"])
        if result_problem(res) is None:
            out.append(res)
    return out


def gpu_names(res: timing.SweepResult) -> str:
    names = [d.get("name", d.get("id", "")) for d in res.environment.get("devices", [])
             if d.get("kind", "cpu") != "cpu"]
    if not names:
        names = list(dict.fromkeys(r["device_name"] for r in res.rows if r["device"] != "cpu"))
    return ", ".join(n for n in names if n)


def machine_label(res: timing.SweepResult) -> str:
    gpus = gpu_names(res)
    return f"{res.host} ({gpus})" if gpus else res.host


# ----------------------------------------------------------------------------- the page

st.title(t("gpu.title"))
st.caption(t("gpu.intro"))
with st.expander(t("lesson.title"), expanded=False):
    lesson("gpu")

devices_here = list_devices()
has_accelerator = any(d.kind != "cpu" for d in devices_here)
recorded = recorded_results()
queue = job_queue()
session = session_id()

if not has_accelerator:
    with st.container(border=True):
        st.markdown(f"**{t('gpu.no_gpu')}**")
        st.markdown(t("gpu.no_gpu_body"))
        st.markdown(t("gpu.no_gpu_recorded") if recorded else t("gpu.no_gpu_none_recorded"))

# -- what to measure ----------------------------------------------------------------------
st.subheader(t("gpu.settings_title"))
ids = [d.id for d in devices_here]
names = {d.id: d.name for d in devices_here}
c1, c2 = st.columns([2, 3])
chosen_devices = c1.pills(t("gpu.devices"), ids, default=ids, key="gpu_devices",
                          selection_mode="multi", help=t("gpu.devices_help"),
                          format_func=lambda d: f"{d} · {names[d]}")
default_batches = [4, 64, 256] + ([1024] if has_accelerator else [])
batch_sizes = c2.pills(t("gpu.batch_sizes"), BATCH_OPTIONS, default=default_batches,
                       key="gpu_batches", selection_mode="multi", help=t("gpu.batch_sizes_help"))
c1, c2 = st.columns([1, 2])
widths = c1.pills(t("gpu.widths"), WIDTH_OPTIONS, default=[1], key="gpu_widths",
                  selection_mode="multi", help=t("gpu.widths_help"))
pipelines = c2.pills(t("gpu.pipelines"), ["fast", "tutorial"], default=["fast", "tutorial"],
                     key="gpu_pipelines", selection_mode="multi", format_func=pipeline_name,
                     help=t("gpu.pipelines_help"))
c1, c2 = st.columns([1, 3])
repeats = c1.number_input(t("gpu.repeats"), min_value=1, max_value=10, value=3, step=1,
                          key="gpu_repeats", help=t("gpu.repeats_help"))
with c2.expander(t("gpu.advanced")):
    a1, a2, a3, a4, a5 = st.columns(5)
    steps = a1.number_input(t("gpu.steps"), min_value=1, max_value=500, value=20, step=5,
                            key="gpu_steps", help=t("gpu.steps_help"))
    warmup = a2.number_input(t("gpu.warmup"), min_value=0, max_value=50, value=3, step=1,
                             key="gpu_warmup", help=t("gpu.warmup_help"))
    max_seconds = a3.number_input(t("gpu.max_seconds"), min_value=0.2, max_value=60.0, value=1.0,
                                  step=0.5, key="gpu_max_seconds", help=t("gpu.max_seconds_help"))
    workers = a4.number_input(t("common.num_workers"), min_value=0, max_value=8, value=2, step=1,
                              key="gpu_num_workers", help=t("common.num_workers_help"))
    with a5:
        do_breakdown = st.checkbox(t("gpu.breakdown"), value=True, key="gpu_breakdown",
                                   help=t("gpu.breakdown_help"))

config = None
if not (chosen_devices and batch_sizes and widths and pipelines):
    st.warning(t("gpu.pick_something"))
else:
    try:
        config = timing.SweepConfig(devices=tuple(chosen_devices), batch_sizes=tuple(batch_sizes),
                                    widths=tuple(widths), pipelines=tuple(pipelines),
                                    steps=int(steps), warmup=int(warmup), repeats=int(repeats),
                                    max_seconds=float(max_seconds), num_workers=int(workers),
                                    breakdown=bool(do_breakdown))
        st.caption(t("gpu.plan", points=len(config.points(list(chosen_devices))),
                     devices=", ".join(chosen_devices), budget=num(float(max_seconds), 1)))
    except CifarLabError as err:
        show_error(err)

if "gpu_run_id" not in st.session_state:  # a reload: this session's latest timing, if any
    mine = [r for r in queue.runs(session, kind="timing") if r.session == session]
    if mine:
        latest = max(mine, key=lambda r: r.created_at)
        st.session_state["gpu_run_id"] = latest.id
        st.session_state["gpu_run_seen"] = latest.id  # don't override a choice on every reload
run_id = st.session_state.get("gpu_run_id")
run = None
if run_id:
    try:
        run = queue.get(session, run_id)
    except CifarLabError:
        st.session_state.pop("gpu_run_id", None)
        run_id = None

if st.button(t("gpu.run"), type="primary", key="gpu_run", help=t("gpu.run_help"),
             disabled=config is None or (run is not None and run.active)):
    # The device the timing keeps to itself: the accelerator when one is timed, else the CPU.
    exclusive_on = next((d for d in config.devices if d != "cpu"), "cpu")
    try:
        run_id = queue.submit_job(session, "timing", config.to_dict(), exclusive_on,
                                  exclusive=True, name="CPU vs GPU timing")
        st.session_state["gpu_run_id"] = run_id
        run = queue.get(session, run_id)
    except CifarLabError as err:
        st.error(t("gpu.queue_failed", message=str(err)))


# -- the timing run, live ------------------------------------------------------------------

def rows_so_far(rid: str) -> list[dict]:
    return [e.data for e in queue.store.events(rid, kinds=["timing_row"])]


def rows_table(rows: list[dict]) -> pd.DataFrame:
    """The measured points as a table with translated column names (speed-up vs the cpu)."""
    cpu = {timing.point_key(r): r["images_per_s"] for r in rows
           if r["device"] == "cpu" and not r["error"]}
    out = []
    for r in rows:
        notes = []
        if r["tutorial_point"]:
            notes.append(t("gpu.tut_marker"))
        if r.get("budget_hit"):
            notes.append(t("gpu.note_budget", n=r["timed_steps"]))
        if r["error"]:
            notes.append(r["error"])
        base = cpu.get(timing.point_key(r))
        ok = not r["error"]
        out.append({
            t("gpu.device_col"): r["device"],
            t("gpu.pipeline_col"): r["pipeline"],
            t("gpu.batch_col"): r["batch_size"],
            t("gpu.width_col"): r["width"],
            t("gpu.ips_col"): round(r["images_per_s"], 1) if ok else None,
            t("gpu.step_col"): round(r["step_ms"], 3) if ok else None,
            t("gpu.spread_col"): (f"{r['step_ms_min']:.3f} – {r['step_ms_max']:.3f}" if ok else ""),
            t("gpu.epoch_col"): duration(r["epoch_s"]) if ok else "",
            t("gpu.speedup_col"): (round(r["images_per_s"] / base, 2)
                                   if ok and base and r["device"] != "cpu" else None),
            t("gpu.note_col"): "; ".join(notes),
        })
    return pd.DataFrame(out)


if run is not None and run.active:
    @st.fragment(run_every=LIVE_EVERY_S)
    def live_panel(rid: str) -> None:
        current = queue.get(session, rid)
        if current.finished:
            st.rerun()  # the whole page: the result appears below
        st.subheader(t("gpu.live_title"))
        cfg = timing.SweepConfig.from_dict(current.config)
        total = len(cfg.points(list(cfg.devices)))
        rows = rows_so_far(rid)
        if current.status == "queued":
            pos = queue.queue_position(rid)
            st.info(t("gpu.queued", device=current.device, n=pos or 1))
        elif not rows and current.started_at is None:
            st.info(t("gpu.starting"))
        else:
            if current.waited_s is not None and current.waited_s >= 1.0:
                st.warning(t("gpu.waited", seconds=duration(current.waited_s),
                             device=current.device))
            elif current.waited_s is not None:
                st.caption(t("gpu.no_wait"))
            if len(rows) < total:
                st.info(t("gpu.running", devices=", ".join(cfg.devices), done=len(rows),
                          total=total))
            else:
                st.info(t("gpu.running_breakdown", total=total))
            st.progress(min(1.0, len(rows) / max(1, total)))
        if rows:
            st.dataframe(rows_table(rows), hide_index=True, key="gpu_live_rows")
        if st.button(t("common.cancel"), key="gpu_cancel"):
            queue.cancel(session, rid)

    live_panel(run.id)
elif run is not None and run.finished:
    if st.session_state.get("gpu_run_seen") != run.id:
        st.session_state["gpu_run_seen"] = run.id
        st.session_state["gpu_pending_source"] = "run"
    if run.status == "failed":
        st.error(t("gpu.failed", message=run.error or "?"))
        rows = rows_so_far(run.id)
        if rows:
            st.dataframe(rows_table(rows), hide_index=True)
    elif run.status in ("cancelled", "interrupted"):
        st.warning(t("gpu.cancelled"))


# -- which result to show -------------------------------------------------------------------

st.subheader(t("gpu.results_title"))
sources: dict[str, tuple[str, timing.SweepResult]] = {}
if run is not None and run.finished and run.result and run.result.get("rows"):
    try:
        res = timing.SweepResult.from_dict(run.result)
        started = datetime.fromtimestamp(run.started_at or run.created_at).strftime("%H:%M:%S")
        sources["run"] = (t("gpu.source_run", time=started), res)
    except CifarLabError as err:
        show_error(err)

with st.expander(t("gpu.load_title"), expanded=not has_accelerator or bool(recorded)):
    upload = st.file_uploader(t("gpu.upload"), key="gpu_upload", help=t("gpu.upload_help"),
                              on_change=lambda: st.session_state.update(
                                  gpu_pending_source="upload"))
    if upload is not None:
        try:
            res = parse_upload(upload.name, upload.getvalue())
            sources["upload"] = (t("gpu.source_upload", name=upload.name), res)
        except CifarLabError as err:
            show_error(err)
for res in recorded:
    sources[f"rec:{Path(res.source).name}"] = (
        t("gpu.source_recorded", machine=machine_label(res), date=res.recorded_at[:10],
          file=Path(res.source).name), res)

shown: timing.SweepResult | None = None
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

def hardware_table(res: timing.SweepResult) -> pd.DataFrame:
    env, cfg = res.environment or {}, res.config or {}
    first = res.rows[0] if res.rows else {}
    none = t("gpu.none")
    items = [(t("gpu.hw_machine"), res.host or env.get("hostname") or none),
             (t("gpu.hw_date"), res.recorded_at.replace("T", " ")[:19] or none)]
    cpu = env.get("cpu") or next((r["device_name"] for r in res.rows if r["device"] == "cpu"), none)
    threads = (env.get("settings") or {}).get("torch_threads", env.get("torch_threads", "?"))
    items.append((t("gpu.hw_cpu"), t("gpu.hw_cpu_value", name=cpu, threads=threads)))
    gpus = [d for d in env.get("devices", []) if d.get("kind", "cpu") != "cpu"]
    if not gpus:  # a CSV without its first line: what the rows say
        gpus = [{"id": r["device"], "name": r["device_name"], "memory_bytes": r["device_memory_bytes"]}
                for r in {r["device"]: r for r in res.rows if r["device"] != "cpu"}.values()]
    for d in gpus:
        mem = d.get("memory_bytes")
        items.append((t("gpu.hw_gpu", device=d.get("id", "?")),
                      t("gpu.hw_gpu_value", name=d.get("name", "?"),
                        memory=num(mem / 2**30, 0) if mem else "?")))
    items.append((t("gpu.hw_torch"), env.get("torch") or first.get("torch") or none))
    cuda = env.get("cuda") or first.get("cuda") or none
    items.append((t("gpu.hw_cuda"), f"{cuda} / {env.get('cudnn') or none}"))
    if env.get("python"):
        items.append((t("gpu.hw_python"), f"{env.get('python')} / {env.get('platform', '')}"))
    if cfg:
        budget = cfg.get("max_seconds")
        items.append((t("gpu.hw_settings"), t(
            "gpu.hw_settings_value", steps=cfg.get("steps", "?"), repeats=cfg.get("repeats", "?"),
            warmup=cfg.get("warmup", "?"), budget=num(budget, 1) if budget else "∞",
            images=cfg.get("images", "?"), workers=cfg.get("num_workers", "?"))))
    load = [env.get("load_average_start"), env.get("load_average_end")]
    if any(load):
        items.append((t("gpu.hw_load"), " → ".join(num(x[0], 2) if x else "?" for x in load)))
    flags = {k: v for k, v in (env.get("settings") or {}).items() if k != "torch_threads"}
    if flags:
        items.append((t("gpu.hw_flags"), ", ".join(f"{k}={v}" for k, v in flags.items())))
    return pd.DataFrame(items, columns=[t("gpu.hw_item"), t("gpu.hw_value")])


def tutorial_point(res: timing.SweepResult) -> None:
    st.markdown(f"#### :material/star: {t('gpu.tutorial_title')}")
    info = timing.explain_tutorial_point(res)
    timed = [d for d in info["devices"] if d["images_per_s"]]
    if not timed:
        st.info(t("gpu.tut_missing"))
        return
    for d in timed:
        if d["device"] == "cpu":
            st.markdown(t("gpu.tut_cpu", name=d["device_name"], ips=num(d["images_per_s"]),
                          images=num(info["epoch_images"]), epoch=duration(d["epoch_s"]),
                          run=duration(d["tutorial_run_s"])))
    for d in timed:
        if d["device"] != "cpu" and d["speedup_vs_cpu"] is not None:
            st.markdown(t("gpu.tut_acc", device=d["device"], name=d["device_name"],
                          ips=num(d["images_per_s"]), x=times(d["speedup_vs_cpu"]),
                          run=duration(d["tutorial_run_s"])))
    params = next((r["params"] for r in res.ok_rows() if r["tutorial_point"] and r["params"]), None)
    st.markdown(t("gpu.tut_why", params=num(params or 62006)))
    ups = timing.speedups(res)
    for d in timed:
        mine = [s for s in ups if s["device"] == d["device"]]
        if d["speedup_vs_cpu"] is not None and mine:
            best = max(mine, key=lambda s: s["speedup"])
            st.markdown("- " + t("gpu.tut_compare", device=d["device"], x=times(d["speedup_vs_cpu"]),
                                 best=times(best["speedup"]), batch=best["batch_size"],
                                 width=best["width"], pipeline=best["pipeline"]))
    for d in timed:
        if d["fast_gain"]:
            st.markdown("- " + t("gpu.tut_fast", device=d["device"], x=times(d["fast_gain"])))
        best = d["best"]
        if best and d["best_gain"] and d["best_gain"] > 1.0 and (
                best["pipeline"], best["batch_size"]) != ("tutorial", 4):
            st.markdown("- " + t("gpu.tut_best", device=d["device"], batch=best["batch_size"],
                                 pipeline=best["pipeline"], x=times(d["best_gain"])))


def tutorial_rows(res: timing.SweepResult) -> list[dict]:
    return [r for r in res.ok_rows() if r["tutorial_point"]]


def throughput_figure(res: timing.SweepResult, pipeline: str) -> go.Figure:
    fig = go.Figure()
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in res.ok_rows():
        if r["pipeline"] == pipeline:
            groups[(r["device"], r["width"])].append(r)
    for (dev, width), rows in sorted(groups.items(), key=lambda kv: (kv[0][0] != "cpu", kv[0])):
        rows.sort(key=lambda r: r["batch_size"])
        ips = [r["images_per_s"] for r in rows]
        fig.add_scatter(
            x=[r["batch_size"] for r in rows], y=ips, mode="lines+markers",
            name=t("gpu.trace", device=dev, width=width),
            line=dict(dash="solid" if dev == "cpu" else "dash" if width > 1 else "solid"),
            error_y=dict(type="data", symmetric=False,
                         array=[(r["images_per_s_max"] or y) - y for r, y in zip(rows, ips)],
                         arrayminus=[y - (r["images_per_s_min"] or y) for r, y in zip(rows, ips)]),
            customdata=[[r["step_ms"], r["timed_steps"]] for r in rows],
            hovertemplate="batch %{x}: %{y:,.0f} images/s<br>%{customdata[0]:.3f} ms/step"
                          "<extra>%{fullData.name}</extra>")
    tut = tutorial_rows(res)
    if tut:
        fig.add_scatter(x=[r["batch_size"] for r in tut], y=[r["images_per_s"] for r in tut],
                        mode="markers+text", marker=STAR, name=t("gpu.tut_marker"),
                        text=[r["device"] for r in tut], textposition="middle left",
                        hovertemplate="%{text}: %{y:,.0f} images/s<extra></extra>")
    fig.update_xaxes(type="log", title=t("gpu.axis_batch"), tickvals=BATCH_OPTIONS)
    fig.update_yaxes(type="log", title=t("gpu.axis_ips"), dtick=1, tickformat="~s")
    fig.update_layout(height=430, margin=dict(t=20, b=40), legend=dict(orientation="h", y=-0.2))
    return fig


def speedup_figure(res: timing.SweepResult, pipeline: str) -> go.Figure:
    fig = go.Figure()
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for s in timing.speedups(res):
        if s["pipeline"] == pipeline:
            groups[(s["device"], s["width"])].append(s)
    for (dev, width), ss in sorted(groups.items()):
        fig.add_scatter(x=[s["batch_size"] for s in ss], y=[s["speedup"] for s in ss],
                        mode="lines+markers", name=t("gpu.trace", device=dev, width=width),
                        hovertemplate="batch %{x}: %{y:.2f}×<extra>%{fullData.name}</extra>")
    cross = [c for c in timing.crossover(res) if c["pipeline"] == pipeline and c["estimate"]]
    if cross:
        fig.add_scatter(x=[c["estimate"] for c in cross], y=[1.0] * len(cross),
                        mode="markers+text", name=t("gpu.crossover_marker"),
                        marker=dict(symbol="diamond", size=14, color="crimson"),
                        text=[f"≈{c['estimate']:.0f}" for c in cross], textposition="top center",
                        hovertemplate="%{text}<extra></extra>")
    tut = [s for s in timing.speedups(res) if timing.point_key(s) == timing.TUTORIAL_POINT]
    if tut:
        fig.add_scatter(x=[s["batch_size"] for s in tut], y=[s["speedup"] for s in tut],
                        mode="markers", marker=STAR, name=t("gpu.tut_marker"),
                        hovertemplate="%{y:.2f}×<extra></extra>")
    fig.add_hline(y=1.0, line_dash="dot", line_color="grey")
    fig.add_annotation(text=t("gpu.cpu_line"), x=1, xref="paper", y=0, yref="y",  # log10(1)
                       showarrow=False, xanchor="right", yanchor="bottom",
                       font=dict(color="grey"))
    fig.update_xaxes(type="log", title=t("gpu.axis_batch"), tickvals=BATCH_OPTIONS)
    fig.update_yaxes(type="log", title=t("gpu.axis_speedup"),
                     tickvals=[0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500])
    fig.update_layout(height=400, margin=dict(t=20, b=40), legend=dict(orientation="h", y=-0.2))
    return fig


def crossover_lines(res: timing.SweepResult, pipeline: str) -> list[str]:
    lines = []
    for c in [c for c in timing.crossover(res) if c["pipeline"] == pipeline]:
        common = dict(device=c["device"], pipeline=c["pipeline"], width=c["width"],
                      best=times(c["max_speedup"]), best_batch=c["max_batch_size"])
        if c["batch_size"] is None:
            lines.append(t("gpu.crossover_never", **common))
        else:
            est = t("gpu.crossover_estimate", n=num(c["estimate"])) if c["estimate"] else ""
            lines.append(t("gpu.crossover_at", batch=c["batch_size"], x=times(c["speedup"]),
                           estimate=est, **common))
    return lines


def breakdown_figure(rows: list[dict], share: bool) -> go.Figure:
    rows = sorted(rows, key=lambda b: (b["pipeline"] != "tutorial", b["batch_size"]))
    labels = [f"{b['pipeline']} · {b['batch_size']}" for b in rows]
    fig = go.Figure()
    for phase, name in phase_names().items():
        values = [b[f"{phase}_s"] / b["total_s"] * 100 if share else b[f"{phase}_s"] * 1000
                  for b in rows]
        fig.add_bar(x=labels, y=values, name=name, marker_color=PHASE_COLORS[phase],
                    hovertemplate=("%{y:.1f} %" if share else "%{y:.3f} ms")
                    + f"<extra>{name}</extra>")
    fig.update_layout(barmode="stack", height=420, margin=dict(t=20, b=40),
                      legend=dict(orientation="h", y=-0.35))
    fig.update_yaxes(title=t("gpu.axis_share") if share else t("gpu.axis_ms"))
    return fig


def pipelines_figure(res: timing.SweepResult, width: int) -> go.Figure:
    fig = go.Figure()
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in res.ok_rows():
        if r["width"] == width:
            groups[(r["device"], r["pipeline"])].append(r)
    for (dev, pipe), rows in sorted(groups.items()):
        rows.sort(key=lambda r: r["batch_size"])
        fig.add_scatter(x=[r["batch_size"] for r in rows], y=[r["images_per_s"] for r in rows],
                        mode="lines+markers", name=f"{dev} · {pipe}",
                        line=dict(dash="solid" if pipe == "fast" else "dot"),
                        hovertemplate="batch %{x}: %{y:,.0f} images/s<extra>%{fullData.name}</extra>")
    tut = tutorial_rows(res)
    if tut and width == timing.TUTORIAL_POINT[2]:
        fig.add_scatter(x=[r["batch_size"] for r in tut], y=[r["images_per_s"] for r in tut],
                        mode="markers", marker=STAR, name=t("gpu.tut_marker"))
    fig.update_xaxes(type="log", title=t("gpu.axis_batch"), tickvals=BATCH_OPTIONS)
    fig.update_yaxes(type="log", title=t("gpu.axis_ips"), dtick=1, tickformat="~s")
    fig.update_layout(height=400, margin=dict(t=20, b=40), legend=dict(orientation="h", y=-0.2))
    return fig


def pipeline_gains(res: timing.SweepResult, width: int) -> list[str]:
    by = {(r["device"], r["pipeline"], r["batch_size"]): r for r in res.ok_rows()
          if r["width"] == width}
    gains: dict[str, list[str]] = defaultdict(list)
    for (dev, pipe, b), r in sorted(by.items(), key=lambda kv: (kv[0][0] != "cpu", kv[0])):
        other = by.get((dev, "tutorial", b))
        if pipe == "fast" and other:
            gains[dev].append(f"{times(r['images_per_s'] / other['images_per_s'])}× ({b})")
    return [t("gpu.pipelines_gain", device=dev, width=width, gains=", ".join(g))
            for dev, g in gains.items()]


def would_add(res: timing.SweepResult) -> None:
    st.markdown(f"#### {t('gpu.would_add_title')}")
    reference = next((r for r in recorded if any(x["device"] != "cpu" for x in r.ok_rows())), None)
    if reference is None:
        st.info(t("gpu.would_add_none"))
        return
    info = timing.what_a_gpu_would_add(res, reference=reference)
    ref = info["reference"]
    tut = info["tutorial_point"]
    if tut:
        st.markdown(t("gpu.would_add_tutorial", gpu=ref["device_name"],
                      machine=reference.host, date=reference.recorded_at[:10],
                      x=times(tut["speedup"]), same=times(tut["speedup_same_machine"])))
    best = info["best"]
    if best:
        st.markdown(t("gpu.would_add_best", batch=best["batch_size"], width=best["width"],
                      pipeline=best["pipeline"], x=times(best["speedup"])))
    if not tut and not best:
        st.info(t("gpu.would_add_none"))


def busy_load(res: timing.SweepResult) -> tuple[float, int] | None:
    """(highest 1-minute load seen, cores) when the machine was busier than its cores."""
    env = res.environment or {}
    cores = env.get("cpu_count")
    seen = [r["load_1m"] for r in res.rows if r.get("load_1m") is not None]
    seen += [x[0] for x in (env.get("load_average_start"), env.get("load_average_end")) if x]
    if not cores or not seen or max(seen) <= cores:
        return None
    return max(seen), cores


def show_result(res: timing.SweepResult) -> None:
    # A loaded file is never taken for this machine's own figures (host names repeat: "vm").
    elsewhere = res.recorded_elsewhere
    if elsewhere:
        st.warning(f"**{t('gpu.recorded_elsewhere', machine=machine_label(res), date=res.recorded_at[:10])}**"
                   f" — {t('gpu.recorded_elsewhere_body')}", icon=":material/public:")
    else:
        st.success(t("gpu.this_machine", machine=machine_label(res), date=res.recorded_at[:10]),
                   icon=":material/computer:")
    busy = busy_load(res)
    if busy:
        st.warning(t("gpu.busy", load=num(busy[0], 1), cores=busy[1]), icon=":material/warning:")
    with st.expander(t("gpu.hardware_title"), expanded=elsewhere):
        st.table(hardware_table(res).set_index(t("gpu.hw_item")))
    st.caption(t("gpu.timing_note"))

    tutorial_point(res)

    measured = list(dict.fromkeys(r["pipeline"] for r in res.ok_rows()))
    if not measured:
        return
    pipe = st.radio(t("gpu.chart_pipeline"), measured, horizontal=True, key="gpu_chart_pipeline",
                    index=measured.index("fast") if "fast" in measured else 0,
                    format_func=pipeline_name)
    st.markdown(f"#### {t('gpu.throughput_title')}")
    st.plotly_chart(throughput_figure(res, pipe), key="gpu_throughput_chart")
    st.caption(t("gpu.throughput_caption"))

    st.markdown(f"#### {t('gpu.speedup_title')}")
    if any(r["device"] != "cpu" for r in res.ok_rows()):
        st.plotly_chart(speedup_figure(res, pipe), key="gpu_speedup_chart")
        st.caption(t("gpu.speedup_caption"))
        for line in crossover_lines(res, pipe):
            st.markdown("- " + line)
    else:
        st.info(t("gpu.no_speedup"))
        would_add(res)

    st.markdown(f"#### {t('gpu.breakdown_title')}")
    passes = [b for b in res.breakdowns if not b["error"] and b["total_s"]]
    if passes:
        b1, b2, b3 = st.columns(3)
        devs = list(dict.fromkeys(b["device"] for b in passes))
        dev = b1.radio(t("gpu.device_col"), devs, horizontal=True, key="gpu_breakdown_device",
                       index=len(devs) - 1)
        methods = list(dict.fromkeys(b["method"] for b in passes if b["device"] == dev))
        method = b2.radio(t("gpu.breakdown_method"), methods, horizontal=True,
                          key="gpu_breakdown_method",
                          format_func=lambda m: t("gpu.breakdown_events") if m == "cuda_events"
                          else t("gpu.breakdown_sync"))
        scale = b3.radio(t("gpu.breakdown_scale"), ["ms", "share"], horizontal=True,
                         key="gpu_breakdown_scale",
                         format_func=lambda s: t("gpu.breakdown_ms") if s == "ms"
                         else t("gpu.breakdown_share"))
        chosen = [b for b in passes if b["device"] == dev and b["method"] == method]
        st.plotly_chart(breakdown_figure(chosen, scale == "share"), key="gpu_breakdown_chart")
        st.caption(t("gpu.breakdown_caption"))
    else:
        st.info(t("gpu.no_breakdown"))

    st.markdown(f"#### {t('gpu.pipelines_title')}")
    if {"fast", "tutorial"} <= set(measured):
        width = min(r["width"] for r in res.ok_rows())
        st.plotly_chart(pipelines_figure(res, width), key="gpu_pipelines_chart")
        st.caption(t("gpu.pipelines_caption"))
        for line in pipeline_gains(res, width):
            st.markdown("- " + line)
    else:
        st.info(t("gpu.pipelines_need_both"))

    st.markdown(f"#### {t('gpu.table_title')}")
    st.dataframe(rows_table(res.rows), hide_index=True, key="gpu_result_rows")

    st.markdown(f"#### {t('gpu.save_title')}")
    stem = f"cifarlab-timing-{res.host or 'machine'}-{res.recorded_at[:10] or 'result'}"
    d1, d2 = st.columns(2)
    d1.download_button(t("gpu.download_csv"), res.to_csv(), file_name=f"{stem}.csv",
                       mime="text/csv", key="gpu_download_csv", on_click="ignore")
    d2.download_button(t("gpu.download_json"), res.to_json(), file_name=f"{stem}.json",
                       mime="application/json", key="gpu_download_json", on_click="ignore")


if shown is not None:
    show_result(shown)
