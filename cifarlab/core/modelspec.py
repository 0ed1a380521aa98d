"""ModelSpec: the one description of a network's shape, its modules and forward steps
(``layout``), the networks the ``net`` knob names, and the checks that tie the tricks together."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from cifarlab.errors import ConfigError, Problem


def is_int(v: Any) -> bool:
    """A whole number, not a bool (``True`` is an ``int`` to Python)."""
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class ModelSpec:
    """The network's shape (defaults: the tutorial's); fc1's input comes from the shape trace."""

    channels: tuple[int, int] = (6, 16)   # output channels of conv1 and conv2
    kernels: tuple[int, int] = (5, 5)     # kernels, paddings, strides: one per conv
    paddings: tuple[int, int] = (0, 0)
    strides: tuple[int, int] = (1, 1)
    pool: int = 2                         # the max-pool kernel (= stride) after each block
    hidden: tuple[int, int] = (120, 84)   # fc1's and fc2's sizes
    width: int = 1                        # multiplies the channels and hidden sizes
    # the speed lesson's variants (defaults: none): batch norm after each conv; a third conv
    # block of ``conv3`` channels (3×3, padding 1); ``block_convs`` 2: a second 3×3 conv in
    # each block (airbench's ConvGroup). Built by core/model.py, listed by ``layout`` below.
    batch_norm: bool = False
    conv3: int = 0
    block_convs: int = 1

    # field -> (lo, hi) for the pairs and the single numbers
    BOUNDS = {"channels": (1, 1024), "kernels": (1, 31), "paddings": (0, 15), "strides": (1, 8),
              "hidden": (1, 8192), "pool": (1, 8), "width": (1, 16), "conv3": (0, 1024),
              "block_convs": (1, 2)}

    def __post_init__(self) -> None:
        for name in ("channels", "kernels", "paddings", "strides", "hidden"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        problems = self.problems()
        if problems:
            raise ConfigError(problems)

    def problems(self) -> list[Problem]:
        out: list[Problem] = []
        for name, (lo, hi) in self.BOUNDS.items():
            value = getattr(self, name)
            pair = name not in ("pool", "width", "conv3", "block_convs")
            ok_type = (isinstance(value, tuple) and len(value) == 2 and all(map(is_int, value))
                       if pair else is_int(value))
            values = value if pair and ok_type else (value,)
            if not ok_type or not all(lo <= v <= hi for v in values):
                out.append(Problem(f"model.{name}", f"config.model_{name}", {"lo": lo, "hi": hi}))
        if not isinstance(self.batch_norm, bool):
            out.append(Problem("model.batch_norm", "config.model_batch_norm", {}))
        return out

    @property
    def is_plain(self) -> bool:
        """The tutorial's kind of network (any sizes): no batch norm, two single-conv blocks."""
        return not self.batch_norm and self.conv3 == 0 and self.block_convs == 1

    @property
    def is_tutorial(self) -> bool:
        return self == ModelSpec()

    def scaled_channels(self) -> tuple[int, int]:
        return (self.channels[0] * self.width, self.channels[1] * self.width)

    def scaled_hidden(self) -> tuple[int, int]:
        return (self.hidden[0] * self.width, self.hidden[1] * self.width)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ModelSpec:
        d = dict(d or {})
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError([Problem("model", "config.unknown",
                                       {"names": ", ".join(sorted(unknown))})])
        return cls(**d)

    @classmethod
    def admitted(cls, d: Mapping[str, Any]) -> ModelSpec:
        """An admitted run's spec from its ``to_dict``: rebuilt as it is, not checked again."""
        spec = object.__new__(cls)
        for f in dataclasses.fields(cls):
            value = d.get(f.name, f.default)
            object.__setattr__(spec, f.name, tuple(value) if isinstance(value, list) else value)
        return spec


# name -> ModelSpec fields. "tutorial": the tutorial's Net (resized by ``model``); "bn3": three
# small conv blocks with batch norm, sized for the CPU (the one-minute preset); "airbench":
# airbench94's widths (64, 256, 256) and two convs a block (KellerJordan/cifar10-airbench),
# with the tutorial's fully connected head.
NETS: dict[str, dict[str, Any]] = {
    "tutorial": {},
    "bn3": dict(channels=(16, 32), kernels=(3, 3), paddings=(1, 1), conv3=64, hidden=(128, 64),
                batch_norm=True),
    "airbench": dict(channels=(64, 256), kernels=(3, 3), paddings=(1, 1), conv3=256,
                     hidden=(256, 128), batch_norm=True, block_convs=2),
}
NET_NAMES = tuple(NETS)


def net_spec(name: str) -> ModelSpec:
    """The ModelSpec of a named network ("tutorial": the tutorial's own Net)."""
    return ModelSpec(**NETS[name])


def trick_problems(values: Mapping[str, Any]) -> list[Problem]:
    """The network the ``net`` knob names must be the one ``model`` describes ("tutorial": any
    plain resize of the tutorial's Net); augmentation works on the fast pipeline's batches."""
    out: list[Problem] = []
    net, model = values.get("net", "tutorial"), values.get("model")
    if net in NETS and isinstance(model, ModelSpec) and not (
            model.is_plain if net == "tutorial" else model == net_spec(net)):
        out.append(Problem("net", "config.net_model", {"net": net}))
    if values.get("augment") in ("flip", "flip_translate") and values.get("pipeline") != "fast":
        out.append(Problem("augment", "config.augment_pipeline", {}))
    if values.get("nesterov") is True and values.get("momentum") == 0:  # torch.optim.SGD's rule
        out.append(Problem("nesterov", "config.nesterov_momentum", {}))
    return out


def layout(spec: ModelSpec) -> tuple[list[dict], list[dict]]:
    """(modules, forward): the modules before fc1 in ``Net``'s order (the same initial weights
    from a seed), and the forward steps: a conv, its batch norm or None, a pool after or not."""
    (c1, c2) = spec.scaled_channels()
    modules = [_conv("conv1", 3, c1, spec.kernels[0], spec.strides[0], spec.paddings[0]),
               {"kind": "pool", "name": "pool", "size": spec.pool},
               _conv("conv2", c1, c2, spec.kernels[1], spec.strides[1], spec.paddings[1])]
    blocks = [(1, c1), (2, c2)] + ([(3, spec.conv3 * spec.width)] if spec.conv3 else [])
    forward = []
    for i, ch in blocks:
        if i == 3:
            modules.append(_conv("conv3", c2, ch, 3, 1, 1))
        for suffix in ("", "b")[:spec.block_convs]:
            if suffix:
                modules.append(_conv(f"conv{i}b", ch, ch, 3, 1, 1))
            if spec.batch_norm:
                modules.append({"kind": "bn", "name": f"bn{i}{suffix}", "channels": ch})
            forward.append({"conv": f"conv{i}{suffix}", "pool": False,
                            "bn": f"bn{i}{suffix}" if spec.batch_norm else None})
        forward[-1]["pool"] = True
    return modules, forward


def _conv(name: str, cin: int, cout: int, kernel: int, stride: int, padding: int) -> dict:
    return {"kind": "conv", "name": name, "cin": cin, "cout": cout, "kernel": kernel,
            "stride": stride, "padding": padding}


def spec_layers(spec: ModelSpec, num_classes: int = 10) -> list[dict]:
    """The layers, in call order, of ``core.model.Net(spec)`` (relus included); the tutorial's
    kind of network leaves the convs unnamed (conv1, conv2 by count)."""
    modules, forward = layout(spec)
    convs = {m["name"]: m for m in modules if m["kind"] == "conv"}
    out: list[dict] = []
    for step in forward:
        c = convs[step["conv"]]
        out.append({"type": "conv", "out_channels": c["cout"], "kernel_size": c["kernel"],
                    "stride": c["stride"], "padding": c["padding"], "dilation": 1}
                   | ({} if spec.is_plain else {"name": c["name"]}))
        if step["bn"]:
            out.append({"type": "batchnorm", "name": step["bn"]})
        out.append({"type": "relu"})
        if step["pool"]:
            out.append({"type": "pool", "kernel_size": spec.pool, "stride": spec.pool})
    h1, h2 = spec.scaled_hidden()
    return out + [{"type": "flatten"},
                  {"type": "linear", "out_features": h1}, {"type": "relu"},
                  {"type": "linear", "out_features": h2}, {"type": "relu"},
                  {"type": "linear", "out_features": num_classes}]
