"""The Data page's engine, on the real data set and the real loaders."""
from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
import torchvision
import torchvision.transforms as transforms
from PIL import Image
from plotly.subplots import make_subplots

from cifarlab import i18n
from cifarlab.core.config import AUGMENTS
from cifarlab.core.data import CifarData
from cifarlab.core.data.pipelines import FastLoader, tutorial_loader
from cifarlab.core.tricks import PAD
from cifarlab.lab import charts as C
from cifarlab.lab.tables import class_name


def class_sample(data: CifarData, class_index: int, n: int = 24,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(indices, n×32×32×3 uint8 images) of ``n`` training images of one class, repeatable."""
    x, y = data.split("train")
    members = np.flatnonzero(np.asarray(y) == class_index)
    rng = np.random.default_rng([int(seed), class_index])
    chosen = rng.choice(members, size=min(n, members.size), replace=False).astype(np.int64)
    images = np.ascontiguousarray(np.asarray(x[chosen]).transpose(0, 2, 3, 1))
    return chosen, images


def transform_stats(images, bins: int = 32) -> dict:
    """Range, mean and per-channel histograms of pictures through ToTensor and Normalize."""
    pics = np.asarray(images)
    pics = pics[None] if pics.ndim == 3 else pics
    to_tensor = transforms.ToTensor()
    norm = transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    t1 = torch.stack([to_tensor(Image.fromarray(p)) for p in pics])         # N×3×H×W, 0…1
    t2 = torch.stack([norm(t) for t in t1])                                 # −1…1
    out = {}
    for stage, x, shape, low, high in (
            ("raw", pics.transpose(0, 3, 1, 2), pics.shape[1:], 0.0, 255.0),
            ("to_tensor", t1, t1.shape[1:], 0.0, 1.0), ("normalize", t2, t2.shape[1:], -1.0, 1.0)):
        values = np.asarray(x, dtype=np.float64)
        edges = np.linspace(low, high, bins + 1)
        out[stage] = {
            "dtype": str(x.dtype).replace("torch.", ""), "shape": tuple(shape),
            "min": float(values.min()), "max": float(values.max()), "mean": float(values.mean()),
            "low": low, "high": high, "edges": edges,
            "counts": np.stack([np.histogram(values[:, c], bins=edges)[0] for c in range(3)]),
        }
    return out


def ranges_table(stats: dict, t) -> pd.DataFrame:
    """One row per stage of ``transform_stats``: stage, dtype, shape, min, max, mean."""
    def num(v) -> str:
        return i18n.number(round(float(v), 3), t.lang)

    names = {"raw": "data.raw_pixels", "to_tensor": "data.after_to_tensor",
             "normalize": "data.after_normalize"}
    return pd.DataFrame([{
        t("data.stage_col"): t(names[stage]), t("common.dtype"): s["dtype"],
        t("common.shape"): " × ".join(map(str, s["shape"])), "min": num(s["min"]),
        "max": num(s["max"]), t("data.mean_col"): num(s["mean"]),
    } for stage, s in stats.items()])


def unnormalize(images: torch.Tensor) -> np.ndarray:
    """The tutorial's ``imshow``: ``img / 2 + 0.5`` (undo Normalize), channels last, 0…1."""
    x = (images.detach().to("cpu", torch.float32) / 2 + 0.5).clamp_(0.0, 1.0)
    return x.movedim(-3, -1).numpy()


def loader_batch(data: CifarData, batch_size: int = 4, seed: int = 0) -> dict:
    """The tutorial ``DataLoader``'s first batch, its ``make_grid`` as ``imshow`` shows it."""
    loader = tutorial_loader(data, "train", batch_size=batch_size, num_workers=0, shuffle=True,
                             seed=int(seed))
    images, labels = next(iter(loader))
    return {
        "shape_text": str(images.shape), "dtype": str(images.dtype),
        "labels": [int(v) for v in labels], "label_names": [data.classes[int(v)] for v in labels],
        "min": float(images.min()), "max": float(images.max()),
        "grid": unnormalize(torchvision.utils.make_grid(images, nrow=min(8, batch_size))),
        "batches_per_epoch": len(loader),
    }


def upscale(images: np.ndarray, factor: int = 3) -> np.ndarray:
    """Pictures (…×H×W×C, or one C×H×W) ``factor`` times larger, pixels repeated, channels last."""
    a = np.asarray(images)
    if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[-1] not in (1, 3):
        a = a.transpose(1, 2, 0)
    return np.ascontiguousarray(np.repeat(np.repeat(a, factor, axis=-3), factor, axis=-2))


AUGMENT_KINDS = tuple(k for k in AUGMENTS if k != "none")   # mirror; mirror and shift
MAX_AUGMENT_EPOCHS = 8


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
    """``epochs`` passes of the training loader itself (``FastLoader(augment=...)``) over these
    images, seeded as a run's is: a picture is what a run with that seed trains on."""
    idx = np.asarray(list(indices), dtype=np.int64).reshape(-1)
    loader = FastLoader(data, "train", batch_size=int(idx.size), shuffle=False, seed=int(seed),
                        subset=idx, augment=kind)
    draws, flipped, moved = [], [], []
    for _ in range(epochs):
        (xb, _labels), = list(loader)           # one epoch is one batch of these images
        flip, shift = loader.augment.last_draw
        draws.append((unnormalize(xb) * 255).round().astype(np.uint8))
        flipped.append(flip.numpy())
        # the loader reads the padded picture from offset ``shift``: the image moves PAD - shift
        moved.append(np.zeros((idx.size, 2), np.int64) if shift is None else PAD - shift.numpy())
    x, _ = data.split("train")
    original = np.ascontiguousarray(np.asarray(x[idx]).transpose(0, 2, 3, 1))
    return AugmentView(kind, original, np.stack(draws), np.stack(flipped), np.stack(moved))


def draw_text(view: AugmentView, k: int, i: int, t) -> str:
    """What epoch ``k``'s draw did to image ``i``: "Epoch 2: mirrored · 1 px right · 2 px up"."""
    parts = [t("data_aug.mirrored") if view.flipped[k, i] else t("data_aug.as_is")]
    if view.kind == "flip_translate":
        dy, dx = (int(v) for v in view.moved[k, i])
        moves = ([t("data_aug.right" if dx > 0 else "data_aug.left", n=abs(dx))] if dx else []) \
            + ([t("data_aug.down" if dy > 0 else "data_aug.up", n=abs(dy))] if dy else [])
        parts += moves or [t("data_aug.not_moved")]
    return t("data_aug.epoch", n=k + 1) + ": " + " · ".join(parts)


def loader_throughput(data: CifarData, pipeline: str = "tutorial", batch_size: int = 4,
                      num_workers: int = 0, max_batches: int = 500, max_seconds: float = 1.0,
                      subset: int | None = None) -> dict:
    """Images per second a pipeline delivers, over ``max_batches`` or ``max_seconds``; start-up
    (every worker's first batch, the fast pipeline's copy) timed apart."""
    started = time.perf_counter()
    with warnings.catch_warnings():   # "suggested max number of worker": the page says so
        warnings.filterwarnings("ignore", message=".*worker processes in total.*")
        if pipeline == "fast":
            num_workers = 0
            iterator = iter(FastLoader(data, "train", batch_size=batch_size, device="cpu",
                                       shuffle=True, seed=0, subset=subset))
        else:
            iterator = iter(tutorial_loader(data, "train", batch_size=batch_size,
                                            num_workers=num_workers, shuffle=True, seed=0,
                                            subset=subset, persistent_workers=False))
    try:
        # every worker's first batch belongs to the start-up (batch i comes from worker
        # i % num_workers): until then the clock would time processes starting, not loading
        first = next(iterator)   # an epoch holds at least one batch
        for _ in range(num_workers - 1):
            if next(iterator, None) is None:
                break
        startup = time.perf_counter() - started
        images = batches = 0
        started = time.perf_counter()
        deadline = started + max_seconds
        for _xb, yb in iterator:
            images += int(yb.shape[0])
            batches += 1
            if batches >= max_batches or time.perf_counter() >= deadline:
                break
        seconds = time.perf_counter() - started
        if batches == 0:            # the epoch held a single batch: time that one instead
            images, batches, seconds = int(first[1].shape[0]), 1, startup
    finally:
        with contextlib.suppress(Exception):  # best effort: the workers are going away anyway
            getattr(iterator, "_shutdown_workers", lambda: None)()
        del iterator
    seconds = max(seconds, 1e-9)
    return {"pipeline": pipeline, "batch_size": batch_size, "num_workers": num_workers,
            "images_per_second": images / seconds, "batches": batches, "images": images,
            "seconds": seconds, "startup_seconds": startup}


def sweep_loaders(data: CifarData, batch_size: int = 4,
                  workers: Sequence[int] = (0, 1, 2, 4), max_batches: int = 500,
                  max_seconds: float = 0.4, subset: int | None = None) -> pd.DataFrame:
    """``loader_throughput`` per pipeline and ``num_workers`` (fast once)."""
    return pd.DataFrame([loader_throughput(data, pipeline, batch_size, int(w), max_batches,
                                           max_seconds, subset)
                         for pipeline, w in [("tutorial", w) for w in workers] + [("fast", 0)]])


def class_names(data: CifarData, t) -> list[str]:
    return [class_name(c, t.lang) for c in data.classes]


def counts_figure(data: CifarData, t) -> go.Figure:
    """Images per class, train and test side by side."""
    fig = go.Figure([go.Bar(x=class_names(data, t), y=list(data.class_counts(split).values()),
                            name=t(f"data.split_{split}"), marker_color=C.PALETTE[k])
                     for k, split in enumerate(("train", "test"))])
    return C.localized(fig, t.lang, barmode="group", height=320, margin=dict(C.MARGIN, t=30),
                       yaxis_title=t("data.images_per_class"), legend=dict(orientation="h", y=1.12))


def histogram_figure(stats: dict, t) -> go.Figure:
    """Each channel's values at each stage of the transform, on that stage's range."""
    # each title on two short lines: on a phone a panel is about 100 px wide
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.06, subplot_titles=[
        "uint8<br>0…255", "ToTensor()<br>0…1", "Normalize<br>−1…1"])
    for col, s in enumerate(stats.values(), start=1):   # raw, to_tensor, normalize
        centres = (s["edges"][:-1] + s["edges"][1:]) / 2
        for ch, (name, colour) in enumerate(zip(("red", "green", "blue"),
                                                ("#E45756", "#54A24B", "#4C78A8"))):
            fig.add_trace(go.Bar(x=centres, y=s["counts"][ch], name=t(f"data.channel_{name}"),
                                 width=float(s["edges"][1] - s["edges"][0]), opacity=0.55,
                                 marker_color=colour, legendgroup=name, showlegend=col == 1),
                          1, col)
        fig.update_xaxes(range=[s["low"], s["high"]], row=1, col=col)
    return C.localized(fig, t.lang, barmode="overlay", height=340, margin=C.MARGIN | {"t": 56},
                       yaxis_title=t("data.histogram"), legend=dict(orientation="h", y=-0.15))


def loader_table(sweep: pd.DataFrame, t) -> pd.DataFrame:
    """``sweep_loaders``' frame in ``t``'s language and notation."""
    columns = {"batch_size": ("common.batch_size", 0), "num_workers": ("common.num_workers", 0),
               "images_per_second": ("common.images_per_second", 0),
               "batches": ("data.batches_col", 0), "images": ("data.images_col", 0),
               "seconds": ("data.seconds_col", 3), "startup_seconds": ("data.startup_col", 3)}
    out = pd.DataFrame({t("data.pipeline_col"): [t(f"data.pipeline_{p}")
                                                 for p in sweep["pipeline"]]})
    for col, (key, digits) in columns.items():
        out[t(key)] = [i18n.number(v, t.lang, digits) for v in sweep[col]]
    return out

