"""A finished run of the tutorial as written, written straight into a run store (no training):
the tutorial's settings, 25,000 step losses, the running loss every 2,000 mini-batches, two
epochs with per-class accuracy, a result of 5,353 right answers out of 10,000, and a checkpoint
of the tutorial's ``Net`` with seeded (untrained) weights. Its figures are large and fractional
on purpose: every one of them needs a thousands or a decimal mark somewhere on the pages.

    run_id = write_finished_run(store, "session-0001")
    run_id = write_running_run(store, "session-0001")     # half way, a live worker pid
"""
from __future__ import annotations

import json
import os
import time
import uuid

import numpy as np
import torch
from sqlalchemy import insert

from cifarlab.core.checkpoint import save
from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.core.model import Net
from cifarlab.serve.schema import RUNS

CONFIG = TrainConfig(device="cpu")          # the tutorial's knobs: 2 epochs, batch 4, lr 0.001
STEPS_PER_EPOCH = 12_500
TOTAL = 2 * STEPS_PER_EPOCH
# One row per true class (1,000 test images each): 5,353 right in all.
DIAGONAL = [611, 702, 381, 312, 448, 455, 640, 587, 683, 534]
ENV = {"torch": torch.__version__, "torch_threads": 2, "device": "cpu"}


def running_row(store, session: str, config: dict, *, kind: str = "train", device: str = "cpu",
                name: str | None = None, owner: str | None = None,
                worker_pid: int | None = None) -> str:
    """A run written into ``store`` as running, its id; never queued, not for a moment: a live
    queue (a page test's, an app server's) polls every 0.2 s and would take a queued row and
    train it, for real, beside the test (``create_run`` then ``set_status`` leaves that gap)."""
    run_id, now = uuid.uuid4().hex, time.time()
    with store._write() as c:
        c.execute(insert(RUNS).values(
            id=run_id, session=session, owner=owner or session, kind=kind, name=name,
            status="running", device=device, config=json.dumps(config), created_at=now,
            started_at=now, heartbeat=now, waited_s=0.0, worker_pid=worker_pid,
            replica=store.replica))
    return run_id


def confusion() -> list[list[int]]:
    rng = np.random.default_rng(7)
    rows = []
    for i, right in enumerate(DIAGONAL):
        rest = rng.multinomial(1000 - right, np.full(9, 1 / 9))
        rows.append([int(v) for v in np.insert(rest, i, right)])
    return rows


def per_class(scale: float = 1.0) -> dict[str, float]:
    return {c: round(scale * d / 1000, 4) for c, d in zip(CIFAR10_CLASSES, DIAGONAL)}


def losses(n: int = TOTAL) -> tuple[list[int], list[float]]:
    rng = np.random.default_rng(3)
    steps = np.arange(1, n + 1)
    curve = 1.25 + 1.05 * np.exp(-steps / 6000.0)
    noisy = np.clip(curve + rng.normal(0, 0.35, n), 0.05, None)
    return steps.tolist(), [round(float(v), 4) for v in noisy]


def _running(values: list[float], upto: int) -> list[tuple[str, dict]]:
    out = []
    for step in range(2000, upto + 1, 2000):
        epoch, i = divmod(step - 1, STEPS_PER_EPOCH)
        out.append(("running_loss", {"epoch": epoch + 1, "i": i + 1,
                                     "loss": float(np.mean(values[step - 2000:step]))}))
    return out


def _epoch(n: int, values: list[float]) -> dict:
    part = values[(n - 1) * STEPS_PER_EPOCH:n * STEPS_PER_EPOCH]
    acc = per_class(0.82 if n == 1 else 1.0)
    return {"epoch": n, "steps": STEPS_PER_EPOCH, "mean_loss": float(np.mean(part)),
            "seconds": 183.4172 + n, "images_per_second": 272.6113 - n, "data_wait_s": 61.25,
            "compute_s": 122.1672 + n, "complete": True,
            "accuracy": float(np.mean(list(acc.values()))), "per_class_accuracy": acc}


