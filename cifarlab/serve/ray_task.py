"""Inside Ray: one run as a detached actor with an ``Outbox`` for a store; ``take(ack)`` returns
the batches not yet acknowledged as written, so a server that dies in between loses nothing."""
from __future__ import annotations

import os
import queue
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from cifarlab.serve.runs import pid_alive
from cifarlab.serve.worker import JobContext, _lower_priority, run_job

FOLDER_PREFIX = "cifarlab-ray-"


def checkpoint_folder() -> Path:
    """This actor's folder for its run's checkpoint, named by its process id. A killed actor
    (``ray.kill``: no cleanup of its own runs) leaves its folder behind; the next actor on the
    node removes those whose process is gone."""
    for old in Path(tempfile.gettempdir()).glob(FOLDER_PREFIX + "*-*"):
        pid = old.name[len(FOLDER_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)   # another user's: not ours to remove
    return Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))


class Outbox:
    """The run store of a ``JobContext`` on Ray: each batch waits here for ``take``."""

    def __init__(self):
        self.cancel = threading.Event()
        self.folder = checkpoint_folder()
        self.batches: queue.SimpleQueue[dict] = queue.SimpleQueue()

    def checkpoint_path(self, run_id: str) -> Path:
        return self.folder / f"{run_id}.pth"

    def record(self, run_id: str, *, steps=(), losses=(), events=(), progress=None) -> None:
        self.batches.put({"record": {"steps": list(steps), "losses": list(losses),
                                     "events": list(events), "progress": progress}})

    def cancel_requested(self, run_id: str) -> bool:
        return self.cancel.is_set()


ACTOR = "cifarlab-run-{}"   # a run's actor: the run id is random, so unique on any cluster
NAMESPACE = "cifarlab-runs"


class RunActor:   # one run (the module docstring says how)
    def __init__(self, job: dict, shared: Any):
        import ray

        self.run_id = job["run_id"]
        _lower_priority(job["nice"] - os.nice(0))   # Ray's workers may be niced already
        # Ray sets OMP_NUM_THREADS to the actor's CPUs; torch reads it when first imported,
        # by the job (3 CPU-s here, paid only by jobs that use torch)
        os.environ["OMP_NUM_THREADS"] = str(job["threads"])
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(job["threads"])
        self.box = Outbox()
        # Ray hands the actor its GPU (or share of one) through CUDA_VISIBLE_DEVICES: cuda:0
        device = "cuda:0" if job["device"].startswith("cuda") else job["device"]
        self.ctx = JobContext(self.box, self.run_id, device,
                              job.get("data_source"), data=shared,
                              time_limit_s=job.get("time_limit_s"))
        self.outcome: tuple[str, dict] | None = None
        self.final = False    # the outcome's batch is made: nothing follows it
        self.seq = 1
        self.sent = [(1, {"worker": {"pid": os.getpid(),
                                     "node": ray.util.get_node_ip_address()}})]
        threading.Thread(target=self._run, args=(job,), name="cifarlab-ray-run",
                         daemon=True).start()

    def _run(self, job: dict) -> None:
        self.outcome = run_job(job["target"], job["payload"], self.ctx)
        time.sleep(3600.0)   # still here after an hour: no app server came for the outcome
        os._exit(0)

    def take(self, ack: int) -> list[tuple[int, dict]]:
        """The batches after ``ack`` (the last one the server wrote), new ones included."""
        self.sent = [b for b in self.sent if b[0] > ack]
        if self.final:
            return self.sent
        outcome = self.outcome   # read before the flush: whatever the job emitted is in it
        self.ctx.flush()
        batches = []
        while not self.box.batches.empty():
            batches.append(self.box.batches.get())
        if outcome is not None:
            self.final = True
            last = {"outcome": {"status": outcome[0], "fields": outcome[1]}}
            path = self.box.checkpoint_path(self.run_id)
            if path.is_file():
                last["checkpoint"] = path.read_bytes()
            shutil.rmtree(self.box.folder, ignore_errors=True)
            batches.append(last)
        for batch in batches:
            self.seq += 1
            self.sent.append((self.seq, batch))
        return self.sent

    def cancel(self) -> None:
        self.box.cancel.set()
