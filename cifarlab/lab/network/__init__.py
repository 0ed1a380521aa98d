"""The Network page's engine: convolution and pooling by hand, each beside PyTorch's answer."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from cifarlab.core import shapes
from cifarlab.core.config import ModelSpec
from cifarlab.core.modelspec import is_int
from cifarlab.errors import ShapeError


def named_kernels() -> dict[str, np.ndarray]:
    return {name: np.asarray(k, dtype=np.float32) for name, k in {
        "edge": [[-1, -1, -1], [-1, 8, -1], [-1, -1, -1]],          # Laplacian-like: all edges
        "vertical": [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]],           # Sobel x: vertical edges
        "horizontal": [[-1, -2, -1], [0, 0, 0], [1, 2, 1]],         # Sobel y: horizontal edges
        "blur": [[1 / 9] * 3] * 3,                                  # box blur: the mean
        "sharpen": [[0, -1, 0], [-1, 5, -1], [0, -1, 0]],
        "identity": [[0, 0, 0], [0, 1, 0], [0, 0, 0]],
    }.items()}


def to_input(image_hwc: np.ndarray, mode: str = "gray") -> np.ndarray:
    """A 32×32×3 uint8 image as C×H×W float32: "gray" (the channels' mean, 0…1, for the
    hand-made kernels) or "rgb" (the tutorial's ToTensor + Normalize: what conv1 sees)."""
    x = np.asarray(image_hwc).astype(np.float32).transpose(2, 0, 1) / np.float32(255)
    if mode == "gray":
        return x.mean(axis=0, keepdims=True, dtype=np.float32)
    return (x - np.float32(0.5)) / np.float32(0.5)


def _operands(image, kernel, stride: int, padding: int) -> tuple:
    """The input as C×H×W and the kernel as C×k×k (float32), the padded input, the output size."""
    x = np.asarray(image, dtype=np.float32)
    x = x[None] if x.ndim == 2 else x
    k = np.asarray(kernel, dtype=np.float32)
    k = np.ascontiguousarray(np.broadcast_to(k, (x.shape[0], *k.shape)) if k.ndim == 2 else k)
    size = shapes.conv2d_output_size(x.shape[1:], k.shape[1:], stride, padding)
    return x, k, np.pad(x, ((0, 0), (padding, padding), (padding, padding))), size


def apply_kernel(image: np.ndarray, kernel: np.ndarray, bias: float = 0.0, stride: int = 1,
                 padding: int = 0) -> np.ndarray:
    """One kernel's feature map by hand: ``F.conv2d``'s cross-correlation (kernel not flipped)."""
    _, k, xp, (oh, ow) = _operands(image, kernel, stride, padding)
    kh, kw = k.shape[1:]
    windows = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))
    windows = windows[:, ::stride, ::stride][:, :oh, :ow]          # C×H'×W'×kh×kw
    out = np.einsum("chwij,cij->hw", windows.astype(np.float64), k.astype(np.float64))
    return (out + float(bias)).astype(np.float32)


def torch_conv(image: np.ndarray, kernel: np.ndarray, bias: float = 0.0, stride: int = 1,
               padding: int = 0) -> np.ndarray:
    """PyTorch's answer for ``apply_kernel``: ``F.conv2d`` on the same numbers."""
    x, k, _, _ = _operands(image, kernel, stride, padding)
    out = F.conv2d(torch.from_numpy(x.copy())[None], torch.from_numpy(k.copy())[None],
                   torch.tensor([float(bias)], dtype=torch.float32), stride=stride, padding=padding)
    return out[0, 0].numpy()


def conv_step(image: np.ndarray, kernel: np.ndarray, bias: float, row: int, col: int,
              stride: int = 1, padding: int = 0) -> dict:
    """One output value worked out beside ``F.conv2d``'s; ``top``/``left`` in the padded image."""
    x, k, xp, (oh, ow) = _operands(image, kernel, stride, padding)
    kh, kw = k.shape[1:]
    top, left = row * stride, col * stride
    window = xp[:, top:top + kh, left:left + kw]
    products = (window.astype(np.float64) * k.astype(np.float64))
    total = float(products.sum())
    output = total + float(bias)
    torch_output = float(torch_conv(x, k, bias, stride, padding)[row, col])
    return {
        "window": window.astype(np.float32), "kernel": k, "products": products,   # they sum
        "sum": total, "bias": float(bias), "output": output, "torch_output": torch_output,
        "match": math.isclose(output, torch_output, rel_tol=1e-4, abs_tol=1e-4),
        "top": top, "left": left, "out_shape": (oh, ow),
    }


