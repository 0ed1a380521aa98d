"""An executor that runs each job in a thread of the test process (rq's ``is_async=False``).

The queue's own logic (first come first served per device, slots, exclusive jobs, limits,
cancels, restarts, time limits, the bookkeeping of a forced stop) does not depend on where a job
runs, so most queue and page tests run it here, with no worker process spawned. A job runs the
way a local worker runs it (``worker.run_job`` with a ``JobContext`` over the real run store:
events in batches, the cancel flag read from the store, a heartbeat), in a thread.

What only real workers have (spawn, process groups, a worker killed by a signal, its priority,
the Ray task and its control actor) is tested on the real executors: test_executors.py holds
the contract every executor meets (this one included, so the stand-in stays faithful), and
test_jobs.py the local executor's process tests.

A thread cannot be killed: a forced stop ("cancel" after the grace period, "heartbeat",
"shutdown") settles the run at once, as a killed worker's would be, and the job's thread
unwinds at its next ``should_stop`` or ``emit`` (``Killed``) without writing anything more.

    from inline_executor import use_inline_executor
    use_inline_executor(monkeypatch)      # every JobQueue made afterwards runs jobs inline
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from cifarlab.serve.executor import Executor, Handle, import_target
from cifarlab.serve.runs import Run, reason
from cifarlab.serve.worker import JobContext, _beat, run_job


class Killed(BaseException):
    """Raised inside a job whose run was stopped by force (what SIGKILL is to a process)."""


class _Context(JobContext):
    """A JobContext that stops dead once its run was stopped by force."""

    def __init__(self, *args, killed: threading.Event, **kw):
        super().__init__(*args, **kw)
        self._killed = killed

    def should_stop(self) -> bool:
        if self._killed.is_set():
            raise Killed()
        return super().should_stop()

    def emit(self, kind: str, data: dict) -> None:
        if self._killed.is_set():
            raise Killed()
        super().emit(kind, data)

    def flush(self) -> None:
        if not self._killed.is_set():
            super().flush()


@dataclass
class _Thread(Handle):
    """A job's thread, as the queue watches it (``Handle``: cancel_seen, forced)."""

    killed: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class InlineExecutor(Executor):
    """Runs each job in a daemon thread of this process (see the module docstring)."""

    name = "inline"

    def __init__(self, store, settings):
        super().__init__(store, settings)
        self.running: dict[str, _Thread] = {}
        self.started = 0          # jobs started (tests count them)

    def launch(self, run: Run, job: dict) -> bool:
        if not self.store.set_status(run.id, "running", only_from=["queued"],
                                     worker_pid=os.getpid()):
            return False  # cancelled meanwhile
        h = _Thread(run.id, run.device)
        h.thread = threading.Thread(target=self._run, args=(job, h), daemon=True,
                                    name=f"cifarlab-inline-{run.id}")
        self.running[run.id] = h
        self.started += 1
        h.thread.start()
        return True

    def _run(self, job: dict, h: _Thread) -> None:
        run_id = job["run_id"]
        beating = threading.Event()
        threading.Thread(target=_beat, args=(self.store, run_id, beating), daemon=True).start()
        ctx = _Context(self.store, run_id, job["device"], job.get("data_source"),
                       time_limit_s=job.get("time_limit_s"), killed=h.killed)
        try:
            run = self.store.get(run_id)
            if run is None or run.status != "running":
                return
            fn = _unless_killed(lambda payload, ctx: import_target(job["target"])(payload, ctx))
            status, fields = run_job(fn, dict(run.config), ctx)
            if not h.killed.is_set():
                self.store.set_status(run_id, status, only_from=["running"], **fields)
        finally:
            beating.set()

    def poll(self) -> None:
        """Threads that ended, and runs stopped by force: the run gets its outcome (a thread
        that ended without recording one says so, as a worker that exited would)."""
        for run_id, h in list(self.running.items()):
            if not (h.forced or not h.thread.is_alive()):
                continue
            del self.running[run_id]
            self.settle_dead(h, lambda: ("failed", reason("serve.worker.no_result")))

    def force(self, run_id: str, why: str, seconds: float = 0.0) -> None:
        h = self.running.get(run_id)
        if h is not None and not h.forced and h.thread.is_alive():
            h.forced, h.forced_s = why, seconds
            h.killed.set()

    def keep_warm(self, backlog: int) -> None:
        """A thread needs no warming up."""

    def warm(self) -> int:
        return self.settings.spare_workers

    def stop_all(self, timeout: float) -> None:
        threads = [h.thread for h in self.running.values()]
        for run_id in list(self.running):
            self.force(run_id, "shutdown")
        self.poll()
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))


def _unless_killed(fn):
    """``fn``, returning quietly once its run was stopped by force (its outcome is settled)."""
    def job(payload: dict, ctx: _Context) -> dict:
        try:
            return fn(payload, ctx)
        except Killed:
            return {}
    return job


def use_inline_executor(monkeypatch) -> None:
    """Every JobQueue created from now on (until ``monkeypatch`` is undone) runs its jobs in
    threads of this process; its settings' ``executor`` is not read."""
    from cifarlab.serve import queue as jobs

    monkeypatch.setattr(jobs, "make_executor", InlineExecutor)
