"""The job queue: training (and timing) runs in worker processes, first come first served.

    queue = get_queue()                      # one per server process (pages: st.cache_resource)
    run_id = queue.submit(session_id, TrainConfig(epochs=1))      # JobError if it can't queue
    queue.store.get(run_id).status           # queued -> running -> done | failed | cancelled
    queue.cancel(session_id, run_id)

Training never runs in the Streamlit script thread, nor in the server process at all: each run
gets its own worker process, started with multiprocessing's **spawn** method (a fresh
interpreter: CUDA does not survive ``fork``), so a crash, an out-of-memory kill or a cancel of
one run never takes the server down, and a finished run gives all its memory back.

The scheduler is a daemon thread in the serving process. Every ~0.2 s (and at once on a
submit) it:

- reaps workers that ended; a worker that died without recording an outcome (killed by a
  signal, out of memory, crashed) gets its run marked ``failed`` with the reason;
- stops, by force, a worker that ignored a cancel for ``CANCEL_GRACE_S``, and one whose
  heartbeat went silent for ``heartbeat_timeout``;
- starts queued runs, first come first served per device, up to ``cpu_slots`` runs on the CPU,
  ``gpu_slots`` per ``cuda:N`` and one on ``mps``. An *exclusive* job (the CPU-vs-GPU timing
  page) waits until its device(s) are idle and keeps them to itself; the runs queued behind it
  on those devices wait for it (strict FIFO, so it cannot starve);
- keeps a spare worker started and warm (torch and cifarlab imported, the data set memory-mapped,
  one tiny forward/backward done), so pressing Train shows the first loss within a second or
  two. The spare takes the next job and a new spare is started behind it (at once when runs
  are waiting; otherwise a moment later, once the cores have room, so its imports do not slow
  the runs going on); each run still has a process of its own.

Spawn re-imports the parent's ``__main__`` in the child; under Streamlit that is the page
script, so workers are started with ``__main__`` briefly swapped out (``_start_process``).
Workers ignore Ctrl-C (the server decides) and stop by themselves if the server process dies.

A worker runs the job kind's function ``fn(payload, ctx)`` (see ``register_kind``), writes its
events into the run store in small batches (step losses, the latest progress, epoch and eval
events), beats a heartbeat, polls for a cancel at most every 0.25 s inside ``should_stop``
(training stops after the current step and keeps what it learned), and records the result and
the outcome. Any exception becomes status ``failed`` with a one-line reason a student can read
(``CifarLabError`` messages as they are); the traceback is kept separately for the host.

The run store (SQLite) is the source of truth: a restart marks runs whose worker is gone as
``interrupted`` and runs the queued ones. One serving process per ``home``.
"""
from __future__ import annotations

import atexit
import importlib
import logging
import multiprocessing
import multiprocessing.util  # noqa: F401 - import before our atexit hook (see JobQueue)
import os
import re
import signal
import sys
import threading
import time
import traceback
import types
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cifarlab.core.config import TrainConfig
from cifarlab.errors import CifarLabError, JobError
from cifarlab.serve.settings import Settings, cpu_cores, load_settings
from cifarlab.serve.store import (ACTIVE, FINISHED, KIND_RE, STATUSES, Run, RunStore, pid_alive,
                                  validate_run_id, validate_session)

# Re-exported for pages, which reach the store only through the queue (an import-linter contract).

log = logging.getLogger("cifarlab.serve.queue")

TICK_S = 0.2                 # scheduler period
CANCEL_POLL_S = 0.25         # workers read the cancel flag at most this often
FLUSH_S = 0.25               # workers write buffered events at most this often
HEARTBEAT_S = 2.0            # workers beat this often
CANCEL_GRACE_S = 60.0        # a worker still running this long after a cancel is killed
SPARE_DELAY_S = 2.0          # start the next spare this long after one was taken
FULL_TRAIN_IMAGES = 50000    # CIFAR-10's training set, when the data is not loaded here
_URGENT = frozenset({"start", "epoch", "eval", "done"})  # written at once; the rest batched


