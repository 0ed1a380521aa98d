"""The dispatcher: the thread that drives the executor (with replicas, the lock holder's)."""
from __future__ import annotations

import logging
import threading
import time

from cifarlab.serve.database import StoreUnreachable
from cifarlab.serve.executor import KINDS, Executor, job_for
from cifarlab.serve.replicas import Replica
from cifarlab.serve.runs import Run, reason
from cifarlab.serve.settings import Settings
from cifarlab.serve.store import RunStore

log = logging.getLogger("cifarlab.serve.queue")  # the queue's log, as hosts configure it

CANCEL_GRACE_S = 60.0        # a worker still running this long after a cancel is killed


class Dispatcher:
    """The scheduler thread of one ``JobQueue``."""

    def __init__(self, store: RunStore, executor: Executor, settings: Settings,
                 replica: Replica):
        self.store, self.executor, self.settings, self.replica = store, executor, settings, replica
        self._store_back = 0.0      # when the store answered again after failing
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._last_health = 0.0
        self._backlog = 0
        self._stop_timeout = 10.0
        self._thread = threading.Thread(target=self._loop, name="cifarlab-scheduler",
                                        daemon=True)

    def start(self) -> None:
        self.replica.start()
        self._thread.start()

    def wake(self) -> None:   # a run was queued or cancelled: tick now
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and the executor (in the thread, where it started)."""
        self._stop_timeout = timeout
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout + 5.0)  # it stops the executor in its own thread
        else:  # never started
            self.executor.stop_all(timeout)
            self.replica.stop()

    def _loop(self) -> None:
        try:
            self.executor.start()  # here: ray.init belongs to a thread that lives
        except Exception:
            log.exception("cifarlab: the %s executor did not start", self.executor.name)
        failing = False
        while not self._stopping.is_set():
            try:
                self._tick()
                if failing:
                    failing, self._store_back = False, time.monotonic()
            except StoreUnreachable:   # said in the log by the store
                failing = True
            except Exception:
                log.exception("cifarlab scheduler tick failed")
            self._wake.wait(0.2)   # the scheduler's period
            self._wake.clear()
        self.executor.stop_all(self._stop_timeout)
        self.replica.stop()

    def _tick(self) -> None:
        self.executor.poll()
        self._watch_workers()
        if self.replica.tick():          # this replica dispatches
            self._start_queued()
            if not self._stopping.is_set():
                self.executor.keep_warm(self._backlog)

    def _watch_workers(self) -> None:
        """Cancels, then force; silent workers; orphans of an earlier server or replica."""
        now, wall, timeout = time.monotonic(), time.time(), self.settings.heartbeat_timeout
        # heartbeats once a second, and not just after the store was down (nobody could beat)
        health = now - self._last_health >= 1.0
        if health:
            self._last_health = now
            health = now - self._store_back >= timeout
        for run_id, h in list(self.executor.running.items()):
            run = self.store.get(run_id)
            if run is None or h.forced or run.status != "running":
                continue
            if run.cancel_requested and h.cancel_seen is None:
                h.cancel_seen = now
                self.executor.cancel(run_id)
            elif run.cancel_requested and now - h.cancel_seen > CANCEL_GRACE_S:
                self.executor.force(run_id, "cancel", CANCEL_GRACE_S)
            elif health and (run.heartbeat is None or wall - run.heartbeat > timeout):
                self.executor.force(run_id, "heartbeat")
        if health:  # not ours: an earlier server's, or a replica's that stopped beating
            self.store.interrupt_orphans(timeout, mine=self.executor.running,
                                         alive=self.replica.alive(), adopt=self.executor.adopt)

    def _start_queued(self) -> None:
        queued = self.store.list_runs(statuses=["queued"])[::-1]   # first come, first served
        self._backlog = len(queued)
        if not queued:
            return
        busy = self.store.running_by_device()   # device -> (runs on it, held by an exclusive)
        blocked: set[str] = set()
        for run in queued:
            if self._stopping.is_set():
                return
            needs = {run.device, *run.holds}
            can_start = not (needs & blocked)
            for d in needs:
                n, held = busy.get(d, (0, False))
                if held or (d in run.holds and n > 0) or n >= self.executor.slots_for(d):
                    can_start = False
            if not can_start:
                blocked |= needs  # first come first served: nobody overtakes it there
                continue
            if self._launch(run):
                self._backlog -= 1
                busy[run.device] = (busy.get(run.device, (0, False))[0] + 1, False)
                for d in run.holds:
                    busy[d] = (busy.get(d, (0, False))[0], True)

    def _launch(self, run: Run) -> bool:
        target = KINDS.get(run.kind)
        if target is None:  # queued by a server that knew this kind
            self.store.set_status(run.id, "failed", only_from=["queued"],
                                  **reason("serve.queue.unknown_kind_queued", kind=run.kind))
            return False
        return self.executor.launch(run, job_for(run, target, self.settings))
