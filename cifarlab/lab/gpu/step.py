"""The timed step (``core.train``'s own, or one CUDA graph) and what timing needs around it."""
from __future__ import annotations

import contextlib
import functools
import gc
import math
import time
from typing import Any, Callable

import numpy as np
import torch

from cifarlab.core import graphs as core_graphs
from cifarlab.core import train as core_train
from cifarlab.core.config import CIFAR10_CLASSES, ModelSpec, TrainConfig
from cifarlab.core.data import CifarData
from cifarlab.core.devices import synchronize
from cifarlab.core.model import count_params

MIN_IMAGES = 2048          # images per timing data set: at least this many, and 8 batches


def timing_images(batch_size: int) -> CifarData:
    """Random pixels, a whole number of batches (>= 8, >= MIN_IMAGES): every step is full."""
    want = batch_size * max(8, math.ceil(MIN_IMAGES / batch_size))
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(want, 3, 32, 32), dtype=np.uint8)
    y = rng.integers(0, len(CIFAR10_CLASSES), size=want).astype(np.int64)
    return CifarData(x, y, x[:0], y[:0], CIFAR10_CLASSES, "synthetic", "synthetic")


class Workload:
    """What training builds for one config (``core.train.build``), ready to step."""

    def __init__(self, device: str | torch.device, batch_size: int, width: int = 1,
                 pipeline: str = "fast", num_workers: int = 2, graphed: bool = False):
        self.device = torch.device(device)
        self.config = TrainConfig(batch_size=batch_size, device=str(self.device),
                                  num_workers=num_workers if pipeline == "tutorial" else 0,
                                  pipeline=pipeline, model=ModelSpec(width=width),
                                  cuda_graphs=graphed)
        self.model, self.criterion, self.optimizer, self.loader = core_train.build(
            self.config, timing_images(batch_size), self.device)
        self.params = count_params(self.model)
        self.graph_notes: list[dict] = []
        self._step = core_graphs.make_step(self.config, self.device, self.model, self.criterion,
                                           self.optimizer, core_train.train_step,
                                           self.graph_notes.append)
        self._it = iter(self.loader)  # starts the DataLoader's workers now, not in a timed step

    def fetch(self):
        try:
            return next(self._it)
        except StopIteration:  # an epoch ended: the next one, in a new order
            self._it = iter(self.loader)
            return next(self._it)

    def step(self) -> torch.Tensor:
        return self._step(*core_train.to_device(*self.fetch(), self.device))

    def steps_to_capture(self) -> int:
        """Steps still to run before a graphed step is captured and replayed once (else 0)."""
        step = self._step
        if not isinstance(step, core_graphs.GraphedStep) or step.graph is not None or step.failed:
            return 0
        return max(1, step.warmup + 1 - step.calls)

    def not_graphed(self) -> str | None:
        """None when the step is replayed as a graph, else why not: the last fallback's code."""
        step = self._step
        if isinstance(step, core_graphs.GraphedStep) and step.graph is not None and not step.failed:
            return None
        note = next((n for n in reversed(self.graph_notes) if n["status"] == "eager"), None)
        if note is None:
            return "graphs.not_captured"
        error = note["params"].get("error")
        return note["reason"] + (f" ({error})" if error else "")

    def close(self) -> None:
        it, self._it, self.loader = self._it, None, None
        with contextlib.suppress(Exception):  # measured already; a worker dying now changes nothing
            getattr(it, "_shutdown_workers", lambda: None)()


# -- the device while timing: settings, synchronising, cleaning up, running out of memory

def sync_for(device: str | torch.device) -> Callable[[], None]:
    return functools.partial(synchronize, torch.device(device))


@contextlib.contextmanager
def timing_settings(device: str | torch.device):
    """cuDNN benchmark mode (autotuning, paid in the warm-up) and ``device`` current, on CUDA."""
    dev = torch.device(device)
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = before or dev.type == "cuda"
    try:
        with torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext():
            yield
    finally:
        torch.backends.cudnn.benchmark = before


def cleanup(dev: torch.device) -> None:
    """Free what one point left behind: the next starts from the same state."""
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    elif dev.type == "mps":
        torch.mps.empty_cache()


def is_out_of_memory(err: BaseException) -> bool:
    msg = str(err).lower()   # torch.OutOfMemoryError is a RuntimeError saying "out of memory"
    return isinstance(err, RuntimeError) and any(
        s in msg for s in ("out of memory", "can't allocate memory", "not enough memory"))


class Stopped(Exception):
    """should_stop() said so in the middle of a point."""


def run_steps(n: int, budget: float | None, step: Callable[[], Any], sync: Callable[[], None],
              stop: Callable[[], bool] = lambda: False) -> tuple[int, float, Any]:
    """(steps run, seconds, last output) of up to n steps, at least one, fewer once ``budget``
    seconds have passed. Only the clock reads synchronise; the budget and stop() decide when."""
    sync()
    t0 = time.perf_counter()
    done, out = 0, None
    while done < n:
        out = step()
        done += 1
        if stop():
            raise Stopped
        if budget is not None and time.perf_counter() - t0 >= budget:
            break
    sync()
    return done, time.perf_counter() - t0, out