# ---------------------------------------------------------------------------------------------
# Job kinds
# ---------------------------------------------------------------------------------------------
_KINDS: dict[str, str] = {}
_TARGET_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def register_kind(name: str, target: str) -> None:
    """Register a job kind: ``target`` is ``"package.module:function"``.

    The function is ``fn(payload: dict, ctx: JobContext) -> dict`` (the result, stored as JSON).
    It is imported in the worker process when a job of this kind starts, never in the server.
    A result with ``"cancelled": True`` (or a cancel seen by ``ctx.should_stop``) ends the run as
    ``cancelled``; an exception ends it as ``failed``.
    """
    if not isinstance(name, str) or not KIND_RE.fullmatch(name):
        raise ValueError(f"a job kind is a short lowercase name, not {name!r}")
    if not isinstance(target, str) or not _TARGET_RE.fullmatch(target):
        raise ValueError(f"a job target is 'module:function', not {target!r}")
    _KINDS[name] = target


def registered_kinds() -> dict[str, str]:
    return dict(_KINDS)


def _import_target(target: str) -> Callable[[dict, "JobContext"], dict]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def run_train_job(payload: dict, ctx: "JobContext") -> dict:
    """The "train" kind: ``cifarlab.core.train.train`` on the config in ``payload``."""
    from cifarlab.core.train import train

    config = TrainConfig.from_dict(payload).replace(device=ctx.device)
    result = train(config, ctx.data(), on_event=lambda e: ctx.emit(e.kind, e.data),
                   should_stop=ctx.should_stop, checkpoint_path=ctx.checkpoint_path,
                   eval_each_epoch=True)
    return result.summary()


register_kind("train", "cifarlab.serve.queue:run_train_job")
register_kind("timing", "cifarlab.lab.gpu:run_timing_job")


# ---------------------------------------------------------------------------------------------
# In the worker process
# ---------------------------------------------------------------------------------------------
class JobContext:
    """What a job function gets: where it runs, how to report, when to stop, the data."""

    def __init__(self, store: RunStore, run_id: str, device: str, data_source: str | None = None,
                 data: Any = None, data_error: BaseException | None = None,
                 parent_alive: Callable[[], bool] | None = None):
        self.store = store
        self.run_id = run_id
        self.device = device
        self.checkpoint_path: Path = store.checkpoint_path(run_id)
        self.stop_reason: str | None = None   # "cancel" | "server" once should_stop said so
        self._data_source = data_source
        self._data = data
        self._data_error = data_error
        self._parent_alive = parent_alive or (lambda: True)
        self._steps: list[int] = []
        self._losses: list[float] = []
        self._events: list[tuple[str, dict]] = []
        self._progress: dict | None = None
        self._last_flush = 0.0
        self._last_poll = 0.0
        self._lock = threading.Lock()

    def data(self):
        """The server's data set (``cifarlab.core.data.load``: decoded once, memory-mapped)."""
        if self._data is None:
            if self._data_error is not None:  # the spare's attempt failed: say why now
                err, self._data_error = self._data_error, None
                raise err
            from cifarlab.core import data as data_mod

            self._data = data_mod.load(self._data_source)
        return self._data

    def emit(self, kind: str, data: dict) -> None:
        """Record an event: "losses" ({steps, losses}) go to the losses table, "progress" into
        the run's row, anything else into its events. Written in small batches."""
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
                                      "elapsed_s": 0.0, "eta_s": None, "images_per_second": 0.0}
            due = time.monotonic() - self._last_flush >= FLUSH_S
        if kind in _URGENT or (due and kind != "losses") or len(self._steps) >= 50000:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            steps, losses, events, progress = self._steps, self._losses, self._events, self._progress
            self._steps, self._losses, self._events, self._progress = [], [], [], None
            self._last_flush = time.monotonic()
        if steps or events or progress is not None:
            self.store.record(self.run_id, steps=steps, losses=losses, events=events,
                              progress=progress)

    def should_stop(self) -> bool:
        """True once the run was cancelled (or the server went away). Cheap to call every step:
        the store is read at most every 0.25 s."""
        if self.stop_reason is not None:
            return True
        now = time.monotonic()
        if now - self._last_poll >= CANCEL_POLL_S:
            self._last_poll = now
            if self.store.cancel_requested(self.run_id):
                self.stop_reason = "cancel"
            elif not self._parent_alive():
                self.stop_reason = "server"
        return self.stop_reason is not None


