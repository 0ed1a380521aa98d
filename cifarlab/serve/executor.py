"""Job kinds and the executor interface, whose methods run in the dispatcher's thread."""
from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import Any, Callable

from cifarlab.serve.runs import Run, reason
from cifarlab.serve.settings import Settings
from cifarlab.serve.store import RunStore

log = logging.getLogger("cifarlab.serve.queue")

TRAIN = "train"
TIMING = "timing"   # the CPU-vs-GPU timing sweep: bounded by max_timing_seconds
LR_FIND = "lr_find"  # the learning-rate finder: a probe of a config, at most 200 steps
# job kinds: the "module:function" each runs, ``fn(payload, ctx: JobContext) -> dict`` (its
# result; ``{"cancelled": True}`` ends it cancelled), imported by the worker: so serve runs the
# GPU page's timing sweep without importing lab
KINDS: dict[str, str] = {TRAIN: "cifarlab.serve.worker:run_train_job",
                         TIMING: "cifarlab.lab.gpu.measure:run_timing_job",
                         LR_FIND: "cifarlab.core.lr_finder:run_job"}


def import_target(target: str) -> Callable[[dict, Any], dict]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass
class Handle:
    """A run an executor is running, as the queue watches it."""

    run_id: str
    device: str
    cancel_seen: float | None = None   # when the dispatcher first saw the cancel flag
    forced: str | None = None          # "cancel" | "heartbeat" | "shutdown" once stopped by force
    forced_s: float = 0.0              # the grace period a forced cancel waited


class Executor:
    """What both executors share; each has ``launch``, ``poll``, ``force`` and ``stop_all``."""

    name = "base"
    adopts = False    # whether ``adopt`` can find another server's runs still going

    def __init__(self, store: RunStore, settings: Settings):
        self.store, self.settings = store, settings
        self.running: dict[str, Handle] = {}

    def start(self) -> None:
        """Called once, in the dispatcher thread, before anything else."""

    def slots_for(self, device: str) -> int:
        return self.settings.slots_for(device)

    def devices(self) -> list[str] | None:
        """A cluster's devices; None: this machine's (``core.devices.list_devices``)."""
        return None

    def adopt(self, runs: list[Run]) -> set[str]:
        """Take on a dead app server's runs still going (where ``adopts``); their ids."""
        return set()

    def cancel(self, run_id: str) -> None:
        """Stop after the current step (local workers read the store's flag themselves)."""

    def keep_warm(self, backlog: int) -> None:
        """Start workers ahead of need (none by default)."""

    def warm(self) -> int:
        """How many workers are ready."""
        return 0

    def settle_dead(self, h: Handle, died: Callable[[], tuple[str, dict]]) -> None:
        """A run whose worker ended without an outcome: why the queue forced it, else ``died()``."""
        run = self.store.get(h.run_id)
        if run is None or run.status != "running":
            return
        if h.forced == "cancel":
            status, why = "cancelled", reason("serve.worker.cancel_forced", seconds=h.forced_s)
        elif h.forced == "heartbeat":
            status, why = "failed", reason("serve.worker.no_heartbeat")
        elif h.forced == "shutdown":
            status, why = "interrupted", reason("serve.worker.shutdown")
        else:
            status, why = died()
        self.store.remove_partial_checkpoints(h.run_id)
        self.store.set_status(h.run_id, status, only_from=["running"], **why)
        log.warning("run %s (%s executor): %s", h.run_id, self.name, why["error"])


def job_for(run: Run, target: str, settings: Settings) -> dict:
    """What an executor hands a worker: the run, its kind's function, where, its limits."""
    return {"run_id": run.id, "kind": run.kind, "target": target, "device": run.device,
            "data_source": settings.data, "payload": dict(run.config),
            "time_limit_s": settings.max_timing_seconds if run.kind == TIMING else None,
            "threads": settings.worker_threads, "nice": settings.worker_nice}
