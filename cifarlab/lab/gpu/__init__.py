"""The CPU vs GPU timing lab: the same training step on every device, swept over batch size
and network width, timed honestly.

    cfg = SweepConfig(devices=("cpu", "cuda:0"), batch_sizes=(4, 64, 1024), widths=(1, 8))
    result = run_sweep(cfg, on_result=print)          # one row per point
    result.to_json("h100.json"); SweepResult.load("h100.json").recorded_elsewhere  # -> True
    speedups(result); crossover(result); explain_tutorial_point(result)
    breakdown("cuda:0", 256, 1)     # seconds per step in data, h2d, forward, backward, optimizer

What "honest" means here (the rules airbench follows too):
- The step is the one training does: Net(ModelSpec(width=w)), CrossEntropyLoss, SGD(lr 0.001,
  momentum 0.9): zero_grad, forward, loss, backward, step. No loss.item() inside the timed loop.
- Warm-up steps run first and are measured apart (first_step_ms, warmup_s): the first call pays
  for cuDNN autotuning (benchmark mode is on during timing runs only), kernel loading, the
  allocator growing and the DataLoader workers starting. They are never in the timed figures.
- Accelerators run asynchronously, so the device is synchronised before every clock read.
- Each point is timed `repeats` times; the rows give the median and the spread (min, quartiles,
  max) of the time per step. images/s = batch size / median step time; an epoch is 50,000 images.
- A point has a time budget (max_seconds): steps are cut short, never the warm-up's first step
  nor the first step of a repeat, and timed_steps says how many steps were really timed.
- Pipelines: `fast` keeps the uint8 images on the device (airbench's trick) and per batch
  gathers and normalises them there, as data.FastLoader does; `tutorial` is a DataLoader (PIL image -> ToTensor -> Normalize per
  image, `num_workers` processes) with a `.to(device)` per batch (pinned memory, non_blocking).
- The split of a step into phases (data, host->device copy, forward, backward, optimizer) is a
  separate pass, `breakdown`: synchronising between phases perturbs the total, so those figures
  are never mixed with the sweep's. On CUDA it can use events instead (method="cuda_events").
- Running out of memory at a huge batch x width is a result (error="out of memory"), not a crash.

Results carry the hardware and versions (`environment`), and save and load as JSON and CSV with
an exact round trip. A loaded result is marked as recorded elsewhere (host and date), so a
classroom without a GPU can show figures recorded on one.

This module imports torch only inside the functions that run work, so that `python -m cifarlab
shapes` (whose parser registers `bench` from here) stays quick to start.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import re
import socket
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from cifarlab.core.config import MAX_BATCH, PIPELINES, TrainConfig
from cifarlab.errors import CifarLabError, ConfigError, DataError

EPOCH_IMAGES = 50_000                 # CIFAR-10's training set: one epoch
TUTORIAL_POINT = ("tutorial", 4, 1)   # pipeline, batch size, width: the tutorial as written
TUTORIAL_EPOCHS = 2
THIS_MACHINE = "this machine"
OOM = "out of memory"
WARMUP_SHARE = 0.25                   # at most this share of a point's budget goes to warm-up
STOP_POLL_SECONDS = 0.25              # how often should_stop() is asked during a point
RESULTS_DIR = Path(__file__).resolve().parent.parent / "docs" / "gpu-results"
FORMAT = "cifarlab-timing"
FORMAT_VERSION = 1
_DEVICE_RE = re.compile(r"^(cpu|mps|cuda:\d+)$")

# One row per measured point. Types drive the CSV round trip: int/float may be None (not
# measured, or the point failed); str is "" when empty; bool is never None.
COLUMNS: dict[str, type] = {
    "device": str, "device_kind": str, "device_name": str, "device_memory_bytes": int,
    "pipeline": str, "batch_size": int, "width": int, "params": int, "tutorial_point": bool,
    "images": str, "num_workers": int,
    "steps": int, "repeats": int, "timed_steps": int, "budget_hit": bool,
    "warmup_steps": int, "warmup_s": float, "first_step_ms": float, "setup_s": float,
    "step_ms": float, "step_ms_min": float, "step_ms_q1": float, "step_ms_q3": float,
    "step_ms_max": float,
    "images_per_s": float, "images_per_s_min": float, "images_per_s_max": float,
    "epoch_s": float,
    "peak_memory_bytes": int, "loss": float, "load_1m": float, "error": str,
    "host": str, "recorded_at": str, "torch": str, "cuda": str,
}
PHASES = ("data", "h2d", "forward", "backward", "optimizer")
BREAKDOWN_COLUMNS: dict[str, type] = {
    "pass": str, "method": str, "device": str, "device_name": str, "pipeline": str,
    "batch_size": int, "width": int, "images": str, "num_workers": int, "steps": int,
    **{f"{p}_s": float for p in PHASES}, "total_s": float, "step_s": float, "error": str,
    "host": str, "recorded_at": str,
}


# -----------------------------------------------------------------------------
# the sweep's settings

@dataclass(frozen=True)
class SweepConfig:
    """What to measure. Frozen; bad values raise ConfigError naming every bad field.

    devices: () means every device this machine has. steps: timed steps per repeat.
    max_seconds: time budget per point (None: no cap). num_workers: the tutorial pipeline's
    DataLoader processes (the tutorial uses 2). images: "synthetic" (random uint8 images, no data
    set needed) or "real" (a fixed random slice of the training set). breakdown: also run the
    phase breakdown pass for every device, pipeline and batch size at the smallest width.
    """

    devices: tuple[str, ...] = ()
    batch_sizes: tuple[int, ...] = (4, 16, 64, 256, 1024)
    widths: tuple[int, ...] = (1, 2, 4, 8)
    pipelines: tuple[str, ...] = ("fast", "tutorial")
    steps: int = 50
    warmup: int = 5
    repeats: int = 3
    max_seconds: float | None = 10.0
    num_workers: int = 2
    images: str = "synthetic"
    breakdown: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("devices", "batch_sizes", "widths", "pipelines"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = tuple(v for v in value.replace(" ", "").split(",") if v)
            if isinstance(value, (list, tuple)):
                value = tuple(dict.fromkeys(value))  # drop repeats, keep the order
            object.__setattr__(self, name, value)
        if isinstance(self.devices, tuple) and all(isinstance(d, str) for d in self.devices):
            devs = tuple(dict.fromkeys("cuda:0" if d.strip().lower() == "cuda" else d.strip().lower()
                                       for d in self.devices))
            object.__setattr__(self, "devices", () if "all" in devs else devs)
        if _is_int(self.max_seconds):
            object.__setattr__(self, "max_seconds", float(self.max_seconds))
        errors = self.errors()
        if errors:
            raise ConfigError(errors)

    def errors(self) -> dict[str, str]:
        errs: dict[str, str] = {}
        if not isinstance(self.devices, tuple) or not all(
                isinstance(d, str) and _DEVICE_RE.match(d) for d in self.devices):
            errs["devices"] = ("Devices must be 'cpu', 'mps' or 'cuda:N' (for example "
                               "'cpu,cuda:0'), or 'all'.")
        if (not isinstance(self.batch_sizes, tuple) or not self.batch_sizes
                or not all(_is_int(b) and 1 <= b <= MAX_BATCH for b in self.batch_sizes)):
            errs["batch_sizes"] = (f"Batch sizes must be whole numbers from 1 to {MAX_BATCH} "
                                   "(for example 4,16,64,256,1024).")
        if (not isinstance(self.widths, tuple) or not self.widths
                or not all(_is_int(w) and 1 <= w <= 16 for w in self.widths)):
            errs["widths"] = "Width multipliers must be whole numbers from 1 to 16 (for example 1,2,4,8)."
        if (not isinstance(self.pipelines, tuple) or not self.pipelines
                or not all(p in PIPELINES for p in self.pipelines)):
            errs["pipelines"] = "Pipelines must be 'fast', 'tutorial' or both."
        if not _is_int(self.steps) or not 1 <= self.steps <= 100_000:
            errs["steps"] = "The number of timed steps must be a whole number from 1 to 100000."
        if not _is_int(self.warmup) or not 0 <= self.warmup <= 10_000:
            errs["warmup"] = "The number of warm-up steps must be a whole number from 0 to 10000."
        if not _is_int(self.repeats) or not 1 <= self.repeats <= 1000:
            errs["repeats"] = "The number of repeats must be a whole number from 1 to 1000."
        if self.max_seconds is not None and (
                not isinstance(self.max_seconds, float) or not math.isfinite(self.max_seconds)
                or self.max_seconds <= 0):
            errs["max_seconds"] = ("The time budget per point must be a number of seconds above 0, "
                                   "or empty for no limit.")
        if not _is_int(self.num_workers) or not 0 <= self.num_workers <= 64:
            errs["num_workers"] = "num_workers must be a whole number from 0 to 64."
        if self.images not in ("synthetic", "real"):
            errs["images"] = "images must be 'synthetic' or 'real'."
        if not isinstance(self.breakdown, bool):
            errs["breakdown"] = "breakdown must be true or false."
        if not _is_int(self.seed) or self.seed < 0:
            errs["seed"] = "The seed must be a whole number of 0 or more."
        return errs

    def resolved_devices(self) -> list[str]:
        """The devices to measure, checked against this machine (DeviceError if one is absent).

        The cpu comes first, so that speedups can be shown as soon as an accelerator row is in.
        """
        from cifarlab.core.devices import device_ids, resolve_device

        devices = list(self.devices) or device_ids()
        for d in devices:
            resolve_device(d)
        return sorted(devices, key=lambda d: d != "cpu")

    def points(self, devices: list[str] | None = None) -> list[dict]:
        """Every point the sweep measures, in order: the tutorial's own point first, then width by
        width, pipeline by pipeline, batch by batch, with the devices innermost (so a sweep cut
        short still compares the devices on what it did measure)."""
        devices = self.resolved_devices() if devices is None else list(devices)
        out = [dict(device=d, pipeline=TUTORIAL_POINT[0], batch_size=TUTORIAL_POINT[1],
                    width=TUTORIAL_POINT[2], tutorial_point=True) for d in devices]
        for w in self.widths:
            for p in self.pipelines:
                for b in sorted(self.batch_sizes):
                    if (p, b, w) == TUTORIAL_POINT:
                        continue
                    out += [dict(device=d, pipeline=p, batch_size=b, width=w,
                                 tutorial_point=False) for d in devices]
        return out

    def breakdown_passes(self, devices: list[str] | None = None) -> list[dict]:
        """The breakdown pass (when cfg.breakdown): every device, pipeline and batch size at the
        smallest width, timed with synchronisation, and on CUDA with CUDA events as well."""
        devices = self.resolved_devices() if devices is None else list(devices)
        if not self.breakdown:
            return []
        return [dict(device=d, pipeline=p, batch_size=b, width=min(self.widths), method=m)
                for d in devices for p in self.pipelines for b in sorted(self.batch_sizes)
                for m in (("sync", "cuda_events") if d.startswith("cuda") else ("sync",))]

    def to_dict(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "SweepConfig":
        d = dict(d or {})
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError({"config": f"Unknown timing setting(s): {', '.join(sorted(unknown))}."})
        return cls(**d)


# -----------------------------------------------------------------------------
# results: rows + what they were measured on; JSON and CSV with an exact round trip

@dataclass
class SweepResult:
    rows: list[dict]
    environment: dict
    config: dict
    host: str
    recorded_at: str                       # ISO 8601, UTC
    breakdowns: list[dict] = field(default_factory=list)
    cancelled: bool = False
    source: str = THIS_MACHINE             # "this machine", or the file it was loaded from

    @property
    def recorded_elsewhere(self) -> bool:
        return self.source != THIS_MACHINE

    @property
    def recorded_on(self) -> str:
        """"this machine", or "<host>, <date>" for a result recorded elsewhere."""
        return THIS_MACHINE if not self.recorded_elsewhere else f"{self.host}, {self.recorded_at[:10]}"

    def ok_rows(self) -> list[dict]:
        return [r for r in self.rows if not r["error"]]

    def to_dataframe(self, breakdowns: bool = False):
        import pandas as pd

        columns = BREAKDOWN_COLUMNS if breakdowns else COLUMNS
        return pd.DataFrame.from_records(self.breakdowns if breakdowns else self.rows,
                                         columns=list(columns))

    # -- JSON
    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": FORMAT_VERSION, "host": self.host,
                "recorded_at": self.recorded_at, "cancelled": self.cancelled,
                "environment": self.environment, "config": self.config,
                "rows": self.rows, "breakdowns": self.breakdowns}

    @classmethod
    def from_dict(cls, d: dict, source: str = THIS_MACHINE) -> "SweepResult":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise DataError(f"{source}: this is not a CIFAR Lab timing result.")
        if d.get("version", 0) > FORMAT_VERSION:
            raise DataError(f"{source}: this timing result comes from a newer CIFAR Lab; update it.")
        return cls(rows=[_typed(r, COLUMNS) for r in d.get("rows", [])],
                   breakdowns=[_typed(r, BREAKDOWN_COLUMNS) for r in d.get("breakdowns", [])],
                   environment=d.get("environment", {}), config=d.get("config", {}),
                   host=d.get("host", ""), recorded_at=d.get("recorded_at", ""),
                   cancelled=bool(d.get("cancelled", False)), source=source)

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=1, allow_nan=False)
        if path is not None:
            _write_atomic(Path(path), text)
        return text

    @classmethod
    def from_json(cls, path: str | Path) -> "SweepResult":
        return cls.from_json_text(_read(path), source=str(path))

    @classmethod
    def from_json_text(cls, text: str | bytes, source: str = "recorded") -> "SweepResult":
        try:
            d = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise DataError(f"{source}: not a JSON timing result ({err}).")
        return cls.from_dict(d, source=source)

    # -- CSV: a first line "# cifarlab-timing {json}" keeps everything but the rows
    def to_csv(self, path: str | Path | None = None) -> str:
        meta = {k: v for k, v in self.to_dict().items() if k != "rows"}
        buf = io.StringIO()
        buf.write(f"# {FORMAT} {json.dumps(meta, allow_nan=False)}\n")
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in self.rows:
            writer.writerow(_cell(row.get(c)) for c in COLUMNS)
        text = buf.getvalue()
        if path is not None:
            _write_atomic(Path(path), text)
        return text

    @classmethod
    def from_csv(cls, path: str | Path) -> "SweepResult":
        return cls.from_csv_text(_read(path), source=str(path))

    @classmethod
    def from_csv_text(cls, text: str | bytes, source: str = "recorded") -> "SweepResult":
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{source}: not a text CSV file (it is not UTF-8).") from None
        lines = text.splitlines(keepends=True)
        meta = {"format": FORMAT}
        if lines and lines[0].startswith(f"# {FORMAT} "):
            try:
                meta = json.loads(lines.pop(0)[len(FORMAT) + 3:])
            except json.JSONDecodeError as err:
                raise DataError(f"{source}: the CSV's first line is damaged ({err}).")
        reader = csv.DictReader(lines)
        if not reader.fieldnames or not {"device", "batch_size", "width"} <= set(reader.fieldnames):
            raise DataError(f"{source}: this CSV has no device, batch_size and width columns; "
                            "it is not a CIFAR Lab timing result.")
        try:
            rows = [{c: _parse(r.get(c), t) for c, t in COLUMNS.items()} for r in reader]
        except ValueError as err:
            raise DataError(f"{source}: a value in the CSV cannot be read ({err}).")
        meta["rows"] = rows
        if not meta.get("host") and rows:
            meta["host"], meta["recorded_at"] = rows[0]["host"], rows[0]["recorded_at"]
        return cls.from_dict(meta, source=source)

    # -- either, by suffix
    def save(self, path: str | Path) -> Path:
        path = Path(path)
        if path.suffix.lower() == ".csv":
            self.to_csv(path)
        elif path.suffix.lower() == ".json":
            self.to_json(path)
        else:
            raise CifarLabError(f"Save timing results as .json or .csv, not '{path.name}'.",
                                field="out")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "SweepResult":
        suffix = Path(path).suffix.lower()
        if suffix == ".csv":
            return cls.from_csv(path)
        if suffix == ".json":
            return cls.from_json(path)
        raise CifarLabError(f"Timing results are .json or .csv files, not '{Path(path).name}'.")


def recorded_results(directory: str | Path | None = None) -> list[SweepResult]:
    """The results recorded in docs/gpu-results (JSON), newest first."""
    directory = Path(directory) if directory is not None else RESULTS_DIR
    results = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            results.append(SweepResult.from_json(path))
        except CifarLabError:
            continue
    return sorted(results, key=lambda r: r.recorded_at, reverse=True)


# -----------------------------------------------------------------------------
# devices: synchronising, settings for timing runs, cleaning up, running out of memory

def sync_for(device) -> Callable[[], None]:
    """The function that waits for all queued work on `device` (a no-op for the cpu)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return lambda: torch.cuda.synchronize(dev)
    if dev.type == "mps":
        return torch.mps.synchronize
    return lambda: None


