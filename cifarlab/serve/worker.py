"""The worker process: one job, niced, its progress in the store, any exception ``failed``."""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from cifarlab.core import data as data_mod
from cifarlab.core.config import TrainConfig
from cifarlab.errors import CifarLabError
from cifarlab.serve.database import StoreUnreachable
from cifarlab.serve.executor import import_target
from cifarlab.serve.runs import reason
from cifarlab.serve.settings import Settings
from cifarlab.serve.store import RunStore

HEARTBEAT_S = 2.0            # workers beat this often
SETTLE_PATIENCE_S = 600.0    # how long a finished run waits for an unreachable store
# written at once; the others batched
_URGENT = frozenset({"start", "epoch", "diverged", "eval", "done", "stop"})


def run_train_job(payload: dict, ctx: JobContext) -> dict:
    """The "train" kind: the config ``JobQueue.submit`` admitted and placed (``ctx.device``)."""
    from cifarlab.core.train import train

    config = TrainConfig.admitted(payload).on_device(ctx.device)
    result = train(config, ctx.data(), on_event=lambda e: ctx.emit(e.kind, e.data),
                   should_stop=ctx.should_stop, checkpoint_path=ctx.checkpoint_path,
                   eval_each_epoch=True, admitted=True)
    ctx.weights_error = result.checkpoint_error
    return result.summary()


class JobContext:
    """What a job function gets: where it runs, how to report, when to stop, the data."""

    def __init__(self, store: RunStore, run_id: str, device: str, data_source: str | None = None,
                 data: Any = None, data_error: BaseException | None = None,
                 parent_alive: Callable[[], bool] | None = None,
                 time_limit_s: float | None = None):
        self.store, self.run_id, self.device = store, run_id, device
        self.checkpoint_path: Path = store.checkpoint_path(run_id)
        self.time_limit_s = time_limit_s
        self.stop_reason: str | None = None   # "cancel" | "server" | "time_limit"
        self.weights_error: BaseException | None = None  # the disk was full at the end
        self._data_source = data_source
        self._data = data
        self._data_error = data_error
        self._parent_alive = parent_alive or (lambda: True)
        self._started = time.monotonic()
        self._steps: list[int] = []
        self._losses: list[float] = []
        self._events: list[tuple[str, dict]] = []
        self._progress: dict | None = None
        self._last_flush = 0.0
        self._retry_at = 0.0
        self._last_poll = 0.0
        self._last_clear_poll_t: float | None = None  # time.time() of the last poll seeing none
        self._calls = 0
        self._lock = threading.Lock()

    def data(self):
        if self._data is None:
            if self._data_error is not None:  # the spare's attempt failed: say why now
                err, self._data_error = self._data_error, None
                raise err
            self._data = data_mod.load(self._data_source)
        return self._data

    def emit(self, kind: str, data: dict) -> None:
        """Record an event ("losses": {steps, losses}; "progress": the run's row), batched."""
        with self._lock:
            if kind == "losses":
                self._steps.extend(data["steps"])
                self._losses.extend(data["losses"])
            elif kind == "progress":
                self._progress = dict(data)
            else:
                self._events.append((kind, data))
                if kind == "start" and self._progress is None:
                    self._progress = {"step": 0, "total_steps": data.get("total_steps"),
                                      "elapsed_s": 0.0, "images_per_second": 0.0}
            due = time.monotonic() - self._last_flush >= 0.25   # batched: 4 writes a second
        if kind in _URGENT or (due and kind != "losses") or len(self._steps) >= 50000:
            self.flush()

    def flush(self, force: bool = False) -> bool:
        """Write what is buffered; False (the batch kept for later) when the store is away."""
        if not force and time.monotonic() < self._retry_at:
            return False
        with self._lock:
            steps, losses = self._steps, self._losses
            events, progress = self._events, self._progress
            self._steps, self._losses, self._events, self._progress = [], [], [], None
            self._last_flush = time.monotonic()
        if steps or events or progress is not None:
            try:
                self.store.record(self.run_id, steps=steps, losses=losses, events=events,
                                  progress=progress)
            except StoreUnreachable:
                with self._lock:   # back in front of what came meanwhile
                    self._steps, self._losses = steps + self._steps, losses + self._losses
                    self._events = events + self._events
                    self._progress = self._progress or progress
                self._retry_at = time.monotonic() + 1.0
                return False
        return True

    def should_stop(self) -> bool:
        """True once the run was cancelled, ran past its time limit, or the server went away."""
        if self.stop_reason is not None:
            return True
        self._calls += 1
        now = time.monotonic()
        if self.time_limit_s is not None and now - self._started > self.time_limit_s:
            self.stop_reason = "time_limit"
        elif now - self._last_poll >= 0.25:   # the cancel flag, read at most this often
            self._last_poll = now
            poll_t = time.time()
            try:
                cancelled = self.store.cancel_requested(self.run_id)
            except StoreUnreachable:   # no cancel can have been asked since
                cancelled = False
            if cancelled:
                self.stop_reason = "cancel"
            elif not self._parent_alive():
                self.stop_reason = "server"
            else:
                self._last_clear_poll_t = poll_t
        if self.stop_reason is None:
            return False
        self.emit("stop", {"reason": self.stop_reason, "calls": self._calls, "seen_t": time.time(),
                           "last_clear_poll_t": self._last_clear_poll_t})
        return True


