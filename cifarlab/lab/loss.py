"""The Loss & Optimizer page's engine: cross-entropy by hand, SGD paths by ``torch.optim.SGD``."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
import torch.nn as nn

from cifarlab import i18n
from cifarlab.lab import charts as C
from cifarlab.lab.inside import random_model, to_input


def net_logits(image_chw_uint8: np.ndarray, seed: int = 0) -> np.ndarray:
    """The logits of the tutorial's ``Net`` seeded with ``seed``, for one 3×32×32 uint8 image."""
    with torch.no_grad():
        out = random_model(seed)(to_input(image_chw_uint8))
    return out[0].numpy().astype(np.float64)


def cross_entropy_by_hand(logits, label: int) -> dict:
    """``nn.CrossEntropyLoss`` for one example step by step, beside PyTorch's: log Σe^(z − max)
    + max − z_label, which neither overflows nor loses a tiny p_true."""
    z = np.asarray(logits, dtype=np.float64).reshape(-1)
    label = int(label)
    shift = float(z.max())
    exps = np.exp(z - shift)
    sum_exp = float(exps.sum())
    probs = exps / sum_exp
    loss = float(math.log(sum_exp) + shift - z[label])
    torch_loss = float(nn.CrossEntropyLoss()(torch.tensor(z[None], dtype=torch.float64),
                                             torch.tensor([label])))
    return {"logits": z, "shift": shift, "exps": exps, "sum_exp": sum_exp, "probs": probs,
            "p_true": float(probs[label]), "loss": loss, "torch_loss": torch_loss,
            "match": math.isclose(loss, torch_loss, rel_tol=1e-9, abs_tol=1e-9),
            "prediction": int(np.argmax(z)), "label": label}


@dataclass(frozen=True)
class Surface:
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # f(x, y), works on tensors
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    start: tuple[float, float]      # a good starting point for the demo
    minimum: tuple[float, float]    # where the loss is smallest
    formula: str
    local_minima: bool = False      # valleys other than the lowest one


SURFACES: dict[str, Surface] = {
    # An elongated quadratic bowl: steep across (curvature 10), gentle along (curvature 1).
    # Plain SGD diverges for lr > 2/10 = 0.2; with momentum β for lr > 2(1 + β)/10.
    "bowl": Surface(lambda x, y: 0.5 * (x ** 2 + 10.0 * y ** 2), (-5.0, 5.0), (-2.5, 2.5),
                    (-4.5, 2.0), (0.0, 0.0), "f(x, y) = ½ (x² + 10 y²)"),
    # A Rosenbrock-like curved valley with its minimum at (1, 1).
    "valley": Surface(lambda x, y: (1.0 - x) ** 2 + 5.0 * (y - x ** 2) ** 2, (-2.0, 2.0),
                      (-1.0, 3.0), (-1.5, 2.5), (1.0, 1.0), "f(x, y) = (1 − x)² + 5 (y − x²)²"),
    # A bowl with ridges, the lowest valley at (0, 0): at the demo's lr plain SGD stops in the
    # valley at (−3.42, 0), momentum 0.9 rolls over the ridges (tests/test_optimlab_minima.py).
    "mountains": Surface(lambda x, y: 0.4 * (x ** 2 + y ** 2)
                         + 2.0 * (2.0 - torch.cos(1.5 * x) - torch.cos(1.5 * y)),
                         (-6.0, 3.0), (-3.0, 4.0), (-5.0, 2.0), (0.0, 0.0),
                         "f(x, y) = 0.4 (x² + y²) + 2 (2 − cos 1.5x − cos 1.5y)",
                         local_minima=True),
}


def loss_surface(name: str, grid: int = 101) -> dict:
    """The loss over a ``grid``×``grid`` grid, for a contour plot, and the surface's facts."""
    s = SURFACES[name]
    xs, ys = np.linspace(*s.x_range, grid), np.linspace(*s.y_range, grid)
    X, Y = np.meshgrid(xs, ys)
    Z = s.fn(torch.from_numpy(X), torch.from_numpy(Y)).numpy()
    return {"x": xs, "y": ys, "z": Z, "start": s.start, "minimum": s.minimum,
            "formula": s.formula, "x_range": s.x_range, "y_range": s.y_range}


# The Loss page's starting values: on the narrow bowl plain SGD crawls while momentum reaches
# the minimum, as the lesson says (at lr 0.05 momentum ends slightly worse).
DEMO = {"surface": "bowl", "lr": 0.01, "momentum": 0.9, "steps": 100}

EXPLODE_FACTOR = 1e6     # a loss this many times the starting loss (or inf/nan) has exploded


@dataclass
class SGDPath:
    points: np.ndarray            # (n + 1)×2: the start, then the point after each step
    losses: np.ndarray            # n + 1 losses, at those points
    diverged: bool                # the loss exploded (or became inf/nan): stopped there
    diverged_at: int | None       # the step after which it had exploded
    on_valleys: bool = False      # the surface has local minima to be stuck in

    @property
    def steps(self) -> int:
        return len(self.points) - 1

    @property
    def final_loss(self) -> float:
        return float(self.losses[-1])

    @property
    def stuck(self) -> bool:
        """Stopped above the minimum: the loss no longer falls (a local minimum)."""
        last = self.losses[-11:]
        return (self.on_valleys and not self.converged() and not self.diverged
                and len(last) == 11 and abs(last[0] - last[-1]) <= 1e-2 * abs(last[-1]))

    def converged(self, tol: float = 1e-3) -> bool:
        """Ended (without diverging) with a loss within ``tol`` of the surface's minimum (0)."""
        return not self.diverged and bool(np.isfinite(self.losses[-1])) and self.losses[-1] < tol


