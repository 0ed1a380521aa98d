"""A worker while the run store's database cannot be reached (PostgreSQL restarting): what it
could not write is kept, in order, and written once the store answers; its outcome is recorded
then. (The same against a real PostgreSQL restarted mid-run: tests/test_replicas.py.)"""
from __future__ import annotations

import os

from cifarlab.serve import worker
from cifarlab.serve.database import StoreUnreachable
from cifarlab.serve.store import RunStore
from cifarlab.serve.worker import JobContext


class FlakyStore(RunStore):
    """A store whose writes fail as an unreachable database's do, ``down`` times."""

    down = 0

    def record(self, *args, **kw):
        if self.down > 0:
            self.down -= 1
            raise StoreUnreachable("serve.store.unreachable")
        return super().record(*args, **kw)


def test_a_batch_the_store_refused_is_kept_and_written_later_in_order(tmp_path, monkeypatch):
    store = FlakyStore(tmp_path / "runs.db", tmp_path / "ck")
    run_id = store.create_run("worker-session-1", "train", {}, "cpu")
    store.set_status(run_id, "running", worker_pid=os.getpid())
    ctx = JobContext(store, run_id, "cpu")
    store.down = 2
    ctx.emit("start", {"total_steps": 6})            # urgent: flushed at once, refused
    for i in (1, 2, 3):
        ctx.emit("losses", {"steps": [i], "losses": [1.0 / i]})
    assert ctx.flush(force=True) is False             # refused again: still kept
    assert store.losses(run_id) == ([], []) and store.events(run_id) == []
    for i in (4, 5, 6):
        ctx.emit("losses", {"steps": [i], "losses": [1.0 / i]})
    ctx.emit("progress", {"step": 6, "total_steps": 6})
    monkeypatch.setattr(worker.time, "sleep", lambda s: None)
    worker.settle(store, ctx, "done", {"result": {"steps": 6}})
    steps, losses = store.losses(run_id)
    assert steps == [1, 2, 3, 4, 5, 6] and losses[0] == 1.0
    assert [e.kind for e in store.events(run_id)] == ["start"]
    run = store.get(run_id)
    assert run.status == "done" and run.result == {"steps": 6} and run.progress["step"] == 6


def test_settle_gives_up_after_its_patience_and_says_so(tmp_path, monkeypatch, capsys):
    store = FlakyStore(tmp_path / "runs.db", tmp_path / "ck")
    run_id = store.create_run("worker-session-2", "train", {}, "cpu")
    store.set_status(run_id, "running", worker_pid=os.getpid())
    ctx = JobContext(store, run_id, "cpu")
    ctx.emit("losses", {"steps": [1], "losses": [0.5]})
    store.down = 10 ** 6
    monkeypatch.setattr(worker.time, "sleep", lambda s: None)
    worker.settle(store, ctx, "done", {}, patience_s=0.0)
    assert "could not be recorded" in capsys.readouterr().err
    assert store.get(run_id).status == "running"      # left to the heartbeat watch