def _worker_main(conn, store: RunStore, settings: Settings, job: dict | None,
                 ready=None) -> None:
    """A worker process: warm up, take one job (``job``, or the next one sent on ``conn``),
    run it, record the outcome, exit. ``ready`` (an Event) is set once warm.

    A spare may be handed its job while it is still warming up (say, decoding the data set the
    first time): a thread waits for the job meanwhile and starts the heartbeat at once, so the
    scheduler never takes a slow start for a dead worker.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C on the server: the server decides
    if hasattr(os, "setpgrp"):
        # A process group of its own: a forced stop (_kill) then takes the DataLoader
        # processes the run started along with it, instead of leaving them orphaned.
        try:
            os.setpgrp()
        except OSError:
            pass
    beat = _Heartbeat(store)
    waiter = None
    got: dict[str, Any] = {}
    if job is not None:
        beat.start(job["run_id"])
    else:
        def wait_for_job() -> None:
            try:
                got["job"] = conn.recv()
            except (EOFError, OSError):  # the server closed the pipe: no job for us
                got["job"] = None
            if got["job"] is not None:
                beat.start(got["job"]["run_id"])

        waiter = threading.Thread(target=wait_for_job, name="cifarlab-job-wait", daemon=True)
        waiter.start()
    data = data_error = None
    try:
        import torch

        torch.set_num_threads(settings.worker_threads)
        from cifarlab.core import data as data_mod
        from cifarlab.core import train as _train  # noqa: F401 - imports the model, evaluation, ...
        try:
            data = data_mod.load(settings.data)
        except Exception as err:  # reported when a job asks for the data
            data_error = err
        _warm_up()
    except Exception as err:  # a broken install: report it on the job
        data_error = err
    if ready is not None:
        ready.set()
    if waiter is not None:
        waiter.join()
        job = got.get("job")
        if job is None:
            return
    try:
        _run_job(store, job, data, data_error)
    finally:
        beat.stop()


def _warm_up() -> None:
    """One tiny forward and backward pass, so the first real step does not pay for lazy inits."""
    import torch

    from cifarlab.core.model import Net

    net = Net()
    net(torch.zeros(2, 3, 32, 32)).sum().backward()


class _Heartbeat:
    def __init__(self, store: RunStore):
        self.store = store
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, run_id: str) -> None:
        def loop() -> None:
            while not self._stop.wait(HEARTBEAT_S):
                try:
                    self.store.heartbeat(run_id)
                except Exception:  # noqa: BLE001 - a busy store: try again next beat
                    pass

        self._thread = threading.Thread(target=loop, name="cifarlab-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()


def _run_job(store: RunStore, job: dict, data: Any, data_error: BaseException | None) -> None:
    run_id = job["run_id"]
    parent = multiprocessing.parent_process()
    ctx = JobContext(store, run_id, job["device"], job.get("data_source"), data, data_error,
                     parent_alive=parent.is_alive if parent is not None else None)
    try:
        run = store.get(run_id)
        if run is None or run.status != "running":
            return  # deleted or settled while we were starting
        fn = _import_target(job["target"])
        result = fn(dict(run.config), ctx)
        ctx.flush()
        result = dict(result or {})
        env = result.pop("env", None)
        peak = _peak_rss_mb()
        if peak is not None:  # for hosts: what one run costs in memory
            result.setdefault("worker_peak_rss_mb", peak)
        if ctx.stop_reason == "server":
            status, error = "interrupted", ("The server stopped while this run was training; "
                                            "what it had learned so far was kept.")
        elif ctx.stop_reason == "cancel" or result.get("cancelled"):
            status, error = "cancelled", None
        else:
            status, error = "done", None
        store.set_status(run_id, status, only_from=["running"], result=result, env=env,
                         error=error)
    except BaseException as err:  # noqa: BLE001 - every failure is recorded, in words
        tb = traceback.format_exc()
        print(f"cifarlab worker: run {run_id} failed:\n{tb}", file=sys.stderr, flush=True)
        try:
            ctx.flush()
        except Exception:  # noqa: BLE001
            pass
        store.set_status(run_id, "failed", only_from=["running"], error=failure_reason(err),
                         traceback=tb)


def _peak_rss_mb() -> float | None:
    """This process's peak resident memory in MB (None where the platform does not say).

    Linux: ``VmHWM``, the peak of this process image. (``ru_maxrss`` survives ``exec``, so in a
    spawned worker it would report the server's size at the fork.)"""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)  # bytes vs KiB


def failure_reason(err: BaseException) -> str:
    """One line a student can read: a CifarLabError's message, else the error type and message."""
    if isinstance(err, CifarLabError):
        return " ".join(str(err).split())
    name = type(err).__name__
    first = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
    if name == "OutOfMemoryError":
        return ("The GPU ran out of memory. Try a smaller batch size or a smaller network. "
                f"({first[:200]})")
    if isinstance(err, MemoryError):
        return "The server ran out of memory. Try a smaller batch size, subset or network."
    return f"{name}: {first}"[:300] if first else name


# ---------------------------------------------------------------------------------------------
# In the server process
# ---------------------------------------------------------------------------------------------
@dataclass
class _Worker:
    run_id: str
    process: Any                       # multiprocessing SpawnProcess
    device: str
    started: float = field(default_factory=time.monotonic)
    cancel_seen: float | None = None   # when the scheduler first saw the cancel flag
    forced: str | None = None          # "cancel" | "heartbeat" | "shutdown" once killed by us
    spare: Any = None                  # the _Spare it was: its Event must outlive the start


@dataclass
class _Spare:
    process: Any
    conn: Any                          # the sending end of the job pipe
    ready: Any                         # an Event the spare sets once it is warm
    started: float = field(default_factory=time.monotonic)


_MAIN_LOCK = threading.Lock()


def _start_process(process) -> None:
    """Start a spawn process without making it re-import the parent's ``__main__``.

    Spawn normally re-runs the main script in the child (as ``__mp_main__``). Under Streamlit the
    main module is the page script: the worker would run the app. The child needs nothing from
    it (its target lives in cifarlab), so ``__main__`` is swapped for an empty module while the
    process is being started.
    """
    with _MAIN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            process.start()
        finally:
            if main is not None:
                sys.modules["__main__"] = main


def _kill(process) -> None:
    """Stop a worker by force, with the processes it started (its DataLoader workers): the
    worker leads a process group of its own (see ``_worker_main``). Falls back to the worker
    alone while it has not made its group yet."""
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


def _death_reason(exitcode: int, forced: str | None) -> tuple[str, str]:
    """(status, reason) for a worker that ended without recording an outcome."""
    if forced == "cancel":
        return "cancelled", (f"The run did not stop within {CANCEL_GRACE_S:g} s of the cancel, "
                             "so its worker was stopped by force; no result was kept.")
    if forced == "heartbeat":
        return "failed", ("The worker process stopped responding (no heartbeat), so it was "
                          "stopped.")
    if forced == "shutdown":
        return "interrupted", "The server stopped while this run was training."
    if exitcode < 0:
        sig = -exitcode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = (" If nobody stopped it, the machine probably ran out of memory: try a smaller "
                "batch size, subset or network.") if sig == signal.SIGKILL else ""
        return "failed", f"The worker process was killed (signal {sig}, {name}).{hint}"
    if exitcode == 0:
        return "failed", "The worker process ended without reporting a result."
    return "failed", f"The worker process exited with status {exitcode} without a result."


class JobQueue:
    """Queue and run jobs in worker processes; see the module docstring.

    ``store``: a RunStore (default: ``settings.db_path``); ``settings``: ``load_settings()``.
    ``start=False`` creates the queue without its scheduler thread (tests of the checks).
    """

    def __init__(self, store: RunStore | None = None, settings: Settings | None = None,
                 start: bool = True):
        self.settings = settings or load_settings()
        self.store = store or RunStore(self.settings.db_path, self.settings.checkpoint_dir)
        self._mp = multiprocessing.get_context("spawn")
        self._submit_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._workers: dict[str, _Worker] = {}
        self._spares: list[_Spare] = []
        self._spare_deaths: list[float] = []
        self._next_spare_at = 0.0
        self._last_health = 0.0
        self._n_train: int | None = None
        self._backlog = 0
        self.closed = False
        self.interrupted = self.store.mark_interrupted_on_start()
        self._thread = threading.Thread(target=self._loop, name="cifarlab-scheduler",
                                        daemon=True)
        if start:
            self._thread.start()
        # Runs before multiprocessing's own exit hook (imported above, so registered earlier),
        # which would otherwise wait for every non-daemonic worker to finish its job.
        ref = weakref.ref(self)
        atexit.register(lambda: ref() is not None and ref().shutdown(timeout=2.0))

    # -- submitting --------------------------------------------------------------------------
    def submit(self, session: str, config: TrainConfig, name: str | None = None) -> str:
        """Queue a training run; returns its id. JobError says why it cannot be queued."""
        validate_session(session)
        if not isinstance(config, TrainConfig):
            raise JobError("Expected a TrainConfig.", field="config")
        s = self.settings
        if config.epochs > s.max_epochs:
            raise JobError(f"This server allows at most {s.max_epochs} epochs per run (you asked "
                           f"for {config.epochs}). Choose fewer epochs.", field="epochs")
        n_data = self._train_images()
        images = min(config.train_subset, n_data) if config.train_subset else n_data
        if images > s.max_train_images:
            raise JobError(f"This server trains on at most {s.max_train_images:,} images per run "
                           f"(this run would use {images:,}). Set a training subset of at most "
                           f"{s.max_train_images:,} images.", field="train_subset")
        try:
            config.check_runtime(n_data)
        except CifarLabError as err:
            raise JobError(str(err), field=err.field) from None
        return self.submit_job(session, "train", config.to_dict(), config.device, name=name)

    def submit_job(self, session: str, kind: str, payload: dict, device: str,
                   exclusive: bool | list[str] = False, name: str | None = None) -> str:
        """Queue a job of a registered kind on ``device`` ("auto" picks one now).

        ``exclusive``: True keeps ``device`` to itself; a list of devices (say, the CPU and the
        GPU a timing sweep compares) keeps all of them. Such a job waits until those devices
        are idle, and the runs queued after it on them wait until it has finished.
        """
        validate_session(session)
        if kind not in _KINDS:
            raise JobError(f"Unknown job kind {kind!r}. Known: {', '.join(sorted(_KINDS))}.",
                           field="kind")
        device = self._resolve(device)
        if not isinstance(exclusive, bool):
            exclusive = [self._resolve(d) for d in exclusive]
        s = self.settings
        with self._submit_lock:
            mine = self.store.counts(session)
            active = mine["queued"] + mine["running"]
            if active >= s.max_per_session:
                raise JobError(f"You already have {active} run(s) queued or running, and this "
                               f"server allows {s.max_per_session} at a time per person. Wait "
                               "for one to finish, or cancel one.", field="session")
            waiting = self.store.counts()["queued"]
            if waiting >= s.max_queue:
                raise JobError(f"The queue is full ({waiting} runs waiting). Try again in a few "
                               "minutes.")
            run_id = self.store.create_run(session, kind, payload, device, name=name,
                                           exclusive=exclusive)
        self._wake.set()
        return run_id

    def _resolve(self, device: str) -> str:
        from cifarlab.core.devices import resolve_device

        try:
            return str(resolve_device(device))
        except CifarLabError as err:
            raise JobError(str(err), field="device") from None

    def _train_images(self) -> int:
        """Training images in the server's data set (50,000 until it has been decoded)."""
        if self._n_train is None:
            try:
                from cifarlab.core import data as data_mod

                if data_mod.is_cached(self.settings.data):
                    self._n_train = data_mod.load(self.settings.data).n_train
            except Exception:  # noqa: BLE001 - the worker will say what is wrong with the data
                pass
        return self._n_train or FULL_TRAIN_IMAGES

    # -- what the pages call -----------------------------------------------------------------
    def runs(self, session: str, statuses=None, kind: str | None = None) -> list[Run]:
        """The runs this session may see (of one ``kind``, or all): its own, or everyone's in
        the shared class view. Newest first."""
        validate_session(session)
        return self.store.list_runs(None if self.settings.shared_view else session, statuses,
                                    kind=kind)

    def get(self, session: str, run_id: str) -> Run:
        """A run this session may see; JobError otherwise."""
        validate_session(session)
        run = self.store.get(validate_run_id(run_id))
        if run is None or not (run.session == session or self.settings.shared_view):
            raise JobError("There is no such run in your session.", field="run_id")
        return run

    def can_control(self, session: str, run: Run) -> bool:
        """Whether this session may cancel or delete the run (only its owner can)."""
        return run.session == session

    def cancel(self, session: str, run_id: str) -> str:
        """Cancel one of this session's runs; returns its status now.

        A queued run is cancelled at once. A running one is asked to stop: it stops after the
        current step (within a second or two), evaluates what it learned and ends as
        ``cancelled``.
        """
        run = self._own(session, run_id)
        if run.status == "queued" and self.store.set_status(run.id, "cancelled",
                                                            only_from=["queued"]):
            return "cancelled"
        if self.store.request_cancel(run.id):
            self._wake.set()
            return "cancelling"
        return self.store.get(run.id).status

    def delete(self, session: str, run_id: str) -> None:
        """Delete one of this session's finished runs and its checkpoint."""
        run = self._own(session, run_id)
        self.store.delete_run(run.id)

    def _own(self, session: str, run_id: str) -> Run:
        validate_session(session)
        run = self.store.get(validate_run_id(run_id))
        if run is None or run.session != session:
            raise JobError("There is no such run in your session (you can only change your own "
                           "runs).", field="run_id")
        return run

    def queue_position(self, run_id: str) -> int | None:
        return self.store.queue_position(run_id)

    def stats(self) -> dict:
        """For a host panel: runs per status, what runs where, the slots, the spare."""
        return {"counts": self.store.counts(),
                "running": {d: n for d, (n, _) in self.store.running_by_device().items()},
                "slots": {"cpu": self.settings.cpu_slots, "gpu": self.settings.gpu_slots},
                "workers": len(self._workers),
                "spares": sum(1 for s in self._spares if s.process.is_alive()),
                "spares_ready": sum(1 for s in list(self._spares) if s.ready.is_set())}

    def wait_warm(self, timeout: float = 120.0) -> bool:
        """Wait until a spare worker is warm (benchmarks and tests); False if none is wanted
        or none became warm in time."""
        if self.settings.spare_workers == 0:
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(s.ready.is_set() for s in list(self._spares)):
                return True
            time.sleep(0.05)
        return False

    def wait(self, run_id: str, timeout: float = 60.0, poll: float = 0.05) -> Run:
        """Block until the run has finished (for tests and scripts, not pages)."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.store.get(run_id)
            if run is None or run.finished:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} still {run.status} after {timeout} s")
            time.sleep(poll)

    # -- the scheduler -----------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - the scheduler must keep going
                log.exception("cifarlab scheduler tick failed")
            self._wake.wait(TICK_S)
            self._wake.clear()

    def _tick(self) -> None:
        self._reap()
        self._watch_workers()
        self._start_queued()
        self._keep_spares()

    def _reap(self) -> None:
        for run_id, w in list(self._workers.items()):
            code = w.process.exitcode
            if code is None:
                continue
            w.process.join(timeout=0)
            del self._workers[run_id]
            run = self.store.get(run_id)
            if run is not None and run.status == "running":
                status, reason = _death_reason(code, w.forced)
                self.store.set_status(run_id, status, only_from=["running"], error=reason)
                log.warning("run %s: %s", run_id, reason)
        for spare in list(self._spares):
            if spare.process.exitcode is not None:
                self._spares.remove(spare)
                spare.process.join(timeout=0)
                self._spare_deaths.append(time.monotonic())
                log.warning("the spare worker exited (status %s)", spare.process.exitcode)

    def _watch_workers(self) -> None:
        """Cancel escalation, silent workers, orphans of an earlier server process."""
        now = time.monotonic()
        for run_id, w in list(self._workers.items()):
            run = self.store.get(run_id)
            if run is None or w.forced:
                continue
            if run.cancel_requested and run.status == "running":
                if w.cancel_seen is None:
                    w.cancel_seen = now
                elif now - w.cancel_seen > CANCEL_GRACE_S:
                    w.forced = "cancel"
                    _kill(w.process)
        if now - self._last_health < 1.0:
            return
        self._last_health = now
        wall = time.time()
        timeout = self.settings.heartbeat_timeout
        for run in self.store.list_runs(statuses=["running"]):
            stale = run.heartbeat is None or wall - run.heartbeat > timeout
            w = self._workers.get(run.id)
            if w is not None:
                if stale and w.process.is_alive() and not w.forced:
                    w.forced = "heartbeat"
                    _kill(w.process)
            elif stale or not pid_alive(run.worker_pid):  # not ours: an earlier server's
                reason = ("Its worker process is gone (the server restarted or the worker was "
                          "stopped), so this run was stopped.")
                self.store.set_status(run.id, "interrupted", only_from=["running"], error=reason)

    def _start_queued(self) -> None:
        queued = self.store.queued()
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
                if held or (d in run.holds and n > 0) or n >= self.settings.slots_for(d):
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
        target = _KINDS.get(run.kind)
        if target is None:
            self.store.set_status(run.id, "failed", only_from=["queued"],
                                  error=f"Unknown job kind {run.kind!r}.")
            return False
        job = {"run_id": run.id, "kind": run.kind, "target": target, "device": run.device,
               "data_source": self.settings.data}
        spare = self._take_spare()
        pid = spare.process.pid if spare else None
        if not self.store.set_status(run.id, "running", only_from=["queued"], worker_pid=pid):
            if spare:
                self._spares.insert(0, spare)
            return False  # cancelled meanwhile
        process = None
        if spare is not None:
            try:
                spare.conn.send(job)
                spare.conn.close()
                process = spare.process
            except (OSError, ValueError):  # the spare died just now: start one for this job
                process = None
        if process is None:
            process = self._new_process(None, job)
            self.store.set_worker_pid(run.id, process.pid)
        self._workers[run.id] = _Worker(run.id, process, run.device, spare=spare)
        self._next_spare_at = time.monotonic() + SPARE_DELAY_S
        return True

    def _take_spare(self) -> _Spare | None:
        """A live spare, a warm one first (one still warming up beats starting a new one)."""
        for spare in [s for s in self._spares if not s.process.is_alive()]:
            self._spares.remove(spare)
            spare.process.join(timeout=0)
        if not self._spares:
            return None
        spare = next((s for s in self._spares if s.ready.is_set()), self._spares[0])
        self._spares.remove(spare)
        return spare

    def _new_process(self, conn, job: dict | None, ready=None):
        process = self._mp.Process(target=_worker_main,
                                   args=(conn, self.store, self.settings, job, ready),
                                   name="cifarlab-worker", daemon=False)
        _start_process(process)
        return process

    def _keep_spares(self) -> None:
        now = time.monotonic()
        if self._stopping.is_set():
            return
        if not self._backlog:
            # Nobody is waiting: don't let a spare's imports (seconds of CPU) slow the runs
            # going on. Wait a moment after a run started (its first steps), and until the
            # cores have room: a CPU run uses worker_threads cores, a GPU run about one.
            if now < self._next_spare_at:
                return
            busy = sum(self.settings.worker_threads if w.device == "cpu" else 1
                       for w in self._workers.values() if w.process.exitcode is None)
            if busy and busy + 1 > cpu_cores():
                return
        self._spare_deaths = [t for t in self._spare_deaths if now - t < 60]
        if len(self._spare_deaths) >= 3:  # spares keep dying: start runs cold for a minute
            return
        while sum(1 for s in self._spares if s.process.is_alive()) < self.settings.spare_workers:
            recv, send = self._mp.Pipe(duplex=False)
            ready = self._mp.Event()
            process = self._new_process(recv, None, ready)
            recv.close()
            self._spares.append(_Spare(process, send, ready))

    # -- stopping ----------------------------------------------------------------------------
    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the scheduler and the spare; runs still going are stopped and marked
        ``interrupted`` (queued runs stay queued for the next start)."""
        if self.closed:
            return
        self.closed = True
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        for spare in self._spares:
            try:
                spare.conn.close()
            except OSError:
                pass
            _kill(spare.process)
        for w in self._workers.values():
            if w.process.exitcode is None:
                w.forced = "shutdown"
                _kill(w.process)
        deadline = time.monotonic() + timeout
        for p in [s.process for s in self._spares] + [w.process for w in self._workers.values()]:
            p.join(max(0.0, deadline - time.monotonic()))
        self._spares.clear()
        self._reap()


_QUEUE: JobQueue | None = None
_QUEUE_LOCK = threading.Lock()


def get_queue(settings: Settings | None = None) -> JobQueue:
    """The process-wide JobQueue (created on first use with ``load_settings()``)."""
    global _QUEUE
    with _QUEUE_LOCK:
        if _QUEUE is None or _QUEUE.closed:
            _QUEUE = JobQueue(settings=settings)
        return _QUEUE
