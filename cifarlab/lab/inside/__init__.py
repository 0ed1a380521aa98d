"""The Inside page's engine; Captum is imported only when a view is computed (seconds)."""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np
import torch

from cifarlab.core.config import ACTIVATION_CODE, ModelSpec, TrainConfig
from cifarlab.core.data.pipelines import normalize
from cifarlab.core.model import Net
from cifarlab.lab.network import conv_step

CONV_LAYERS = ("conv1", "conv2")


@dataclass(frozen=True)
class Stage:
    """One step of the forward pass: its name in the shape trace, shape, values."""

    name: str                 # "input", "conv1", "relu1", "pool1", ..., "fc3", "softmax"
    shape: tuple[int, ...]    # the batch dimension left out
    values: np.ndarray        # float32, exactly ``shape``
    line: str                 # the tutorial's code that makes it


def to_input(image: np.ndarray | torch.Tensor) -> torch.Tensor:
    """A uint8 image (CHW or HWC) as the network's input, normalised as training does."""
    a = torch.as_tensor(np.array(image))  # a copy: a cached data set is read-only
    if a.ndim == 3 and a.shape[-1] == 3 and a.shape[0] != 3:
        a = a.permute(2, 0, 1)
    return normalize((a[None] if a.ndim == 3 else a).contiguous())


@torch.no_grad()
def activations(model: Net, x: torch.Tensor) -> list[Stage]:
    """Every stage of ``Net.forward`` for one image (``x`` from ``to_input``), then softmax, each
    with the tutorial's line that makes it (a run's own activation where these say F.relu)."""
    model, act = model.eval(), model.act
    steps = (("input", lambda h: h, "def forward(self, x):"),
             ("conv1", model.conv1, "self.conv1(x)"),
             ("relu1", act, "F.relu(self.conv1(x))"),
             ("pool1", model.pool, "x = self.pool(F.relu(self.conv1(x)))"),
             ("conv2", model.conv2, "self.conv2(x)"),
             ("relu2", act, "F.relu(self.conv2(x))"),
             ("pool2", model.pool, "x = self.pool(F.relu(self.conv2(x)))"),
             ("flatten", lambda h: h.flatten(1), "x = x.view(-1, 16 * 5 * 5)"),
             ("fc1", model.fc1, "self.fc1(x)"),
             ("relu3", act, "x = F.relu(self.fc1(x))"),
             ("fc2", model.fc2, "self.fc2(x)"),
             ("relu4", act, "x = F.relu(self.fc2(x))"),
             ("fc3", model.fc3, "x = self.fc3(x)"),
             ("softmax", lambda h: torch.softmax(h, dim=1), "torch.softmax(x, dim=1)"))
    stages, h = [], x
    for name, fn, line in steps:
        flat = " * ".join(map(str, h.shape[1:]))   # before the flatten: "16 * 5 * 5" or others
        h = fn(h)
        values = h[0].detach().to(torch.float32).cpu().numpy()
        line = line.replace("F.relu", ACTIVATION_CODE[model.activation])
        stages.append(Stage(name, values.shape, values, line.replace("16 * 5 * 5", flat)))
    return stages


def stage(stages: list[Stage], name: str) -> Stage:
    return next(s for s in stages if s.name == name)


def neuron(model: Net, x: torch.Tensor, layer: str = "conv1", channel: int = 0, row: int = 0,
           col: int = 0, stages: list[Stage] | None = None) -> dict:
    """Output (``channel``, ``row``, ``col``) of conv1 or conv2 by hand (``conv_step``), with its
    window's ``top``/``left`` in the unpadded input and ``activated``, what is pooled."""
    stages = stages if stages is not None else activations(model, x)
    conv = getattr(model, layer)
    source = stage(stages, "input" if layer == "conv1" else "pool1").values.astype(np.float64)
    bias = float(conv.bias[channel].detach()) if conv.bias is not None else 0.0
    step = conv_step(source, conv.weight[channel].detach().cpu().numpy(), bias, row, col,
                     conv.stride[0], conv.padding[0])
    activated = model.act(torch.tensor(step["output"], dtype=torch.float64))
    return step | {"layer": layer, "top": step["top"] - conv.padding[0],
                   "left": step["left"] - conv.padding[1], "activated": float(activated)}


def initial_model(config: TrainConfig, classes: int = 10) -> Net:
    """The ``Net`` a run started from, seeded as ``core.train`` does; the global RNG untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return Net(config.model, num_classes=classes, activation=config.activation).eval()


def random_model(seed: int = 0, spec: ModelSpec | None = None, classes: int = 10) -> Net:
    """An untrained network (the tutorial's ``Net`` by default) with seeded random weights."""
    return initial_model(TrainConfig(seed=int(seed), model=spec or ModelSpec()), classes)


def filter_patches(weight: torch.Tensor) -> np.ndarray:
    """conv1's kernels as C_out×k×k×3 uint8 patches on one scale (zero mid grey)."""
    w = weight.detach().to(torch.float64).cpu().numpy()
    lim = float(np.abs(w).max()) or 1.0
    rgb = 0.5 + 0.5 * np.clip(w / lim, -1, 1)
    return np.round(255 * rgb).astype(np.uint8).transpose(0, 2, 3, 1)


def filter_table(before: torch.Tensor | None, after: torch.Tensor) -> list[dict]:
    """Per conv1 kernel: mean weight per colour, norm, and how far training moved it (if known)."""
    a = after.detach().to(torch.float64).cpu()
    b = before.detach().to(torch.float64).cpu() if before is not None else None
    rows = []
    for i in range(a.shape[0]):
        row = {"kernel": i + 1, "red": float(a[i, 0].mean()), "green": float(a[i, 1].mean()),
               "blue": float(a[i, 2].mean()), "norm": float(a[i].norm())}
        if b is not None:
            row["norm_before"] = float(b[i].norm())
            row["moved"] = float((a[i] - b[i]).norm())
        rows.append(row)
    return rows


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


def occlusion_windows(size: tuple[int, int]) -> int:
    """How many squares occlusion greys out, one at a time, on an image of ``size``."""
    w, s = OCCLUSION_WINDOW, OCCLUSION_STRIDE
    return ((size[0] - w) // s + 1) * ((size[1] - w) // s + 1)


def explain(model: torch.nn.Module, x: torch.Tensor, target: int, method: str, *,
            per_eval: int | None = None) -> View:
    """One attribution map of ``target``'s logit; ``per_eval``: occluded images per forward pass."""
    import captum.attr as ca

    target = int(target)
    # a copy: Captum hangs hooks on its layers, and a cached model is shared by every session
    net = copy.deepcopy(model).eval()
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
        raw = ca.LayerGradCam(net, net.conv2).attribute(x, target=target, relu_attributions=True)
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
