"""The CPU vs GPU page's figures, each from a tidy DataFrame, in ``t``'s language."""
from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from cifarlab import i18n
from cifarlab.lab import charts as C
import cifarlab.lab.gpu.analysis as analysis
from cifarlab.lab.gpu.config import TUTORIAL_POINT
from cifarlab.lab.gpu.report import pipeline_name
from cifarlab.lab.gpu.results import BREAKDOWN_COLUMNS, COLUMNS, PHASES, SweepResult

PHASE_COLORS = ("#9e9e9e", "#ff7f0e", "#1f77b4", "#2ca02c", "#d62728")   # in PHASES' order


def _series(device: str, width: int, lang: str, graphed: bool = False) -> str:
    return i18n.t("gpu.trace_graphed" if graphed else "gpu.trace", lang, device=device,
                  width=width)


def _breakdowns(res: SweepResult) -> pd.DataFrame:
    """The phase passes that can be drawn (older recordings also hold "cuda_events" ones)."""
    df = pd.DataFrame(res.breakdowns, columns=list(BREAKDOWN_COLUMNS))
    return df[(df["error"] == "") & (df["total_s"] > 0) & (df["method"] == "sync")]


def breakdown_devices(res: SweepResult) -> list[str]:
    return list(_breakdowns(res)["device"].unique())


# ------------------------------------------------------------------------------- the figures
BATCH_TICKS = [4, 8, 16, 32, 64, 128, 256, 512, 1024]
STAR = dict(symbol="star", size=18, color="gold", line=dict(color="black", width=1))


def _log_axes(fig: go.Figure, y_title: str, t, **y) -> go.Figure:
    fig.update_xaxes(type="log", title=t("gpu.axis_batch"), tickvals=BATCH_TICKS)
    fig.update_yaxes(type="log", title=y_title, **y)
    fig.update_layout(height=420, margin=dict(t=20, b=40), legend=dict(orientation="h", y=-0.2),
                      legend_title_text="")
    return C.localized(fig, t.lang)


def throughput_figure(res: SweepResult, pipeline: str, t) -> go.Figure:
    """Images/s against batch size per device and width, the repeats' spread, the tutorial."""
    df = pd.DataFrame(res.ok_rows(), columns=list(COLUMNS)).query("pipeline == @pipeline")
    ips, series = df["images_per_s"], zip(df["device"], df["width"], df["graphed"])
    df = df.assign(series=[_series(d, w, t.lang, g) for d, w, g in series],
                   plus=df["images_per_s_max"].fillna(ips) - ips,
                   minus=ips - df["images_per_s_min"].fillna(ips), acc=df["device"] != "cpu")
    df = df.sort_values(["acc", "device", "series", "batch_size"])   # the CPU's series first
    fig = px.line(df, x="batch_size", y="images_per_s", **C.series_style("series"), markers=True,
                  error_y="plus", error_y_minus="minus", hover_data={"step_ms": ":.3f"})
    tut = [r for r in res.ok_rows() if r["tutorial_point"]]   # on each device, any pipeline
    if tut:
        fig.add_scatter(x=[r["batch_size"] for r in tut], y=[r["images_per_s"] for r in tut],
                        mode="markers+text", marker=STAR, name=t("gpu.tut_marker"),
                        text=[r["device"] for r in tut], textposition="middle left")
    return _log_axes(fig, t("gpu.axis_ips"), t, dtick=1, tickformat="~s")


def speedup_figure(res: SweepResult, pipeline: str, t) -> go.Figure:
    """Accelerator ÷ CPU against batch size, where the curves cross marked, 1× as a line."""
    ups = [s for s in analysis.speedups(res) if s["pipeline"] == pipeline]
    df = pd.DataFrame([{"series": _series(s["device"], s["width"], t.lang, s["graphed"]),
                        "batch_size": s["batch_size"], "speedup": s["speedup"],
                        "tutorial": analysis.point_key(s) == TUTORIAL_POINT} for s in ups],
                      columns=["series", "batch_size", "speedup", "tutorial"])
    fig = px.line(df, x="batch_size", y="speedup", **C.series_style("series"), markers=True)
    cross = [c["estimate"] for c in analysis.crossover(res)
             if c["pipeline"] == pipeline and c["estimate"]]   # where the curves cross
    if cross:
        fig.add_scatter(x=cross, y=[1.0] * len(cross), mode="markers+text",
                        name=t("gpu.crossover_marker"), text=[f"≈{e:.0f}" for e in cross],
                        marker=dict(symbol="diamond", size=14, color="crimson"),
                        textposition="top center")
    if not (tut := df[df["tutorial"]]).empty:
        fig.add_scatter(x=tut["batch_size"], y=tut["speedup"], mode="markers", marker=STAR,
                        name=t("gpu.tut_marker"))
    fig.add_hline(y=1.0, line_dash="dot", line_color="grey")
    fig.add_annotation(text=t("gpu.cpu_line"), x=1, xref="paper", y=0, yref="y",  # log10(1)
                       showarrow=False, xanchor="right", yanchor="bottom", font=dict(color="grey"))
    return _log_axes(fig, t("gpu.axis_speedup"), t,
                     tickvals=[0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500])


def breakdown_figure(res: SweepResult, device: str, share: bool, t) -> go.Figure:
    """A stacked bar per pipeline and batch size: each phase's ms per step, or its share."""
    df = _breakdowns(res).query("device == @device")
    df = df.assign(later=df["pipeline"] != "tutorial").sort_values(["later", "batch_size"])
    phases = df[[f"{p}_s" for p in PHASES]].set_axis(
        [i18n.t(f"gpu.phase_{p}", t.lang) for p in PHASES], axis=1)
    values = phases.div(df["total_s"], axis=0) * 100 if share else phases * 1000
    names = df["pipeline"].map(lambda p: pipeline_name(p, t.lang))
    df = values.assign(bar=names + " · " + df["batch_size"].astype(str)).melt(
        "bar", var_name="phase")
    fig = px.bar(df, x="bar", y="value", color="phase", color_discrete_sequence=list(PHASE_COLORS))
    fig.update_layout(height=420, margin=dict(t=20, b=40), legend=dict(orientation="h", y=-0.35),
                      legend_title_text="", xaxis_title="")
    fig.update_yaxes(title=t("gpu.axis_share") if share else t("gpu.axis_ms"))
    return C.localized(fig, t.lang)