def sgd_path(surface: str, start=None, lr: float = 0.05, momentum: float = 0.0,
             steps: int = 50) -> SGDPath:
    """``torch.optim.SGD``'s path on ``surface``, stopped where the loss explodes (or inf/nan)."""
    s = SURFACES[surface]
    start = s.start if start is None else tuple(float(v) for v in start)
    p = torch.tensor(start, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([p], lr=float(lr), momentum=float(momentum))

    def f() -> torch.Tensor:
        return s.fn(p[0], p[1])

    with torch.no_grad():
        first = float(f())
    limit = max(abs(first), 1.0) * EXPLODE_FACTOR
    points, losses = [list(start)], [first]
    diverged_at = None
    for i in range(1, steps + 1):
        opt.zero_grad()
        loss = f()
        loss.backward()
        opt.step()
        with torch.no_grad():
            value = float(f())
        points.append(p.detach().tolist())
        losses.append(value)
        if not math.isfinite(value) or value > limit:
            diverged_at = i
            break
    return SGDPath(np.asarray(points, dtype=np.float64), np.asarray(losses, dtype=np.float64),
                   diverged_at is not None, diverged_at, s.local_minima)


PATH_COLOURS = {"plain": "#D55E00", "momentum": "#0072B2"}


def probs_figure(ce: dict, names: list[str], label: int, t) -> go.Figure:
    """The softmax's probabilities, the true class's bar in another colour."""
    fig = C.bar_figure(names, ce["probs"], title=t("loss.softmax"),
                       y_title=t("loss.probability"),
                       text=[i18n.number(p, t.lang, 3) for p in ce["probs"]],
                       colours=[C.PALETTE[5] if i == label else "#7f9fbf"
                                for i in range(len(names))],
                       yaxis_range=[0, max(0.2, float(ce["probs"].max()) * 1.2)])
    return C.localized(fig, t.lang)


def ce_table(ce: dict, names: list[str], t) -> pd.DataFrame:
    """The logits, their exponentials and the probabilities, as the language writes them."""
    def col(values):
        return [i18n.number(round(float(v), 4), t.lang, 4) for v in values]
    return pd.DataFrame({t("common.class"): names, t("loss.logit_col"): col(ce["logits"]),
                         t("loss.exp_col"): col(ce["exps"]),
                         t("loss.probability"): col(ce["probs"])})


def paths_figures(surf: dict, paths: dict[str, SGDPath], labels: dict[str, str],
                  t) -> tuple[go.Figure, go.Figure]:
    """The paths on the surface's contours, and their losses on a log scale."""
    fig = go.Figure(go.Contour(x=surf["x"], y=surf["y"], z=np.log1p(surf["z"]),
                               colorscale="Greys", showscale=False, ncontours=25,
                               contours=dict(coloring="lines")))
    for key, path in paths.items():
        fig.add_trace(go.Scatter(x=path.points[:, 0], y=path.points[:, 1], mode="lines+markers",
                                 name=labels[key], line=dict(color=PATH_COLOURS[key]),
                                 marker=dict(size=4)))
    for point, word, where, marker in (
            (surf["start"], t("loss.start_point"), "top center",
             dict(size=12, color="black", symbol="x")),
            (surf["minimum"], t("loss.minimum"), "bottom center",
             dict(size=14, color="#009E73", symbol="star"))):
        fig.add_trace(go.Scatter(x=[point[0]], y=[point[1]], mode="markers+text", text=[word],
                                 textposition=where, marker=marker, showlegend=False))
    # the formula's decimals in the language's notation (0,4 and cos 1,5x in Spanish)
    formula = re.sub(r"(\d)\.(\d)", rf"\g<1>{i18n.separators(t.lang)[0]}\g<2>", surf["formula"])
    C.localized(fig, t.lang, title=formula, height=480, margin=C.MARGIN,
                legend=dict(orientation="h", y=-0.12),
                xaxis=dict(range=list(surf["x_range"]), title="x"),
                yaxis=dict(range=list(surf["y_range"]), title="y"))
    curves = go.Figure([go.Scatter(y=np.maximum(path.losses, 1e-12), mode="lines",
                                   name=labels[key], line=dict(color=PATH_COLOURS[key]))
                        for key, path in paths.items()])
    return fig, C.localized(
        curves, t.lang, title=t("loss.loss_curve"), xaxis_title=t("loss.steps"),
        yaxis_title=t("common.loss"), yaxis=dict(type="log", dtick=1, exponentformat="power"),
        height=480, margin=C.MARGIN, legend=dict(orientation="h", y=-0.2))


def path_verdict(path: SGDPath, label: str, t) -> tuple[str, str]:
    """(message kind, sentence): exploded, stuck in a local minimum, converged or too slow."""
    if path.diverged:
        return "error", f"**{label}**: " + t("loss.exploded", n=path.diverged_at)
    kind, key = (("warning", "loss.stuck") if path.stuck else
                 ("success", "loss.converges") if path.converged() else ("info", "loss.too_slow"))
    return kind, (f"**{label}**: " + t(key) + " " + t(
        "loss.final_loss", loss=i18n.significant(path.final_loss, t.lang), n=path.steps))
