"""The figures' data: one tidy DataFrame per chart of the CPU vs GPU page (the page draws it).

    throughput_frame(result, "fast", lang)   # series, batch_size, images_per_s, plus, minus
    speedup_frame(result, "fast", lang)      # series, batch_size, speedup (one recording)
    breakdown_frame(result, "cuda:0", "sync", share=False, lang)
    pipelines_frame(result, width=1, lang)   # series, pipeline, batch_size, images_per_s

Series names say device and width in the student's language; they are legend entries, never
Markdown.
"""
from __future__ import annotations

import pandas as pd

from cifarlab import i18n
from cifarlab.lab.gpu import analysis
from cifarlab.lab.gpu.config import TUTORIAL_POINT
from cifarlab.lab.gpu.results import PHASES, SweepResult

PHASE_COLORS = ("#9e9e9e", "#ff7f0e", "#1f77b4", "#2ca02c", "#d62728")   # in PHASES' order


def _series(device: str, width: int, lang: str, graphed: bool = False) -> str:
    return i18n.t("gpu.trace_graphed" if graphed else "gpu.trace", lang, device=device,
                  width=width)


def _pipe(pipeline: str, lang: str) -> str:
    return (i18n.t(f"gpu.pipe_{pipeline}", lang) if pipeline in ("fast", "tutorial")
            else pipeline)


def _order(df: pd.DataFrame, *by: str) -> pd.DataFrame:
    """The CPU first, then the accelerators; within each, by ``by``."""
    if df.empty:
        return df
    return (df.assign(_acc=df["device"] != "cpu").sort_values(["_acc", "device", *by])
            .drop(columns="_acc").reset_index(drop=True))


def throughput_frame(res: SweepResult, pipeline: str, lang: str) -> pd.DataFrame:
    """Images/s against batch size, one series per device and width, with the spread of the
    repeats (plus / minus: distances to the fastest and slowest repeat)."""
    rows = [r for r in res.ok_rows() if r["pipeline"] == pipeline]
    df = pd.DataFrame([{"device": r["device"], "width": r["width"],
                        "series": _series(r["device"], r["width"], lang, r.get("graphed")),
                        "batch_size": r["batch_size"], "images_per_s": r["images_per_s"],
                        "plus": (r["images_per_s_max"] or r["images_per_s"]) - r["images_per_s"],
                        "minus": r["images_per_s"] - (r["images_per_s_min"] or r["images_per_s"]),
                        "step_ms": r["step_ms"]} for r in rows],
                      columns=["device", "width", "series", "batch_size", "images_per_s",
                               "plus", "minus", "step_ms"])
    return _order(df, "series", "batch_size")


def tutorial_points(res: SweepResult) -> pd.DataFrame:
    """The tutorial as written on each device: where the star goes."""
    return pd.DataFrame([{"device": r["device"], "batch_size": r["batch_size"],
                          "images_per_s": r["images_per_s"]}
                         for r in res.ok_rows() if r["tutorial_point"]],
                        columns=["device", "batch_size", "images_per_s"])


def speedup_frame(res: SweepResult, pipeline: str, lang: str) -> pd.DataFrame:
    """Accelerator ÷ CPU images/s against batch size (within this recording), with a column
    ``tutorial`` marking the tutorial's own point."""
    ups = [s for s in analysis.speedups(res) if s["pipeline"] == pipeline]
    return pd.DataFrame([{"device": s["device"],
                          "series": _series(s["device"], s["width"], lang, s["graphed"]),
                          "batch_size": s["batch_size"], "speedup": s["speedup"],
                          "tutorial": analysis.point_key(s) == TUTORIAL_POINT} for s in ups],
                        columns=["device", "series", "batch_size", "speedup", "tutorial"])


def crossover_frame(res: SweepResult, pipeline: str) -> pd.DataFrame:
    """Where the curves cross (estimated batch size), per accelerator and width."""
    cross = [c for c in analysis.crossover(res) if c["pipeline"] == pipeline and c["estimate"]]
    return pd.DataFrame([{"device": c["device"], "width": c["width"], "estimate": c["estimate"],
                          "label": f"≈{c['estimate']:.0f}"} for c in cross],
                        columns=["device", "width", "estimate", "label"])


def breakdown_choices(res: SweepResult) -> dict[str, list[str]]:
    """device -> the methods its breakdown was timed with ("sync", "cuda_events")."""
    out: dict[str, list[str]] = {}
    for b in res.breakdowns:
        if not b["error"] and b["total_s"]:
            out.setdefault(b["device"], [])
            if b["method"] not in out[b["device"]]:
                out[b["device"]].append(b["method"])
    return out


def breakdown_frame(res: SweepResult, device: str, method: str, share: bool,
                    lang: str) -> pd.DataFrame:
    """One stacked bar per pipeline and batch size: milliseconds per step in each phase, or each
    phase's share of the step (%). Phases in PHASES' order, translated."""
    passes = sorted((b for b in res.breakdowns if not b["error"] and b["total_s"]
                     and b["device"] == device and b["method"] == method),
                    key=lambda b: (b["pipeline"] != "tutorial", b["batch_size"]))
    out = []
    for b in passes:
        label = f"{_pipe(b['pipeline'], lang)} · {b['batch_size']}"
        for p in PHASES:
            value = b[f"{p}_s"] / b["total_s"] * 100 if share else b[f"{p}_s"] * 1000
            out.append({"bar": label, "phase": i18n.t(f"gpu.phase_{p}", lang), "value": value})
    return pd.DataFrame(out, columns=["bar", "phase", "value"])


def pipelines_frame(res: SweepResult, width: int, lang: str) -> pd.DataFrame:
    """Images/s against batch size for both pipelines, one series per device and pipeline."""
    rows = [r for r in analysis.eager(res.ok_rows()) if r["width"] == width]
    df = pd.DataFrame([{"device": r["device"], "pipeline": r["pipeline"],
                        "series": f"{r['device']} · {_pipe(r['pipeline'], lang)}",
                        "batch_size": r["batch_size"], "images_per_s": r["images_per_s"]}
                       for r in rows if r["pipeline"] in ("fast", "tutorial")],
                      columns=["device", "pipeline", "series", "batch_size", "images_per_s"])
    return _order(df, "pipeline", "batch_size")
