"""Checkpoints: the model's ``state_dict`` plus the config, class names and results.

Saved atomically (a temp file in the same folder, fsync, rename), so a crash never leaves a torn
file under the real name. Loaded with ``torch.load(..., weights_only=True)``: a file that would
need arbitrary pickled code to load (a "malicious pickle") is refused. A plain ``state_dict``
saved by the tutorial itself (``torch.save(net.state_dict(), PATH)``) loads too.
"""
from __future__ import annotations

import os
import pickle
import tempfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.errors import CheckpointError, ConfigError, ShapeError

FORMAT = "cifarlab-checkpoint"
VERSION = 1


@dataclass
class Checkpoint:
    state_dict: "OrderedDict[str, torch.Tensor]"
    config: TrainConfig
    classes: tuple[str, ...]
    results: dict = field(default_factory=dict)
    plain: bool = False  # True when the file held only a tutorial-style state_dict

    def model(self):
        """A ``Net`` of the right shape with these weights loaded."""
        from cifarlab.core.model import Net

        try:
            net = Net(self.config.model, num_classes=len(self.classes))
            net.load_state_dict(self.state_dict)
        except (RuntimeError, ShapeError) as err:
            raise CheckpointError(
                "The weights in this checkpoint do not fit the network it describes: "
                f"{str(err).splitlines()[0]}") from None
        return net


def atomic_write_bytes(path: str | os.PathLike, write) -> Path:
    """Call ``write(fileobj)`` on a temp file beside ``path``, fsync it, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def save(path: str | os.PathLike, model: torch.nn.Module, config: TrainConfig,
         classes, results: dict | None = None) -> Path:
    state = OrderedDict((k, v.detach().cpu().clone()) for k, v in model.state_dict().items())
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "state_dict": state,
        "config": config.to_dict(),
        "classes": list(classes),
        "results": _plain(results or {}),
    }
    return atomic_write_bytes(path, lambda f: torch.save(payload, f))


def save_state_dict(path: str | os.PathLike, model_or_state) -> Path:
    """The tutorial's own format: ``torch.save(net.state_dict(), PATH)``, atomically."""
    state = model_or_state.state_dict() if hasattr(model_or_state, "state_dict") else model_or_state
    state = OrderedDict((k, v.detach().cpu()) for k, v in state.items())
    return atomic_write_bytes(path, lambda f: torch.save(state, f))


def load(path_or_file, map_location="cpu") -> Checkpoint:
    """Load a checkpoint (ours, or a plain tutorial state_dict) safely onto ``map_location``."""
    name = getattr(path_or_file, "name", str(path_or_file))
    if isinstance(path_or_file, (str, os.PathLike)) and not Path(path_or_file).is_file():
        raise CheckpointError(f"No checkpoint file at '{path_or_file}'.")
    try:
        obj = torch.load(path_or_file, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise CheckpointError(
            f"'{Path(name).name}' was refused: it holds Python objects that could run code when "
            "loaded, so it is not a safe checkpoint. Only weights (state_dict) files are accepted."
            f" ({str(err).splitlines()[0][:160]})") from None
    except Exception as err:  # torn, truncated or foreign: the unpickler raises all sorts
        raise CheckpointError(
            f"'{Path(name).name}' is not a readable PyTorch checkpoint (it may be torn, truncated "
            f"or another kind of file): {str(err).splitlines()[0][:160]}") from None
    return _interpret(obj, name)


def _interpret(obj, name) -> Checkpoint:
    if isinstance(obj, dict) and obj.get("format") == FORMAT:
        try:
            config = TrainConfig.from_dict(obj["config"])
        except (ConfigError, KeyError, TypeError) as err:
            raise CheckpointError(f"'{Path(name).name}' has an invalid config: {err}") from None
        state = obj.get("state_dict")
        if not _is_state_dict(state):
            raise CheckpointError(f"'{Path(name).name}' has no weights in it.")
        return Checkpoint(OrderedDict(state), config, tuple(obj.get("classes") or CIFAR10_CLASSES),
                          dict(obj.get("results") or {}))
    if _is_state_dict(obj):
        return Checkpoint(OrderedDict(obj), TrainConfig(), tuple(CIFAR10_CLASSES), {}, plain=True)
    raise CheckpointError(
        f"'{Path(name).name}' is a PyTorch file, but not a CIFAR Lab checkpoint or a model "
        "state_dict.")


def _is_state_dict(obj) -> bool:
    return (isinstance(obj, dict) and len(obj) > 0
            and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()))


def _plain(obj):
    """Results as plain Python (lists, dicts, numbers, strings) so weights_only can load them."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)
