"""The executor interface: where the queue's runs execute (the hosting setting ``executor``).
Every method is called from the dispatcher's one thread (``ray.init`` needs a thread that lives).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from cifarlab.serve.kinds import TIMING
from cifarlab.serve.runs import Run, reason
from cifarlab.serve.settings import Settings
from cifarlab.serve.store import RunStore

log = logging.getLogger("cifarlab.serve.queue")

@dataclass
class Handle:
    """A run an executor is running, as the queue watches it."""

    run_id: str
    device: str
    cancel_seen: float | None = None   # when the dispatcher first saw the cancel flag
    forced: str | None = None          # "cancel" | "heartbeat" | "shutdown" once stopped by force
    forced_s: float = 0.0              # the grace period a forced cancel waited


class Executor:
    """The interface; the base does what both executors share."""

    name = "base"
    adopts = False    # whether ``adopt`` can find another server's runs still going

    def __init__(self, store: RunStore, settings: Settings):
        self.store = store
        self.settings = settings
        self.running: dict[str, Handle] = {}

    def start(self) -> None:
        """Called once, in the dispatcher thread, before anything else."""

    def slots_for(self, device: str) -> int:
        return self.settings.slots_for(device)

    def devices(self) -> list[str] | None:
        """A cluster's devices; None: this machine's (``core.devices.list_devices``)."""
        return None

    def launch(self, run: Run, job: dict) -> bool:
        """Move the run ``queued -> running`` (False when it was cancelled meanwhile), start it."""
        raise NotImplementedError

    def poll(self) -> None:
        """Take what the runs sent into the store; a run whose worker died gets ``failed`` (or
        the reason the queue forced it) and its half-written checkpoint goes."""
        raise NotImplementedError

    def adopt(self, runs: list[Run]) -> set[str]:
        """Take on a dead app server's runs still going (where ``adopts``); their ids."""
        return set()

    def cancel(self, run_id: str) -> None:
        """Stop after the current step (local workers read the store's flag themselves)."""

    def force(self, run_id: str, why: str, seconds: float = 0.0) -> None:
        """Stop now (``why``: "cancel" after ``seconds`` of grace, "heartbeat", "shutdown")."""
        raise NotImplementedError

    def keep_warm(self, backlog: int) -> None:
        """Start workers ahead of need (none by default)."""

    def warm(self) -> int:
        """How many workers are ready."""
        return 0

    def stop_all(self, timeout: float) -> None:
        """Force every run ("shutdown") and release everything."""
        raise NotImplementedError

    def settle_dead(self, h: Handle, died: Callable[[], tuple[str, dict]]) -> None:
        """A run whose worker ended without recording an outcome: the reason the queue forced
        it, else ``died()``; its half-written checkpoint goes before its end is visible."""
        run = self.store.get(h.run_id)
        if run is not None and run.status == "running":
            status, why = forced_reason(h.forced, h.forced_s) or died()
            self.store.remove_partial_checkpoints(h.run_id)
            self.store.set_status(h.run_id, status, only_from=["running"], **why)
            log.warning("run %s (%s executor): %s", h.run_id, self.name, why["error"])


def forced_reason(why: str | None, seconds: float) -> tuple[str, dict] | None:
    """(status, ``runs.reason``) for a run the queue stopped by force; None if it did not."""
    if why == "cancel":
        return "cancelled", reason("serve.worker.cancel_forced", seconds=seconds)
    if why == "heartbeat":
        return "failed", reason("serve.worker.no_heartbeat")
    if why == "shutdown":
        return "interrupted", reason("serve.worker.shutdown")
    return None


def job_for(run: Run, target: str, settings: Settings) -> dict:
    """What an executor hands a worker: the run, its kind's function, where, its limits."""
    return {"run_id": run.id, "kind": run.kind, "target": target, "device": run.device,
            "data_source": settings.data, "payload": dict(run.config), "exclusive": run.exclusive,
            "time_limit_s": settings.max_timing_seconds if run.kind == TIMING else None,
            "threads": settings.worker_threads, "nice": settings.worker_nice}