def maxpool_windows(fmap: np.ndarray, kernel: int = 2, stride: int | None = None) -> dict:
    """Max pooling window by window (the first argmax on a tie) beside ``F.max_pool2d``'s."""
    x = np.asarray(fmap, dtype=np.float32)
    stride = kernel if stride is None else stride
    oh, ow = shapes.pool2d_output_size(x.shape, kernel, stride)
    out = np.empty((oh, ow), dtype=np.float32)
    windows = []
    for r in range(oh):
        for c in range(ow):
            top, left = r * stride, c * stride
            values = x[top:top + kernel, left:left + kernel]
            i, j = np.unravel_index(int(np.argmax(values)), values.shape)
            out[r, c] = values[i, j]
            windows.append({"row": r, "col": c, "top": top, "left": left,
                            "values": values.copy(), "argmax": (top + int(i), left + int(j)),
                            "max": float(values[i, j])})
    tout = F.max_pool2d(torch.from_numpy(x.copy())[None, None], kernel, stride)[0, 0].numpy()
    return {"windows": windows, "output": out, "torch_output": tout,
            "match": bool(np.array_equal(out, tout)), "in_shape": x.shape, "out_shape": (oh, ow),
            "kernel": kernel, "stride": stride}


def calculator(kind: str, size, kernel, padding=0, stride=1, dilation=1) -> dict:
    """A conv or max-pool layer's output size by PyTorch's formula; an argument is an int, an
    (h, w) pair or typed text. What PyTorch refuses comes back as ``shape_error``."""
    layer, fn, size_of = (
        (shapes.CONV, shapes.conv2d_formula, shapes.conv2d_output_size) if kind == "conv"
        else (shapes.POOL, shapes.pool2d_formula, shapes.pool2d_output_size))
    dims: list[dict] = []
    out, err, n_dims = None, None, 0
    try:
        args = tuple(shapes.parse_size(a, n, layer) if isinstance(a, str) else a
                     for a, n in zip((size, kernel, stride, padding, dilation), shapes.ARGS))
        n_dims = 1 if all(map(is_int, args)) else 2
        for s, k, st, p, d in shapes.per_dim(args, layer)[:n_dims]:
            formula, o, exact = fn(s, k, st, p, d)
            dims.append({"formula": formula, "output": o, "exact": exact, "stride": st,
                         "remainder": (s + 2 * p - d * (k - 1) - 1) % st})
        out = size_of(*args)      # refuses an output below 1, which the formulas still show
    except ShapeError as e:
        dims, err = dims if len(dims) == n_dims else [], e
    return {"dims": dims, "output": out, "shape_error": err,
            "shown": "—" if out is None else shapes.fmt_size(out),
            "formula": "\n".join(d["formula"] for d in dims),
            "exact": all(d["exact"] for d in dims)}


@dataclass
class StackReport:
    """What a ModelSpec does to a 3×32×32 image, or why it can't."""

    spec: ModelSpec
    rows: list[dict] = field(default_factory=list)   # shapes.trace_table rows
    flat: int | None = None                          # fc1's input size (400 for the tutorial)
    flat_shape: tuple[int, int, int] | None = None   # (C, H, W) before the flatten
    total_params: int | None = None
    shape_error: ShapeError | None = None            # why it can't: .text(lang), .layer
    view_error: str | None = None      # "RuntimeError: …", PyTorch's words with x.view(-1, 400)
    flatten_error: str | None = None   # ... with torch.flatten(x, 1) + Linear(400)

    @property
    def ok(self) -> bool:
        return self.shape_error is None


def analyze_stack(spec: ModelSpec) -> StackReport:
    """``spec``'s shapes, fc1's real input size, and what PyTorch says of ``16 * 5 * 5`` with it."""
    report = StackReport(spec)
    try:
        traces = shapes.trace_spec(spec)
    except ShapeError as err:
        report.shape_error = err
    else:
        report.rows = shapes.trace_table(traces)
        flat = next(t for t in traces if t.kind == "flatten")
        report.flat, report.flat_shape = flat.out_shape[0], tuple(flat.in_shape)
        report.total_params = shapes.total_params(traces)
    report.view_error = _run_tutorial(spec, "view")
    report.flatten_error = _run_tutorial(spec, "flatten")
    return report


TUTORIAL_FLAT = 16 * 5 * 5


def _run_tutorial(spec: ModelSpec, flatten: str) -> str | None:
    """The exception and first line of PyTorch's message from the tutorial's forward and loss
    with ``spec``'s conv layers but fc1 hard-coded to 16 * 5 * 5; None when it runs."""
    (c1, c2), (h1, h2) = spec.scaled_channels(), spec.scaled_hidden()
    with torch.random.fork_rng(devices=[]):   # the layers' initialisation: no page's RNG
        conv1 = nn.Conv2d(3, c1, spec.kernels[0], spec.strides[0], spec.paddings[0])
        conv2 = nn.Conv2d(c1, c2, spec.kernels[1], spec.strides[1], spec.paddings[1])
        fc1, fc2, fc3 = nn.Linear(TUTORIAL_FLAT, h1), nn.Linear(h1, h2), nn.Linear(h2, 10)
    pool = nn.MaxPool2d(spec.pool, spec.pool)
    try:
        with torch.no_grad():
            x = pool(F.relu(conv1(torch.zeros(4, 3, 32, 32))))
            x = pool(F.relu(conv2(x)))
            x = x.view(-1, 16 * 5 * 5) if flatten == "view" else torch.flatten(x, 1)
            x = fc3(F.relu(fc2(F.relu(fc1(x)))))
            nn.CrossEntropyLoss()(x, torch.zeros(4, dtype=torch.long))
    except (RuntimeError, ValueError) as err:
        return f"{type(err).__name__}: {str(err).strip().splitlines()[0]}"
    return None

