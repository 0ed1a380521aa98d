"""cifarlab.serve.store: schema and migrations, WAL, a writer process beside a reader,
downsampling, id checks, owners and their compute, queue positions, deletes, restarts, the
half-written checkpoints a killed worker leaves.

The ``store`` fixture runs each test on both backends: a SQLite file and a real PostgreSQL
(tests/pg_support.py, marker ``postgres``). What only a SQLite file has (WAL, its migrations from
version 1) uses ``sqlite_store``."""
import math
import multiprocessing
import os
import pickle
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from cifarlab import i18n
from cifarlab.errors import JobError
from cifarlab.serve.store import SCHEMA_VERSION, RunStore, pid_alive, validate_run_id
from old_store import old_store, schema_version

SESSION = "session-aaaa"
OTHER = "session-bbbb"


@pytest.fixture
def store(store_location, tmp_path):
    return RunStore(store_location, tmp_path / "home" / "checkpoints")


@pytest.fixture
def sqlite_store(tmp_path):
    return RunStore(tmp_path / "home" / "runs.db")


def test_the_same_store_opens_again_and_a_newer_one_is_refused(store, tmp_path):
    assert schema_version(store) == SCHEMA_VERSION == 5
    run_id = store.create_run(SESSION, "train", {"epochs": 1}, "cpu")
    again = RunStore(store.url.render_as_string(hide_password=False), store.checkpoint_dir)
    assert again.get(run_id).config == {"epochs": 1}
    with store._write() as c:   # as a newer CIFAR Lab would leave it
        if store.dialect == "sqlite":
            c.exec_driver_sql("PRAGMA user_version = 99")
        else:
            c.exec_driver_sql("UPDATE cifarlab_schema SET version = 99")
    with pytest.raises(JobError, match="newer CIFAR Lab") as info:
        RunStore(store.url.render_as_string(hide_password=False), store.checkpoint_dir)
    assert info.value.code == "serve.store.newer_schema" and info.value.params["version"] == 99


def test_a_database_servers_store_without_its_checkpoint_folder_is_refused_before_connecting(
        tmp_path):
    # nothing listens on port 9: the refusal comes before any connection is tried
    with pytest.raises(ValueError, match="checkpoint_dir"):
        RunStore("postgresql+psycopg://nobody@127.0.0.1:9/none")
    assert RunStore(tmp_path / "runs.db").checkpoint_dir == (tmp_path / "checkpoints").resolve()


def test_schema_is_versioned_and_in_wal_mode(sqlite_store, tmp_path):
    store = sqlite_store
    assert schema_version(store) == SCHEMA_VERSION == 5
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"   # WAL is the file's own
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "losses", "events"} <= tables
    columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    assert {"id", "session", "kind", "name", "status", "device", "config", "created_at",
            "started_at", "finished_at", "error", "result", "env", "checkpoint",
            "cancel_requested", "worker_pid", "heartbeat", "progress", "waited_s", "owner",
            "image_epochs", "error_code", "error_params"} <= columns
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert any("losses" in i for i in indexes) or conn.execute(
        "SELECT sql FROM sqlite_master WHERE name='losses'").fetchone()[0].count("PRIMARY KEY")
    # a second store over the same file sees the same runs and does not re-create anything
    run_id = store.create_run(SESSION, "train", {"epochs": 1}, "cpu")
    again = RunStore(store.path)
    assert again.get(run_id).config == {"epochs": 1}
    # a file from a newer CIFAR Lab is refused, in words
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(JobError, match="newer CIFAR Lab") as info:
        RunStore(store.path)
    assert info.value.code == "serve.store.newer_schema" and info.value.params["version"] == 99


