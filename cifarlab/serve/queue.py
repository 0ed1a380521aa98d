"""The job queue: a run is its browser session's to see and act on, its owner's to count."""
from __future__ import annotations

import atexit
import contextlib
import importlib.util
import multiprocessing.util  # noqa: F401 - import before our atexit hook (see JobQueue)
import threading
import time
import weakref

from cifarlab.core import data as data_mod
from cifarlab.core import lr_finder
from cifarlab.core.config import TrainConfig
from cifarlab.errors import CifarLabError, JobError
from cifarlab.serve import admission, disk, replicas
from cifarlab.serve.backup import Backups
from cifarlab.serve.classroom import enforce, tables
from cifarlab.serve.dispatcher import Dispatcher
from cifarlab.serve.executor import KINDS, LR_FIND, TIMING, TRAIN, Executor
from cifarlab.serve.local_executor import LocalExecutor
from cifarlab.serve.ray_executor import RayExecutor  # imports ray only once it starts
from cifarlab.serve.runs import FINISHED, Run, validate_session
from cifarlab.serve.settings import Settings, load_settings
from cifarlab.serve.store import RunStore, StoreCounters

# what pages and tests import from here (pages reach the store only through the queue)
__all__ = ["JobQueue", "get_queue", "FULL_TRAIN_IMAGES", "FINISHED", "KINDS"]

FULL_TRAIN_IMAGES = 50000    # CIFAR-10's training set, when the data is not loaded here


def make_executor(store: RunStore, settings: Settings) -> Executor:
    """The executor the setting ``executor`` names (``"ray"``: the optional extra)."""
    if settings.executor == "ray":
        if importlib.util.find_spec("ray") is None:
            raise JobError("serve.executor.ray_missing")
        return RayExecutor(store, settings)
    return LocalExecutor(store, settings)


