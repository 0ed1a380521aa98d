"""What the Results and Runs pages show: a finished run's model, its predictions and mistakes,
per-class accuracy over the epochs, a student's own photo classified, and runs side by side.

    model, ckpt = load_run_model(store, run)          # the run's checkpoint, weights_only
    ev = predictions_for(model, data)                  # EvalResult over the 10,000 test images
    confused_examples(ev, "cat", "dog", limit=12)      # test images: true cat, answered dog
    per_class_by_epoch(store.events(run.id, ["epoch"]))  # DataFrame: epoch, class, accuracy
    classify_image(model, png_bytes, ckpt.classes)     # [("cat", 0.61), ("dog", 0.22), ...]
    runs_table(runs); differing_columns(df, KNOB_COLUMNS)

What students upload (a checkpoint, a picture) is handled in ``results.uploads`` and exported
here. Never imports streamlit. Every refusal is a ``CifarLabError`` with a code and parameters,
so a page shows it in the student's language: ``err.text(lang)``.
"""
from __future__ import annotations

import io
import math
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from cifarlab.core.checkpoint import Checkpoint, load as load_checkpoint
from cifarlab.core.config import ModelSpec, TrainConfig
from cifarlab.core.evaluate import EvalResult, evaluate
from cifarlab.errors import CheckpointError, CifarLabError
from cifarlab.lab.results.uploads import (  # noqa: F401  (the page's one import)
    MAX_CHECKPOINT_BYTES, MAX_DECODE_BYTES, MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS, MAX_UPLOAD_BYTES,
    PREVIEW_SIZE, SERVER_UPLOAD_MB, UPLOADER_MB, ImageError, PreparedImage, classify_image,
    classify_prepared, load_uploaded_checkpoint, prepare_image)

__all__ = [
    "TUTORIAL_REFERENCE", "MAX_CHECKPOINT_BYTES", "MAX_UPLOAD_BYTES", "MAX_IMAGE_BYTES",
    "UPLOADER_MB", "SERVER_UPLOAD_MB", "MAX_IMAGE_PIXELS", "MAX_DECODE_BYTES", "PREVIEW_SIZE",
    "KNOB_COLUMNS", "CheckpointError", "ImageError", "PreparedImage",
    "load_run_model", "load_uploaded_checkpoint", "predictions_for", "confused_examples",
    "most_confused_pair", "sample_predictions", "per_class_by_epoch", "prepare_image",
    "classify_image", "classify_prepared", "upscale", "state_dict_bytes", "runs_table",
    "differing_columns", "loss_curves", "model_label",
]

# The PyTorch tutorial's printed figures: 54 % overall after 2 epochs; per class they swing
# widely from run to run (two runs of the tutorial: bird 21-38 %, ship 61-81 %).
TUTORIAL_REFERENCE: dict[str, Any] = {
    "accuracy": 0.54,
    "per_class_ranges": {"bird": (0.21, 0.38), "ship": (0.61, 0.81)},
    "chance": 0.10,
}

# --------------------------------------------------------------------------------- models

def load_run_model(store, run) -> tuple[torch.nn.Module, Checkpoint]:
    """The model a run saved (its checkpoint at the store's validated path), on the CPU."""
    path = store.checkpoint_path(run.id)   # validates the id: nothing else becomes a path
    if not path.is_file():
        raise CheckpointError("checkpoint.no_saved_model")
    ckpt = load_checkpoint(path, map_location="cpu")
    return ckpt.model().eval(), ckpt


def predictions_for(model: torch.nn.Module, data, device="cpu") -> EvalResult:
    """Every test image's class probabilities, the confusion matrix and accuracies."""
    out_features = getattr(getattr(model, "fc3", None), "out_features", None)
    if out_features is not None and out_features != len(data.classes):
        raise CheckpointError("checkpoint.other_classes", n=out_features,
                              classes=len(data.classes))
    return evaluate(model, data, device)


def confused_examples(ev: EvalResult, true_cls: int | str, pred_cls: int | str,
                      limit: int = 24) -> np.ndarray:
    """Indices of test images of class ``true_cls`` that the model called ``pred_cls``, the
    most confident answers first. ``true_cls == pred_cls`` gives correctly classified ones."""
    t, p = _class_index(ev.classes, true_cls), _class_index(ev.classes, pred_cls)
    idx = np.flatnonzero((ev.labels == t) & (ev.predictions == p))
    if len(idx) == 0:
        return idx
    conf = ev.probabilities[idx, p]
    order = np.argsort(-conf, kind="stable")
    return idx[order][:max(0, int(limit))]


