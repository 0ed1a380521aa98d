"""The job kinds tests/test_executors.py runs ("waiting", "steps"), in a module of their own:
a Ray actor is a fresh process that imports its job's module, and this one imports no torch
(the test module does: ~3 CPU-s more for each of the dozen actors those tests start)."""
from __future__ import annotations

import os
import time

from cifarlab.serve.executor import KINDS


def step_through(ctx, steps: int, dt: float) -> int | None:
    """``steps`` steps of ``dt`` seconds, each one's loss and progress emitted, as a training
    run reports them (the test job kinds here, in tests/test_jobs.py and in
    tests/replica_support.py); the step a cancel stopped it at, else None."""
    ctx.emit("start", {"total_steps": steps})
    for i in range(1, steps + 1):
        time.sleep(dt)
        ctx.emit("losses", {"steps": [i], "losses": [1.0 / i]})
        ctx.emit("progress", {"step": i, "total_steps": steps})
        if ctx.should_stop():
            return i
    return None


def waiting_job(payload, ctx):
    """A test job kind: emits "start", then waits (in small steps) until cancelled."""
    ctx.emit("start", {"total_steps": 0})
    steps = 0
    while not ctx.should_stop():
        time.sleep(0.02)
        steps += 1
    return {"cancelled": True, "steps": steps}


def steps_job(payload, ctx):
    """A test job kind: ``steps`` steps of ``dt`` seconds with a loss each, honouring cancels
    and time limits; ``fail`` raises."""
    if payload.get("fail"):
        raise ValueError(payload["fail"])
    steps = int(payload.get("steps", 5))
    if stopped := step_through(ctx, steps, float(payload.get("dt", 0.02))):
        return {"cancelled": True, "steps": stopped}
    # a spare's warm-up maps the data set before its job comes; a worker made for its job
    # maps it only when the job asks (this one never does)
    return {"steps": steps, "pid": os.getpid(), "warmed": ctx._data is not None,
            "mark": os.environ.get("CIFARLAB_TEST_MARK")}


WAITING, STEPS = f"{__name__}:waiting_job", f"{__name__}:steps_job"
KINDS["waiting"] = WAITING
KINDS["steps"] = STEPS
