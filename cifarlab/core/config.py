"""The one frozen, validated TrainConfig (each field carries its Knob); defaults: the tutorial's."""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from cifarlab.core.knobs import KnobField, knob, knob_problems
from cifarlab.core.modelspec import (NET_NAMES, NETS, ModelSpec, is_int, net_spec,
                                     trick_problems)
from cifarlab.errors import ConfigError, Problem

PIPELINES = ("tutorial", "fast")
# the speed lesson's tricks (after KellerJordan/cifar10-airbench, airbench94.py): core/tricks.py
AUGMENTS = ("none", "flip", "flip_translate")
SCHEDULES = ("constant", "onecycle")
ACTIVATIONS = ("relu", "sigmoid", "tanh")   # core.model.ACTIVATIONS: the tutorial's F.relu first
# each in the code a student reads (exported scripts, the Inside page) and in the lessons' words
ACTIVATION_CODE = {"relu": "F.relu", "sigmoid": "torch.sigmoid", "tanh": "torch.tanh"}
ACTIVATION_NAMES = {"relu": "ReLU", "sigmoid": "sigmoid", "tanh": "tanh"}
# CIFAR-10's label order (0..9). The tutorial prints short names: plane, car, bird, ...
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")
TUTORIAL_SHORT_NAMES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                        "truck")
MAX_EPOCHS = 500
MAX_BATCH = 65536
MAX_WORKERS = 8        # DataLoader workers: more only adds processes on a shared server
MAX_SEED = 2**31 - 1   # what a browser's number widget holds exactly


