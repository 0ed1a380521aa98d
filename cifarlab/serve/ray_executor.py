"""The Ray executor: each run a named, detached ``ray_task.RunActor``, never restarted behind a
student's back; each a fresh process (ray#28773): no spare can be kept warm."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import threading
import time
from typing import Any

from cifarlab.core import data as data_mod
from cifarlab.serve import ray_task
from cifarlab.serve.executor import TIMING, Executor, Handle
from cifarlab.serve.replicas import take_over
from cifarlab.serve.runs import Run, reason
from cifarlab.serve.settings import Settings, cpu_cores
from cifarlab.serve.store import RunStore
from cifarlab.serve.ray_task import ACTOR, NAMESPACE
from cifarlab.serve.worker import HEARTBEAT_S

log = logging.getLogger("cifarlab.serve.queue")

_SHARED: dict[str, Any] = {}   # data key -> its ObjectRef, while this process is connected


@dataclasses.dataclass
class RayRun(Handle):
    actor: Any = None           # its ray_task.RunActor
    pending: Any = None         # the take() on its way
    acked: int = 0              # the last batch written into the store
    worker: dict | None = None  # {"pid", "node"} of the Ray worker running it, once it started
    beat_at: float = 0.0        # when the dispatcher last beat for it


class RayExecutor(Executor):
    name = "ray"
    adopts = True

    def __init__(self, store: RunStore, settings: Settings):
        super().__init__(store, settings)
        self.running: dict[str, RayRun] = {}
        self._ray: Any = None
        self._owns = False        # whether this executor started Ray (and so shuts it down)
        self._actor: Any = None
        self._data: Any = None
        self._resources: dict[str, float] = {}
        self._resources_at = 0.0
        self._retry_at = 0.0

    def start(self) -> None:
        import ray

        self._ray = ray
        self._retry_at = time.monotonic() + 10.0   # if this start fails, try again then
        if not ray.is_initialized():
            before = signal.getsignal(signal.SIGTERM)
            # Ray's C++ failure handler would catch the server's SIGTERM and abort it 3 s later
            os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
            from ray._private import ray_constants   # read when ray was imported: set it too
            ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
            common = {"include_dashboard": False, "namespace": "cifarlab"}
            if self.settings.ray_address:
                ray.init(address=self.settings.ray_address, **common)
            else:  # a Ray of this machine's own; its workers niced as local workers are
                os.environ.setdefault("RAY_worker_niceness", str(self.settings.worker_nice))
                ray.init(address="local", num_cpus=cpu_cores(), _node_ip_address="127.0.0.1",
                         **common)
            self._owns = True
            # ray.init replaces SIGTERM's handler in the main thread (tests): put it back
            if before is not None and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, before)
        self._actor = ray.remote(max_restarts=0, max_task_retries=0)(ray_task.RunActor)
        self._resources, self._resources_at = dict(ray.cluster_resources()), time.monotonic()
        log.info("cifarlab: Ray executor on %s", self._resources)

    def devices(self) -> list[str] | None:
        """The cluster's ("cuda:0": the GPU Ray gives a task); None until it has been read."""
        if not self._resources:
            return None
        return ["cpu"] + (["cuda:0"] if self._resources.get("GPU", 0) > 0 else [])

    def slots_for(self, device: str) -> int:
        res = self._resources
        if not res:
            return super().slots_for(device)
        if device == "cpu":
            return max(1, int(res.get("CPU", 0) // self.settings.worker_threads))
        if device.startswith("cuda"):
            return max(1, int(res.get("GPU", 0) * self.settings.gpu_share))
        return 1

    def resources_for(self, run: Run) -> dict[str, float]:
        """A GPU run ``1/gpu_share`` of a GPU (an exclusive one a whole GPU)."""
        threads = float(self.settings.worker_threads)
        if run.device.startswith("cuda"):
            whole = run.kind == TIMING or bool(run.holds)   # an exclusive job
            share = 1.0 if whole else round(1.0 / self.settings.gpu_share, 4)
            return {"num_gpus": share, "num_cpus": threads if "cpu" in run.holds else share}
        return {"num_cpus": threads, "num_gpus": 0}

    def _shared_data(self) -> Any:
        """The data set in the object store (put there once), or None: runs load it."""
        if self._data is False:
            return None
        if self._data is None:
            try:
                d = data_mod.load(self.settings.data)
            except Exception:
                log.exception("cifarlab: the data set could not be loaded for Ray")
                self._data = False
                return None
            if d.key not in _SHARED:   # its arrays, not its cache's path (other nodes have none)
                _SHARED[d.key] = self._ray.put(dataclasses.replace(d, cache_path=""))
            self._data = _SHARED[d.key]
        return self._data

    def launch(self, run: Run, job: dict) -> bool:
        if self._actor is None:
            return False  # not connected (yet): the run stays queued
        shared = self._shared_data()
        if not self.store.set_status(run.id, "running", only_from=["queued"]):
            return False  # cancelled meanwhile
        actor = self._actor.options(name=ACTOR.format(run.id), namespace=NAMESPACE,
                                    lifetime="detached", **self.resources_for(run)
                                    ).remote(job, shared)
        self.running[run.id] = RayRun(run.id, run.device, actor=actor)
        return True

    def adopt(self, runs: list[Run]) -> set[str]:
        """Claim the runs of a replica gone whose actor still runs; the ids not to interrupt."""
        if self._actor is None:
            return {run.id for run in runs}   # Ray out of reach: nobody can tell yet
        kept = set()
        for run in runs:
            try:
                actor = self._ray.get_actor(ACTOR.format(run.id), namespace=NAMESPACE)
            except ValueError:   # gone: the run is interrupted
                continue
            kept.add(run.id)
            if take_over(self.store, run.id, run.replica):   # else another replica got it first
                worker = self.store.events(run.id, kinds=["worker"])
                self.running[run.id] = RayRun(run.id, run.device, actor=actor,
                                              worker=worker[0].data if worker else None,
                                              beat_at=time.monotonic())
                log.info("cifarlab: run %s on Ray taken over from replica %s", run.id,
                         (run.replica or "?")[:8])
        return kept

    def poll(self) -> None:
        if self._ray is None:
            return
        if self._actor is None:
            if time.monotonic() >= self._retry_at:
                try:
                    self.start()
                except Exception:
                    log.exception("cifarlab: the Ray cluster is still out of reach")
            return
        if time.monotonic() - self._resources_at > 10.0:   # the slots follow the cluster's size
            self._resources = dict(self._ray.cluster_resources())
            self._resources_at = time.monotonic()
        for r in list(self.running.values()):
            self._drain(r)

    def _drain(self, r: RayRun) -> None:
        ray = self._ray
        try:
            if r.pending is None:
                r.pending = r.actor.take.remote(r.acked)
            if ray.wait([r.pending], timeout=0)[0]:
                batches, r.pending = ray.get(r.pending), None
                for seq, batch in batches:
                    self._take(r, batch)
                    if r.run_id not in self.running:
                        return
                    r.acked = seq
                # the next take now: it tells the actor at once what is written
                r.pending = r.actor.take.remote(r.acked)
            elif r.worker is not None:
                return   # its actor does not answer: silent too long, the heartbeat watch acts
            if time.monotonic() - r.beat_at > HEARTBEAT_S:
                # its actor answers, or Ray keeps it waiting for resources (another app on the
                # cluster, a node that left): not silent, so the heartbeat watch leaves it be
                r.beat_at = time.monotonic()
                self.store.heartbeat(r.run_id)
        except Exception as err:  # noqa: BLE001 - Ray's word that the worker or node died
            self._died(r, err)

    def _take(self, r: RayRun, batch: dict) -> None:
        run_id = r.run_id
        if "worker" in batch:
            r.worker = batch["worker"]
            self.store.record(run_id, events=[("worker", {"executor": "ray", **r.worker})])
        if "record" in batch:
            self.store.record(run_id, **batch["record"])
        if batch.get("checkpoint"):
            from cifarlab.core.checkpoint import atomic_write_bytes

            data = batch["checkpoint"]
            atomic_write_bytes(self.store.checkpoint_path(run_id), lambda f: f.write(data))
        if "outcome" in batch:
            outcome = batch["outcome"]
            self.store.set_status(run_id, outcome["status"], only_from=["running"],
                                  **outcome["fields"])
            self._forget(r)

    def _died(self, r: RayRun, err: BaseException | None) -> None:
        """The run's stream ended without an outcome: Ray's ``err`` says why (None: forced)."""
        name = type(err).__name__
        code = ("serve.executor.out_of_memory" if "OutOfMemory" in name
                else "serve.executor.worker_died")
        why = {**reason(code, name=name), "traceback": f"{name}: {err}"}
        self.settle_dead(r, lambda: ("failed", why))
        self._forget(r)

    def _forget(self, r: RayRun) -> None:
        self.running.pop(r.run_id, None)
        with contextlib.suppress(Exception):  # already gone
            self._ray.kill(r.actor)

    def cancel(self, run_id: str) -> None:
        r = self.running.get(run_id)
        if r is not None:
            r.actor.cancel.remote()

    def force(self, run_id: str, why: str, seconds: float = 0.0) -> None:
        r = self.running.get(run_id)
        if r is None or r.forced:
            return
        r.forced, r.forced_s = why, seconds
        try:
            self._ray.kill(r.actor)
        except Exception:  # it ended meanwhile: poll settles it
            log.debug("ray.kill(%s) failed", run_id, exc_info=True)

    def stop_all(self, timeout: float) -> None:
        if self._ray is None:
            return
        for run_id in list(self.running):
            self.force(run_id, "shutdown")
        deadline = time.monotonic() + timeout
        while self.running and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.05)
        for r in list(self.running.values()):
            self._died(r, None)   # forced: "interrupted"
        self._actor = None
        if self._owns:
            _SHARED.clear()
            self._ray.shutdown()
