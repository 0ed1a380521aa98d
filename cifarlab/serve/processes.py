"""Worker processes as the server sees them: the pool of one queue (the workers running a job, the
spares), starting one, stopping one by force, and saying why one ended when it could not. The
warm spare (torch imported, the data mapped, one tiny step done) makes pressing Train show the
first loss within a second or two.

Workers are forked from a fork server that imported torch and the worker's modules once
(multiprocessing's ``forkserver``; ``spawn`` where there is none): a new worker then starts
in a fraction of a second instead of importing torch again (seconds of CPU each time). The fork
server starts no thread of ours and no CUDA context (forking a process that imported torch is
what DataLoader workers do too); a worker gets the server's environment as it is when the
worker starts, as with spawn.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from dataclasses import dataclass
from typing import Any

from cifarlab.serve.executor import Handle
from cifarlab.serve.runs import reason
from cifarlab.serve.settings import Settings, cpu_cores
from cifarlab.serve.store import RunStore
from cifarlab.serve.worker import _worker_main

SPARE_DELAY_S = 2.0          # start the next spare this long after one was taken
# What the fork server imports once, before it forks any worker.
PRELOAD = ["torch", "torchvision", "cifarlab.core.train", "cifarlab.core.data",
           "cifarlab.serve.worker"]


@dataclass
class Worker(Handle):
    """A worker running a job, as the scheduler tracks it (``Handle``: cancel_seen, forced)."""

    process: Any = None                # a multiprocessing Process (forkserver or spawn)
    spare: Any = None                  # the Spare it was: its Event must outlive the start


@dataclass
class Spare:
    """A worker started ahead of need, warming up or warm, waiting for a job on its pipe."""

    process: Any
    conn: Any                          # the sending end of the job pipe
    ready: Any                         # an Event the spare sets once it is warm


_MAIN_LOCK = threading.Lock()


def context():
    """The start method for workers: ``forkserver`` preloaded with torch, else ``spawn``."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _in_environment(env: dict, target, *args) -> None:
    """A worker's entry: the environment its server has now (a forked worker would otherwise
    have the fork server's, from when it started), then ``target``."""
    os.environ.clear()
    os.environ.update(env)
    target(*args)


def start_process(process) -> None:
    """Start a worker process without making it re-import the parent's ``__main__``.

    Spawn and forkserver normally re-run the main script in the child (as ``__mp_main__``). Under
    Streamlit the main module is the page script: the worker would run the app. The child needs
    nothing from it (its target lives in cifarlab), so ``__main__`` is swapped for an empty module
    while the process is being started.
    """
    with _MAIN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            process.start()
        finally:
            if main is not None:
                sys.modules["__main__"] = main


def kill(process) -> None:
    """Stop a worker by force, with the processes it started (its DataLoader workers): the
    worker leads a process group of its own (see ``worker._worker_main``). Falls back to the
    worker alone while it has not made its group yet."""
    if process.exitcode is not None:
        return
    pid = process.pid
    if pid and hasattr(os, "killpg"):
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
                return
        except (ProcessLookupError, PermissionError):
            pass
    process.kill()


def death_reason(exitcode: int) -> tuple[str, dict]:
    """(status, ``runs.reason``) for a worker that ended by itself without recording an outcome
    (one the queue stopped by force: ``executor.forced_reason``)."""
    if exitcode < 0:
        sig = -exitcode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        code = "serve.worker.killed_oom" if sig == signal.SIGKILL else "serve.worker.killed"
        return "failed", reason(code, signal=sig, name=name)
    if exitcode == 0:
        return "failed", reason("serve.worker.no_result")
    return "failed", reason("serve.worker.exit_status", status=exitcode)