def test_an_older_sqlite_store_is_migrated_and_keeps_its_runs(tmp_path):
    old = old_store(tmp_path / "runs.db")          # a runs.db from before owners
    assert schema_version(old) == 1
    conn = sqlite3.connect(old.path)
    conn.execute("INSERT INTO runs (id, session, kind, status, device, config, created_at, "
                 "error) VALUES (?, ?, 'train', 'failed', 'cpu', '{}', 1.0, 'old reason')",
                 ("a" * 32, SESSION))
    conn.commit()
    conn.close()
    store = RunStore(tmp_path / "runs.db")
    assert schema_version(store) == SCHEMA_VERSION
    run = store.get("a" * 32)
    assert run.owner == SESSION and run.image_epochs is None     # an old run's owner: its session
    assert run.error == run.error_text("es") == "old reason" and run.error_code is None
    # and the migrated file works as a new one does
    new = store.create_run(SESSION, "train", {}, "cpu", owner="10.0.0.7", image_epochs=5)
    assert store.get(new).owner == "10.0.0.7"
    assert schema_version(RunStore(tmp_path / "runs.db")) == SCHEMA_VERSION  # idempotent


def test_run_fields_timestamps_and_guarded_status_changes(store):
    run_id = store.create_run(SESSION, "train", {"lr": 0.01, "model": {"channels": [6, 16]}},
                              "cpu", name="  my   first\nrun ")
    run = store.get(run_id)
    assert len(run_id) == 32 and run.status == "queued" and run.active
    assert run.config == {"lr": 0.01, "model": {"channels": [6, 16]}}
    assert run.name == "my first run" and run.started_at is None
    time.sleep(0.05)
    assert store.set_status(run_id, "running", only_from=["queued"], worker_pid=1234)
    run = store.get(run_id)
    assert run.status == "running" and run.worker_pid == 1234
    assert run.waited_s >= 0.05 and run.started_at >= run.created_at and run.heartbeat
    store.record(run_id, progress={"step": 3, "total_steps": 10})
    assert store.get(run_id).progress == {"step": 3, "total_steps": 10}
    assert store.set_status(run_id, "done", only_from=["running"], result={"acc": 0.5},
                            env={"torch": "x"})
    # a late writer (a worker that was already given up on) cannot overwrite the outcome
    assert not store.set_status(run_id, "failed", only_from=["running"], error="late")
    run = store.get(run_id)
    assert run.status == "done" and run.finished and run.result == {"acc": 0.5}
    assert run.env == {"torch": "x"} and run.error is None and run.finished_at >= run.started_at
    assert run.checkpoint is None  # no file was written
    with pytest.raises(Exception, match=r"(?i)check constraint"):   # the table's own CHECK
        store.set_status(run_id, "exploded")
    with pytest.raises(JobError) as info:
        store.set_status(run_id, "done", checkpoint="/etc/passwd")  # paths are the store's
    assert info.value.code == "serve.store.bad_fields"


def test_sessions_and_counts(store):
    a = store.create_run(SESSION, "train", {}, "cpu")
    b = store.create_run(OTHER, "train", {}, "cpu")
    c = store.create_run(SESSION, "timing", {}, "cpu")
    store.set_status(c, "running")
    assert [r.id for r in store.list_runs(SESSION)] == [c, a]  # newest first
    assert [r.id for r in store.list_runs(OTHER)] == [b]
    assert {r.id for r in store.list_runs()} == {a, b, c}
    assert [r.id for r in store.list_runs(statuses=["running"])] == [c]
    assert store.counts()["queued"] == 2 and store.counts()["running"] == 1
    assert store.counts(owner=SESSION) == {"queued": 1, "running": 1, "done": 0, "failed": 0,
                                           "cancelled": 0, "interrupted": 0}
    with pytest.raises(JobError):
        store.list_runs("x")  # not a session id
    with pytest.raises(JobError):
        store.create_run("../../bad", "train", {}, "cpu")