@dataclass(frozen=True)
class Limits:
    """What this server allows one run (its hosting settings): checked by ``validate``."""

    max_epochs: int | None = None
    max_train_images: int | None = None
    max_num_workers: int | None = None
    devices: tuple[str, ...] | None = None   # device ids present ("cpu", "cuda:0", ...)


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs. Defaults: the tutorial as written."""

    epochs: int = knob(2, kind="int", lo=1, hi=MAX_EPOCHS, tutorial=True)
    lr: float = knob(0.001, kind="float", lo=0, lo_open=True, hi=10, step=0.001, tutorial=True)
    momentum: float = knob(0.9, kind="float", lo=0, hi=1, hi_open=True, step=0.05, tutorial=True)
    batch_size: int = knob(4, kind="int", lo=1, hi=MAX_BATCH, tutorial=True)
    num_workers: int = knob(2, kind="int", lo=0, hi=MAX_WORKERS, tutorial=True)
    device: str = knob("auto", kind="device", preset=False, tutorial=True)
    pipeline: str = knob("tutorial", kind="choice", choices=PIPELINES)
    seed: int = knob(0, kind="int", lo=0, hi=MAX_SEED, preset=False)
    train_subset: int | None = knob(None, kind="int", lo=1, optional=True, step=500)
    # the share of the training images held out to measure overfitting (0: the tutorial's)
    val_fraction: float = knob(0.0, kind="float", lo=0, hi=0.5, step=0.05)
    shuffle: bool = knob(True, kind="bool", preset=False, widget=False)
    # the network's shape; None: the spec of the network ``net`` names, set when it is built
    model: ModelSpec | None = None
    # the tutorial prints the running loss every 2,000 mini-batches
    log_every: int = knob(2000, kind="int", lo=1, preset=False, widget=False)
    # the speed lesson's tricks; the defaults change nothing
    net: str = knob("tutorial", kind="choice", choices=NET_NAMES, keys="speed.knob")
    activation: str = knob("relu", kind="choice", choices=ACTIVATIONS)
    augment: str = knob("none", kind="choice", choices=AUGMENTS, keys="speed.knob")
    label_smoothing: float = knob(0.0, kind="float", lo=0, hi=1, hi_open=True, step=0.05,
                                  keys="speed.knob")
    nesterov: bool = knob(False, kind="bool", keys="speed.knob")
    weight_decay: float = knob(0.0, kind="float", lo=0, hi=1, step=0.0005, keys="speed.knob")
    schedule: str = knob("constant", kind="choice", choices=SCHEDULES, keys="speed.knob")
    tta: bool = knob(False, kind="bool", keys="speed.knob")
    # the fast pipeline's whole step replayed as one CUDA graph (core/graphs.py)
    cuda_graphs: bool = knob(False, kind="bool", preset=False)

    def __post_init__(self) -> None:
        if isinstance(self.model, Mapping):
            object.__setattr__(self, "model", ModelSpec.from_dict(self.model))
        if self.model is None and self.net in NETS:  # the named network's own shape
            object.__setattr__(self, "model", net_spec(self.net))
        for f in knobs(type(self)):  # 1 -> 1.0 for floats; " CPU " -> "cpu"
            value = getattr(self, f.name)
            if f.knob.kind == "float" and is_int(value):
                object.__setattr__(self, f.name, float(value))
            elif f.knob.kind == "device" and isinstance(value, str):
                object.__setattr__(self, f.name, value.strip().lower())
        problems = _field_problems(type(self), {f.name: getattr(self, f.name)
                                                for f in dataclasses.fields(self)})
        if problems:
            raise ConfigError(problems)

    # -- checking -----------------------------------------------------------------------
    def check_runtime(self, n_train: int | None = None):
        """The ``torch.device`` of a config nobody admitted, checked against this machine and
        the data (ConfigError, DeviceError)."""
        from cifarlab.core.devices import resolve_device  # devices imports torch: on demand

        device = resolve_device(self.device)  # raises DeviceError naming the devices present
        problems = validate(self, n_train=n_train)
        if problems:
            raise ConfigError(problems)
        return device

    # -- derived -------------------------------------------------------------------------
    def images_per_epoch(self, n_train: int) -> int:
        n = min(n_train, self.train_subset) if self.train_subset else n_train
        return n - val_count(n, self.val_fraction)

    def steps_per_epoch(self, n_train: int) -> int:
        return math.ceil(self.images_per_epoch(n_train) / self.batch_size)

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes``; a new ``net`` brings its own network unless ``model`` is
        given too (a config never holds a net with another network's shape)."""
        if "model" not in changes and changes.get("net", self.net) != self.net:
            changes["model"] = None
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["model"] = self.model.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainConfig:
        """A config from a mapping anyone may have written: checked as it is built."""
        d = _migrate(d)
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError([Problem("config", "config.unknown",
                                       {"names": ", ".join(sorted(unknown))})])
        return cls(**d)

    @classmethod
    def admitted(cls, d: Mapping[str, Any]) -> TrainConfig:
        """The config ``JobQueue.submit`` admitted, from its ``to_dict()``: rebuilt as it is,
        **not checked again** (the submit was the authority). Anything else: ``from_dict``."""
        d = _migrate(d)
        config = object.__new__(cls)
        for f in dataclasses.fields(cls):
            object.__setattr__(config, f.name, d.get(f.name, f.default))
        model = config.model
        object.__setattr__(config, "model", net_spec(config.net) if model is None else
                           model if isinstance(model, ModelSpec) else ModelSpec.admitted(model))
        return config

    def on_device(self, device: str) -> TrainConfig:
        """This admitted config on the ``device`` its submit resolved "auto" (or "cuda") to."""
        config = copy.copy(self)
        object.__setattr__(config, "device", device)
        return config

    def knob_values(self, preset_only: bool = False) -> dict[str, Any]:
        """The knobs' values (those a preset sets, with ``preset_only``)."""
        return {f.name: getattr(self, f.name) for f in knobs(type(self))
                if f.knob.preset or not preset_only}

    def describe(self) -> str:
        """One line in English, for logs: the tutorial's settings, then the others changed."""
        sub = f", subset {self.train_subset}" if self.train_subset else ""
        tricks = "".join(f", {name} {getattr(self, name)}" for name in
                         ("val_fraction", "net", "activation", "augment", "label_smoothing",
                          "nesterov", "weight_decay", "schedule", "tta")
                         if getattr(self, name) != TrainConfig.__dataclass_fields__[name].default)
        return (f"{self.epochs} epoch(s), lr {self.lr:g}, momentum {self.momentum:g}, batch "
                f"{self.batch_size}, {self.num_workers} worker(s), {self.device}, "
                f"{self.pipeline} pipeline, seed {self.seed}{sub}{tricks}")


def val_count(n: int, fraction: float) -> int:
    """How many of ``n`` images a validation share holds out: at least one, never all."""
    return min(n - 1, max(1, round(n * fraction))) if fraction > 0 and n > 1 else 0


@functools.cache
def knobs(cls: type = TrainConfig) -> tuple[KnobField, ...]:
    """Every field of ``cls`` that carries a ``Knob``, its catalog keys filled in."""
    return tuple(KnobField(f.name, f.default, dataclasses.replace(
        k, label=k.label or f"{k.keys}.{f.name}", help=k.help or f"{k.keys}.{f.name}_help",
        error=k.error or f"config.{f.name}"))
        for f in dataclasses.fields(cls) if (k := f.metadata.get("knob")) is not None)


