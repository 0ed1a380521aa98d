"""An app server's job queue in a process of its own, for the tests of several replicas on one
PostgreSQL store (tests/test_replicas.py): ``python tests/replica_support.py STORE_URL HOME
[RAY_ADDRESS]`` starts a ``JobQueue`` there (on the Ray cluster at that address when given),
prints ``replica <id>`` and then ``leading`` once it dispatches, and serves until it is killed.
``steady_job`` is the job kind the tests queue."""
from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]     # this folder and the checkout

from cifarlab.serve.queue import KINDS  # noqa: E402
from executor_jobs import step_through  # noqa: E402

STEADY = "steady"


def steady_job(payload, ctx):
    """``steps`` steps of ``dt`` seconds, each one's loss written; stops on a cancel (or when
    its server is gone) keeping what it did."""
    steps = int(payload.get("steps", 10))
    if stopped := step_through(ctx, steps, float(payload.get("dt", 0.05))):
        return {"cancelled": True, "steps": stopped, "pid": os.getpid()}
    return {"steps": steps, "pid": os.getpid()}


KINDS[STEADY] = "replica_support:steady_job"


def main(url: str, home: str, ray_address: str | None = None) -> None:
    from cifarlab.serve.queue import JobQueue
    from cifarlab.serve.settings import load_settings

    on_ray = {} if ray_address is None else {"executor": "ray", "ray_address": ray_address,
                                             "data": os.path.join(home, "no-data-here")}
    # heartbeat_timeout 30: A's first worker starts its fork server (torch's imports), which
    # on a busy machine took longer than 10 s, and A failed the run as silent. (How soon B
    # takes over from A is B's heartbeat_timeout.)
    settings = load_settings(env={}, home=home, store_url=url, spare_workers=0, cpu_slots=1,
                             max_per_owner=20, heartbeat_timeout=30, **on_ray)
    queue = JobQueue(settings=settings)
    print("replica", queue.replica.id, flush=True)
    while not queue.replica.leading:
        time.sleep(0.05)
    print("leading", flush=True)
    while True:
        time.sleep(1.0)


if __name__ == "__main__":
    main(*sys.argv[1:4])
