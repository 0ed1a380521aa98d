"""The executor interface: where the queue's runs execute.

The queue (``cifarlab.serve.queue``) decides *which* run starts *when* (first come first served
per device, slots, exclusive jobs, limits); an executor runs it somewhere and reports back. Two
exist, chosen by the hosting setting ``executor`` (``cifarlab.serve.executors.make_executor``):

- ``"local"`` (the default, ``cifarlab.serve.local_executor``): a spawned worker process per run
  on this machine, a warm spare, process groups. Its workers write their event batches into the
  run store themselves (they share its disk), so ``poll`` only settles the runs whose worker
  died.
- ``"ray"`` (``cifarlab.serve.ray_executor``, an optional extra: ``requirements-ray.txt``): each
  run is a detached Ray actor on a cluster, whose event batches ``poll`` writes into the same
  run store, so no page knows the difference; it outlives the server that started it.

Every method is called from the queue's one dispatcher thread (``cifarlab.serve.dispatcher``:
``start`` first, ``stop_all`` last), never from a page's script run: Ray needs ``ray.init`` in a
thread that lives as long as the connection.

The contract, in the queue's words:

- ``launch(run, job)``: the run is ``queued``; move it to ``running`` (``only_from=["queued"]``:
  False when it was cancelled meanwhile) and start it. ``job``: ``job_for(run, settings)``.
- ``poll()``: take what the runs sent, into the store; a run that ended records its outcome; a
  run whose worker died gets ``failed`` (or ``cancelled`` / ``interrupted`` when the queue had
  stopped it by force) with a reason (``runs.reason``), and its half-written checkpoint goes.
- ``cancel(run_id)``: the student pressed Cancel (the store's flag is set): pass it on, so the
  run stops after its current step and keeps its partial result.
- ``force(run_id, why, seconds)``: stop it now ("cancel" after the grace period, "heartbeat",
  "shutdown").
- ``adopt(runs)``: runs of an app server that stopped beating (``adopts``: the executor can
  find its runs still going, as Ray's detached actors): take on those still going, return their
  ids; the others are marked ``interrupted``. With ``adopts``, the queue leaves such runs to
  the dispatcher at start too. The local executor adopts none: its workers stop by themselves
  when their server dies.
- ``running``: run id -> ``Handle`` of the runs this executor is running.
- ``slots_for(device)``: how many runs may use ``device`` at the same time.
- ``keep_warm(backlog)`` / ``warm()``: keep workers started ahead of need / how many are ready.
- ``stop_all(timeout)``: force every run ("shutdown") and release everything.
"""
from __future__ import annotations

from dataclasses import dataclass

from cifarlab.serve.kinds import TIMING
from cifarlab.serve.runs import Run, reason
from cifarlab.serve.settings import Settings
from cifarlab.serve.store import RunStore

@dataclass
class Handle:
    """A run an executor is running, as the queue watches it."""

    run_id: str
    device: str
    cancel_seen: float | None = None   # when the dispatcher first saw the cancel flag
    forced: str | None = None          # "cancel" | "heartbeat" | "shutdown" once stopped by force
    forced_s: float = 0.0              # the grace period a forced cancel waited


class Executor:
    """The interface (see the module docstring); the base does what both executors share."""

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
        """The devices a run can be placed on when they are not this machine's (a cluster's);
        None: this machine's (``core.devices.list_devices``)."""
        return None

    def launch(self, run: Run, job: dict) -> bool:
        raise NotImplementedError

    def poll(self) -> None:
        raise NotImplementedError

    def adopt(self, runs: list[Run]) -> set[str]:
        return set()

    def cancel(self, run_id: str) -> None:
        """The local workers read the store's flag themselves: nothing to pass on."""

    def force(self, run_id: str, why: str, seconds: float = 0.0) -> None:
        raise NotImplementedError

    def keep_warm(self, backlog: int) -> None:
        """Nothing kept warm by default."""

    def warm(self) -> int:
        return 0

    def stop_all(self, timeout: float) -> None:
        raise NotImplementedError


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
