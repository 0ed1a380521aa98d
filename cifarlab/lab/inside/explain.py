"""Why this class: where in the picture the network's answer comes from, four ways, with Captum:
saliency, integrated gradients (from a grey image), Grad-CAM on conv2 (stretched to the
picture) and occlusion (every square greyed out in one batch). Captum is imported only when a
view is computed (it takes seconds to import).
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np
import torch


METHODS = ("saliency", "integrated_gradients", "gradcam", "occlusion")
SIGNED = {"integrated_gradients", "occlusion"}   # a map with both signs (drawn around zero)
IG_STEPS = 32
OCCLUSION_WINDOW = 4
OCCLUSION_STRIDE = 2


@dataclass(frozen=True)
class View:
    """One attribution map for one class."""

    method: str
    target: int
    heat: np.ndarray      # H×W float32, the picture's size: what is drawn over it
    raw: np.ndarray       # Captum's own output without the batch dimension (3×H×W, 1×h×w)
    seconds: float        # wall time of the attribution itself, on this machine
    signed: bool          # True: positive and negative values mean opposite things


def _private(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of the model for one attribution: Captum hangs hooks on its layers for the call,
    and a model a web server caches is shared by every student's session at once."""
    return copy.deepcopy(model).eval()


def occlusion_windows(size: tuple[int, int]) -> int:
    """How many squares occlusion greys out, one at a time, on an image of ``size``."""
    w, s = OCCLUSION_WINDOW, OCCLUSION_STRIDE
    return ((size[0] - w) // s + 1) * ((size[1] - w) // s + 1)


def explain(model: torch.nn.Module, x: torch.Tensor, target: int, method: str, *,
            per_eval: int | None = None) -> View:
    """One attribution map of class ``target``'s logit for ``x``; ``per_eval``: occluded
    images per forward pass (default all)."""
    import captum.attr as ca

    target = int(target)
    net = _private(model)
    x = x.detach().to(torch.float32).clone()
    size = tuple(x.shape[-2:])
    start = time.perf_counter()
    if method == "saliency":
        raw = ca.Saliency(net).attribute(x.requires_grad_(), target=target, abs=True)
        heat = raw[0].amax(dim=0)
    elif method == "integrated_gradients":
        raw = ca.IntegratedGradients(net).attribute(
            x, baselines=torch.zeros_like(x), target=target, n_steps=IG_STEPS,
            internal_batch_size=IG_STEPS)
        heat = raw[0].sum(dim=0)
    elif method == "gradcam":
        raw = ca.LayerGradCam(net, net.conv2).attribute(x, target=target,
                                                         relu_attributions=True)
        heat = ca.LayerAttribution.interpolate(raw, size, "bilinear")[0, 0]
    else:
        w, s = OCCLUSION_WINDOW, OCCLUSION_STRIDE
        raw = ca.Occlusion(net).attribute(
            x, target=target, sliding_window_shapes=(3, w, w), strides=(3, s, s), baselines=0,
            perturbations_per_eval=int(per_eval or occlusion_windows(size)))
        heat = raw[0].sum(dim=0)
    seconds = time.perf_counter() - start
    return View(method, target, heat.detach().to(torch.float32).cpu().numpy(),
                raw[0].detach().to(torch.float32).cpu().numpy(), seconds, method in SIGNED)


def explain_all(model: torch.nn.Module, x: torch.Tensor, target: int) -> dict[str, View]:
    return {m: explain(model, x, target, m) for m in METHODS}


def blocks(heat: np.ndarray, size: int = 4) -> np.ndarray:
    """The map's means over ``size``×``size`` squares (a table a screen reader can read)."""
    h, w = heat.shape
    hh, ww = h // size * size, w // size * size
    a = np.asarray(heat[:hh, :ww], dtype=np.float64)
    return a.reshape(hh // size, size, ww // size, size).mean(axis=(1, 3))


def strongest(heat: np.ndarray, size: int = 4, n: int = 3) -> list[tuple[int, int, float]]:
    """The ``n`` squares with the largest mean, as (first row, first column, mean)."""
    b = blocks(heat, size)
    order = np.argsort(-b, axis=None, kind="stable")[:n]
    return [(int(i // b.shape[1]) * size, int(i % b.shape[1]) * size,
             float(b.flat[i])) for i in order]
