"""Evaluation in one pass (accuracy, per class, confusion, the test set's two halves) and the
validation split: training images held out to measure overfitting each epoch."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch
import torch.nn as nn

from cifarlab.core.config import TrainConfig, val_count
from cifarlab.core.data.pipelines import normalize, subset_indices
from cifarlab.core.devices import synchronize
from cifarlab.core.tricks import tta_logits

HALVES_SEED = 20261124   # never change it: every recorded public/private score depends on it


@lru_cache(maxsize=8)
def split_halves(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(public, private) test-image indices of ``n`` images, sorted; the public half has n // 2."""
    perm = np.random.RandomState(HALVES_SEED).permutation(int(n))
    public, private = np.sort(perm[: n // 2]), np.sort(perm[n // 2:])
    public.setflags(write=False)
    private.setflags(write=False)
    return public, private


@dataclass
class EvalResult:
    accuracy: float                          # 0..1
    per_class_accuracy: dict[str, float]     # class name -> 0..1
    confusion: list[list[int]]               # rows: true class, columns: predicted class
    classes: tuple[str, ...]
    predictions: np.ndarray = field(repr=False)    # int64, N
    probabilities: np.ndarray = field(repr=False)  # float32, N x classes
    labels: np.ndarray = field(repr=False)         # int64, N
    seconds: float = 0.0

    @property
    def correct(self) -> int:
        return int((self.predictions == self.labels).sum())

    @property
    def total(self) -> int:
        return int(self.labels.shape[0])

    def half_accuracies(self) -> dict[str, float]:
        """Accuracy on the public and the private half of the test set (``split_halves``)."""
        ok = self.predictions == self.labels
        return {name: float(ok[idx].mean()) if len(idx) else 0.0
                for name, idx in zip(("public", "private"), split_halves(self.total))}

    def summary(self) -> dict:
        """JSON-friendly figures (no per-image arrays): what the store and checkpoints keep."""
        return {
            "accuracy": self.accuracy,
            "per_class_accuracy": dict(self.per_class_accuracy),
            "confusion": [list(map(int, row)) for row in self.confusion],
            "classes": list(self.classes),
            "correct": self.correct,
            "total": self.total,
            "eval_seconds": self.seconds,
            "half_accuracies": self.half_accuracies(),
        }


@torch.inference_mode()
def predict(model: nn.Module, images_uint8: np.ndarray | torch.Tensor, device="cpu",
            batch_size: int = 1000, tta: bool = False) -> np.ndarray:
    """Class probabilities (float32, N x classes) for uint8 N×3×32×32 images (``tta``: from
    the mean logits of each image and its mirror, ``core.tricks.tta_logits``)."""
    dev = torch.device(device)
    model = model.to(dev).eval()
    out = []
    for start in range(0, len(images_uint8), batch_size):
        chunk = images_uint8[start:start + batch_size]
        if isinstance(chunk, np.ndarray):  # a (read-only) memmap slice: copy this batch only
            chunk = torch.from_numpy(np.array(chunk))
        x = normalize(chunk.to(dev, non_blocking=True))
        logits = tta_logits(model, x) if tta else model(x)
        out.append(torch.softmax(logits.float(), dim=1).cpu())
    return torch.cat(out).numpy()


def evaluate(model: nn.Module, data, device="cpu", batch_size: int = 1000,
             tta: bool = False) -> EvalResult:
    """Evaluate on ``data.test_x``/``test_y`` in batches of ``batch_size``."""
    was_training = model.training
    t0 = time.perf_counter()
    probs = predict(model, data.test_x, device, batch_size, tta=tta)
    synchronize(device)
    seconds = time.perf_counter() - t0
    model.train(was_training)
    return result_from_probabilities(probs, np.asarray(data.test_y, dtype=np.int64),
                                     tuple(data.classes), seconds)


def result_from_probabilities(probs: np.ndarray, labels: np.ndarray, classes, seconds=0.0
                              ) -> EvalResult:
    k = len(classes)
    preds = probs.argmax(axis=1).astype(np.int64)
    confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(confusion, (labels, preds), 1)
    totals = confusion.sum(axis=1)
    per_class = {c: (float(confusion[i, i] / totals[i]) if totals[i] else 0.0)
                 for i, c in enumerate(classes)}
    accuracy = float(np.trace(confusion) / max(1, len(labels)))
    return EvalResult(accuracy, per_class, confusion.tolist(), tuple(classes), preds,
                      probs.astype(np.float32, copy=False), labels, seconds)


def validation_split(config: TrainConfig, n_train: int
                     ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(train, validation)`` indices into the training images, sorted, disjoint and fixed by
    the config; ``(None, None)`` with no validation."""
    pool = (subset_indices(n_train, config.train_subset) if config.train_subset
            else np.arange(n_train, dtype=np.int64))
    k = val_count(len(pool), config.val_fraction)
    if not k:
        return None, None
    # its own generator: the split never moves the torch stream the model's weights come from
    order = np.random.default_rng(config.seed).permutation(len(pool))
    return np.sort(pool[order[k:]]), np.sort(pool[order[:k]])


@torch.no_grad()
def measure_validation(model: nn.Module, criterion, data, indices: np.ndarray, device: torch.device,
            batch_size: int = 1000) -> dict[str, float]:
    """The mean training loss and the accuracy on the training images at ``indices``."""
    model.eval()
    total_loss, correct = 0.0, 0
    for start in range(0, len(indices), batch_size):
        idx = indices[start:start + batch_size]
        x = normalize(torch.from_numpy(np.array(data.train_x[idx])).to(device))
        y = torch.as_tensor(np.asarray(data.train_y)[idx], dtype=torch.int64, device=device)
        logits = model(x).float()
        total_loss += float(criterion(logits, y)) * len(idx)
        correct += int((logits.argmax(1) == y).sum())
    model.train()
    n = max(1, len(indices))
    return {"val_loss": total_loss / n, "val_accuracy": correct / n}
