"""The local executor (default): workers forked from a fork server with torch, warm spares."""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from dataclasses import dataclass
from typing import Any

from cifarlab.serve.executor import Executor, Handle
from cifarlab.serve.runs import Run, reason
from cifarlab.serve.settings import cpu_cores
from cifarlab.serve.worker import _worker_main

SPARE_DELAY_S = 2.0          # start the next spare this long after one was taken or died
# What the fork server imports once, before it forks any worker (it starts no thread of ours
# and no CUDA context).
PRELOAD = ["torch", "torchvision", "cifarlab.core.train", "cifarlab.core.data",
           "cifarlab.serve.worker"]
_MAIN_LOCK = threading.Lock()


@dataclass
class Worker(Handle):
    process: Any = None                # a multiprocessing Process
    spare: Any = None                  # the Spare it was: its Event must outlive the start


@dataclass
class Spare:
    """A worker started ahead of need, waiting for a job on its pipe."""

    process: Any
    conn: Any                          # the sending end of the job pipe
    ready: Any                         # an Event the spare sets once it is warm


def context():
    """The start method for workers: ``forkserver`` (POSIX, as process groups), torch preloaded."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _in_environment(env: dict, target, *args) -> None:
    """A worker's entry: the server's environment now, not the fork server's from its start."""
    os.environ.clear()
    os.environ.update(env)
    target(*args)


def kill(process) -> None:
    """Stop a worker by force, with its process group (its DataLoader workers) once it has one."""
    if process.exitcode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if process.pid and os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, signal.SIGKILL)
            return
    process.kill()


def death_reason(exitcode: int) -> tuple[str, dict]:
    """(status, ``runs.reason``) for a worker that ended without recording an outcome."""
    if exitcode < 0:
        sig = -exitcode
        code = "serve.worker.killed_oom" if sig == signal.SIGKILL else "serve.worker.killed"
        name = next((s.name for s in signal.Signals if s == sig), f"signal {sig}")
        return "failed", reason(code, signal=sig, name=name)
    if exitcode == 0:
        return "failed", reason("serve.worker.no_result")
    return "failed", reason("serve.worker.exit_status", status=exitcode)


class LocalExecutor(Executor):
    """Runs in worker processes of this machine: ``running`` (run id -> Worker), ``spares``."""

    name = "local"

    def __init__(self, store, settings):
        super().__init__(store, settings)
        self._mp = context()
        self.running: dict[str, Worker] = {}
        self.spares: list[Spare] = []
        self._spare_deaths: list[float] = []
        self._next_spare_at = 0.0

    def launch(self, run: Run, job: dict) -> bool:
        spare = self._take_spare()
        pid = spare.process.pid if spare else None
        if not self.store.set_status(run.id, "running", only_from=["queued"], worker_pid=pid):
            if spare:
                self.spares.insert(0, spare)   # first again
            return False  # cancelled meanwhile
        process = None
        if spare is not None:
            with contextlib.suppress(OSError, ValueError):  # the spare died just now
                spare.conn.send(job)
                spare.conn.close()
                process = spare.process
        started = process is None
        if started:
            process = self._new_process(None, job)
        # watched before the store hears of it: a store that fails this write must not leave a
        # worker that nothing settles, forces or stops
        self.running[run.id] = Worker(run.id, run.device, process=process, spare=spare)
        if started:
            self.store.set_worker_pid(run.id, process.pid)
        self._next_spare_at = time.monotonic() + SPARE_DELAY_S
        return True

    def _take_spare(self) -> Spare | None:
        """A live spare, a warm one first (one warming up still beats a new one)."""
        self.spares = [s for s in self.spares if s.process.is_alive()]
        if not self.spares:
            return None
        spare = next((s for s in self.spares if s.ready.is_set()), self.spares[0])
        self.spares.remove(spare)
        return spare

    def _new_process(self, conn, job: dict | None, ready=None):
        """Start a worker; an empty ``__main__`` meanwhile (a worker would re-run the page's)."""
        process = self._mp.Process(target=_in_environment,
                                   args=(dict(os.environ), _worker_main, conn, self.store,
                                         self.settings, job, ready),
                                   name="cifarlab-worker", daemon=False)
        with _MAIN_LOCK:
            main = sys.modules.get("__main__")
            sys.modules["__main__"] = types.ModuleType("__main__")
            try:
                process.start()
            finally:
                if main is not None:
                    sys.modules["__main__"] = main
        return process

    def poll(self) -> None:
        for run_id, w in list(self.running.items()):
            if w.process.exitcode is None:
                continue
            del self.running[run_id]
            self.settle_dead(w, lambda w=w: death_reason(w.process.exitcode))
        for spare in list(self.spares):
            if spare.process.exitcode is not None:
                self.spares.remove(spare)
                self._spare_deaths.append(time.monotonic())

    def force(self, run_id: str, why: str, seconds: float = 0.0) -> None:
        w = self.running.get(run_id)
        if w is not None and not w.forced and w.process.exitcode is None:
            w.forced, w.forced_s = why, seconds
            kill(w.process)

    def keep_warm(self, backlog: int) -> None:
        """Spares up to ``spare_workers``: at once when runs wait, else when the cores have room."""
        now = time.monotonic()
        self._spare_deaths = [t for t in self._spare_deaths if now - t < 60]
        # spares keep dying: runs start cold for a minute. One that just died (the fork server
        # stopping with the whole process: a new spare would start a new one) waits a moment.
        if len(self._spare_deaths) >= 3 or now - max(self._spare_deaths, default=0) < SPARE_DELAY_S:
            return
        if not backlog:
            if now < self._next_spare_at:
                return
            # a CPU run uses worker_threads cores, a GPU run about one
            busy = sum(self.settings.worker_threads if w.device == "cpu" else 1
                       for w in self.running.values() if w.process.exitcode is None)
            if busy and busy + 1 > cpu_cores():
                return
        while sum(1 for s in self.spares if s.process.is_alive()) < self.settings.spare_workers:
            recv, send = self._mp.Pipe(duplex=False)
            ready = self._mp.Event()
            process = self._new_process(recv, None, ready)
            recv.close()
            self.spares.append(Spare(process, send, ready))

    def warm(self) -> int:
        return sum(1 for s in list(self.spares) if s.ready.is_set())

    def stop_all(self, timeout: float) -> None:
        """Kill the spares and every running worker ("shutdown"), wait, record why each ended."""
        for spare in self.spares:
            spare.conn.close()
            kill(spare.process)
        for w in self.running.values():
            if w.process.exitcode is None:
                w.forced = "shutdown"
                kill(w.process)
        deadline = time.monotonic() + timeout
        for p in [s.process for s in self.spares] + [w.process for w in self.running.values()]:
            p.join(max(0.0, deadline - time.monotonic()))
        self.spares.clear()
        self.poll()