def test_owners_count_across_sessions_with_their_compute(store):
    """A person (an owner) has several tabs (sessions); limits count the person."""
    tab1 = store.create_run(SESSION, "train", {}, "cpu", owner="cookie-42", image_epochs=1000)
    tab2 = store.create_run(OTHER, "train", {}, "cpu", owner="cookie-42", image_epochs=2000)
    store.create_run(OTHER, "train", {}, "cpu", image_epochs=4000)    # owner: the session
    assert store.get(tab1).owner == "cookie-42" and store.get(tab1).session == SESSION
    assert store.counts(owner="cookie-42")["queued"] == 2
    assert store.counts(owner=OTHER)["queued"] == 1   # OTHER's session has 2 (one is cookie-42's)
    assert len(store.list_runs(OTHER, statuses=["queued"])) == 2
    start = store.get(tab1).created_at
    assert [n for _, n in store.image_epochs_since("cookie-42", start)] == [1000, 2000]
    # a run cancelled before it started used nothing; one that started and ended counts
    store.set_status(tab1, "cancelled", only_from=["queued"])
    store.set_status(tab2, "running")
    store.set_status(tab2, "failed")
    assert [n for _, n in store.image_epochs_since("cookie-42", start)] == [2000]
    assert store.image_epochs_since("cookie-42", time.time() + 1) == []   # outside the window
    for bad in ("", "a b", "x" * 129, "<script>", 42):
        with pytest.raises(JobError) as info:
            store.create_run(SESSION, "train", {}, "cpu", owner=bad)
        assert info.value.field == "owner"


def _writer(s, run_id, n, batch):
    """In another process (the store pickled to it, as to a worker): append n step losses in
    batches, and an event per batch."""
    for start in range(1, n + 1, batch):
        steps = list(range(start, min(n, start + batch - 1) + 1))
        s.record(run_id, steps=steps, losses=[1.0 / k for k in steps],
                 events=[("progress_note", {"upto": steps[-1]})],
                 progress={"step": steps[-1], "total_steps": n})
        time.sleep(0.002)


