"""A finished training run, trained once per test session (tests/conftest.py's ``finished_run``)
and written into any run store as a worker would have left it: the run's row (config, result,
environment, timestamps), its events and step losses, its checkpoint file.

The page tests (AppTest) and the browser tests that need "a student's finished run" share it
instead of each training their own. A test that needs a run of another shape trains that one.
"""
from __future__ import annotations

import fcntl
import os
import pickle
from dataclasses import dataclass

from cifarlab.core.config import TrainConfig
from synthetic_run import running_row

# 200 real SGD steps (2 epochs × 100, an evaluation after each): small, and above chance.
CONFIG = TrainConfig(epochs=2, batch_size=32, lr=0.01, pipeline="fast", device="cpu",
                     train_subset=3200, seed=3, log_every=10**6)


@dataclass(frozen=True)
class FinishedRun:
    """What one real ``train()`` left: its result, every event it sent (``on_event``), the
    events and losses a worker would have recorded, and the checkpoint's bytes."""

    config: TrainConfig
    result: object            # core.train's result (the model, summary(), env, ...)
    train_events: tuple       # core.train's Event objects, as on_event got them
    steps: tuple[int, ...]
    losses: tuple[float, ...]
    events: tuple[tuple[str, dict], ...]
    checkpoint: bytes

    def write(self, store, session: str, name: str | None = None,
              owner: str | None = None) -> str:
        """Write the run into ``store`` (a RunStore) as ``session``'s finished run; its id."""
        # a live pid: a queue watching this store leaves the run be (one whose worker is gone
        # it would mark interrupted) until it is done, a moment later
        run_id = running_row(store, session, self.config.to_dict(), name=name, owner=owner,
                             worker_pid=os.getpid())
        store.record(run_id, steps=self.steps, losses=self.losses, events=self.events)
        path = store.checkpoint_path(run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.checkpoint)
        assert store.set_status(run_id, "done", only_from=["running"],
                                result=self.result.summary(), env=self.result.env)
        return run_id


def train_finished_run(data, folder) -> FinishedRun:
    """``CONFIG`` trained for real on ``data`` (its checkpoint written under ``folder``)."""
    from cifarlab.core.train import train

    every, steps, losses, events = [], [], [], []

    def on_event(e):
        every.append(e)
        if e.kind == "losses":
            steps.extend(e.data["steps"])
            losses.extend(e.data["losses"])
        elif e.kind != "progress":
            events.append((e.kind, e.data))

    path = folder / "finished.pth"
    result = train(CONFIG, data, on_event=on_event, eval_each_epoch=True, checkpoint_path=path)
    return FinishedRun(CONFIG, result, tuple(every), tuple(steps), tuple(losses),
                       tuple(events), path.read_bytes())


def shared_finished_run(data, folder) -> FinishedRun:
    """``train_finished_run`` once per ``folder``: the first process to take the folder's lock
    trains and pickles the run there, the others (pytest-xdist's workers) load that."""
    saved = folder / "finished-run.pickle"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if saved.is_file():
            with open(saved, "rb") as f:
                return pickle.load(f)
        run = train_finished_run(data, folder)
        with open(saved.with_suffix(".part"), "wb") as f:
            pickle.dump(run, f)
        saved.with_suffix(".part").rename(saved)
        return run
