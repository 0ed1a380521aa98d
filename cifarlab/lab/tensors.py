"""The Tensors page's engine; every timer synchronises (a CUDA call returns before the work)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from cifarlab import i18n
from cifarlab.core.data import CifarData
from cifarlab.core.data.pipelines import normalize
from cifarlab.core.devices import Stopwatch, resolve_device, synchronize
from cifarlab.lab import charts as C
from cifarlab.lab.tables import class_name


@dataclass(frozen=True)
class RankExample:
    """One tensor of a given rank, cut from real CIFAR-10 images (after ToTensor+Normalize)."""

    rank: int                    # 0..4: a scalar, vector, matrix, image, batch
    shape: tuple[int, ...]       # torch shape, e.g. (3, 32, 32)
    values: np.ndarray           # float32 values, that shape
    pixels: np.ndarray | None    # for images/batches: the same pictures as HWC uint8, to show
    labels: tuple[int, ...] = ()   # class index of each image involved
    code: str = ""                 # how the tensor is taken from the batch in PyTorch


def rank_examples(data: CifarData, batch: int = 4) -> list[RankExample]:
    """Ranks 0–4 cut from the first ``batch`` training images, as the network sees them."""
    x, y = data.split("train")
    n = max(1, min(int(batch), 64, len(y)))
    raw = torch.from_numpy(np.array(x[:n]))   # uint8 B×3×32×32, a copy: the cache is read-only
    images = normalize(raw)                                        # float32, −1…1
    hwc = raw.permute(0, 2, 3, 1).numpy()
    labels = tuple(int(v) for v in y[:n])
    codes = ("images[0, 0, 0, 0]", "images[0, 0, 0]", "images[0, 0]", "images[0]", "images")
    tensors = (images[0, 0, 0, 0], images[0, 0, 0], images[0, 0], images[0], images)
    return [RankExample(rank, tuple(t.shape), t.numpy().copy(),
                        (hwc[:1] if rank < 4 else hwc).copy() if rank >= 3 else None,
                        labels[:1] if rank < 4 else labels, code)
            for rank, (t, code) in enumerate(zip(tensors, codes))]


def _best_of(fns: dict, device: torch.device, repeats: int, max_seconds: float
             ) -> tuple[dict, dict, int]:
    """Each of ``fns``' best time, its last value, and the rounds done within ``max_seconds``."""
    synchronize(device)
    best, value, sw, done = dict.fromkeys(fns, math.inf), {}, Stopwatch(device), 0
    budget_end = time.perf_counter() + max_seconds
    while done < repeats:
        for name, fn in fns.items():
            sw.start()
            value[name] = fn()
            best[name] = min(best[name], max(sw.stop(), 1e-9))
        done += 1
        if time.perf_counter() > budget_end:
            break
    return best, value, done


def _copies(pairs: list) -> Callable[[], None]:
    """Every (dst, src) piece copied in turn, as x.to(device) does; four copied now (warm-up)."""
    for d, s in pairs[:4]:
        d.copy_(s)

    def copy() -> None:
        for d, s in pairs:
            d.copy_(s)
    return copy


