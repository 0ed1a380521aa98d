"""The Runs page's engine: runs side by side, their loss curves, their downloads."""
from __future__ import annotations

import io
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import torch
from pandas.io.formats.style import Styler

from cifarlab import i18n
from cifarlab.core.checkpoint import Checkpoint
from cifarlab.core.config import ModelSpec, TrainConfig, knobs
from cifarlab.core.export.bundle import bundle_bytes
from cifarlab.core.export.record import RunRecord, run_slug
from cifarlab.core.export.render import export_script
from cifarlab.errors import CifarLabError
from cifarlab.lab import charts as C
from cifarlab.lab.train import LossSeries

MAX_POINTS = 1000   # loss points per run on the comparison chart


def downsampled(steps: Sequence[int], losses: Sequence[float]) -> tuple[list[int], list[float]]:
    """At most ``MAX_POINTS`` bucket means of a run's step losses, as the Train page draws."""
    series = LossSeries(max_points=MAX_POINTS)
    series.add(list(steps), list(losses))
    return series.points()


def state_dict_bytes(ckpt: Checkpoint) -> bytes:
    """The weights alone, as the tutorial saves them (``torch.save(net.state_dict(), PATH)``)."""
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in ckpt.state_dict.items()}, buf)
    return buf.getvalue()


def bundle_for_run(run, ckpt: Checkpoint, steps: Sequence[int] | None,
                   losses: Sequence[float] | None, lang: str) -> bytes:
    """"Take your run home": ``core.export.bundle``'s zip in ``lang``, in memory."""
    return bundle_bytes(RunRecord(
        config=ckpt.config, state_dict=ckpt.state_dict, classes=tuple(ckpt.classes),
        results=dict(run.result or ckpt.results or {}),
        losses=list(losses) if losses is not None else None,
        steps=list(steps) if steps is not None else None, env=run.env, run_id=run.id,
        name=run.name or "", created_at=run.started_at or run.created_at), lang)


def run_script(run) -> str:
    """The script that repeats the run; "" for a run whose config is no TrainConfig."""
    cfg = config_of(run)
    if cfg is None:
        return ""
    acc = (run.result or {}).get("test_accuracy")
    note = f"CIFAR Lab run {run.id}" + (f", test accuracy {100 * acc:.1f} %"
                                        if isinstance(acc, (int, float)) else "")
    return export_script(cfg, source_note=note, script_name=f"cifar_run_{run.id[:8]}.py")


def bundle_file_name(run) -> str:
    """The zip's name: its one folder's name (``cifarlab-<name>-<id[:8]>``) plus ``.zip``."""
    return f"cifarlab-{run_slug(run.name, run.id)}.zip"


# every knob of the schema (a field added there appears here), and the network
def knob_columns(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in knobs(cls) if f.name != "log_every") + ("model",)


KNOB_COLUMNS = knob_columns(TrainConfig)
RESULT_COLUMNS = ("accuracy", "final_loss", "images_per_second", "train_seconds", "steps")
RUN_COLUMNS = ("run", "name", "status", "started") + RESULT_COLUMNS + KNOB_COLUMNS


def model_label(spec: Mapping[str, Any] | ModelSpec | None) -> str:
    """"Net()" for the tutorial's network, else the settings that differ from it."""
    try:
        spec = spec if isinstance(spec, ModelSpec) else ModelSpec.from_dict(spec)
    except CifarLabError:
        return "?"
    base = ModelSpec()
    changes = [f"{name}={list(value) if isinstance(value, tuple) else value}"
               for name in ("channels", "kernels", "paddings", "strides", "pool", "hidden", "width")
               if (value := getattr(spec, name)) != getattr(base, name)]
    return "Net(" + ", ".join(changes) + ")"


