"""The Network page's tables and figures, their words from ``t`` (``i18n.translator(lang)``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from cifarlab import i18n
from cifarlab.core.model import ACTIVATIONS
from cifarlab.lab import charts as C
from cifarlab.lab.inside import random_model
from cifarlab.lab.network import named_kernels, to_input

KINDS = ("input", "conv", "pool", "relu", "flatten", "linear")
NET_KERNELS = 6     # conv1's first kernels offered beside the named ones
POOL_MARK = "#D55E00"


def shape_table(rows: list[dict], t) -> pd.DataFrame:
    """A shape trace (``StackReport.rows``) in words, with a last row of the parameters' sum."""
    total = {"layer": t("network.total_row"), "kind": "", "input": "", "output": "",
             "params": sum(r["params"] for r in rows), "formula": ""}
    rows = [*rows, total]
    return pd.DataFrame({
        t("network.layer_col"): [r["layer"] for r in rows],
        t("network.kind_col"): [t(f"network.kind_{r['kind']}") if r["kind"] in KINDS
                                else r["kind"] for r in rows],
        t("network.in_shape_col"): [r["input"] for r in rows],
        t("network.out_shape_col"): [r["output"] for r in rows],
        t("network.params_col"): [i18n.number(r["params"], t.lang) for r in rows],
        t("network.formula_col"): [r["formula"] for r in rows],
    })


def kernel_options() -> list[str]:
    return list(named_kernels()) + [f"net{i}" for i in range(NET_KERNELS)]


def kernel_label(name: str, t) -> str:
    if name.startswith("net"):
        return t("network.kernel_net", n=int(name[3:]) + 1)
    return t(f"network.kernel_{name}")


@dataclass
class ConvExample:
    kernel: np.ndarray     # 3×3 (a named kernel, on gray) or C×k×k (conv1's, on RGB)
    bias: float
    image: np.ndarray      # C×H×W float: what the kernel slides over
    caption: str           # the catalog key that says which


def conv_example(hwc: np.ndarray, choice: str, seed: int) -> ConvExample:
    """A named kernel on the gray picture, or a seeded conv1 kernel on the normalised RGB one."""
    if choice.startswith("net"):
        conv1, i = random_model(seed).conv1, int(choice[3:])
        return ConvExample(conv1.weight[i].detach().numpy(), conv1.bias[i].item(),
                           to_input(hwc, "rgb"), "network.net_kernel_caption")
    return ConvExample(named_kernels()[choice], 0.0, to_input(hwc, "gray"), "network.gray_caption")


def input_figure(hwc: np.ndarray, ex: ConvExample, step: dict, name: str, t) -> go.Figure:
    """The picture the kernel works on, the window of the chosen output boxed."""
    if ex.image.shape[0] == 3:
        fig = go.Figure(go.Image(z=hwc))
    else:
        fig = go.Figure(go.Heatmap(z=ex.image[0], colorscale="gray", zmin=0, zmax=1,
                                   showscale=False))
    fig.update_layout(title=t("network.input_title", name=name), height=330, margin=C.MARGIN)
    C.pixel_axes(fig, hwc.shape[0], hwc.shape[1], square=True)
    k = ex.kernel.shape[-1]
    C.box(fig, step["top"], step["left"], k, k)
    return C.localized(fig, t.lang)


def kernel_figure(kernel: np.ndarray, t) -> go.Figure:
    mean = kernel.ndim == 3
    fig = C.grid_figure(kernel.mean(axis=0) if mean else kernel,
                        t("network.kernel_title_mean" if mean else "network.kernel_title"),
                        text=kernel.shape[-1] <= 5, height=330)
    return C.localized(fig, t.lang)


def fmap_figure(fmap: np.ndarray, row: int, col: int, t) -> go.Figure:
    fig = C.grid_figure(fmap, t("network.fmap_title", h=fmap.shape[0], w=fmap.shape[1]),
                        height=330)
    C.box(fig, row, col, 1, 1, color="#111111")
    return C.localized(fig, t.lang)