@contextlib.contextmanager
def timing_settings(device):
    """cuDNN benchmark mode (autotuning, paid in the warm-up) for timing runs on CUDA only; the
    previous setting comes back afterwards. Work runs with `device` as the current CUDA device."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        yield
        return
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        with torch.cuda.device(dev):
            yield
    finally:
        torch.backends.cudnn.benchmark = before


def cleanup(device) -> None:
    """Free what one point left behind, so the next starts from the same state."""
    import gc

    import torch

    gc.collect()
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    elif dev.type == "mps":
        torch.mps.empty_cache()


def is_out_of_memory(err: BaseException) -> bool:
    import torch

    if isinstance(err, torch.OutOfMemoryError):
        return True
    msg = str(err).lower()
    return isinstance(err, RuntimeError) and any(
        s in msg for s in ("out of memory", "can't allocate memory", "not enough memory"))


def _loader_kwargs(device, num_workers: int) -> dict:
    """DataLoader settings for the tutorial pipeline: pinned memory when copying to CUDA (so the
    copy can be non_blocking), workers kept alive between epochs (started during setup)."""
    import multiprocessing

    import torch

    if multiprocessing.current_process().daemon:  # a daemonic job worker may not fork children
        num_workers = 0
    return {"num_workers": num_workers, "pin_memory": torch.device(device).type == "cuda",
            "persistent_workers": num_workers > 0}


# -----------------------------------------------------------------------------
# the workload: images, batches, the training step

def _images(data, batch_size: int, seed: int):
    """A fixed random slice of the training set (uint8 N×3×32×32, labels int64), or synthetic
    images of the same kind. Enough for 8 batches, and at least 2,048 images."""
    import numpy as np

    want = max(2048, 8 * batch_size)
    rng = np.random.default_rng(seed)
    if data is None:
        x = rng.integers(0, 256, size=(want, 3, 32, 32), dtype=np.uint8)
        return x, rng.integers(0, 10, size=want).astype(np.int64)
    n = int(len(data.train_y))
    if n < batch_size:
        raise ConfigError({"batch_sizes": f"The batch size ({batch_size}) is larger than the "
                                          f"training data ({n} images)."})
    idx = np.sort(rng.choice(n, size=min(want, n), replace=False))  # sorted: one pass over the memmap
    return np.ascontiguousarray(data.train_x[idx]), np.asarray(data.train_y[idx], dtype=np.int64)


class _TutorialImages:
    """The tutorial's Dataset: per image, a PIL image -> ToTensor -> Normalize((.5,)*3, (.5,)*3)."""

    def __init__(self, x, y):
        import numpy as np
        import torchvision.transforms as T

        self.x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # H×W×C, as torchvision's CIFAR10
        self.y = y
        self.transform = T.Compose([T.ToTensor(), T.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        from PIL import Image

        return self.transform(Image.fromarray(self.x[i])), int(self.y[i])


class _Batches:
    """Endless training batches for one pipeline. fetch() gives the next batch where the pipeline
    keeps it (the device for `fast`, the host for `tutorial`); to_device() moves it over."""

    def __init__(self, pipeline: str, x, y, batch_size: int, device, num_workers: int, seed: int):
        import torch

        self.device, self.batch_size = device, batch_size
        self.loader = self._it = None
        self.num_workers = 0
        if pipeline == "fast":  # as data.FastLoader: uint8 resident on the device, copied once
            self.x, self.y = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
            self.order, self.pos = None, len(y)
            self.generator = torch.Generator().manual_seed(seed)
            self.randperm, self.index_select = torch.randperm, torch.index_select
        else:
            kwargs = _loader_kwargs(device, num_workers)
            self.num_workers = kwargs["num_workers"]
            self.loader = torch.utils.data.DataLoader(
                _TutorialImages(x, y), batch_size=batch_size, shuffle=True, drop_last=True,
                generator=torch.Generator().manual_seed(seed), **kwargs)
            self._it = iter(self.loader)  # starts the workers now, not inside the timed steps

    def fetch(self):
        if self.loader is None:
            if self.pos + self.batch_size > len(self.y):  # a new epoch: a new order
                order = self.randperm(len(self.y), generator=self.generator)
                self.order, self.pos = order.to(self.device), 0
            idx = self.order[self.pos:self.pos + self.batch_size]
            self.pos += self.batch_size
            # gather on the device, then ToTensor + Normalize((.5,)*3, (.5,)*3) as two ops
            return (self.index_select(self.x, 0, idx).float().mul_(2.0 / 255.0).sub_(1.0),
                    self.index_select(self.y, 0, idx))
        try:
            return next(self._it)
        except StopIteration:
            self._it = iter(self.loader)
            return next(self._it)

    def to_device(self, inputs, labels):
        if inputs.device == self.device:
            return inputs, labels
        return (inputs.to(self.device, non_blocking=True),  # from pinned memory on CUDA
                labels.to(self.device, non_blocking=True))

    def next(self):
        return self.to_device(*self.fetch())

    def close(self) -> None:
        it, self._it, self.loader = self._it, None, None
        if it is not None and hasattr(it, "_shutdown_workers"):
            try:  # the measurement is done; a worker that dies while stopping changes nothing
                it._shutdown_workers()
            except Exception:  # noqa: BLE001
                pass


def _workload(width: int, device):
    """The training step's parts, as train.py builds them (defaults: the tutorial's)."""
    import torch.nn as nn
    import torch.optim as optim

    from cifarlab.core.config import ModelSpec
    from cifarlab.core.model import Net, count_params

    cfg = TrainConfig()
    model = Net(ModelSpec(width=width)).to(device)
    model.train()
    optimizer = optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    return model, nn.CrossEntropyLoss(), optimizer, count_params(model)


def _train_step(model, criterion, optimizer, inputs, labels):
    """One training step, exactly as in train.py and the tutorial."""
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    loss.backward()
    optimizer.step()
    return loss


class _Poll:
    """should_stop(), asked at most every STOP_POLL_SECONDS (it may be a database read)."""

    def __init__(self, should_stop: Callable[[], bool] | None):
        self.fn, self.next_at, self.stopped = should_stop, 0.0, False

    def __call__(self) -> bool:
        if self.fn is None or self.stopped:
            return self.stopped
        now = time.perf_counter()
        if now >= self.next_at:
            self.next_at = now + STOP_POLL_SECONDS
            self.stopped = bool(self.fn())
        return self.stopped


class _Stopped(Exception):
    pass


def _run_steps(n: int, budget: float | None, step: Callable[[], Any], sync, stop: _Poll):
    """Run up to n steps; stop early once `budget` seconds have passed (after at least one).

    The clock is read after synchronising. The budget check reads the host clock without
    synchronising (it only decides when to stop; the host is at most a queue ahead)."""
    sync()
    t0 = time.perf_counter()
    done, out = 0, None
    while done < n:
        out = step()
        done += 1
        if stop():
            raise _Stopped
        if budget is not None and time.perf_counter() - t0 >= budget:
            break
    sync()
    return done, time.perf_counter() - t0, out


# -----------------------------------------------------------------------------
# measuring one point

def measure_point(device, batch_size: int, width: int = 1, pipeline: str = "fast",
                  steps: int = 50, warmup: int = 5, repeats: int = 3, data=None,
                  max_seconds: float | None = None, num_workers: int = 2, seed: int = 0,
                  should_stop: Callable[[], bool] | None = None,
                  tutorial_point: bool | None = None) -> dict | None:
    """Time the training step at one point; a row (see COLUMNS), or None if should_stop() said so.

    data: a CifarData (a fixed random slice of its training set is used) or None (synthetic
    uint8 images). Out of memory gives a row with error="out of memory" and no figures.
    """
    from cifarlab.core.devices import resolve_device

    SweepConfig(devices=(str(device),), batch_sizes=(batch_size,), widths=(width,),
                pipelines=(pipeline,), steps=steps, warmup=warmup, repeats=repeats,
                max_seconds=max_seconds, num_workers=num_workers, seed=seed)  # validates
    dev = resolve_device(device)
    row = _blank_row(dev, pipeline, batch_size, width, data)
    row.update(steps=steps, repeats=repeats, num_workers=num_workers if pipeline == "tutorial" else 0,
               tutorial_point=(pipeline, batch_size, width) == TUTORIAL_POINT
               if tutorial_point is None else tutorial_point)
    measured, oom = None, False
    try:
        with timing_settings(dev):
            measured = _measure(dev, batch_size, width, pipeline, steps, warmup, repeats, data,
                                max_seconds, num_workers, seed, _Poll(should_stop))
    except _Stopped:
        measured = None
    except Exception as err:
        if not is_out_of_memory(err):
            raise
        oom = True  # handled after the except block, once the traceback (and its tensors) is gone
    cleanup(dev)
    row["load_1m"] = _load_1m()  # how busy the machine was: a busy one gives slow, noisy figures
    if oom:
        row["error"] = OOM
        return row
    if measured is None:
        return None
    row.update(measured)
    return row


def _measure(dev, batch_size, width, pipeline, steps, warmup, repeats, data, max_seconds,
             num_workers, seed, stop: _Poll) -> dict:
    import torch

    sync = sync_for(dev)
    t_setup = time.perf_counter()
    torch.manual_seed(seed)
    model, criterion, optimizer, params = _workload(width, dev)
    batches = _Batches(pipeline, *_images(data, batch_size, seed), batch_size, dev, num_workers,
                       seed)
    try:
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        sync()
        setup_s = time.perf_counter() - t_setup

        def step():
            return _train_step(model, criterion, optimizer, *batches.next())

        # warm-up, measured apart: the first step alone (first-call costs), then the rest
        first_ms, warm_done, warm_s = None, 0, 0.0
        if warmup:
            _, first_s, _ = _run_steps(1, None, step, sync, stop)
            first_ms, warm_done, warm_s = first_s * 1000, 1, first_s
            if warmup > 1:
                budget = None if max_seconds is None else max(0.0, max_seconds * WARMUP_SHARE - first_s)
                n, s, _ = _run_steps(warmup - 1, budget, step, sync, stop)
                warm_done, warm_s = warm_done + n, warm_s + s

        left = None if max_seconds is None else max(0.0, max_seconds - warm_s) / repeats
        per_step, timed, loss = [], 0, None
        for _ in range(repeats):
            n, s, loss = _run_steps(steps, left, step, sync, stop)
            per_step.append(s / n)
            timed += n
        row = {"params": params, "num_workers": batches.num_workers, "setup_s": setup_s,
               "warmup_steps": warm_done, "warmup_s": warm_s, "first_step_ms": first_ms,
               "timed_steps": timed, "budget_hit": timed < steps * repeats,
               "loss": _finite(loss.item())}
        row.update(_step_stats(per_step, batch_size))
        if dev.type == "cuda":
            row["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated(dev))
        return row
    finally:
        batches.close()


def _step_stats(per_step_s: list[float], batch_size: int) -> dict:
    """Median and spread of the seconds per step over repeats, as ms/step and images/s."""
    xs = sorted(per_step_s)
    if len(xs) > 1:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    else:
        q1 = q3 = xs[0]
    med = statistics.median(xs)
    return {"step_ms": med * 1000, "step_ms_min": xs[0] * 1000, "step_ms_q1": q1 * 1000,
            "step_ms_q3": q3 * 1000, "step_ms_max": xs[-1] * 1000,
            "images_per_s": batch_size / med, "images_per_s_min": batch_size / xs[-1],
            "images_per_s_max": batch_size / xs[0], "epoch_s": EPOCH_IMAGES * med / batch_size}


def _blank_row(dev, pipeline: str, batch_size: int, width: int, data) -> dict:
    import torch

    from cifarlab.core.devices import list_devices

    info = next((d for d in list_devices() if d.id == _device_id(dev)), None)
    row: dict[str, Any] = {c: ("" if t is str else False if t is bool else None)
                           for c, t in COLUMNS.items()}
    row.update(device=_device_id(dev), device_kind=dev.type,
               device_name=info.name if info else str(dev),
               device_memory_bytes=info.memory_bytes if info else None,
               pipeline=pipeline, batch_size=batch_size, width=width,
               images="synthetic" if data is None else "real", host=_hostname(),
               recorded_at=_now(), torch=torch.__version__, cuda=torch.version.cuda or "")
    return row


# -----------------------------------------------------------------------------
# the breakdown pass: where the time of a step goes

class SyncTimer:
    """Synchronise, then read the clock, at every phase boundary (perturbs the total a little)."""

    method = "sync"

    def __init__(self, device):
        self.sync, self.totals, self.t = sync_for(device), defaultdict(float), 0.0

    def start(self) -> None:
        self.sync()
        self.t = time.perf_counter()

    def mark(self, phase: str) -> None:
        self.sync()
        now = time.perf_counter()
        self.totals[phase] += now - self.t
        self.t = now

    def finish(self) -> dict[str, float]:
        return dict(self.totals)


class EventTimer:
    """CUDA events recorded on the device's stream at every phase boundary and read after one
    synchronisation at the end: the GPU's own timeline, with no synchronisation between phases.
    A phase's time includes the GPU waiting for the host (e.g. for the DataLoader)."""

    method = "cuda_events"

    def __init__(self, device):
        import torch

        self.device, self.marks = torch.device(device), []

    def _event(self):
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def start(self) -> None:
        self.marks = [(None, self._event())]

    def mark(self, phase: str) -> None:
        self.marks.append((phase, self._event()))

    def finish(self) -> dict[str, float]:
        import torch

        torch.cuda.synchronize(self.device)
        totals: dict[str, float] = defaultdict(float)
        for (_, a), (phase, b) in zip(self.marks, self.marks[1:]):
            totals[phase] += a.elapsed_time(b) / 1000.0  # elapsed_time is in milliseconds
        return dict(totals)


def breakdown(device, batch_size: int, width: int = 1, pipeline: str = "tutorial",
              steps: int = 20, warmup: int = 3, data=None, method: str = "sync",
              num_workers: int = 2, max_seconds: float | None = None, seed: int = 0) -> dict:
    """Seconds per step in each phase: data (fetch the batch), h2d (copy it to the device),
    forward (with the loss), backward, optimizer (step + zero_grad); total_s, their sum; and
    step_s, a step timed without the phase boundaries, for comparison. A separate pass, labelled
    "pass": "breakdown": its figures are never mixed with the sweep's.

    method: "sync" (any device) or "cuda_events" (CUDA only).
    """
    import torch

    from cifarlab.core.devices import resolve_device

    SweepConfig(batch_sizes=(batch_size,), widths=(width,), pipelines=(pipeline,), steps=steps,
                warmup=warmup, max_seconds=max_seconds, num_workers=num_workers)  # validates
    dev = resolve_device(device)
    if method not in ("sync", "cuda_events"):
        raise CifarLabError("The breakdown method must be 'sync' or 'cuda_events'.", field="method")
    if method == "cuda_events" and dev.type != "cuda":
        raise CifarLabError("CUDA events time CUDA devices only; use method 'sync' here.",
                            field="method")
    base = _blank_row(dev, pipeline, batch_size, width, data)
    out = {c: ("" if t is str else None) for c, t in BREAKDOWN_COLUMNS.items()}
    out.update({k: base[k] for k in ("device", "device_name", "pipeline", "batch_size", "width",
                                     "images", "host", "recorded_at")})
    out.update({"pass": "breakdown", "method": method})
    figures, oom = None, False
    try:
        with timing_settings(dev):
            figures = _breakdown(dev, batch_size, width, pipeline, steps, warmup, data, method,
                                 num_workers, max_seconds, seed)
    except Exception as err:
        if not is_out_of_memory(err):
            raise
        oom = True
    cleanup(dev)
    if oom:
        out["error"] = OOM
    else:
        out.update(figures)
    return out


def _breakdown(dev, batch_size, width, pipeline, steps, warmup, data, method, num_workers,
               max_seconds, seed) -> dict:
    import torch

    sync, never = sync_for(dev), _Poll(None)
    torch.manual_seed(seed)
    model, criterion, optimizer, _ = _workload(width, dev)
    batches = _Batches(pipeline, *_images(data, batch_size, seed), batch_size, dev, num_workers,
                       seed)
    try:
        def step():
            return _train_step(model, criterion, optimizer, *batches.next())

        budget = None if max_seconds is None else max_seconds / 3
        if warmup:
            _run_steps(warmup, budget, step, sync, never)
        n, seconds, _ = _run_steps(steps, budget, step, sync, never)  # unperturbed, for comparison

        timer = EventTimer(dev) if method == "cuda_events" else SyncTimer(dev)
        optimizer.zero_grad()
        timer.start()
        for _ in range(n):
            inputs, labels = batches.fetch()
            timer.mark("data")
            inputs, labels = batches.to_device(inputs, labels)
            timer.mark("h2d")
            loss = criterion(model(inputs), labels)
            timer.mark("forward")
            loss.backward()
            timer.mark("backward")
            optimizer.step()
            optimizer.zero_grad()
            timer.mark("optimizer")
        totals = timer.finish()
        sync()
        phases = {f"{p}_s": totals.get(p, 0.0) / n for p in PHASES}
        return {**phases, "total_s": sum(phases.values()), "step_s": seconds / n, "steps": n,
                "num_workers": batches.num_workers}
    finally:
        batches.close()


# -----------------------------------------------------------------------------
# the sweep, and the job-queue entry point

def sweep_environment(devices: Iterable[str]) -> dict:
    """devices.environment() plus the host name, the measured devices in detail and the settings."""
    import torch

    from cifarlab.core.devices import environment, list_devices

    env = environment()
    env["hostname"] = _hostname()
    infos = {d.id: d.to_dict() for d in list_devices()}
    records = []
    for d in devices:
        rec = dict(infos.get(d, {"id": d}))
        if d.startswith("cuda:"):
            props = torch.cuda.get_device_properties(int(d.split(":")[1]))
            rec.update(capability=f"{props.major}.{props.minor}",
                       multiprocessors=props.multi_processor_count)
        records.append(rec)
    env["devices"] = records
    settings = {"cudnn_benchmark_when_timing": True,
                "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
                "float32_matmul_precision": torch.get_float32_matmul_precision(),
                "torch_threads": torch.get_num_threads()}
    with contextlib.suppress(Exception):
        settings["cuda_matmul_allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        settings["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    env["settings"] = settings
    env["load_average_start"] = _load_average()
    return env


def run_sweep(cfg: SweepConfig | None = None, on_result: Callable[[dict], None] | None = None,
              should_stop: Callable[[], bool] | None = None, data=None,
              save_to: str | Path | Iterable[str | Path] | None = None) -> SweepResult:
    """Measure every point of `cfg` (see SweepConfig.points) and, if cfg.breakdown, the
    breakdown pass. on_result(row) after each point; should_stop() is polled during points (the
    result is then marked cancelled, keeping what was measured). save_to: file(s) (.json/.csv)
    rewritten after every point, so an interrupted sweep keeps its rows."""
    cfg = cfg or SweepConfig()
    devices = cfg.resolved_devices()  # DeviceError before anything runs
    if cfg.images == "real" and data is None:
        from cifarlab.core import data as data_mod

        data = data_mod.load()
    paths = [] if save_to is None else [save_to] if isinstance(save_to, (str, Path)) else list(save_to)
    for p in paths:
        if Path(p).suffix.lower() not in (".json", ".csv"):
            raise CifarLabError(f"Save timing results as .json or .csv, not '{Path(p).name}'.",
                                field="out")
    result = SweepResult(rows=[], environment=sweep_environment(devices), config=cfg.to_dict(),
                         host=_hostname(), recorded_at=_now())
    stop = should_stop or (lambda: False)

    def save() -> None:
        for p in paths:
            result.save(p)

    for point in cfg.points(devices):
        if stop():
            result.cancelled = True
            break
        row = measure_point(point["device"], point["batch_size"], point["width"],
                            point["pipeline"], cfg.steps, cfg.warmup, cfg.repeats, data,
                            cfg.max_seconds, cfg.num_workers, cfg.seed, should_stop=stop,
                            tutorial_point=point["tutorial_point"])
        if row is None:
            result.cancelled = True
            break
        row.update(host=result.host, recorded_at=result.recorded_at)
        result.rows.append(row)
        save()
        if on_result:
            on_result(row)
    if cfg.breakdown and not result.cancelled:
        for b in cfg.breakdown_passes(devices):
            if stop():
                result.cancelled = True
                break
            row = breakdown(b["device"], b["batch_size"], b["width"], b["pipeline"],
                            steps=min(cfg.steps, 20), warmup=max(1, cfg.warmup), data=data,
                            method=b["method"], num_workers=cfg.num_workers,
                            max_seconds=cfg.max_seconds, seed=cfg.seed)
            row.update(host=result.host, recorded_at=result.recorded_at)
            result.breakdowns.append(row)
            save()
    result.environment["load_average_end"] = _load_average()
    save()
    return result


def run_timing_job(payload: dict, ctx) -> dict:
    """Job-queue entry ("timing"): payload is a SweepConfig dict. Emits ("timing_row", row) as
    each point finishes, stops when ctx.should_stop(), returns the result's dict (+ "points")."""
    cfg = SweepConfig.from_dict(payload)
    data = ctx.data() if cfg.images == "real" else None
    result = run_sweep(cfg, on_result=lambda row: ctx.emit("timing_row", row),
                       should_stop=ctx.should_stop, data=data)
    return {**result.to_dict(), "points": len(result.rows)}


# -----------------------------------------------------------------------------
# analysis: speedups, crossovers, the tutorial's point, what a GPU would add (figures only)

def point_key(row: dict) -> tuple:
    """Which point of the grid a row measures, device aside: (pipeline, batch size, width).
    Rows with the same key on two devices are compared for a speed-up."""
    return row["pipeline"], row["batch_size"], row["width"]


def speedups(result: SweepResult | list[dict], baseline: list[dict] | None = None) -> list[dict]:
    """Accelerator images/s ÷ cpu images/s at each (pipeline, batch size, width) measured on
    both. baseline: cpu rows to compare with (default: the result's own)."""
    rows = result.ok_rows() if isinstance(result, SweepResult) else [r for r in result if not r["error"]]
    cpu_rows = rows if baseline is None else [r for r in baseline if not r["error"]]
    cpu = {point_key(r): r for r in cpu_rows if r["device"] == "cpu"}
    out = []
    for r in rows:
        c = cpu.get(point_key(r))
        if r["device"] == "cpu" or c is None:
            continue
        out.append({"device": r["device"], "device_name": r["device_name"],
                    "pipeline": r["pipeline"], "batch_size": r["batch_size"], "width": r["width"],
                    "images_per_s": r["images_per_s"], "cpu_images_per_s": c["images_per_s"],
                    "speedup": r["images_per_s"] / c["images_per_s"]})
    return sorted(out, key=lambda s: (s["device"], s["pipeline"], s["width"], s["batch_size"]))


def crossover(result: SweepResult | list[dict], baseline: list[dict] | None = None) -> list[dict]:
    """Per accelerator, pipeline and width: batch_size, the smallest measured batch size at which
    the accelerator beats the cpu (None if it never does); speedup there; and estimate, where
    the curves cross between the two measured batch sizes around it (interpolated on log scales;
    None if it already wins at the smallest batch or never wins)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for s in speedups(result, baseline):
        groups[(s["device"], s["pipeline"], s["width"])].append(s)
    out = []
    for (device, pipeline, width), ss in sorted(groups.items()):
        ss.sort(key=lambda s: s["batch_size"])
        first = next((i for i, s in enumerate(ss) if s["speedup"] > 1), None)
        estimate = None
        if first:  # not None and not 0: it loses at the batch before
            a, b = ss[first - 1], ss[first]
            la, lb = math.log(a["speedup"]), math.log(b["speedup"])
            f = -la / (lb - la)
            estimate = math.exp(math.log(a["batch_size"]) +
                                f * (math.log(b["batch_size"]) - math.log(a["batch_size"])))
        out.append({"device": device, "device_name": ss[0]["device_name"], "pipeline": pipeline,
                    "width": width, "batch_size": None if first is None else ss[first]["batch_size"],
                    "speedup": None if first is None else ss[first]["speedup"],
                    "estimate": estimate, "max_speedup": max(s["speedup"] for s in ss),
                    "max_batch_size": max(ss, key=lambda s: s["speedup"])["batch_size"]})
    return out


def _best(rows: list[dict]) -> dict | None:
    if not rows:
        return None
    r = max(rows, key=lambda r: r["images_per_s"])
    return {"pipeline": r["pipeline"], "batch_size": r["batch_size"], "width": r["width"],
            "images_per_s": r["images_per_s"], "epoch_s": r["epoch_s"]}


def explain_tutorial_point(result: SweepResult) -> dict:
    """Figures about the tutorial as written (tutorial pipeline, batch 4, width 1) on each device,
    for the page to put into words: its speed, its two epochs, the fast pipeline at the same
    batch, and the best point measured with the same network (width 1)."""
    rows = result.ok_rows()
    pipe, b, w = TUTORIAL_POINT
    cpu_tut = next((r for r in rows if r["device"] == "cpu" and point_key(r) == TUTORIAL_POINT), None)
    devices = []
    for dev in dict.fromkeys(r["device"] for r in result.rows):
        mine = [r for r in rows if r["device"] == dev]
        tut = next((r for r in mine if point_key(r) == TUTORIAL_POINT), None)
        fast = next((r for r in mine if point_key(r) == ("fast", b, w)), None)
        best = _best([r for r in mine if r["width"] == w])
        failed = next((r["error"] for r in result.rows
                       if r["device"] == dev and point_key(r) == TUTORIAL_POINT and r["error"]), "")
        d = {"device": dev, "device_name": next(r["device_name"] for r in result.rows
                                                if r["device"] == dev),
             "error": failed, "images_per_s": None, "step_ms": None, "epoch_s": None,
             "tutorial_run_s": None, "speedup_vs_cpu": None, "fast_images_per_s": None,
             "fast_gain": None, "best": best, "best_gain": None}
        if tut:
            d.update(images_per_s=tut["images_per_s"], step_ms=tut["step_ms"],
                     epoch_s=tut["epoch_s"], tutorial_run_s=TUTORIAL_EPOCHS * tut["epoch_s"])
            if cpu_tut and dev != "cpu":
                d["speedup_vs_cpu"] = tut["images_per_s"] / cpu_tut["images_per_s"]
            if fast:
                d["fast_images_per_s"] = fast["images_per_s"]
                d["fast_gain"] = fast["images_per_s"] / tut["images_per_s"]
            if best:
                d["best_gain"] = best["images_per_s"] / tut["images_per_s"]
        devices.append(d)
    timed = [d for d in devices if d["images_per_s"]]
    return {"pipeline": pipe, "batch_size": b, "width": w, "epoch_images": EPOCH_IMAGES,
            "epochs": TUTORIAL_EPOCHS, "steps_per_epoch": math.ceil(EPOCH_IMAGES / b),
            "recorded_elsewhere": result.recorded_elsewhere, "recorded_on": result.recorded_on,
            "host": result.host, "recorded_at": result.recorded_at, "devices": devices,
            "fastest_device": max(timed, key=lambda d: d["images_per_s"])["device"] if timed else None}


def what_a_gpu_would_add(result: SweepResult, reference: SweepResult | None = None,
                         directory: str | Path | None = None) -> dict:
    """Figures on what an accelerator adds over this machine's cpu.

    With an accelerator in `result`, its own rows are used. Without one, a result recorded
    elsewhere is: `reference`, else the newest in docs/gpu-results (None if there is none).
    Two comparisons are given: against this result's cpu (`speedup`, different machines when
    recorded elsewhere) and against the recording's own cpu (`speedup_same_machine`)."""
    has_acc = any(r["device"] != "cpu" for r in result.ok_rows())
    if not has_acc and reference is None:
        reference = next((r for r in recorded_results(directory)
                          if any(x["device"] != "cpu" for x in r.ok_rows())), None)
    source = result if has_acc else reference
    out = {"has_accelerator": has_acc, "reference": None, "points": [], "tutorial_point": None,
           "best": None, "crossover": []}
    if source is None:
        return out
    if not has_acc:
        acc = next(r for r in source.ok_rows() if r["device"] != "cpu")
        out["reference"] = {"recorded_on": source.recorded_on, "host": source.host,
                            "recorded_at": source.recorded_at, "source": source.source,
                            "device": acc["device"], "device_name": acc["device_name"]}
    here_cpu = [r for r in result.ok_rows() if r["device"] == "cpu"]
    acc_rows = [r for r in source.ok_rows() if r["device"] != "cpu"]
    own = {(s["device"], point_key(s)): s["speedup"] for s in speedups(source)}
    points = []
    for s in speedups(acc_rows, baseline=here_cpu):
        s["speedup_same_machine"] = own.get((s["device"], point_key(s)))
        points.append(s)
    out["points"] = points
    out["tutorial_point"] = next((p for p in points if point_key(p) == TUTORIAL_POINT), None)
    out["best"] = max(points, key=lambda p: p["speedup"]) if points else None
    out["crossover"] = crossover(acc_rows, baseline=here_cpu)
    return out


# -----------------------------------------------------------------------------
# printing (CLI and bench/gpu_sweep.py)

TABLE = [("device", 7), ("pipeline", 8), ("batch", 5), ("width", 5), ("images/s", 10),
         ("ms/step", 9), ("spread ms", 15), ("epoch", 9), ("vs cpu", 7), ("note", 0)]


def format_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def table_header() -> str:
    return "  ".join(name.rjust(w) if w else name for name, w in TABLE)


def table_line(row: dict, cpu_images_per_s: float | None = None) -> str:
    if row["error"]:
        cells = [row["device"], row["pipeline"], row["batch_size"], row["width"], "-", "-", "-",
                 "-", "-", row["error"]]
    else:
        notes = []
        if row["tutorial_point"]:
            notes.append("the tutorial as written")
        if row["budget_hit"]:
            notes.append(f"time budget: {row['timed_steps']} steps timed")
        speed = (f"{row['images_per_s'] / cpu_images_per_s:.2f}x"
                 if cpu_images_per_s and row["device"] != "cpu" else "")
        cells = [row["device"], row["pipeline"], row["batch_size"], row["width"],
                 f"{row['images_per_s']:,.0f}", f"{row['step_ms']:.3f}",
                 f"{row['step_ms_min']:.3f}-{row['step_ms_max']:.3f}",
                 format_seconds(row["epoch_s"]), speed, "; ".join(notes)]
    return "  ".join(str(c).rjust(w) if w else str(c) for c, (_, w) in zip(cells, TABLE))


class TablePrinter:
    """on_result callback that prints each row as it arrives, with its speedup over the cpu."""

    def __init__(self, out=None):
        self.out, self.cpu = out or sys.stdout, {}
        print(table_header(), file=self.out, flush=True)

    def __call__(self, row: dict) -> None:
        if row["device"] == "cpu" and not row["error"]:
            self.cpu[point_key(row)] = row["images_per_s"]
        print(table_line(row, self.cpu.get(point_key(row))), file=self.out, flush=True)


def summary_lines(result: SweepResult) -> list[str]:
    env = result.environment
    lines = [f"recorded on: {result.recorded_on} (host {result.host}, {result.recorded_at})",
             f"torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, "
             f"python {env.get('python')}; cpu: {env.get('cpu')}"]
    for d in env.get("devices", []):
        if d.get("kind") != "cpu":
            mem = f", {d['memory_bytes'] / 2**30:.0f} GiB" if d.get("memory_bytes") else ""
            lines.append(f"{d.get('id')}: {d.get('name')}{mem}")
    cross = crossover(result)
    if not any(r["device"] != "cpu" for r in result.rows):
        lines.append("no accelerator measured: nothing to compare with the cpu here "
                     "(see docs/gpu-results for results recorded on a GPU)")
    for c in cross:
        where = (f"beats the cpu from batch {c['batch_size']} ({c['speedup']:.2f}x)"
                 if c["batch_size"] is not None else "never beats the cpu in this range")
        est = f", curves cross near batch {c['estimate']:.0f}" if c["estimate"] else ""
        lines.append(f"crossover {c['device']} {c['pipeline']} width {c['width']}: {where}{est}; "
                     f"best {c['max_speedup']:.2f}x at batch {c['max_batch_size']}")
    for b in result.breakdowns:
        if b["error"]:
            lines.append(f"breakdown {b['device']} {b['pipeline']} batch {b['batch_size']}: {b['error']}")
            continue
        parts = ", ".join(f"{p} {b[p + '_s'] * 1000:.3f}" for p in PHASES)
        lines.append(f"breakdown ({b['method']}) {b['device']} {b['pipeline']} batch "
                     f"{b['batch_size']} width {b['width']}, ms/step: {parts}; sum "
                     f"{b['total_s'] * 1000:.3f} vs unperturbed step {b['step_s'] * 1000:.3f}")
    if result.cancelled:
        lines.append("stopped early: the rows above are what was measured")
    return lines


# -----------------------------------------------------------------------------
# the `bench` subcommand

def register_cli(subparsers) -> None:
    d = SweepConfig()
    p = subparsers.add_parser("bench", help="time training on cpu and accelerators: batch size x "
                                            "width sweep, speedups, crossover")
    p.add_argument("--devices", default="all", help="cpu,cuda:0,mps or all (default: all)")
    p.add_argument("--batch-sizes", default=",".join(map(str, d.batch_sizes)))
    p.add_argument("--widths", default=",".join(map(str, d.widths)), help="width multipliers")
    p.add_argument("--pipelines", default=",".join(d.pipelines), help="fast,tutorial")
    p.add_argument("--steps", default=str(d.steps), help="timed steps per repeat")
    p.add_argument("--warmup", default=str(d.warmup), help="warm-up steps (timed apart)")
    p.add_argument("--repeats", default=str(d.repeats))
    p.add_argument("--max-seconds", default=str(d.max_seconds),
                   help="time budget per point in seconds, or 'none'")
    p.add_argument("--num-workers", default=str(d.num_workers),
                   help="DataLoader workers of the tutorial pipeline (the tutorial uses 2)")
    p.add_argument("--breakdown", action="store_true",
                   help="also time the phases of a step (a separate pass)")
    p.add_argument("--data", default=None,
                   help="use a slice of the real training set (image folder, .tar.gz or 'download')")
    p.add_argument("--out", action="append", default=[], help="save to .json or .csv (repeatable)")
    p.add_argument("--show", default=None, help="print a saved result instead of measuring")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=cmd_bench)


def cmd_bench(args) -> int:
    if args.show:
        if not Path(args.show).is_file():
            raise CifarLabError(f"No such file: {args.show}.", field="show")
        result = SweepResult.load(args.show)
        if args.json:
            print(result.to_json())
            return 0
        printer = TablePrinter()
        for row in result.rows:
            printer(row)
    else:
        cfg = SweepConfig(devices=args.devices, batch_sizes=_cli_ints(args.batch_sizes, "batch_sizes"),
                          widths=_cli_ints(args.widths, "widths"), pipelines=args.pipelines,
                          steps=_cli_int(args.steps, "steps"), warmup=_cli_int(args.warmup, "warmup"),
                          repeats=_cli_int(args.repeats, "repeats"),
                          max_seconds=_cli_seconds(args.max_seconds),
                          num_workers=_cli_int(args.num_workers, "num_workers"),
                          images="real" if args.data else "synthetic", breakdown=args.breakdown)
        for out in args.out:
            if Path(out).suffix.lower() not in (".json", ".csv"):
                raise CifarLabError(f"--out must end in .json or .csv, not '{out}'.", field="out")
        cfg.resolved_devices()  # an absent device fails here, before any data is loaded
        data = None
        if args.data:
            from cifarlab.core import data as data_mod

            data = data_mod.load(args.data)
        result = run_sweep(cfg, on_result=None if args.json else TablePrinter(), data=data,
                           save_to=args.out or None)
        if args.json:
            print(result.to_json())
            return 0
    for line in summary_lines(result):
        print(line)
    for out in args.out:
        print(f"saved: {out}")
    return 0


def _cli_ints(text: str, name: str) -> tuple:
    try:
        return tuple(int(v) for v in text.replace(" ", "").split(",") if v)
    except ValueError:
        raise ConfigError({name: f"--{name.replace('_', '-')} must be whole numbers separated by "
                                 f"commas, got '{text}'."})


def _cli_int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError({name: f"--{name.replace('_', '-')} must be a whole number, got '{text}'."})


def _cli_seconds(text: str) -> float | None:
    if text.strip().lower() in ("none", "", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise ConfigError({"max_seconds": f"--max-seconds must be a number of seconds, got '{text}'."})


# -----------------------------------------------------------------------------
# small helpers

def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):  # not on Windows
        return None


def _load_1m() -> float | None:
    load = _load_average()
    return load[0] if load else None


def _finite(v: float) -> float | None:
    v = float(v)
    return v if math.isfinite(v) else None


def _device_id(dev) -> str:
    return f"cuda:{dev.index or 0}" if dev.type == "cuda" else dev.type


def _hostname() -> str:
    return socket.gethostname() or "unknown host"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)  # shortest exact representation: float(repr(x)) == x
    return str(v)


def _parse(text: str | None, kind: type) -> Any:
    if kind is str:
        return text or ""
    if kind is bool:
        return (text or "").strip().lower() in ("true", "1", "yes")
    if text is None or text == "":
        return None
    return kind(text)


def _typed(row: dict, columns: dict[str, type]) -> dict:
    """A row with every column, in order (JSON gives ints and floats back exactly)."""
    out = {}
    for c, t in columns.items():
        v = row.get(c)
        if t is str:
            out[c] = v or ""
        elif t is bool:
            out[c] = bool(v)
        elif v is None:
            out[c] = None
        else:
            out[c] = t(v)
    return out


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise DataError(f"Cannot read {path}: {err.strerror or err}.")


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