def runs_table(runs: Sequence[Any], cls: type = TrainConfig) -> pd.DataFrame:
    """One row per run: ``RUN_COLUMNS`` (``accuracy`` a percentage, missing figures NaN)."""
    knob_cols = knob_columns(cls)
    rows = []
    for run in runs:
        cfg, res = dict(run.config or {}), dict(run.result or {})
        rows.append({
            "run": run.id,
            "name": run.name or "",
            "status": run.status,
            "started": datetime.fromtimestamp(run.started_at or run.created_at),
            "accuracy": res.get("test_accuracy"),
            **{col: res.get(col) for col in RESULT_COLUMNS[1:]},
            **{name: cfg.get(name) for name in knob_cols},
            "device": res.get("device") or getattr(run, "device", None),
            "model": model_label(cfg.get("model")),
        })
    df = pd.DataFrame(rows, columns=["run", "name", "status", "started", *RESULT_COLUMNS,
                                     *knob_cols])
    df[list(RESULT_COLUMNS)] = df[list(RESULT_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    df["accuracy"] *= 100
    return df


def differing_columns(df: pd.DataFrame, columns: Iterable[str] = KNOB_COLUMNS) -> list[str]:
    """The ``columns`` whose values differ across ``df``'s rows (None and NaN alike)."""
    return [col for col in columns if col in df.columns and df[col].map(
        lambda v: repr(v) if isinstance(v, (list, dict)) else v).fillna("–").nunique() > 1]


def loss_curves(curves: Mapping[str, tuple[Sequence[int], Sequence[float]]],
                steps_per_epoch: Mapping[str, float] | None = None, x: str = "step",
                smooth: int | None = None) -> pd.DataFrame:
    """Loss curves (label -> (steps, losses)) in one frame (run, x, loss), by "step" or "epoch",
    smoothed by a centred mean over ``smooth`` points (default: 1/50 of the curve)."""
    frames = []
    for label, (steps, losses) in curves.items():
        per = 1.0 if x == "step" else (steps_per_epoch or {}).get(label)
        if len(steps) == 0 or not per:
            continue
        loss = pd.Series(losses, dtype=float)
        window = smooth or max(1, len(loss) // 50)
        frames.append(pd.DataFrame({
            "run": label, "x": np.asarray(steps, dtype=float) / per,
            "loss": loss.rolling(window, center=True, min_periods=1).mean().to_numpy()}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["run", "x", "loss"])


def steps_per_epoch(run) -> float | None:
    res = run.result or {}
    steps, done = res.get("steps"), res.get("epochs_done")
    if isinstance(steps, (int, float)) and isinstance(done, (int, float)) and done > 0:
        return steps / done
    return None


def config_of(run) -> TrainConfig | None:
    """The run's TrainConfig, or None when its stored config is not one (a timing job)."""
    try:
        return TrainConfig.from_dict(dict(run.config or {}))
    except (CifarLabError, TypeError, KeyError):
        return None


# The result columns' labels; each knob column is labelled by its knob (the config's schema).
COLUMN_KEYS = {
    "run": "runs.run_col", "name": "runs.name_col", "status": "status.status",
    "started": "runs.created", "accuracy": "runs.accuracy_col", "final_loss": "runs.loss_col",
    "images_per_second": "common.images_per_second", "train_seconds": "runs.train_time_col",
    "steps": "common.step", "model": "runs.model_col",
} | {f.name: f.knob.label for f in knobs()}
HIGHLIGHT = "background-color: rgba(255, 200, 0, 0.35)"
DIGITS = {"accuracy": 1, "final_loss": 3, "images_per_second": 0, "train_seconds": 1,
          "steps": 0, "lr": None, "momentum": None}


def compare_table(df: pd.DataFrame, selected: Sequence[str], statuses: Sequence[str], t) -> Styler:
    """``runs_table``'s frame in words, the knobs that differ in ``selected`` first and marked."""
    differ = differing_columns(df[df["run"].isin(selected)])
    shown = df.copy()
    shown["run"] = shown["run"].str[:8]
    shown["status"] = list(statuses)
    shown["train_subset"] = shown["train_subset"].map(
        lambda v: t("runs.all_images") if pd.isna(v) else i18n.number(int(v), t.lang))
    shown["shuffle"] = shown["shuffle"].map(lambda v: t("common.yes") if v else t("common.no"))
    first = ["run", "name", "status", "started", "accuracy"]
    shown = shown[first + differ + [c for c in shown.columns if c not in first + differ]]
    names = {c: t(COLUMN_KEYS[c]) for c in shown.columns}
    marked = {names[d] for d in differ}
    chosen = set(selected)
    style = shown.rename(columns=names).style.apply(
        lambda col: [HIGHLIGHT if col.name in marked and rid in chosen else ""
                     for rid in df["run"]], axis=0)

    def number(digits):
        return lambda v: ((t("common.yes") if v else t("common.no"))
                          if isinstance(v, (bool, np.bool_)) else i18n.number(v, t.lang, digits))

    every = {names[c]: number(None) for c in shown.columns}   # None and NaN read "–" too
    return style.format(every | {names[c]: number(d) for c, d in DIGITS.items()}
                        | {names["started"]: lambda d: d.strftime("%d/%m %H:%M")}, na_rep="–")


def curves_figure(df: pd.DataFrame, x: str, t) -> go.Figure:
    """``loss_curves``' frame on one chart: a colour and a line style per run."""
    fig = px.line(df, x="x", y="loss", **C.series_style("run"),
                  labels={"x": t(f"runs.x_{x}"), "loss": t("common.loss"),
                          "run": t("runs.run_col")})
    return C.localized(fig, t.lang, height=380, margin=dict(C.MARGIN, t=20),
                       legend=dict(orientation="h", y=-0.25))
