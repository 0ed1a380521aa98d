"""Checkpoints: saved atomically, loaded with ``weights_only=True``; a checkpoint may be an
upload, so its sizes and shapes are checked before anything big is allocated."""
from __future__ import annotations

import contextlib
import errno
import io
import os
import pickle
import tempfile
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.core.model import Net
from cifarlab.core.shapes import total_params, trace_spec
from cifarlab.errors import CheckpointError, ConfigError, ShapeError

FORMAT = "cifarlab-checkpoint"
VERSION = 1

# The largest network a checkpoint may hold: the tutorial's Net at width 16 (15.5 M parameters,
# 62 MB of float32) fits. Its weights, plus the pickled config, class names and results, fit in
# the largest file accepted, which every upload limit of the app derives from.
MAX_UPLOAD_PARAMS = 16_000_000
METADATA_BYTES = 2 * 2**20                 # data.pkl and the zip's small records
MAX_CHECKPOINT_BYTES = -(-(MAX_UPLOAD_PARAMS * 4 + METADATA_BYTES) // 2**20) * 2**20  # 64 MiB
MAX_RATIO = 20                             # unpacked / packed, for records over 1 MiB
MAX_CLASSES = 1000


@dataclass
class Checkpoint:
    state_dict: OrderedDict[str, torch.Tensor]
    config: TrainConfig
    classes: tuple[str, ...]
    results: dict = field(default_factory=dict)
    plain: bool = False  # True when the file held only a tutorial-style state_dict
    name: str = ""       # the file's name, for messages

    def model(self):
        """A ``Net`` holding these weights (checked by ``load``), built on the ``meta`` device
        so that the loaded tensors themselves are its weights (in memory once, not twice)."""
        try:
            with torch.device("meta"):
                net = Net(self.config.model, num_classes=len(self.classes),
                          activation=self.config.activation)
            net.load_state_dict({k: v.to(torch.float32) for k, v in self.state_dict.items()},
                                assign=True)
        except (RuntimeError, ShapeError):
            raise CheckpointError("checkpoint.weights_do_not_fit", name=self.name or "?") \
                from None
        return net


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def atomic_write_bytes(path: str | os.PathLike, write) -> Path:
    """``write(fileobj)`` into a temp file beside ``path``, fsynced, renamed into place; a full
    disk (or quota) leaves nothing behind and is ``CheckpointError("checkpoint.disk_full")``."""
    path, tmp = Path(path), None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        if isinstance(err, OSError) and err.errno in DISK_FULL_ERRNOS:
            raise CheckpointError("checkpoint.disk_full", name=path.name, path=str(path)) \
                from err
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
    # into memory first: an error while writing is then the file system's own (ENOSPC), never
    # torch's garbled one from inside its zip writer
    buf = io.BytesIO()
    torch.save(payload, buf)
    return atomic_write_bytes(path, lambda f: f.write(buf.getbuffer()))


def load(path_or_file, map_location="cpu", max_params: int | None = MAX_UPLOAD_PARAMS,
         max_bytes: int = MAX_CHECKPOINT_BYTES) -> Checkpoint:
    """A checkpoint (ours, or the tutorial's plain state_dict); CheckpointError before anything
    big is allocated if it is too large (``max_params`` None: no limit), torn, foreign or code."""
    if isinstance(path_or_file, (str, os.PathLike)):
        if not Path(path_or_file).is_file():
            raise CheckpointError("checkpoint.missing", path=str(path_or_file))
        with open(path_or_file, "rb") as f:
            return load(f, map_location, max_params, max_bytes)
    name = Path(getattr(path_or_file, "name", None) or "?").name
    check_archive(path_or_file, name, max_bytes)
    try:
        obj = torch.load(path_or_file, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        raise CheckpointError("checkpoint.unsafe", name=name) from None
    except Exception:  # noqa: BLE001 - torn, truncated or foreign: the unpickler raises all sorts
        raise CheckpointError("checkpoint.not_readable", name=name) from None
    return _interpret(obj, name, max_params)


def check_archive(f, name: str, max_bytes: int = MAX_CHECKPOINT_BYTES) -> None:
    """Refuse a file whose zip directory promises more than ``max_bytes`` once unpacked (or is
    not a zip at all), reading only the directory. Leaves ``f`` at its start."""
    f.seek(0, io.SEEK_END)
    size = f.tell()
    f.seek(0)
    if size == 0:
        raise CheckpointError("checkpoint.empty", name=name)
    if size > max_bytes:
        raise CheckpointError("checkpoint.file_too_large", name=name, size_mb=size / 2**20,
                              limit_mb=max_bytes / 2**20)
    try:
        # torch.save has written zips since PyTorch 1.6; the older format declares its storage
        # sizes inside the pickle, where they cannot be checked before they are allocated.
        with zipfile.ZipFile(f) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise CheckpointError("checkpoint.not_readable", name=name) from None
    finally:
        f.seek(0)
    unpacked = sum(r.file_size for r in records)
    if unpacked > max_bytes:
        raise CheckpointError("checkpoint.unpacks_too_large", name=name, size=unpacked,
                              limit=max_bytes, size_mb=unpacked / 2**20,
                              limit_mb=max_bytes / 2**20)
    for r in records:
        if r.file_size > 2**20 and r.file_size > MAX_RATIO * max(1, r.compress_size):
            raise CheckpointError("checkpoint.compression_ratio", name=name, record=r.filename,
                                  ratio=r.file_size // max(1, r.compress_size))
        if r.filename.endswith("data.pkl") and r.file_size > METADATA_BYTES:
            raise CheckpointError("checkpoint.metadata_too_large", name=name,
                                  size_mb=r.file_size / 2**20, limit_mb=METADATA_BYTES / 2**20)


def _interpret(obj, name: str, max_params: int | None) -> Checkpoint:
    if isinstance(obj, dict) and obj.get("format") == FORMAT:
        try:
            config = TrainConfig.from_dict(obj["config"])
        except (ConfigError, KeyError, TypeError, ValueError) as err:
            raise CheckpointError("checkpoint.bad_config", name=name,
                                  setting=getattr(err, "field", None) or "config") from None
        classes = obj.get("classes") or CIFAR10_CLASSES
        if (not isinstance(classes, (list, tuple)) or not 1 <= len(classes) <= MAX_CLASSES
                or not all(isinstance(c, str) and 0 < len(c) <= 100 for c in classes)):
            raise CheckpointError("checkpoint.bad_classes", name=name, limit=MAX_CLASSES)
        state = obj.get("state_dict")
        if not _is_state_dict(state):
            raise CheckpointError("checkpoint.no_weights", name=name)
        results = obj.get("results")
        ckpt = Checkpoint(OrderedDict(state), config, tuple(classes),
                          dict(results) if isinstance(results, dict) else {}, name=name)
    elif _is_state_dict(obj):
        ckpt = Checkpoint(OrderedDict(obj), TrainConfig(), tuple(CIFAR10_CLASSES), {}, plain=True,
                          name=name)
    else:
        raise CheckpointError("checkpoint.not_ours", name=name)
    params = network_params(ckpt.config, len(ckpt.classes), name)
    if max_params is not None and params > max_params:
        raise CheckpointError("checkpoint.too_large", name=name, params=params, limit=max_params)
    check_weights(ckpt.state_dict, ckpt.config, len(ckpt.classes), name)
    return ckpt


def network_params(config: TrainConfig, num_classes: int, name: str = "") -> int:
    """Learnable parameters of ``config``'s network, by arithmetic: nothing is allocated."""
    try:
        return total_params(trace_spec(config.model, num_classes=num_classes))
    except ShapeError as err:
        raise CheckpointError("checkpoint.bad_network", name=name, layer=err.layer or "?") \
            from None


def check_weights(state: dict, config: TrainConfig, num_classes: int, name: str) -> None:
    """Every tensor the network needs, of its shape and backed by its own numbers, and no
    other: against the network built on the ``meta`` device (shapes, no memory)."""
    with torch.device("meta"):
        net_state = Net(config.model, num_classes=num_classes).state_dict()
    wanted = {k: tuple(v.shape) for k, v in net_state.items()}
    # batch norm's num_batches_tracked is a whole number; everything else floats
    counters = {k for k, v in net_state.items() if not v.dtype.is_floating_point}
    for key, shape in wanted.items():
        if key not in state:
            raise CheckpointError("checkpoint.missing_weights", name=name, weights=key)
        t = state[key]
        if tuple(t.shape) != shape:
            raise CheckpointError("checkpoint.wrong_shape", name=name, weights=key,
                                  shape=_dims(t.shape), expected=_dims(shape))
        if (t.layout != torch.strided or t.dtype.is_floating_point == (key in counters)
                or t.is_quantized
                or t.untyped_storage().nbytes() < t.numel() * t.element_size()):
            raise CheckpointError("checkpoint.bad_tensor", name=name, weights=key)
    extra = sorted(set(state) - set(wanted))
    if extra:
        raise CheckpointError("checkpoint.unexpected_weights", name=name, weights=extra[0])


def _dims(shape) -> str:
    return "×".join(str(int(n)) for n in shape) or "()"


def _is_state_dict(obj) -> bool:
    return (isinstance(obj, dict) and len(obj) > 0
            and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()))


def _plain(obj):
    """Results as plain Python (lists, dicts, numbers, strings) so weights_only can load them;
    any key as its text (a run must not fail at its save for a key JSON would refuse)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)