def most_confused_pair(confusion: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(true, predicted) of the largest off-diagonal cell; (0, 0) when there are no mistakes."""
    m = np.array(confusion, dtype=np.int64)
    if m.size == 0:
        return (0, 0)
    np.fill_diagonal(m, -1)
    i, j = np.unravel_index(int(np.argmax(m)), m.shape)
    return (int(i), int(j)) if m[i, j] > 0 else (0, 0)


def sample_predictions(ev: EvalResult, n: int = 16, seed: int = 0) -> pd.DataFrame:
    """``n`` test images picked at random (repeatably, by ``seed``): index, true, predicted,
    confidence (the probability of the predicted class), correct."""
    n = max(0, min(int(n), ev.total))
    idx = np.sort(np.random.default_rng(seed).choice(ev.total, size=n, replace=False))
    pred = ev.predictions[idx]
    return pd.DataFrame({
        "index": idx.astype(int),
        "true": [ev.classes[i] for i in ev.labels[idx]],
        "predicted": [ev.classes[i] for i in pred],
        "confidence": ev.probabilities[idx, pred].astype(float),
        "correct": ev.labels[idx] == pred,
    })


def per_class_by_epoch(events: Iterable[Any]) -> pd.DataFrame:
    """Per-class accuracy after each epoch, long format: columns epoch, class, accuracy (0..1).

    ``events``: the run's events (``RunEvent`` or ``{"kind", "data"}`` dicts; only "epoch" ones
    count) or the epoch summaries themselves (dicts with "epoch" and "per_class_accuracy", as
    in ``result["epochs"]``). Epochs evaluated without per-class figures are left out; an empty
    frame (same columns) when there are none.
    """
    rows = []
    for item in events or ():
        kind, data = _event_parts(item)
        if kind not in (None, "epoch") or not isinstance(data, Mapping):
            continue
        per_class = data.get("per_class_accuracy")
        epoch = data.get("epoch")
        if not isinstance(per_class, Mapping) or epoch is None:
            continue
        for cls, acc in per_class.items():
            if isinstance(acc, (int, float)) and math.isfinite(acc):
                rows.append({"epoch": int(epoch), "class": str(cls), "accuracy": float(acc)})
    df = pd.DataFrame(rows, columns=["epoch", "class", "accuracy"])
    return df.drop_duplicates(["epoch", "class"], keep="last").reset_index(drop=True)


def _event_parts(item: Any) -> tuple[str | None, Any]:
    if hasattr(item, "kind") and hasattr(item, "data"):
        return item.kind, item.data
    if isinstance(item, Mapping) and "kind" in item and "data" in item:
        return item["kind"], item["data"]
    return None, item


def _class_index(classes: Sequence[str], cls: int | str) -> int:
    if isinstance(cls, (int, np.integer)) and 0 <= int(cls) < len(classes):
        return int(cls)
    if isinstance(cls, str) and cls in classes:
        return list(classes).index(cls)
    raise CifarLabError("results.unknown_class", field="class", cls=repr(cls)[:40],
                        classes=", ".join(classes))


def upscale(image: np.ndarray, factor: int = 4) -> np.ndarray:
    """A small image enlarged by repeating pixels (CHW or HWC uint8 in, HWC out), so 32×32
    pictures stay sharp blocks instead of a blur."""
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[-1] not in (1, 3):
        a = a.transpose(1, 2, 0)
    factor = max(1, int(factor))
    return np.ascontiguousarray(a.repeat(factor, axis=0).repeat(factor, axis=1))


# -------------------------------------------------------------------------------- downloads

def state_dict_bytes(ckpt: Checkpoint) -> bytes:
    """The weights alone, as the tutorial saves them (``torch.save(net.state_dict(), PATH)``):
    a file that ``Net().load_state_dict(torch.load(PATH, weights_only=True))`` reads."""
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in ckpt.state_dict.items()}, buf)
    return buf.getvalue()


# ------------------------------------------------------------------------------- run tables

# Config columns: the knobs a student turns. Result columns follow them in runs_table.
KNOB_COLUMNS = ("device", "pipeline", "epochs", "batch_size", "lr", "momentum", "train_subset",
                "seed", "shuffle", "num_workers", "model")
RESULT_COLUMNS = ("accuracy", "final_loss", "images_per_second", "train_seconds", "steps")
RUN_COLUMNS = ("run", "name", "status", "started") + RESULT_COLUMNS + KNOB_COLUMNS


def model_label(spec: Mapping[str, Any] | ModelSpec | None) -> str:
    """"Net()" for the tutorial's network, else the settings that differ from it."""
    try:
        spec = spec if isinstance(spec, ModelSpec) else ModelSpec.from_dict(spec)
    except CifarLabError:
        return "?"
    base = ModelSpec()
    changes = []
    for name in ("channels", "kernels", "paddings", "strides", "pool", "hidden", "width"):
        value = getattr(spec, name)
        if value != getattr(base, name):
            changes.append(f"{name}={list(value) if isinstance(value, tuple) else value}")
    return "Net(" + ", ".join(changes) + ")"


