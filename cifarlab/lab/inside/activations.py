"""A network seen from the inside: every activation of one image, one neuron's arithmetic, and
conv1's filters before and after training. The forward pass is ``Net.forward`` written out line
by line; each shape comes from the trace of the model's own ``ModelSpec``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from cifarlab.core.config import ACTIVATION_CODE, ACTIVATION_NAMES, ModelSpec, TrainConfig
from cifarlab.core.data.pipelines import normalize
from cifarlab.core.model import Net
from cifarlab.core.shapes import trace_spec
from cifarlab.errors import CifarLabError
from cifarlab.lab.network import conv_step
from cifarlab.lab.tables import dims

# Each stage, the line of the tutorial's forward that makes it (the lesson quotes them); a run
# with another activation reads its own function where these say F.relu.
FORWARD_LINES = {
    "input": "def forward(self, x):",
    "conv1": "self.conv1(x)",
    "relu1": "F.relu(self.conv1(x))",
    "pool1": "x = self.pool(F.relu(self.conv1(x)))",
    "conv2": "self.conv2(x)",
    "relu2": "F.relu(self.conv2(x))",
    "pool2": "x = self.pool(F.relu(self.conv2(x)))",
    "flatten": "x = x.view(-1, 16 * 5 * 5)",   # the tutorial's Net; view_line() for others
    "fc1": "self.fc1(x)",
    "relu3": "x = F.relu(self.fc1(x))",
    "fc2": "self.fc2(x)",
    "relu4": "x = F.relu(self.fc2(x))",
    "fc3": "x = self.fc3(x)",
    "softmax": "torch.softmax(x, dim=1)",
}
CONV_LAYERS = ("conv1", "conv2")


def view_line(shape: tuple[int, ...]) -> str:
    """The tutorial's flatten line with the traced (C, H, W) sizes."""
    return "x = x.view(-1, " + " * ".join(str(int(n)) for n in shape) + ")"


@dataclass(frozen=True)
class Stage:
    """One step of the forward pass: its name in the shape trace, kind, shape, values."""

    name: str                 # "input", "conv1", "relu1", "pool1", ..., "fc3", "softmax"
    kind: str                 # "input" | "conv" | "relu" | "pool" | "flatten" | "linear" | ...
    shape: tuple[int, ...]    # from the shape trace (batch dimension left out)
    values: np.ndarray        # float32, exactly ``shape``
    line: str                 # the tutorial's code that makes it


@dataclass(frozen=True)
class Neuron:
    """One output value of a conv layer, worked out by hand: the numbers a page shows."""

    layer: str                # "conv1" | "conv2"
    channel: int
    row: int
    col: int
    top: int                  # the window's first row and column in the layer's input (may be
    left: int                 # negative where the padding's zeros are part of it)
    window: np.ndarray        # C×k×k: the layer's input under the kernel (padding zeros included)
    kernel: np.ndarray        # C×k×k: the learned weights of this output channel
    products: np.ndarray      # window × kernel, element by element
    total: float              # the sum of the products
    bias: float
    value: float              # total + bias: what the map shows at (row, col)
    activated: float          # the activation of value (ReLU: max(0, value)): what is pooled
    torch_value: float        # PyTorch's own F.conv2d at the same place

    @property
    def matches(self) -> bool:
        return abs(self.value - self.torch_value) <= 1e-4 * max(1.0, abs(self.torch_value))


def to_input(image: np.ndarray | torch.Tensor) -> torch.Tensor:
    """A uint8 image (CHW or HWC) as the network's input, normalised as training does."""
    a = torch.as_tensor(np.array(image))  # a copy: a cached data set is read-only
    if a.ndim == 3 and a.shape[-1] == 3 and a.shape[0] != 3:
        a = a.permute(2, 0, 1)
    if a.ndim == 3:
        a = a[None]
    if a.ndim != 4 or a.shape[1] != 3:
        raise CifarLabError("inside.image_shape", shape=dims(a.shape))
    return normalize(a.contiguous())


def num_classes(model: Net) -> int:
    return int(model.fc3.out_features)