def result() -> dict:
    cm = confusion()
    _, values = losses()
    return {
        "test_accuracy": 0.5353, "per_class_accuracy": per_class(), "confusion": cm,
        "classes": list(CIFAR10_CLASSES), "steps": TOTAL, "epochs_done": 2.0, "images": 100_000,
        "train_seconds": 368.8344, "images_per_second": 271.1232, "steps_per_second": 67.7808,
        "data_wait_seconds": 122.5, "compute_seconds": 246.3344, "eval_seconds": 3.2171,
        "final_loss": float(np.mean(values[-200:])),
        "epochs": [_epoch(1, values), _epoch(2, values)],
        "running_losses": [d for _, d in _running(values, TOTAL)], "cancelled": False,
        "device": "cpu", "device_name": "CPU", "checkpoint": None, "config": CONFIG.to_dict(),
        "env": ENV,
    }


def _checkpoint(store, run_id: str) -> None:
    torch.manual_seed(0)
    path = store.checkpoint_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    save(path, Net().eval(), CONFIG, CIFAR10_CLASSES, {"test_accuracy": 0.5353})


def _inside() -> list[tuple[str, dict]]:
    """core/probes.py's samples, four of them: weight and gradient norms with decimals."""
    names = ("conv1", "conv2", "fc1", "fc2", "fc3")
    return [("inside", {"step": step, "layers": [
        {"name": n, "weight_norm": 2.4137 + k, "grad_norm": 0.01234 * (1 + k) * step / 2500,
         "hist": [0.0] * 16, "range": [-0.25, 0.25]} | ({"dead": 0.125} if n != "fc3" else {})
        for k, n in enumerate(names)]}) for step in (2_500, 5_000, 7_500, 10_000)]


def write_finished_run(store, session: str, name: str | None = None) -> str:
    """The tutorial's run, finished, as a worker would have left it in ``store``; its id."""
    run_id = running_row(store, session, CONFIG.to_dict(), name=name, worker_pid=os.getpid())
    steps, values = losses()
    res = result()
    events = ([("start", {"total_steps": TOTAL, "steps_per_epoch": STEPS_PER_EPOCH,
                          "n_train": 50_000, "n_test": 10_000, "device": "cpu",
                          "device_name": "CPU", "config": CONFIG.to_dict()})]
              + _running(values, STEPS_PER_EPOCH) + [("epoch", res["epochs"][0])]
              + _running(values, TOTAL)[STEPS_PER_EPOCH // 2000:] + [("epoch", res["epochs"][1])]
              + _inside()
              + [("eval", {"accuracy": 0.5353, "per_class_accuracy": per_class(),
                           "confusion": res["confusion"], "classes": list(CIFAR10_CLASSES),
                           "correct": 5353, "total": 10_000, "eval_seconds": 3.2171,
                           "half_accuracies": {"public": 0.5318, "private": 0.5388}}),
                 ("done", {"cancelled": False, "steps": TOTAL, "train_seconds": 368.8344,
                           "images_per_second": 271.1232, "accuracy": 0.5353,
                           "checkpoint": None})])
    store.record(run_id, steps=steps, losses=values, events=events)
    _checkpoint(store, run_id)
    assert store.set_status(run_id, "done", only_from=["running"], result=res, env=ENV)
    return run_id


def write_running_run(store, session: str, step: int = 7_312) -> str:
    """The tutorial's run half way through its first epoch, its worker (this process) alive."""
    run_id = running_row(store, session, CONFIG.to_dict(), worker_pid=os.getpid())
    steps, values = losses(step)
    store.record(run_id, steps=steps, losses=values,
                 events=[("start", {"total_steps": TOTAL, "steps_per_epoch": STEPS_PER_EPOCH,
                                    "n_train": 50_000, "n_test": 10_000, "device": "cpu",
                                    "device_name": "CPU", "config": CONFIG.to_dict()})]
                 + _running(values, step),
                 progress={"step": step, "total_steps": TOTAL, "elapsed_s": 107.25,
                           "steady_step": 250, "steady_s": 5.0, "images_per_second": 272.7192,
                           "data_wait_s": 35.5})
    return run_id
