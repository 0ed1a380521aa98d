"""Inside a Ray worker: one run as a streaming generator of event batches.

``cifarlab.serve.ray_executor`` submits ``stream_job`` as a Ray task (``num_returns=
"streaming"``). It runs the job kind's function, the same one a local worker runs
(``worker.run_job``: ``core.train.train`` for "train"), in a thread, with a ``JobContext`` whose
"store" is an ``Outbox``: every ~0.25 s (``FLUSH_S``) the generator yields what was emitted
since (step losses, events, the latest progress), an empty batch at least every
``HEARTBEAT_S`` (the server's heartbeat), and at the end the outcome and the checkpoint's bytes
(the run store and its checkpoint folder live on the app server, not on this node).

A cancel cannot travel down a generator: the server tells the executor's control actor, which
this generator asks every ~0.25 s; training then stops after its current step and keeps what it
learned, as locally. Ray is imported lazily (it is an optional extra).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from cifarlab.serve.kinds import import_target
from cifarlab.serve.worker import (FLUSH_S, HEARTBEAT_S, JobContext, _lower_priority, _raise,
                                   _warm_up, run_job)

_NICED = False  # Ray reuses its worker processes: set the priority once per process


class Outbox:
    """What a run's ``JobContext`` writes to on Ray instead of the run store."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.cancel = threading.Event()
        self.folder = Path(tempfile.mkdtemp(prefix="cifarlab-ray-"))
        self._lock = threading.Lock()
        self._batch = _empty()

    def checkpoint_path(self, run_id: str) -> Path:
        return self.folder / f"{run_id}.pth"

    def record(self, run_id: str, *, steps=(), losses=(), events=(), progress=None) -> None:
        with self._lock:
            self._batch["steps"].extend(int(s) for s in steps)
            self._batch["losses"].extend(float(v) for v in losses)
            self._batch["events"].extend(events)
            if progress is not None:
                self._batch["progress"] = progress

    def cancel_requested(self, run_id: str) -> bool:
        return self.cancel.is_set()

    def take(self) -> dict | None:
        """The batch since the last take, or None when nothing came."""
        with self._lock:
            batch, self._batch = self._batch, _empty()
        if batch["steps"] or batch["events"] or batch["progress"] is not None:
            return batch
        return None


def _empty() -> dict:
    return {"steps": [], "losses": [], "events": [], "progress": None}


def _prepare(job: dict) -> None:
    global _NICED
    if not _NICED:  # Ray starts its workers niced already (worker_niceness, 15 by default)
        _lower_priority(int(job.get("nice", 0)) - os.nice(0))
        _NICED = True
    import torch

    torch.set_num_threads(max(1, int(job.get("threads") or 1)))


def _data(shared: Any):
    """The data set the server put into Ray's object store (zero-copy arrays), or None: the
    run then loads it from the data source itself (and says why, if it cannot)."""
    if not isinstance(shared, dict):
        return None
    from cifarlab.core.data.cache import CifarData

    meta = shared["meta"]
    return CifarData(**shared["arrays"], classes=tuple(meta["classes"]), source=meta["source"],
                     key=meta["key"], notes=tuple(meta["notes"]))


def _device(device: str) -> str:
    # Ray hands the task its GPU (or share of one) through CUDA_VISIBLE_DEVICES: it is cuda:0.
    return "cuda:0" if device.startswith("cuda") else device


def stream_job(job: dict, shared: Any, control: Any) -> Iterator[dict]:
    """The Ray task: run ``job`` (see ``executor.job_for``), yielding event batches."""
    import ray

    run_id = job["run_id"]
    _prepare(job)
    box = Outbox(run_id)
    ctx = JobContext(box, run_id, _device(job["device"]), job.get("data_source"),
                     data=_data(shared), time_limit_s=job.get("time_limit_s"))
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            fn = import_target(job["target"])
        except BaseException as err:  # noqa: BLE001 - recorded as the run's failure
            fn = _raise(err)
        outcome["status"], outcome["fields"] = run_job(fn, job["payload"], ctx)

    runner = threading.Thread(target=body, name="cifarlab-ray-run", daemon=True)
    runner.start()
    yield {"worker": {"pid": os.getpid(), "node": ray.util.get_node_ip_address()}}
    last = time.monotonic()
    try:
        while runner.is_alive():
            runner.join(FLUSH_S)
            if not box.cancel.is_set() and _asked_to_cancel(ray, control, run_id):
                box.cancel.set()
            ctx.flush()
            batch = box.take()
            if batch is not None or time.monotonic() - last >= HEARTBEAT_S:
                yield batch or {}
                last = time.monotonic()
        final = box.take() or {}
        final["outcome"] = outcome
        path = box.checkpoint_path(run_id)
        if path.is_file():
            final["checkpoint"] = path.read_bytes()
        yield final
    finally:
        shutil.rmtree(box.folder, ignore_errors=True)


def _asked_to_cancel(ray: Any, control: Any, run_id: str) -> bool:
    """Whether the server cancelled the run; False when the control actor cannot say (the run
    goes on, and the server's forced stop after the grace period still ends it)."""
    try:
        return bool(ray.get(control.cancelled.remote(run_id), timeout=FLUSH_S * 8))
    except Exception:  # noqa: BLE001 - never let the stream die under a training thread
        return False


def warm_up(shared: Any, nice: int = 0) -> int:
    """Import torch and the training code, touch the data, one tiny step: Ray keeps this
    worker process and hands it the next run, which then starts at once. Returns its pid."""
    _prepare({"threads": 1, "nice": nice})
    from cifarlab.core import train as _train  # noqa: F401 - the model, the loaders, evaluation

    _data(shared)
    _warm_up()
    return os.getpid()