def same(a: Any, b: Any) -> bool:
    """One knob's two values are equal (floats to rounding; a box's text only to itself)."""
    if isinstance(a, str) or isinstance(b, str):   # a box's text that is no number yet
        return a == b
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def validate(values: Mapping[str, Any] | TrainConfig, *, limits: Limits | None = None,
             n_train: int | None = None, cls: type = TrainConfig) -> list[Problem]:
    """Every problem with ``values`` (a TrainConfig, or field -> value, missing fields taking
    defaults) under this server's ``limits`` and ``n_train`` training images; [] if fine."""
    built = isinstance(values, TrainConfig)
    if built:
        cls = type(values)
        values = {f.name: getattr(values, f.name) for f in dataclasses.fields(values)}
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - names
    if unknown:
        return [Problem("config", "config.unknown", {"names": ", ".join(sorted(unknown))})]
    full = {f.name: f.default for f in dataclasses.fields(cls)} | dict(values)
    problems = _field_problems(cls, full)
    if built and not isinstance(full["model"], ModelSpec):  # a built one always has its network
        problems.append(Problem("model", "config.model", {}))
    bad = {p.field for p in problems}
    limits = limits or Limits()
    epochs, subset, batch = full.get("epochs"), full.get("train_subset"), full.get("batch_size")

    def add(field_name: str, code: str, **params: Any) -> None:
        if field_name not in bad:
            problems.append(Problem(field_name, code, params))
            bad.add(field_name)

    if limits.max_epochs is not None and is_int(epochs) and epochs > limits.max_epochs:
        add("epochs", "config.epochs_limit", n=limits.max_epochs)
    workers = full.get("num_workers")
    if limits.max_num_workers is not None and is_int(workers) and workers > limits.max_num_workers:
        add("num_workers", "config.num_workers_limit", n=limits.max_num_workers)
    device = full.get("device")
    if (limits.devices is not None and isinstance(device, str) and device != "auto"
            and device.strip().lower() not in limits.devices):
        add("device", "config.device_missing", device=device,
            present=", ".join(limits.devices) or "cpu")
    if is_int(subset) and n_train is not None and subset > n_train:
        add("train_subset", "config.subset_data", n=n_train)
    images = subset if is_int(subset) else n_train
    if limits.max_train_images is not None and images is not None \
            and images > limits.max_train_images:
        add("train_subset", "config.subset_limit", n=limits.max_train_images)
    sizes = [x for x in (subset if is_int(subset) else None, n_train) if x is not None]
    if is_int(batch) and "train_subset" not in bad and sizes and batch > min(sizes):
        add("batch_size", "config.batch_data", batch=batch, n=min(sizes))
    return problems


def _field_problems(cls: type, values: Mapping[str, Any]) -> list[Problem]:
    """Each knob's own type and bounds (``core.knobs``); and the network's."""
    out = knob_problems(knobs(cls), values)
    model = values.get("model")
    if isinstance(model, ModelSpec):
        out.extend(model.problems())  # checked when it was made, unless changed since
    elif isinstance(model, Mapping):
        try:
            model = ModelSpec.from_dict(model)
        except ConfigError as err:
            out.extend(err.problems)
            model = None
    elif model is not None:
        out.append(Problem("model", "config.model", {}))
    out.extend(trick_problems({**values, "model": model}))
    return out


def _migrate(d: Mapping[str, Any]) -> dict[str, Any]:
    """A stored config as this version reads it: a named ``net`` beside the tutorial's
    ``model`` (written before the network lived in one place) meant the net's network."""
    d, model = dict(d), d.get("model")
    if isinstance(model, Mapping):
        with contextlib.suppress(ConfigError, TypeError, ValueError):
            model = ModelSpec.from_dict(model)
    if d.get("net") in NETS and d["net"] != "tutorial" and model == ModelSpec():
        d["model"] = None
    return d


def problems_by_field(problems: Iterable[Problem]) -> dict[str, Problem]:
    """The first problem of each field (a form shows one message per widget)."""
    out: dict[str, Problem] = {}
    for p in problems:
        out.setdefault(p.field, p)
    return out


# Presets are TrainConfig values; a preset sets the knobs marked ``preset`` (not the seed or
# the device, which stay as the student chose).
PRESETS: dict[str, TrainConfig] = {
    "tutorial": TrainConfig(),
    "quick": TrainConfig(epochs=1, train_subset=5000),
    "big_batch": TrainConfig(lr=0.01, batch_size=64, pipeline="fast"),
    "high_lr": TrainConfig(lr=0.01),
    # the best test accuracy in a minute of training on the 2-core CPU machine
    # (docs/benchmarks.md, section 13), and airbench94's recipe for a GPU (cited there)
    "one_minute_cpu": TrainConfig(epochs=2, lr=0.2, momentum=0.9, batch_size=256,
                                  pipeline="fast", net="bn3", augment="flip",
                                  label_smoothing=0.1, nesterov=True, weight_decay=0.0005,
                                  schedule="onecycle", tta=True),
    "gpu_fast": TrainConfig(epochs=10, lr=0.4, momentum=0.9, batch_size=512, pipeline="fast",
                            net="airbench", augment="flip_translate", label_smoothing=0.2,
                            nesterov=True, weight_decay=0.0005, schedule="onecycle", tta=True),
}