def step_figure(step: dict, t) -> go.Figure:
    """One output value: each channel's window, kernel and products."""
    win = step["window"]
    names = ([t("network.channel_name", c=c) for c in "RGB"] if win.shape[0] == 3 else [""])
    fig = C.arithmetic_figure(win, step["kernel"], step["products"], names,
                              (t("network.window"), t("network.kernel_word"),
                               t("network.products")))
    return C.localized(fig, t.lang)


def pool_figures(region: np.ndarray, pooled: dict, pick: int, kernel: int,
                 t) -> tuple[go.Figure, go.Figure]:
    """Input (chosen window boxed, each max starred) and output; numbers written on small grids."""
    wins, out = pooled["windows"], pooled["output"]
    small, chosen = region.shape[0] <= 8, wins[pick]
    fig_in = C.grid_figure(region, t("network.pool_in_title", h=region.shape[0],
                                     w=region.shape[1]), signed=False, text=small, height=420)
    if small:
        for w in wins:
            C.box(fig_in, w["top"], w["left"], kernel, kernel, color="white", width=1, dash="dot")
    C.box(fig_in, chosen["top"], chosen["left"], kernel, kernel, color=POOL_MARK, width=4)
    # each max's star at the centre of its cell; on a grid with numbers, that cell's number
    # moves just under its star (out of the heatmap's text) so both stay readable
    rows, cols = [w["argmax"][0] for w in wins], [w["argmax"][1] for w in wins]
    star = go.Scatter(x=cols, y=rows, mode="markers", name=t("network.pool_max_marker"),
                      marker=dict(symbol="star", size=11 if small else 7, color=POOL_MARK,
                                  line=dict(width=1, color="white")), showlegend=False)
    if small:
        top = float(np.max(region)) or 1.0
        text = [[i18n.number(float(v), t.lang, 2) for v in row] for row in region]
        star.update(mode="markers+text", text=[text[r][c] for r, c in zip(rows, cols)],
                    textposition="bottom center", textfont=dict(size=11, color=[
                        "black" if region[r, c] / top > 0.5 else "white"   # on Viridis
                        for r, c in zip(rows, cols)]))
        for r, c in zip(rows, cols):
            text[r][c] = ""
        fig_in.update_traces(text=text, texttemplate="%{text}", selector=dict(type="heatmap"))
    fig_in.add_trace(star)
    fig_out = C.grid_figure(out, t("network.pool_out_title", h=out.shape[0], w=out.shape[1]),
                            signed=False, text=out.shape[0] <= 8, height=420)
    C.box(fig_out, chosen["row"], chosen["col"], 1, 1, color=POOL_MARK, width=4)
    return C.localized(fig_in, t.lang), C.localized(fig_out, t.lang)


def activation_curves(lo: float = -6.0, hi: float = 6.0, n: int = 241) -> dict[str, tuple]:
    """name -> (x, f(x), f'(x)) as lists, the derivative by autograd."""
    out = {}
    for name, fn in ACTIVATIONS.items():
        x = torch.linspace(lo, hi, n, dtype=torch.float64, requires_grad=True)
        y = fn(x)
        (grad,) = torch.autograd.grad(y.sum(), x)
        out[name] = (x.detach().tolist(), y.detach().tolist(), grad.tolist())
    return out


def activation_figure(t) -> go.Figure:
    """The three functions (left) and their derivatives (right)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(t("network.act_functions"),
                                                        t("network.act_derivatives")))
    for i, (name, (x, y, dy)) in enumerate(activation_curves().items()):
        style = dict(color=C.PALETTE[i], dash=C.DASHES[i], width=2.5)
        label = t(f"common.activation_{name}")
        fig.add_scatter(x=x, y=y, name=label, legendgroup=name, line=style, row=1, col=1)
        fig.add_scatter(x=x, y=dy, name=label, legendgroup=name, showlegend=False, line=style,
                        row=1, col=2)
    fig.update_xaxes(title_text="x", zeroline=True)
    return C.localized(fig, t.lang, height=360, margin=dict(C.MARGIN, t=60), legend=dict(
        orientation="h", y=-0.15, x=0.5, xanchor="center"))