@torch.no_grad()
def activations(model: Net, x: torch.Tensor) -> list[Stage]:
    """Every stage of ``Net.forward`` for one image (``x`` from ``to_input``), then the
    softmax."""
    model = model.eval()
    spec = getattr(model, "spec", None) or ModelSpec()
    traces = trace_spec(spec, tuple(x.shape[1:]), num_classes(model))
    kinds = {t.name: (t.kind, t.out_shape) for t in traces}
    out: dict[str, torch.Tensor] = {"input": x}
    act = getattr(model, "act", F.relu)   # the run's activation knob
    out["conv1"] = h = model.conv1(x)
    out["relu1"] = h = act(h)
    out["pool1"] = h = model.pool(h)
    out["conv2"] = h = model.conv2(h)
    out["relu2"] = h = act(h)
    out["pool2"] = h = model.pool(h)
    # the line view_line() shows; the loop below checks these sizes against the trace
    out["flatten"] = h = h.view(-1, int(np.prod(h.shape[1:])))
    out["fc1"] = h = model.fc1(h)
    out["relu3"] = h = act(h)
    out["fc2"] = h = model.fc2(h)
    out["relu4"] = h = act(h)
    out["fc3"] = h = model.fc3(h)
    out["softmax"] = torch.softmax(h, dim=1)
    kinds["softmax"] = ("softmax", kinds["fc3"][1])
    stages = []
    for name, value in out.items():
        kind, shape = kinds[name]
        values = value[0].detach().to(torch.float32).cpu().numpy()
        if tuple(values.shape) != tuple(shape):  # the trace and the model disagree: say so
            raise CifarLabError("inside.shape_mismatch", layer=name, traced=dims(shape),
                                got=dims(values.shape))
        line = view_line(kinds["pool2"][1]) if name == "flatten" else FORWARD_LINES[name]
        line = line.replace("F.relu", ACTIVATION_CODE[activation_of(model)])
        stages.append(Stage(name, kind, tuple(shape), values, line))
    return stages


def activation_of(model: Net) -> str:
    return getattr(model, "activation", "relu")


def activation_name(model: Net) -> str:
    return ACTIVATION_NAMES[activation_of(model)]


def stage(stages: list[Stage], name: str) -> Stage:
    return next(s for s in stages if s.name == name)


def neuron(model: Net, x: torch.Tensor, layer: str = "conv1", channel: int = 0, row: int = 0,
           col: int = 0, stages: list[Stage] | None = None) -> Neuron:
    """Output (``channel``, ``row``, ``col``) of ``conv1`` or ``conv2`` by hand, beside
    ``F.conv2d``'s."""
    if layer not in CONV_LAYERS:
        raise CifarLabError("inside.unknown_layer", layer=str(layer)[:20],
                            layers=", ".join(CONV_LAYERS))
    stages = stages if stages is not None else activations(model, x)
    conv = getattr(model, layer)
    source = stage(stages, "input" if layer == "conv1" else "pool1").values.astype(np.float64)
    fmap = stage(stages, layer).values
    channels, height, width = fmap.shape
    for name, code, value, hi in (("channel", "inside.channel_outside", channel, channels),
                                  ("row", "inside.row_outside", row, height),
                                  ("col", "inside.col_outside", col, width)):
        if not (isinstance(value, (int, np.integer)) and 0 <= int(value) < hi):
            raise CifarLabError(code, field=name, hi=hi - 1, value=str(value)[:12])
    channel, row, col = int(channel), int(row), int(col)
    # the Network page's arithmetic, on this layer's input, kernel, stride and padding
    bias = float(conv.bias[channel].detach()) if conv.bias is not None else 0.0
    step = conv_step(source, conv.weight[channel].detach().cpu().numpy(), bias, row, col,
                     conv.stride[0], conv.padding[0])
    value = step["output"]
    return Neuron(layer, channel, row, col, step["top"] - conv.padding[0],
                  step["left"] - conv.padding[1], step["window"], step["kernel"],
                  step["products"], step["sum"], bias, value,
                  float(getattr(model, "act", F.relu)(torch.tensor(value, dtype=torch.float64))),
                  step["torch_output"])


# ------------------------------------------------------------------------------------ filters

def initial_model(config: TrainConfig, classes: int = 10) -> Net:
    """The network a run started from (``core.train`` seeds torch, then builds the ``Net``);
    the global random state left as it was (a page must not change another's)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return Net(config.model, num_classes=classes, activation=config.activation).eval()


def random_model(seed: int = 0, spec: ModelSpec | None = None, classes: int = 10) -> Net:
    """An untrained network (the tutorial's ``Net`` by default) with seeded random weights."""
    return initial_model(TrainConfig(seed=int(seed), model=spec or ModelSpec()), classes)


def filter_patches(weight: torch.Tensor) -> np.ndarray:
    """conv1's kernels as C_out×k×k×3 uint8 patches on one scale (zero mid grey), so the
    patches of one layer compare."""
    w = weight.detach().to(torch.float64).cpu().numpy()
    if w.ndim != 4 or w.shape[1] != 3:
        raise CifarLabError("inside.not_colour", shape=dims(w.shape))
    lim = float(np.abs(w).max()) or 1.0
    rgb = 0.5 + 0.5 * np.clip(w / lim, -1, 1)
    return np.round(255 * rgb).astype(np.uint8).transpose(0, 2, 3, 1)


def filter_table(before: torch.Tensor | None, after: torch.Tensor) -> list[dict]:
    """Per conv1 kernel: mean weight per colour, norm, and (when known) how far training moved
    it."""
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
