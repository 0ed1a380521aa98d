"""What the Results page shows: a finished run's model, its predictions and mistakes, per-class
accuracy over the epochs, a student's own photo classified (uploads: ``results.uploads``).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from cifarlab.core.checkpoint import Checkpoint, load as load_checkpoint
from cifarlab.core.evaluate import EvalResult, evaluate
from cifarlab.errors import CheckpointError
from cifarlab.lab.data import upscale
from cifarlab.lab.results.uploads import (  # the page's one import: re-exported
    MAX_CHECKPOINT_BYTES, MAX_IMAGE_PIXELS, MAX_UPLOAD_BYTES, PREVIEW_SIZE, SERVER_UPLOAD_MB,
    UPLOADER_MB, ImageError, classify_prepared, load_uploaded_checkpoint, prepare_image)

__all__ = [
    "TUTORIAL_REFERENCE", "MAX_CHECKPOINT_BYTES", "MAX_UPLOAD_BYTES", "UPLOADER_MB",
    "SERVER_UPLOAD_MB", "MAX_IMAGE_PIXELS", "PREVIEW_SIZE", "CheckpointError", "ImageError",
    "load_run_model", "load_uploaded_checkpoint", "predictions_for", "confused_examples",
    "most_confused_pair", "picked_cell", "sample_predictions", "per_class_by_epoch",
    "prepare_image", "classify_prepared", "upscale",
]

# The PyTorch tutorial's printed figures: 54 % overall after 2 epochs; per class they swing
# widely from run to run (two runs of the tutorial: bird 21-38 %, ship 61-81 %).
TUTORIAL_REFERENCE: dict[str, Any] = {
    "accuracy": 0.54,
    "per_class_ranges": {"bird": (0.21, 0.38), "ship": (0.61, 0.81)},
    "chance": 0.10,
}

# --------------------------------------------------------------------------------- models

def load_run_model(path) -> tuple[torch.nn.Module, Checkpoint]:
    """The model a run saved, on the CPU; ``path`` from ``JobQueue.checkpoint`` (checked
    against the session)."""
    if not path.is_file():
        raise CheckpointError("checkpoint.no_saved_model")
    ckpt = load_checkpoint(path, map_location="cpu")
    return ckpt.model().eval(), ckpt


def predictions_for(model: torch.nn.Module, data, tta: bool = False) -> EvalResult:
    """The model's ``EvalResult`` on the test set (``tta``: with mirrored testing)."""
    out_features = getattr(getattr(model, "fc3", None), "out_features", None)
    if out_features is not None and out_features != len(data.classes):
        raise CheckpointError("checkpoint.other_classes", n=out_features,
                              classes=len(data.classes))
    return evaluate(model, data, "cpu", tta=tta)


def confused_examples(ev: EvalResult, true_cls: int, pred_cls: int,
                      limit: int = 24) -> np.ndarray:
    """Test images of class ``true_cls`` the model called ``pred_cls``, most confident
    first."""
    idx = np.flatnonzero((ev.labels == true_cls) & (ev.predictions == pred_cls))
    order = np.argsort(-ev.probabilities[idx, pred_cls], kind="stable")
    return idx[order][:max(0, int(limit))]


def picked_cell(point: Mapping[str, Any], names: Sequence[str]) -> tuple[int, int] | None:
    """(true, predicted) of a clicked confusion-matrix cell, from the axis labels (on the
    heatmap's points and the markers' alike)."""
    if not hasattr(point, "get"):
        return None
    x, y = point.get("x"), point.get("y")
    names = list(names)
    if x in names and y in names:
        return names.index(y), names.index(x)
    return None


def most_confused_pair(confusion: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(true, predicted) of the largest off-diagonal cell; (0, 0) when there are no mistakes."""
    m = np.array(confusion, dtype=np.int64)
    if m.size == 0:
        return (0, 0)
    np.fill_diagonal(m, -1)
    i, j = np.unravel_index(int(np.argmax(m)), m.shape)
    return (int(i), int(j)) if m[i, j] > 0 else (0, 0)


def sample_predictions(ev: EvalResult, n: int = 16, seed: int = 0) -> pd.DataFrame:
    """``n`` test images picked by ``seed``: index, true, predicted, confidence, correct."""
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
    """Per-class accuracy after each epoch (epoch, class, accuracy), from the run's "epoch"
    events or ``result["epochs"]``; epochs without per-class figures left out."""
    rows = []
    for item in events or ():
        kind, data = (item.kind, item.data) if hasattr(item, "kind") else (None, item)
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
