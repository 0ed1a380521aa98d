"""The local executor (the default): each run in a worker process on this machine. A
worker writes its event batches and outcome into the run store itself, so ``poll`` only has to
say why a worker that died could not.
"""
from __future__ import annotations

import logging

from cifarlab.serve.executor import Executor, forced_reason
from cifarlab.serve.processes import WorkerPool, death_reason
from cifarlab.serve.runs import Run
from cifarlab.serve.settings import Settings
from cifarlab.serve.store import RunStore

log = logging.getLogger("cifarlab.serve.queue")


class LocalExecutor(Executor):
    """Runs in worker processes of this machine (``WorkerPool``)."""

    name = "local"

    def __init__(self, store: RunStore, settings: Settings):
        super().__init__(store, settings)
        self.pool = WorkerPool(store, settings)
        self.running = self.pool.running  # run id -> Worker (a Handle)

    def launch(self, run: Run, job: dict) -> bool:
        spare = self.pool.take_spare()
        pid = spare.process.pid if spare else None
        if not self.store.set_status(run.id, "running", only_from=["queued"], worker_pid=pid):
            if spare:
                self.pool.put_back(spare)
            return False  # cancelled meanwhile
        process, new = self.pool.run(run.id, run.device, job, spare)
        if new:
            self.store.set_worker_pid(run.id, process.pid)
        return True

    def poll(self) -> None:
        """Workers that ended: a run still "running" gets why (it could not say so itself), and
        the checkpoint it may have been writing is removed."""
        for w in self.pool.ended():
            run = self.store.get(w.run_id)
            if run is not None and run.status == "running":
                status, why = (forced_reason(w.forced, w.forced_s)
                               or death_reason(w.process.exitcode))
                self.store.remove_partial_checkpoints(w.run_id)  # before its end is visible
                self.store.set_status(w.run_id, status, only_from=["running"], **why)
                log.warning("run %s: %s", w.run_id, why["error"])

    def force(self, run_id: str, why: str, seconds: float = 0.0) -> None:
        w = self.running.get(run_id)
        if w is not None and not w.forced and w.process.exitcode is None:
            w.forced_s = seconds
            self.pool.force(w, why)

    def keep_warm(self, backlog: int) -> None:
        self.pool.keep_spares(backlog)

    def warm(self) -> int:
        return self.pool.warm()

    def stop_all(self, timeout: float) -> None:
        self.pool.stop_all(timeout)
        self.poll()