def _worker_main(conn, store: RunStore, settings: Settings, job: dict | None,
                 ready=None) -> None:
    """A worker process: warm up (``ready`` set then), run one job (``job`` or from ``conn``).
    The job arrives on a thread that starts the heartbeat: a slow warm-up never looks dead."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C on the server: the server decides
    _lower_priority(settings.worker_nice)
    # A process group of its own: a forced stop (local_executor.kill) takes its DataLoader processes
    os.setpgrp()
    beating = threading.Event()   # set once the job has ended
    got = {"job": job}

    def wait_for_job() -> None:
        if got["job"] is None:
            try:
                got["job"] = conn.recv()
            except (EOFError, OSError):  # the server closed the pipe: no job for us
                return
        threading.Thread(target=_beat, args=(store, got["job"]["run_id"], beating),
                         name="cifarlab-heartbeat", daemon=True).start()

    waiter = threading.Thread(target=wait_for_job, name="cifarlab-job-wait", daemon=True)
    waiter.start()
    data = data_error = None
    try:
        import torch

        torch.set_num_threads(settings.worker_threads)
        if job is None:  # a spare warms up; a worker made for its job loads what it needs
            from cifarlab.core import train as _train  # noqa: F401 - the model, evaluation, ...
            _warm_up()
            data = data_mod.load(settings.data)
    except Exception as err:  # noqa: BLE001 - said when the job asks for the data
        data_error = err
    if ready is not None:
        ready.set()
    waiter.join()
    if got["job"] is None:
        return
    job, parent = got["job"], multiprocessing.parent_process()
    ctx = JobContext(store, job["run_id"], job["device"], job.get("data_source"), data,
                     data_error, parent_alive=parent.is_alive if parent is not None else None,
                     time_limit_s=job.get("time_limit_s"))
    try:
        try:
            run = store.get(job["run_id"])
        except Exception as err:  # noqa: BLE001 - the store away at the start: said, in words
            settle(store, ctx, "failed", failure(err))
            return
        if run is not None and run.status == "running":   # not deleted or settled meanwhile
            settle(store, ctx, *run_job(job["target"], job["payload"], ctx))
    finally:
        beating.set()


def _lower_priority(steps: int) -> None:
    if steps > 0:
        with contextlib.suppress(OSError):  # not allowed here: run at the server's priority
            os.nice(steps)


def _warm_up() -> None:
    """One tiny forward and backward pass, so the first real step does not pay for lazy inits."""
    import torch

    from cifarlab.core.model import Net

    net = Net()
    net(torch.zeros(2, 3, 32, 32)).sum().backward()


def _beat(store: RunStore, run_id: str, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_S):
        with contextlib.suppress(Exception):  # a busy store: try again next beat
            store.heartbeat(run_id)


def settle(store: RunStore, ctx: Any, status: str, fields: dict,
           patience_s: float = SETTLE_PATIENCE_S) -> None:
    """Record the outcome, retried each second for ``patience_s`` while the store is away."""
    deadline = time.monotonic() + patience_s
    while True:
        with contextlib.suppress(StoreUnreachable):
            if ctx.flush(force=True):
                store.set_status(ctx.run_id, status, only_from=["running"], **fields)
                return
        if time.monotonic() > deadline:
            print(f"cifarlab worker: run {ctx.run_id}: the run store stayed unreachable; its "
                  f"outcome ({status}) could not be recorded", file=sys.stderr, flush=True)
            return
        time.sleep(1.0)


def run_job(fn: Callable[[dict, Any], dict] | str, payload: dict,
            ctx: JobContext) -> tuple[str, dict[str, Any]]:
    """Run a job function (or its ``"module:function"``): (status, the fields to record)."""
    try:
        result = (import_target(fn) if isinstance(fn, str) else fn)(payload, ctx)
        ctx.flush()
        result = dict(result or {})
        env = result.pop("env", None)
        result.setdefault("worker_peak_rss_mb", _peak_rss_mb())  # for hosts: a run's memory
        why: dict[str, Any] = {}
        if ctx.stop_reason == "server":
            status, why = "interrupted", reason("serve.worker.server_stopped")
        elif ctx.stop_reason == "time_limit":
            status, why = "cancelled", reason("serve.worker.time_limit",
                                              seconds=round(ctx.time_limit_s))
        elif result.get("diverged"):   # the partial result is kept; the run did not finish
            status, why = "failed", reason("train.diverged", step=result["diverged"][
                "step"], loss=result["diverged"]["loss"], lr=result["config"]["lr"])
        elif ctx.stop_reason == "cancel" or result.get("cancelled"):
            status = "cancelled"
        else:
            status = "done"
        if getattr(ctx, "weights_error", None) is not None:  # results kept, weights lost
            print(f"cifarlab worker: run {ctx.run_id}: the server's disk is full; its checkpoint "
                  f"{ctx.checkpoint_path} could not be written ({ctx.weights_error})",
                  file=sys.stderr, flush=True)
            status = "failed" if status == "done" else status
            why = reason("serve.worker.disk_full")
        return status, {"result": result, "env": env, **why}
    except BaseException as err:  # noqa: BLE001 - every failure is recorded, in words
        tb = traceback.format_exc()
        print(f"cifarlab worker: run {ctx.run_id} failed:\n{tb}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):  # the failure is recorded next, flushed or not
            ctx.flush()
        try:
            why = failure(err)
        except Exception:  # noqa: BLE001 - a message that cannot be rendered: still record it
            why = {"error": type(err).__name__}
        return "failed", {"traceback": tb, **why}


def _peak_rss_mb() -> float:
    """Peak resident MB: Linux's ``VmHWM`` (``ru_maxrss`` may be the parent's), else macOS's."""
    try:
        with open("/proc/self/status") as f:
            return next(round(int(line.split()[1]) / 1024, 1) for line in f
                        if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def failure(err: BaseException) -> dict[str, Any]:
    """Why a job failed, in one line a student can read."""
    if isinstance(err, CifarLabError):   # its own code and parameters, on one line
        return {"error": " ".join(str(err).split()), "error_code": err.code or None,
                "error_params": dict(err.params)}
    name = type(err).__name__
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    if name == "OutOfMemoryError":
        return reason("serve.worker.gpu_out_of_memory", detail=first[:200])
    if isinstance(err, MemoryError):
        return reason("serve.worker.out_of_memory")
    if not first:
        return reason("serve.worker.exception_bare", name=name)
    return reason("serve.worker.exception", name=name, message=first[:300 - len(name) - 2])