def transfer_costs(device: str | torch.device = "auto", total_mb: float = 32,
                   chunks: int = 1024, repeats: int = 3,
                   max_seconds: float = 2.0) -> pd.DataFrame:
    """``total_mb`` MB copied in one copy and in ``chunks`` (pageable and pinned on CUDA)."""
    dev = resolve_device(device)
    total = max(int(total_mb * 1e6) // chunks * chunks, chunks)    # a whole number per chunk

    src = torch.ones(total, dtype=torch.uint8)
    if dev.type == "cpu":
        variants = [("ram", src, torch.empty_like(src))]
    else:
        dst = torch.empty(total, dtype=torch.uint8, device=dev)
        variants = [("pageable", src, dst)]
        if dev.type == "cuda":
            variants.append(("pinned", src.pin_memory(), dst))
    best, _, done = _best_of({
        (memory, method, n): _copies(list(zip(d.split(total // n), s.split(total // n))))
        for memory, s, d in variants for method, n in (("one_big", 1), ("many_small", chunks))
    }, dev, repeats, max_seconds)
    return pd.DataFrame([{
        "path": f"cpu → {dev}", "memory": memory, "method": method, "copies": n,
        "bytes_per_copy": total // n, "total_bytes": total, "seconds": seconds,
        "ms": seconds * 1e3, "us_per_copy": seconds * 1e6 / n,
        "gb_per_s": total / seconds / 1e9, "repeats": done, "device": str(dev),
    } for (memory, method, n), seconds in best.items()])


def item_sync_cost(device: str | torch.device = "auto", steps: int = 200, size: int = 4096,
                   repeats: int = 3, max_seconds: float = 2.0) -> dict:
    """The same loop with ``.item()`` every step (the tutorial's ``running_loss += loss.item()``)
    and summed on the device, read once; small steps, so one CPU thread times them."""
    dev = resolve_device(device)
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(size, generator=gen).to(dev)
    b = torch.rand(size, generator=gen).to(dev)

    def with_item() -> float:
        total = 0.0
        for _ in range(steps):
            total += (a * b).mean().item()    # waits for the device, copies one number back
        return total

    def without_item() -> float:
        acc = torch.zeros((), device=dev)
        for _ in range(steps):
            acc += (a * b).mean()        # stays on the device: nothing waits
        return acc.item()                 # one wait, one copy, at the end

    _ = (a * b).mean().item()             # warm up (kernels, allocator), untimed
    best, total, done = _best_of({"with": with_item, "without": without_item}, dev, repeats,
                                 max_seconds)
    return {
        "device": str(dev), "steps": steps, "size": size,
        "with_item_s": best["with"], "without_item_s": best["without"],
        "item_calls_with": steps, "item_calls_without": 1,
        "total_with": float(total["with"]), "total_without": float(total["without"]),
        "repeats": done,
    }


CHANNELS = (("tensors.channel_red", "Reds"), ("tensors.channel_green", "Greens"),
            ("tensors.channel_blue", "Blues"))


def size_text(n: float, lang: str) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{i18n.number(n / scale, lang, 1)} {unit}"
    return f"{int(n)} B"


def _heat(z: np.ndarray, colorscale: str = "RdBu_r", text: bool = False) -> go.Heatmap:
    # numbers through templates: plotly writes them with the layout's separators
    return go.Heatmap(z=z, zmin=-1, zmax=1, colorscale=colorscale, showscale=False,
                      texttemplate="%{z:.2f}" if text else None,
                      hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>")


def rank_figure(ex: RankExample, classes, t) -> go.Figure:
    """A tensor of rank 0–4 as a picture: a cell, a row, a channel, an image's channels, a batch."""
    if ex.rank == 0:
        fig = go.Figure(_heat(np.array([[float(ex.values)]]), text=True))
        fig.update_traces(textfont_size=28)
        fig.update_layout(height=180, width=220)
    elif ex.rank == 1:
        n = ex.values.shape[0]
        fig = go.Figure(_heat(ex.values[None, :]))
        fig.update_layout(height=160)
        fig.update_yaxes(showticklabels=False)
        fig.update_xaxes(title_text=t("tensors.axis_column"), range=[-0.5, n - 0.5],
                         **C.pixel_ticks(n))
    elif ex.rank == 2:
        # square cells, the axes exactly the channel's pixels (0 .. n-1), whole-pixel ticks
        h, w = ex.values.shape
        fig = go.Figure(_heat(ex.values, "Reds"))
        fig.update_layout(height=420)
        C.pixel_axes(fig, h, w, square=True)
        fig.update_xaxes(range=[-0.5, w - 0.5], title_text=t("tensors.axis_column"))
        fig.update_yaxes(range=[h - 0.5, -0.5], autorange=False, title_text=t("tensors.axis_row"))
    else:
        images = ex.pixels if ex.rank == 4 else ex.pixels[:1]
        titles = ([f"[{i}] {class_name(classes[label], t.lang)}"
                   for i, label in enumerate(ex.labels)] if ex.rank == 4 else
                  [t("tensors.picture")] + [t(k) + f" [{i}]" for i, (k, _) in enumerate(CHANNELS)])
        fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles,
                            horizontal_spacing=0.01 if ex.rank == 4 else 0.03)
        for i, image in enumerate(images):
            fig.add_trace(go.Image(z=image), 1, i + 1)
        if ex.rank == 3:
            for i, (_, scale) in enumerate(CHANNELS):
                fig.add_trace(_heat(ex.values[i], scale), 1, i + 2)
            fig.update_yaxes(autorange="reversed", scaleanchor="x")
        fig.update_xaxes(showticklabels=False)
        fig.update_yaxes(showticklabels=False)
        fig.update_layout(height=300 if ex.rank == 3 else max(140, int(1100 / max(len(images), 4)))
                          + 40)
    return C.localized(fig, t.lang, margin=C.MARGIN)


def ranks_table(examples: list[RankExample], t) -> pd.DataFrame:
    return pd.DataFrame([{
        t("tensors.rank"): e.rank, t("common.shape"): str(tuple(e.shape)),
        t("tensors.in_pytorch"): e.code, t("tensors.numel"): i18n.number(e.values.size, t.lang),
        t("tensors.bytes"): size_text(e.values.nbytes, t.lang)} for e in examples])


def transfer_figure(res: pd.DataFrame, t) -> tuple[go.Figure, pd.DataFrame]:
    """The copies' total times as bars; each copy's size, time and bandwidth as a table."""
    lang = t.lang
    labels = [f"{t(f'tensors.transfer_{m}')} ({mem})" for m, mem in zip(res["method"],
                                                                        res["memory"])]
    fig = C.bar_figure(labels, res["ms"], y_title="ms", height=340,
                       text=[f"{i18n.number(v, lang, 2)} ms" for v in res["ms"]],
                       colours=[C.PALETTE[0] if m == "one_big" else C.PALETTE[1]
                                for m in res["method"]],
                       title=f"{res['path'].iloc[0]} · "
                             f"{size_text(res['total_bytes'].iloc[0], lang)}")
    table = pd.DataFrame({
        t("tensors.copy_col"): labels,
        t("tensors.copies_col"): [i18n.number(n, lang) for n in res["copies"]],
        t("tensors.copy_size_col"): [size_text(b, lang) for b in res["bytes_per_copy"]],
        t("tensors.per_copy_col"): [i18n.number(v, lang, 2) for v in res["us_per_copy"]],
        "GB/s": [i18n.number(v, lang, 2) for v in res["gb_per_s"]]})
    return C.localized(fig, lang), table


def item_figure(item: dict, t) -> tuple[go.Figure, pd.DataFrame]:
    """The two loops' times as bars; their ``.item()`` calls and sums (equal) as a table."""
    labels = [t("tensors.item_every_step", n=item["item_calls_with"]),
              t("tensors.item_once", n=item["item_calls_without"])]
    ms = [item["with_item_s"] * 1e3, item["without_item_s"] * 1e3]
    per_step = [v / item["steps"] for v in ms]
    fig = C.bar_figure(labels, ms, y_title="ms", height=320, colours=[C.PALETTE[5], C.PALETTE[2]],
                       text=[t("tensors.item_per_step", ms=i18n.number(v, t.lang, 3))
                             for v in per_step],
                       title=t("tensors.item_chart_title", device=item["device"],
                               n=i18n.number(item["steps"], t.lang)))
    # the chart's times too: the table is what a screen reader reads
    table = pd.DataFrame({t("tensors.item_loop_col"): labels,
                          t("tensors.item_calls_col"): [item["item_calls_with"],
                                                        item["item_calls_without"]],
                          "ms": [i18n.number(v, t.lang, 3) for v in ms],
                          t("tensors.item_sum_col"): [item["total_with"], item["total_without"]]})
    return C.localized(fig, t.lang), table
