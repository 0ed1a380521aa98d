"""The one frozen, validated config that travels from widget to worker to checkpoint to script.

Defaults are the tutorial's: 2 epochs, SGD with lr 0.001 and momentum 0.9, batch 4, 2 loader
workers, CrossEntropyLoss, the tutorial's ``Net``.

    cfg = TrainConfig()                      # the tutorial as written
    cfg = TrainConfig(lr=0.01, batch_size=64)
    TrainConfig.check(lr=-1)                 # -> {"lr": "The learning rate must be ..."}
    TrainConfig.from_dict(cfg.to_dict()) == cfg

Construction validates everything that does not depend on the machine or the data and raises
``ConfigError`` (with ``.errors``: field -> message) listing every bad value at once. What does
depend on them (is the device present? is the batch larger than the data?) is checked by
``check_runtime`` just before training.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any

from cifarlab.errors import ConfigError

PIPELINES = ("tutorial", "fast")
# CIFAR-10's label order (0..9). The tutorial prints short names: plane, car, bird, ...
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")
TUTORIAL_SHORT_NAMES = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                        "truck")
_DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
MAX_EPOCHS = 500
MAX_BATCH = 65536
MAX_WORKERS = 64


@dataclass(frozen=True)
class ModelSpec:
    """The network's shape. The defaults build the tutorial's ``Net`` exactly.

    ``channels``: output channels of conv1 and conv2; ``kernels``/``paddings``/``strides``: one
    per conv; ``pool``: the max-pool kernel (= stride) after each conv; ``hidden``: the sizes of
    fc1 and fc2; ``width``: a multiplier applied to channels and hidden sizes.
    ``fc1``'s input size is never stored: it comes from the shape trace.
    """

    channels: tuple[int, int] = (6, 16)
    kernels: tuple[int, int] = (5, 5)
    paddings: tuple[int, int] = (0, 0)
    strides: tuple[int, int] = (1, 1)
    pool: int = 2
    hidden: tuple[int, int] = (120, 84)
    width: int = 1

    def __post_init__(self) -> None:
        for name in ("channels", "kernels", "paddings", "strides", "hidden"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        errors = self.errors()
        if errors:
            raise ConfigError(errors)

    def errors(self) -> dict[str, str]:
        errs: dict[str, str] = {}

        def pair(name: str, lo: int, hi: int, what: str) -> None:
            value = getattr(self, name)
            if (not isinstance(value, tuple) or len(value) != 2
                    or not all(_is_int(v) for v in value)):
                errs[f"model.{name}"] = f"{what} must be two whole numbers, one per conv layer."
            elif not all(lo <= v <= hi for v in value):
                errs[f"model.{name}"] = f"{what} must be between {lo} and {hi} (got {list(value)})."

        pair("channels", 1, 1024, "The conv channels")
        pair("kernels", 1, 31, "The kernel sizes")
        pair("paddings", 0, 15, "The paddings")
        pair("strides", 1, 8, "The strides")
        pair("hidden", 1, 8192, "The hidden layer sizes")
        if not _is_int(self.pool) or not 1 <= self.pool <= 8:
            errs["model.pool"] = "The pooling size must be a whole number from 1 to 8."
        if not _is_int(self.width) or not 1 <= self.width <= 16:
            errs["model.width"] = "The width multiplier must be a whole number from 1 to 16."
        return errs

    @property
    def is_tutorial(self) -> bool:
        return self == ModelSpec()

    def scaled_channels(self) -> tuple[int, int]:
        return (self.channels[0] * self.width, self.channels[1] * self.width)

    def scaled_hidden(self) -> tuple[int, int]:
        return (self.hidden[0] * self.width, self.hidden[1] * self.width)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "ModelSpec":
        d = dict(d or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError({"model": f"Unknown model setting(s): {', '.join(sorted(unknown))}."})
        return cls(**d)


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs. Defaults: the tutorial as written."""

    epochs: int = 2
    lr: float = 0.001
    momentum: float = 0.9
    batch_size: int = 4
    num_workers: int = 2
    device: str = "auto"
    pipeline: str = "tutorial"
    seed: int = 0
    train_subset: int | None = None
    shuffle: bool = True
    model: ModelSpec = field(default_factory=ModelSpec)
    log_every: int = 2000  # the tutorial prints the running loss every 2,000 mini-batches

    def __post_init__(self) -> None:
        if isinstance(self.model, dict):
            object.__setattr__(self, "model", ModelSpec.from_dict(self.model))
        if isinstance(self.lr, int) and not isinstance(self.lr, bool):
            object.__setattr__(self, "lr", float(self.lr))
        if isinstance(self.momentum, int) and not isinstance(self.momentum, bool):
            object.__setattr__(self, "momentum", float(self.momentum))
        if isinstance(self.device, str):
            object.__setattr__(self, "device", self.device.strip().lower())
        errors = _errors(self)
        if errors:
            raise ConfigError(errors)

    # -- checking -----------------------------------------------------------------------
    @classmethod
    def check(cls, **values: Any) -> dict[str, str]:
        """Every problem with these values, field -> message; empty when they are fine."""
        try:
            cls(**values)
        except ConfigError as err:
            return err.errors
        except TypeError as err:  # unknown keyword
            return {"config": f"Unknown setting: {err}"}
        return {}

    def check_runtime(self, n_train: int | None = None) -> None:
        """Check what depends on this machine and the data; raise ConfigError or DeviceError."""
        from cifarlab.core.devices import resolve_device  # local import: devices imports torch

        resolve_device(self.device)  # raises DeviceError naming the devices present
        errs: dict[str, str] = {}
        if n_train is not None:
            n = min(n_train, self.train_subset) if self.train_subset else n_train
            if self.batch_size > n:
                errs["batch_size"] = (
                    f"The batch size ({self.batch_size}) is larger than the training data "
                    f"({n} images). Choose a batch size of at most {n}.")
            if self.train_subset and self.train_subset > n_train:
                errs["train_subset"] = (
                    f"The training subset ({self.train_subset}) is larger than the training data "
                    f"({n_train} images). Leave it empty to use all of it.")
        if errs:
            raise ConfigError(errs)

    # -- derived -------------------------------------------------------------------------
    def steps_per_epoch(self, n_train: int) -> int:
        n = min(n_train, self.train_subset) if self.train_subset else n_train
        return math.ceil(n / self.batch_size)

    def replace(self, **changes: Any) -> "TrainConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["model"] = self.model.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        d = dict(d)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError({"config": f"Unknown setting(s): {', '.join(sorted(unknown))}."})
        return cls(**d)

    def describe(self) -> str:
        """One line, for logs and run lists."""
        sub = f", subset {self.train_subset}" if self.train_subset else ""
        return (f"{self.epochs} epoch(s), lr {self.lr:g}, momentum {self.momentum:g}, batch "
                f"{self.batch_size}, {self.num_workers} worker(s), {self.device}, "
                f"{self.pipeline} pipeline, seed {self.seed}{sub}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _errors(c: TrainConfig) -> dict[str, str]:
    errs: dict[str, str] = {}
    if not _is_int(c.epochs) or c.epochs < 1:
        errs["epochs"] = "The number of epochs must be a whole number of at least 1."
    elif c.epochs > MAX_EPOCHS:
        errs["epochs"] = f"At most {MAX_EPOCHS} epochs, please."
    if not _is_number(c.lr) or not math.isfinite(c.lr) or c.lr <= 0:
        errs["lr"] = ("The learning rate must be a number greater than 0 (the tutorial uses "
                      "0.001).")
    elif c.lr > 10:
        errs["lr"] = "A learning rate above 10 only makes the loss explode; try 0.001 to 0.1."
    if not _is_number(c.momentum) or not math.isfinite(c.momentum) or not 0 <= c.momentum < 1:
        errs["momentum"] = ("The momentum must be at least 0 and below 1 (the tutorial uses "
                            "0.9; 0 means plain SGD).")
    if not _is_int(c.batch_size) or c.batch_size < 1:
        errs["batch_size"] = "The batch size must be a whole number of at least 1 (the tutorial uses 4)."
    elif c.batch_size > MAX_BATCH:
        errs["batch_size"] = f"The batch size must be at most {MAX_BATCH}."
    if not _is_int(c.num_workers) or c.num_workers < 0:
        errs["num_workers"] = ("num_workers must be a whole number of 0 or more (0 loads the data "
                               "in the training process itself).")
    elif c.num_workers > MAX_WORKERS:
        errs["num_workers"] = f"num_workers must be at most {MAX_WORKERS}."
    if not isinstance(c.device, str) or not _DEVICE_RE.match(c.device):
        errs["device"] = ("The device must be 'auto', 'cpu', 'mps' or 'cuda:N' (for example "
                          "'cuda:0').")
    if c.pipeline not in PIPELINES:
        errs["pipeline"] = "The input pipeline must be 'tutorial' or 'fast'."
    if not _is_int(c.seed) or not 0 <= c.seed < 2**63:
        errs["seed"] = "The seed must be a whole number of 0 or more."
    if c.train_subset is not None and (not _is_int(c.train_subset) or c.train_subset < 1):
        errs["train_subset"] = ("The training subset must be a whole number of images (at least 1), "
                                "or empty for all of them.")
    if not isinstance(c.shuffle, bool):
        errs["shuffle"] = "shuffle must be true or false."
    if not _is_int(c.log_every) or c.log_every < 1:
        errs["log_every"] = "log_every must be a whole number of at least 1."
    if not isinstance(c.model, ModelSpec):
        errs["model"] = "model must be a ModelSpec."
    return errs