class WorkerPool:
    """The worker processes of one queue: ``running`` (run id -> Worker) and the spares."""

    def __init__(self, store: RunStore, settings: Settings):
        self.store = store
        self.settings = settings
        self._mp = context()
        self.running: dict[str, Worker] = {}
        self.spares: list[Spare] = []
        self._spare_deaths: list[float] = []
        self._next_spare_at = 0.0

    def take_spare(self) -> Spare | None:
        """A live spare, a warm one first (one still warming up beats starting a new one)."""
        for spare in [s for s in self.spares if not s.process.is_alive()]:
            self.spares.remove(spare)
            spare.process.join(timeout=0)
        if not self.spares:
            return None
        spare = next((s for s in self.spares if s.ready.is_set()), self.spares[0])
        self.spares.remove(spare)
        return spare

    def put_back(self, spare: Spare) -> None:
        self.spares.insert(0, spare)

    def run(self, run_id: str, device: str, job: dict, spare: Spare | None) -> tuple[Any, bool]:
        """Hand ``job`` to ``spare``, or to a new process when there is none (or it just died);
        returns (the process, whether it is a new one)."""
        process = None
        if spare is not None:
            try:
                spare.conn.send(job)
                spare.conn.close()
                process = spare.process
            except (OSError, ValueError):  # the spare died just now
                process = None
        new = process is None
        if new:
            process = self._new_process(None, job)
        self.running[run_id] = Worker(run_id, device, process=process, spare=spare)
        self._next_spare_at = time.monotonic() + SPARE_DELAY_S
        return process, new

    def ended(self) -> list[Worker]:
        """The workers whose process has ended since the last call (no longer ``running``);
        spares that died are dropped and counted."""
        out = []
        for run_id, w in list(self.running.items()):
            if w.process.exitcode is not None:
                w.process.join(timeout=0)
                del self.running[run_id]
                out.append(w)
        for spare in list(self.spares):
            if spare.process.exitcode is not None:
                self.spares.remove(spare)
                spare.process.join(timeout=0)
                self._spare_deaths.append(time.monotonic())
        return out

    def force(self, w: Worker, why: str) -> None:
        """Stop a running worker by force; ``why``: "cancel", "heartbeat" or "shutdown"."""
        w.forced = why
        kill(w.process)

    def _new_process(self, conn, job: dict | None, ready=None):
        process = self._mp.Process(target=_in_environment,
                                   args=(dict(os.environ), _worker_main, conn, self.store,
                                         self.settings, job, ready),
                                   name="cifarlab-worker", daemon=False)
        start_process(process)
        return process

    def keep_spares(self, backlog: int) -> None:
        """Start spares up to ``spare_workers``: at once when runs wait (``backlog``), else a
        moment after the last start and only when the cores have room."""
        now = time.monotonic()
        if not backlog:
            # Nobody is waiting: don't let a spare's imports (seconds of CPU) slow the runs
            # going on. Wait a moment after a run started (its first steps), and until the
            # cores have room: a CPU run uses worker_threads cores, a GPU run about one.
            if now < self._next_spare_at:
                return
            busy = sum(self.settings.worker_threads if w.device == "cpu" else 1
                       for w in self.running.values() if w.process.exitcode is None)
            if busy and busy + 1 > cpu_cores():
                return
        self._spare_deaths = [t for t in self._spare_deaths if now - t < 60]
        if len(self._spare_deaths) >= 3:  # spares keep dying: start runs cold for a minute
            return
        while sum(1 for s in self.spares if s.process.is_alive()) < self.settings.spare_workers:
            recv, send = self._mp.Pipe(duplex=False)
            ready = self._mp.Event()
            process = self._new_process(recv, None, ready)
            recv.close()
            self.spares.append(Spare(process, send, ready))

    def stop_all(self, timeout: float) -> None:
        """Kill the spares and every running worker (marked "shutdown"), and wait for them."""
        for spare in self.spares:
            try:
                spare.conn.close()
            except OSError:
                pass
            kill(spare.process)
        for w in self.running.values():
            if w.process.exitcode is None:
                self.force(w, "shutdown")
        deadline = time.monotonic() + timeout
        for p in [s.process for s in self.spares] + [w.process for w in self.running.values()]:
            p.join(max(0.0, deadline - time.monotonic()))
        self.spares.clear()

    def warm(self) -> int:
        """How many spares are warm."""
        return sum(1 for s in list(self.spares) if s.ready.is_set())
