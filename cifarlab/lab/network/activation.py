"""Why ReLU: the activation knob's three functions and their derivatives, taken by autograd
(core.model.ACTIVATIONS, the functions the network really uses), and how much of a gradient
survives a stack of them: the largest derivative, once per layer."""
from __future__ import annotations

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from cifarlab import i18n
from cifarlab.core.model import ACTIVATIONS
from cifarlab.lab import charts as C


def curves(lo: float = -6.0, hi: float = 6.0, n: int = 241) -> dict[str, tuple]:
    """name -> (x, f(x), f'(x)) as lists, the derivative by autograd."""
    out = {}
    for name, fn in ACTIVATIONS.items():
        x = torch.linspace(lo, hi, n, dtype=torch.float64, requires_grad=True)
        y = fn(x)
        (grad,) = torch.autograd.grad(y.sum(), x)
        out[name] = (x.detach().tolist(), y.detach().tolist(), grad.tolist())
    return out


def largest_slope(name: str) -> float:
    """The steepest the function gets (sigmoid 0.25 at 0, tanh and ReLU 1)."""
    return max(curves()[name][2])


def surviving(name: str, layers: int) -> float:
    """The most of a gradient that can pass ``layers`` activations going backwards: each
    multiplies it by its derivative, at best the largest."""
    return largest_slope(name) ** layers


def figure(t) -> go.Figure:
    """The three functions (left) and their derivatives (right)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(t("network.act_functions"),
                                                        t("network.act_derivatives")))
    for i, (name, (x, y, dy)) in enumerate(curves().items()):
        style = dict(color=C.PALETTE[i], dash=C.DASHES[i], width=2.5)
        label = t(f"common.activation_{name}")
        fig.add_scatter(x=x, y=y, name=label, legendgroup=name, line=style, row=1, col=1)
        fig.add_scatter(x=x, y=dy, name=label, legendgroup=name, showlegend=False, line=style,
                        row=1, col=2)
    fig.update_xaxes(title_text="x", zeroline=True)
    return C.localized(fig, t.lang, height=360, margin=dict(C.MARGIN, t=60), legend=dict(
        orientation="h", y=-0.15, x=0.5, xanchor="center"))


def table(t, layers: tuple[int, ...] = (1, 2, 4, 8)) -> list[dict]:
    """Rows for the page: each function's steepest slope and what survives 1, 2, 4, 8 layers."""
    return [{t("network.act_col"): t(f"common.activation_{name}"),
             **{t("network.act_layers", n=n): i18n.significant(surviving(name, n), t.lang)
                for n in layers}} for name in ACTIVATIONS]