def runs_table(runs: Sequence[Any]) -> pd.DataFrame:
    """One row per run (newest first, as given): id, result figures and config knobs.

    Columns: ``RUN_COLUMNS``. ``accuracy`` is a percentage; missing figures are NaN/None.
    The ``run`` column holds the full run id (pages shorten it for display).
    """
    rows = []
    for run in runs:
        cfg = dict(run.config or {})
        res = dict(run.result or {})
        acc = res.get("test_accuracy")
        device = res.get("device") or getattr(run, "device", None)
        rows.append({
            "run": run.id,
            "name": run.name or "",
            "status": run.status,
            "started": datetime.fromtimestamp(run.started_at or run.created_at),
            "accuracy": 100.0 * acc if isinstance(acc, (int, float)) else np.nan,
            "final_loss": _num(res.get("final_loss")),
            "images_per_second": _num(res.get("images_per_second")),
            "train_seconds": _num(res.get("train_seconds")),
            "steps": _num(res.get("steps")),
            "device": device,
            "pipeline": cfg.get("pipeline"),
            "epochs": cfg.get("epochs"),
            "batch_size": cfg.get("batch_size"),
            "lr": cfg.get("lr"),
            "momentum": cfg.get("momentum"),
            "train_subset": cfg.get("train_subset"),
            "seed": cfg.get("seed"),
            "shuffle": cfg.get("shuffle"),
            "num_workers": cfg.get("num_workers"),
            "model": model_label(cfg.get("model")),
        })
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else np.nan


def differing_columns(df: pd.DataFrame, columns: Iterable[str] = KNOB_COLUMNS) -> list[str]:
    """The columns (of ``columns``) whose values are not all the same across ``df``'s rows:
    the knobs that could explain a difference between these runs. None differ for < 2 rows."""
    if len(df) < 2:
        return []
    out = []
    for col in columns:
        if col not in df.columns:
            continue
        values = {_hashable(v) for v in df[col].tolist()}
        if len(values) > 1:
            out.append(col)
    return out


def _hashable(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (list, dict)):
        return repr(v)
    return v


def loss_curves(curves: Mapping[str, tuple[Sequence[int], Sequence[float]]],
                steps_per_epoch: Mapping[str, float] | None = None, x: str = "step",
                smooth: int | None = None) -> pd.DataFrame:
    """Loss curves of several runs in one long frame (columns run, x, loss) for one chart.

    ``curves``: label -> (steps, losses), e.g. from ``store.losses(id, max_points=1000)``.
    ``x``: "step", or "epoch" (step / steps_per_epoch[label], so runs with different batch
    sizes line up). ``smooth``: a centred moving average over that many points (default: about
    1/50 of each curve), since a single step's loss is very noisy. NaN losses stay gaps.
    """
    frames = []
    for label, (steps, losses) in curves.items():
        if len(steps) == 0:
            continue
        s = pd.Series(np.asarray(losses, dtype=float))
        window = smooth if smooth is not None else max(1, len(s) // 50)
        if window > 1:
            s = s.rolling(window, center=True, min_periods=1).mean()
        xs = np.asarray(steps, dtype=float)
        if x == "epoch":
            per = (steps_per_epoch or {}).get(label)
            if not per:
                continue
            xs = xs / float(per)
        frames.append(pd.DataFrame({"run": label, "x": xs, "loss": s.to_numpy()}))
    if not frames:
        return pd.DataFrame(columns=["run", "x", "loss"])
    return pd.concat(frames, ignore_index=True)


def steps_per_epoch(run) -> float | None:
    """Steps in one epoch of a run, from its result (steps / epochs done)."""
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
