"""The Data page's augmentation viewer: a few training images through the Speed page's
augmentations, drawn by the training loader itself (``FastLoader(augment=...)``), one draw per
epoch, seeded as a run's is, so a picture is what a run with that seed trains on.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cifarlab.core.config import AUGMENTS
from cifarlab.core.data import CifarData
from cifarlab.core.data.pipelines import FastLoader
from cifarlab.core.tricks import PAD
from cifarlab.lab.data import LoadingError, _whole

KINDS = tuple(k for k in AUGMENTS if k != "none")   # mirror; mirror and shift
MAX_IMAGES = 10
MAX_EPOCHS = 8


@dataclass(frozen=True)
class AugmentView:
    """``original`` N×32×32×3 and ``draws`` E×N×32×32×3 uint8 pixels; ``flipped`` E×N;
    ``moved`` E×N×2, the pixels each picture moved (down, right), zero for mirror only."""

    kind: str
    original: np.ndarray
    draws: np.ndarray
    flipped: np.ndarray
    moved: np.ndarray


def augment_draws(data: CifarData, indices: Sequence[int], kind: str, epochs: int = 4,
                  seed: int = 0) -> AugmentView:
    """``epochs`` passes of the training loader over just these training images."""
    if kind not in KINDS:
        raise LoadingError("loading.bad_augment", augment=repr(kind)[:40], known=", ".join(KINDS))
    idx = np.asarray(list(indices), dtype=np.int64).reshape(-1)
    _whole("images", int(idx.size), 1, MAX_IMAGES)
    epochs = _whole("epochs", epochs, 1, MAX_EPOCHS)
    loader = FastLoader(data, "train", batch_size=int(idx.size), shuffle=False, seed=int(seed),
                        subset=idx, augment=kind)
    draws, flipped, moved = [], [], []
    for _ in range(epochs):
        (xb, _labels), = list(loader)           # one epoch is one batch of these images
        flip, shift = loader.augment.last_draw
        draws.append(to_pixels(xb.numpy()))
        flipped.append(flip.numpy())
        # the loader reads the padded picture from offset ``shift``: the image moves PAD - shift
        moved.append(np.zeros((idx.size, 2), np.int64) if shift is None else PAD - shift.numpy())
    x, _ = data.split("train")
    original = np.ascontiguousarray(np.asarray(x[idx]).transpose(0, 2, 3, 1))
    return AugmentView(kind, original, np.stack(draws), np.stack(flipped), np.stack(moved))


def to_pixels(batch: np.ndarray) -> np.ndarray:
    """A normalised B×3×H×W batch (pixels · 2/255 − 1) back to B×H×W×3 uint8 pixels."""
    return ((batch + 1.0) * 127.5).round().clip(0, 255).astype(np.uint8).transpose(0, 2, 3, 1)


def draw_text(view: AugmentView, k: int, i: int, t) -> str:
    """What epoch ``k``'s draw did to image ``i``: "Epoch 2: mirrored · 1 px right · 2 px up"."""
    parts = [t("data_aug.mirrored") if view.flipped[k, i] else t("data_aug.as_is")]
    if view.kind == "flip_translate":
        dy, dx = (int(v) for v in view.moved[k, i])
        moves = ([t("data_aug.right" if dx > 0 else "data_aug.left", n=abs(dx))] if dx else []) \
            + ([t("data_aug.down" if dy > 0 else "data_aug.up", n=abs(dy))] if dy else [])
        parts += moves or [t("data_aug.not_moved")]
    return t("data_aug.epoch", n=k + 1) + ": " + " · ".join(parts)


def summary_text(view: AugmentView, t) -> str:
    """How many of the pictures the draws mirrored (and moved), over all epochs."""
    total = int(view.flipped.size)
    text = t("data_aug.summary_flip", k=int(view.flipped.sum()), n=total)
    if view.kind == "flip_translate":
        moved = int(np.any(view.moved != 0, axis=-1).sum())
        text += " " + t("data_aug.summary_moved", k=moved, n=total)
    return text