class JobQueue:
    """Queue jobs and run them on the settings' executor (``start=False``: no dispatcher)."""

    def __init__(self, store: RunStore | None = None, settings: Settings | None = None,
                 start: bool = True):
        self.settings = settings or load_settings()
        self.store = store or RunStore(self.settings.store_location, self.settings.checkpoint_dir)
        self.executor = make_executor(self.store, self.settings)
        self.replica = replicas.Replica(self.store, self.settings.heartbeat_timeout)
        self.store.replica = self.replica.id      # the runs it starts are recorded as its own
        self._submit_lock = threading.Lock()
        self._n_train: int | None = None
        self.closed = False
        # runs an executor may find still going (Ray's) wait for its dispatcher to look
        self.interrupted = ([] if self.executor.adopts else
                            self.store.interrupt_orphans(alive=self.replica.alive()))
        self.store.remove_partial_checkpoints()  # left by workers killed while saving
        # SQLite's copies; a PostgreSQL host backs its database up its own way (pg_dump, ...)
        self.backups = (Backups(self.store.path, self.settings.backup_interval)
                        if self.store.path is not None else None)
        self.dispatcher = Dispatcher(self.store, self.executor, self.settings, self.replica)
        if start:
            self.dispatcher.start()
            if self.backups is not None:
                self.backups.start()
        # before multiprocessing's exit hook (registered earlier), which waits for every worker
        ref = weakref.ref(self)
        atexit.register(lambda: ref() is not None and ref().shutdown(timeout=2.0))

    def submit(self, session: str, config: TrainConfig, name: str | None = None,
               owner: str | None = None, sweep: dict | None = None) -> str:
        """Queue a training run, or with ``sweep`` the learning-rate finder on it; its id."""
        validate_session(session)
        owner = session if owner is None else owner   # checked where the run is created
        n_train = self.train_images()
        device = admission.check_config(config, n_train, self.settings,  # the one check
                                        self.executor.devices())
        if sweep is not None:
            try:
                sweep = lr_finder.check(*(sweep.get(k) for k in ("steps", "lr_min", "lr_max")))
            except CifarLabError as err:
                raise admission.as_job_error(err) from None
            return self._enqueue(session, owner, LR_FIND, {"config": config.to_dict()} | sweep,
                                 device, name=name, config=config,
                                 image_epochs=sweep["steps"] * config.batch_size)
        needed = admission.check_train(config, self.settings, n_train)  # the compute budget
        return self._enqueue(session, owner, TRAIN, config.to_dict(), device,
                             name=name, image_epochs=needed, config=config)

    def submit_job(self, session: str, kind: str, payload: dict, device: str,
                   exclusive: list[str] = (), name: str | None = None,
                   owner: str | None = None, estimate_s: float | None = None) -> str:
        """Queue a job of another kind; ``exclusive``: the devices it keeps to itself."""
        validate_session(session)
        owner = session if owner is None else owner
        others = sorted(set(KINDS) - {TRAIN, LR_FIND})   # those two only through submit
        if kind not in others:
            raise JobError("serve.queue.unknown_kind", field="kind", kind=repr(kind)[:40],
                           known=", ".join(others))
        admission.check_num_workers(payload.get("num_workers"), self.settings)
        if kind == TIMING:
            admission.check_timing(estimate_s, self.settings)
        return self._enqueue(session, owner, kind, payload, self._resolve(device), name=name,
                             exclusive=[self._resolve(d) for d in exclusive])

    def _enqueue(self, session: str, owner: str, kind: str, payload: dict, device: str,
                 name: str | None = None, exclusive: list[str] = (),
                 image_epochs: int | None = None, config: TrainConfig | None = None) -> str:
        # the checks and the insert as one step, on every replica of the store at once
        with self._submit_lock, self.store.mutex("admission"):
            # the owner's class (locked knobs, class limits) holds whatever the browser sent
            code = config and enforce.check_submit(self.store, owner, config, device,
                                                   self.train_images())
            admission.check_owner(self.store, owner, image_epochs, self.settings)
            admission.check_queue_room(self.store, self.settings)
            disk.check_room([self.store.checkpoint_dir, self.store.path.parent if
                             self.store.path else self.store.checkpoint_dir],
                            disk.run_bytes(config if kind == TRAIN else None))  # not later
            run_id = self.store.create_run(session, kind, payload, device, name=name,
                                           exclusive=exclusive, owner=owner,
                                           image_epochs=image_epochs)
            if code and kind == TRAIN:  # the class board and its challenge find the run
                tables.record_run(self.store, code, owner, run_id)
        self.dispatcher.wake()
        return run_id

    def devices(self) -> list[str]:
        """The executor's devices (a Ray cluster's), else this machine's."""
        placed = self.executor.devices()
        if placed is not None:
            return list(placed)
        from cifarlab.core.devices import list_devices

        return [d.id for d in list_devices()]

    def _resolve(self, device: str) -> str:
        return admission.resolve_device(device, self.executor.devices())

    def device_for(self, device: str) -> str | None:
        """Where a run asking for ``device`` would train now; None when nowhere here."""
        try:
            return self._resolve(device)
        except CifarLabError:
            return None

    def train_images(self) -> int:
        """Training images in the server's data set (50,000 until it has been decoded)."""
        if self._n_train is None:
            with contextlib.suppress(Exception):  # the worker will say what is wrong with the data
                if data_mod.is_cached(self.settings.data):
                    self._n_train = data_mod.load(self.settings.data).n_train
        return self._n_train or FULL_TRAIN_IMAGES

    def runs(self, session: str, statuses=None, kind: str | None = None,
             limit: int | None = None) -> list[Run]:
        """The runs this session may see, newest first: its own, or everyone's (shared view)."""
        return self.store.list_runs(None if self.settings.shared_view else session, statuses,
                                    kind=kind, limit=limit)

    def get(self, session: str, run_id: str, mine: bool = False) -> Run:
        """A run this session may see (``mine``: act on, whatever the shared view)."""
        run = self.store.get(run_id)
        if run is None or not (run.session == session or (self.settings.shared_view and not mine)):
            raise JobError("serve.queue.not_yours" if mine else "serve.queue.no_such_run",
                           field="run_id")
        return run

    # What a page reads of a run, each call checked against the browser session.
    def events(self, session: str, run_id: str, kinds=None, since_seq: int = 0) -> list:
        return self.store.events(self.get(session, run_id).id, kinds=kinds, since_seq=since_seq)

    def losses(self, session: str, run_id: str, since_step: int = 0):
        return self.store.losses(self.get(session, run_id).id, since_step=since_step)

    def checkpoint(self, session: str, run_id: str):
        return self.store.checkpoint_path(self.get(session, run_id).id)

    def measured_speeds(self) -> list[dict]:
        """How fast its latest runs trained (anyone's: speeds only), for the time estimates."""
        out = []
        for run in self.store.list_runs(None, ["done"], kind=TRAIN, limit=40):
            res = run.result or {}
            if res.get("images_per_second") and run.started_at and run.finished_at:
                out.append({"config": dict(run.config), "device": run.device,
                            "images_per_second": float(res["images_per_second"]),
                            "train_seconds": float(res.get("train_seconds") or 0.0),
                            "eval_seconds": float(res.get("eval_seconds") or 0.0),
                            "wall_seconds": float(run.finished_at - run.started_at)})
        return out

    def can_control(self, session: str, run: Run) -> bool:
        return run.session == session

    def cancel(self, session: str, run_id: str) -> str:
        """Cancel one of this session's runs; its status now (or "cancelling")."""
        run = self.get(session, run_id, mine=True)
        if run.status == "queued" and self.store.set_status(run.id, "cancelled",
                                                            only_from=["queued"]):
            return "cancelled"
        if self.store.request_cancel(run.id):
            self.dispatcher.wake()
            return "cancelling"
        return self.store.get(run.id).status

    def rename(self, session: str, run_id: str, name: str | None) -> None:
        self.store.rename(self.get(session, run_id, mine=True).id, name)

    def delete(self, session: str, run_id: str) -> None:
        """Delete one of this session's finished runs and its checkpoint."""
        self.store.delete_run(self.get(session, run_id, mine=True).id)

    def queue_position(self, run_id: str) -> int | None:
        return self.store.queue_position(run_id)

    def counters(self, name: str) -> StoreCounters:
        """Guessing counters in the run store, shared by its app servers (``clock=time.time``)."""
        return StoreCounters(self.store, name)

    def store_notice(self) -> CifarLabError | None:
        """Why the run store was recovered at start (for every student, in words), or None."""
        return self.store.recovery

    def wait_warm(self, timeout: float = 120.0) -> bool:
        """Wait until a spare worker is warm (benchmarks and tests); False if none is, in time."""
        deadline = time.monotonic() + timeout
        spares = self.settings.spare_workers and self.executor.name != "ray"   # Ray keeps none
        while spares and time.monotonic() < deadline:
            if self.executor.warm():
                return True
            time.sleep(0.05)
        return False

    def wait(self, run_id: str, timeout: float = 60.0, poll: float = 0.05) -> Run:
        """Block until the run has finished (for tests and scripts, not pages)."""
        deadline = time.monotonic() + timeout
        while (run := self.store.get(run_id)) is not None and not run.finished:
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} still {run.status} after {timeout} s")
            time.sleep(poll)
        return run

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the dispatcher and the executor: runs going end ``interrupted``, queued stay."""
        if self.closed:
            return
        self.closed = True
        self.dispatcher.stop(timeout)
        if self.backups is not None:
            self.backups.stop()  # the last copy of the run store, with every outcome recorded


_QUEUE: JobQueue | None = None
_QUEUE_LOCK = threading.Lock()


def get_queue() -> JobQueue:
    """The process-wide JobQueue (created on first use with ``load_settings()``)."""
    global _QUEUE
    with _QUEUE_LOCK:
        if _QUEUE is None or _QUEUE.closed:
            _QUEUE = JobQueue()
        return _QUEUE