def test_writer_process_and_readers_at_the_same_time(store):
    run_id = store.create_run(SESSION, "train", {}, "cpu")
    n = 3000
    proc = multiprocessing.get_context("spawn").Process(target=_writer,
                                                         args=(store, run_id, n, 25))
    proc.start()
    errors, seen = [], []

    def reader():
        mine = pickle.loads(pickle.dumps(store))  # its own connections, as another process
        last = 0
        try:
            while proc.is_alive() or last < n:
                steps, losses = mine.losses(run_id)
                # always a consistent prefix: 1..k with nothing missing or repeated
                if steps != list(range(1, len(steps) + 1)):
                    errors.append(f"not a prefix: {steps[:5]}...")
                    return
                if len(steps) < last:
                    errors.append("went backwards")
                    return
                last = len(steps)
                seen.append(last)
                mine.get(run_id)
                mine.events(run_id, since_seq=max(0, last // 25 - 3))
                if not proc.is_alive() and last < n:
                    break
        except Exception as err:  # noqa: BLE001 - any error is the finding, e.g. "database is locked"
            errors.append(repr(err))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    # the serving process writes too (a cancel flag, a heartbeat) while the worker writes
    for _ in range(20):
        store.request_cancel(run_id)
        store.heartbeat(run_id)
        time.sleep(0.01)
    proc.join(600)  # a hang guard, not a speed check
    for t in threads:
        t.join(600)
    assert proc.exitcode == 0
    assert errors == []
    assert len(set(seen)) > 3, "the readers should have seen the losses grow"
    steps, losses = store.losses(run_id)
    assert steps == list(range(1, n + 1)) and losses[-1] == pytest.approx(1.0 / n)
    assert len(store.events(run_id)) == n // 25
    assert store.get(run_id).progress == {"step": n, "total_steps": n}


def test_losses_read_incrementally(store):
    run_id = store.create_run(SESSION, "train", {}, "cpu")
    store.record(run_id, steps=list(range(1, 1001)), losses=[float(i) for i in range(1, 1001)])
    steps, losses = store.losses(run_id)
    assert len(steps) == 1000 and steps == [int(v) for v in losses]
    # incremental reads for a live chart
    steps, losses = store.losses(run_id, since_step=990)
    assert steps == list(range(991, 1001)) and losses[0] == 991.0
    # an exploded loss (NaN) comes back as NaN, infinity as infinity
    store.record(run_id, steps=[1001, 1002], losses=[float("nan"), float("inf")])
    _, losses = store.losses(run_id, since_step=1000)
    assert math.isnan(losses[0]) and losses[1] == math.inf


def test_events_in_order_filtered_and_incremental(store):
    run_id = store.create_run(SESSION, "train", {}, "cpu")
    store.record(run_id, events=[("start", {"total_steps": 10})])
    store.record(run_id, events=[("epoch", {"epoch": 1}), ("eval", {"accuracy": 0.3})])
    store.record(run_id, events=[("done", {"cancelled": False})])
    events = store.events(run_id)
    assert [(e.seq, e.kind) for e in events] == [(1, "start"), (2, "epoch"), (3, "eval"),
                                                 (4, "done")]
    assert events[2].data == {"accuracy": 0.3} and events[0].t > 0
    assert [e.kind for e in store.events(run_id, kinds=["epoch", "done"])] == ["epoch", "done"]
    assert [e.seq for e in store.events(run_id, since_seq=2)] == [3, 4]


BAD_IDS = ["../etc", "../../etc/passwd", "0" * 31, "0" * 33, "A" * 32, "g" * 32,
           "0" * 32 + "\n", "/" + "0" * 31, "", None, 12345, "0" * 30 + "/.", "..%2f" + "0" * 27]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_run_ids_are_validated_before_any_use(store, bad):
    with pytest.raises(JobError, match="not a run id") as info:
        validate_run_id(bad)
    assert info.value.field == "run_id" and "no es un id" in info.value.text("es")
    for call in (store.get, store.checkpoint_path, store.delete_run, store.request_cancel,
                 store.cancel_requested, store.losses, store.events, store.queue_position):
        with pytest.raises(JobError):
            call(bad)


def test_checkpoint_paths_are_computed_by_the_store(store, tmp_path):
    run_id = store.create_run(SESSION, "train", {}, "cpu")
    path = store.checkpoint_path(run_id)
    assert path == tmp_path / "home" / "checkpoints" / f"{run_id}.pth"
    assert path.resolve().parent == store.checkpoint_dir


def _die_while_saving(path):
    """In another process (forked: this one has imported torch already): start writing a
    checkpoint the way core.checkpoint does, and be killed (as the kernel's OOM killer would)
    half-way through."""
    from cifarlab.core.checkpoint import atomic_write_bytes

    proc = multiprocessing.get_context("fork").Process(target=atomic_write_bytes, args=(
        path, lambda f: (f.write(b"half"), f.flush(), os.kill(os.getpid(), 9))))
    proc.start()
    proc.join(600)   # a hang guard
    assert proc.exitcode == -9


def test_half_written_checkpoints_are_removed_unless_their_run_is_running(store):
    dead = store.create_run(SESSION, "train", {}, "cpu")
    live = store.create_run(SESSION, "train", {}, "cpu")
    store.set_status(live, "running")
    store.checkpoint_dir.mkdir(parents=True)
    _die_while_saving(store.checkpoint_path(dead))
    _die_while_saving(store.checkpoint_path(live))
    (tmp_dead,) = store.checkpoint_dir.glob(f".{dead}.pth.*.tmp")   # what a killed worker leaves
    (tmp_live,) = store.checkpoint_dir.glob(f".{live}.pth.*.tmp")
    stray = store.checkpoint_dir / ".not-a-run.pth.abc.tmp"
    stray.write_bytes(b"?")
    done = store.checkpoint_path(dead).with_name(f"{store.create_run(SESSION, 'x', {}, 'cpu')}.pth")
    done.write_bytes(b"a finished checkpoint")
    assert set(store.remove_partial_checkpoints()) == {tmp_dead, stray}
    assert tmp_live.exists() and done.exists()   # a running run may still be saving; files stay
    assert store.remove_partial_checkpoints(live) == [tmp_live]
    assert [p.name for p in store.checkpoint_dir.iterdir()] == [done.name]


def test_queue_positions_are_fifo_per_device(store):
    ids = []
    for device in ("cpu", "cuda:0", "cpu", "cpu", "cuda:0"):
        ids.append(store.create_run(SESSION, "train", {}, device))
    c1, g1, c2, c3, g2 = ids
    assert [store.queue_position(i) for i in ids] == [1, 1, 2, 3, 2]
    assert [r.id for r in store.list_runs(statuses=["queued"])[::-1]] == ids
    store.set_status(c1, "running")
    store.set_status(c2, "cancelled", only_from=["queued"])
    assert store.queue_position(c1) is None and store.queue_position(c2) is None
    assert store.queue_position(c3) == 1 and store.queue_position(g2) == 2
    assert store.running_by_device() == {"cpu": (1, False)}


def test_delete_removes_rows_and_the_checkpoint(store):
    run_id = store.create_run(SESSION, "train", {}, "cpu")
    keep = store.create_run(SESSION, "train", {}, "cpu")
    store.record(run_id, steps=[1, 2], losses=[2.3, 2.2])
    store.record(keep, steps=[1], losses=[2.3])
    store.record(run_id, events=[("start", {})])
    store.set_status(run_id, "running")
    path = store.checkpoint_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"weights")
    with pytest.raises(JobError, match="cancel it first"):
        store.delete_run(run_id)
    store.set_status(run_id, "done")
    assert store.get(run_id).checkpoint == str(path)  # recorded when the run finished
    assert store.delete_run(run_id)
    assert not path.exists() and store.get(run_id) is None
    assert store.losses(run_id) == ([], []) and store.events(run_id) == []
    assert store.losses(keep) == ([1], [2.3])
    assert not store.delete_run(run_id)


def test_restart_interrupts_orphaned_runs_and_keeps_the_queue(store):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert not pid_alive(dead.pid) and pid_alive(os.getpid())
    orphan = store.create_run(SESSION, "train", {}, "cpu")
    store.set_status(orphan, "running", worker_pid=dead.pid)
    store.record(orphan, progress={"step": 40, "total_steps": 100})
    alive = store.create_run(OTHER, "train", {}, "cpu")
    store.set_status(alive, "running", worker_pid=os.getpid())
    waiting = store.create_run(SESSION, "train", {}, "cpu")
    assert store.interrupt_orphans() == [orphan]
    run = store.get(orphan)
    assert run.status == "interrupted"
    assert "restarted" in run.error and "step 40 of 100" in run.error
    assert run.error_code == "serve.store.restarted_at"
    assert run.error_text("es") == i18n.t("errors.serve.store.restarted_at", "es", step=40,
                                          total=100)
    assert "paso 40 de 100" in run.error_text("es")
    assert store.get(alive).status == "running"
    assert store.get(waiting).status == "queued" and store.queue_position(waiting) == 1
    # a live process whose heartbeat is stale counts as gone when asked to
    assert store.interrupt_orphans(stale_after=0.0) == [alive]


def test_store_travels_to_threads_and_processes(store):
    copy = pickle.loads(pickle.dumps(store))
    assert copy.where == store.where and copy.checkpoint_dir == store.checkpoint_dir
    run_id = copy.create_run(SESSION, "train", {}, "cpu")
    out = []
    t = threading.Thread(target=lambda: out.append(store.get(run_id).status))
    t.start()
    t.join()
    assert out == ["queued"]


def test_the_declared_tables_are_what_each_backend_has(store):
    """A new store (SQLite or PostgreSQL) has the declared columns, keys and indexes."""
    _has_the_declared_tables(store)


def test_a_store_migrated_from_version_1_has_the_declared_tables(tmp_path):
    old_store(tmp_path / "runs.db")
    _has_the_declared_tables(RunStore(tmp_path / "runs.db"))


def _has_the_declared_tables(store):
    from sqlalchemy import inspect

    from cifarlab.serve.schema import METADATA

    insp = inspect(store.engine)
    for table in METADATA.tables.values():
        assert ({c["name"] for c in insp.get_columns(table.name)}
                == {c.name for c in table.columns}), table.name
        assert (set(insp.get_pk_constraint(table.name)["constrained_columns"])
                == {c.name for c in table.primary_key.columns}), table.name
        assert ({i["name"] for i in insp.get_indexes(table.name)} - {None}
                >= {i.name for i in table.indexes}), table.name
