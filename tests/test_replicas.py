"""Several app servers (replicas) on one run store: a real PostgreSQL (tests/pg_support.py,
marker ``postgres``; skipped without it, except in CI). One dispatcher at a time and a takeover
when it is killed; per-person limits and guessing counts across replicas; the database down at
start, restarted mid-run, a wrong URL or password; a dead replica's runs on another machine; a
run on Ray that outlives its replica (also marked ``ray``: the session's cluster).

No test bounds a wall-clock time: the waits below are hang guards (GUARD)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cifarlab import i18n
from cifarlab.errors import JobError
from cifarlab.serve import replicas
from cifarlab.serve.classroom.facade import Classroom
from cifarlab.serve.classroom.model import ClassError
from cifarlab.serve.dispatcher import Dispatcher
from cifarlab.serve.identity import Person
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.settings import SettingsError, load_settings
from cifarlab.serve.store import RunStore
from ray_support import ray_cluster  # noqa: F401 - the session's Ray cluster (a fixture)
from replica_support import STEADY

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[1]
GUARD = 600.0
ALICE, BOB = "alice-session-1", "bob-session-22"


def settings_for(url: str, home: Path, **overrides):
    # worker_nice=0: a niced worker starting on a busy CI machine can take longer than the
    # timeout to beat once, and these tests are about replicas, not about priorities
    values = dict(spare_workers=0, cpu_slots=1, max_per_owner=20, heartbeat_timeout=15,
                  worker_nice=0)
    values.update(overrides)
    return load_settings(env={}, home=str(home), store_url=url,
                         data=str(home / "no-data-here"), **values)


def wait_for(check, what: str, timeout: float = GUARD, poll: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {what} after {timeout} s")
        time.sleep(poll)


@pytest.fixture
def queues():
    made = []
    yield made
    for q in made:
        q.shutdown(timeout=5.0)


# -- faults and bad input -------------------------------------------------------------------
def test_a_wrong_password_or_database_is_one_line_naming_the_setting(postgres, tmp_path):
    for url in (postgres.url(password="not-the-password"), postgres.url(database="nope")):
        with pytest.raises(JobError) as info:
            RunStore(url, tmp_path / "ck")
        err = info.value
        line = str(err)
        assert err.code == "serve.store.down" and "\n" not in line
        assert "CIFARLAB_STORE_URL" in line and "not-the-password" not in line
        assert "***" in line or "nope" in line
    # a URL that is no database URL at all, from the environment: the setting named, no password
    with pytest.raises(SettingsError) as info:
        load_settings(env={"CIFARLAB_STORE_URL": "mysql://ana:secret-pw@db/x"})
    assert "CIFARLAB_STORE_URL" in str(info.value) and "secret-pw" not in str(info.value)
    assert "\n" not in str(info.value)


def test_postgres_down_at_start_is_one_line_for_the_host_and_words_for_students(tmp_path):
    from pg_support import free_port

    url = f"postgresql://cifarlab@127.0.0.1:{free_port()}/cifarlab"   # nobody listens there
    with pytest.raises(JobError) as info:
        JobQueue(settings=settings_for(url, tmp_path / "home"), start=False)
    line = str(info.value)
    assert info.value.code == "serve.store.down" and "\n" not in line
    assert "CIFARLAB_STORE_URL" in line and "127.0.0.1" in line
    # the pages say it in the student's language, without the host's details
    from streamlit.testing.v1 import AppTest

    script = ("import streamlit as st\nfrom ui import data\nst.session_state['lang'] = 'es'\n"
              "data.queue()\nst.write('not reached')\n")
    os.environ["CIFARLAB_STORE_URL"] = url
    os.environ["CIFARLAB_HOME"] = str(tmp_path / "home")
    try:
        from cifarlab.serve import queue as jobs

        jobs._QUEUE = None
        at = AppTest.from_string(script, default_timeout=60)
        at.query_params["lang"] = "es"
        at.run()
    finally:
        del os.environ["CIFARLAB_STORE_URL"], os.environ["CIFARLAB_HOME"]
    assert [e.value for e in at.error] == [i18n.t("errors.serve.store.unreachable", "es")]
    assert not at.exception and "127.0.0.1" not in at.error[0].value


def test_postgres_restarted_mid_run_loses_nothing(postgres, pg_url, tmp_path, queues):
    # no failover here: a worker slow to start on a loaded machine must not count as dead
    queue = JobQueue(settings=settings_for(pg_url, tmp_path / "home", heartbeat_timeout=60))
    queues.append(queue)
    run_id = queue.submit_job(ALICE, STEADY, {"steps": 120, "dt": 0.05}, "cpu")
    wait_for(lambda: (queue.store.get(run_id).progress or {}).get("step", 0) >= 10,
             "the run to train a few steps")
    postgres.restart(down_s=3.0)        # every connection cut; nothing answers for 3 s
    run = queue.wait(run_id, timeout=GUARD)
    assert run.status == "done" and run.result["steps"] == 120, (run.status, run.error)
    steps, losses = queue.store.losses(run_id)
    assert steps == list(range(1, 121)) and losses[-1] == pytest.approx(1 / 120)
    # the queue dispatches again after the restart
    again = queue.submit_job(ALICE, STEADY, {"steps": 3, "dt": 0.01}, "cpu")
    assert queue.wait(again, timeout=GUARD).status == "done"


# -- several replicas -----------------------------------------------------------------------
def test_limits_and_guessing_counts_hold_across_replicas(pg_url, tmp_path, queues):
    a = JobQueue(settings=settings_for(pg_url, tmp_path / "home", max_per_owner=2), start=False)
    b = JobQueue(settings=settings_for(pg_url, tmp_path / "home", max_per_owner=2), start=False)
    queues += [a, b]
    results: list = []

    def submit(q, i):
        try:
            results.append(q.submit_job(f"tab-session-{i:02d}", STEADY, {}, "cpu",
                                        owner="browser:ana-cookie"))
        except JobError as err:
            results.append(err.code)

    threads = [threading.Thread(target=submit, args=((a, b)[i % 2], i)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(GUARD)
    accepted = [r for r in results if len(r) == 32]
    assert len(accepted) == 2 and results.count("serve.limits.per_owner") == 6
    # a student guessing class codes on one replica waits on the other as well
    teacher = Person("instructor:passphrase", "", instructor=True)
    cr_a, cr_b = Classroom(a.store), Classroom(b.store)
    code = cr_a.create_class(teacher, "Period 1").code
    guesser = Person("browser:guessing-cookie", "")
    for _ in range(3):
        with pytest.raises(ClassError):
            cr_a.join(guesser, "red-fox-11" if code != "red-fox-11" else "red-fox-12", "G", "k")
    with pytest.raises(ClassError) as info:
        cr_b.join(guesser, code, "G", "k")    # even the right code: this browser must wait
    assert info.value.code == "class.rate_limited"


def test_a_dead_replicas_runs_elsewhere_are_interrupted_once_silent(store_location, tmp_path):
    store = RunStore(store_location, tmp_path / "ck")
    gone = replicas.Replica(store, 10).id
    with store._write() as c:   # a replica on another machine that stopped beating a while ago
        c.exec_driver_sql("UPDATE replicas SET host = 'elsewhere', heartbeat = heartbeat - 100")
    store.replica = gone
    silent = store.create_run(ALICE, "train", {}, "cpu")
    store.set_status(silent, "running", worker_pid=os.getpid())
    store.record(silent, progress={"step": 40, "total_steps": 100})
    beating = store.create_run(BOB, "train", {}, "cpu")
    store.set_status(beating, "running", worker_pid=1)
    with store._write() as c:
        c.exec_driver_sql(f"UPDATE runs SET heartbeat = heartbeat - 100 WHERE id = '{silent}'")
    here = replicas.Replica(store, timeout=10)
    assert gone not in here.alive() and here.id in here.alive()
    # its pids mean nothing here: only the heartbeats say whether its runs are alive
    assert [r.id for r in store.orphans(10, alive=here.alive())] == [silent]
    assert store.interrupt_orphans(alive=here.alive()) == []   # not at start: no timeout
    # the dispatcher marks it once silent, in the words a restart finds it with: the step
    # it reached; a checkpoint it was writing goes
    partial = store.checkpoint_dir / f".{silent}.pth.1.tmp"
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(b"half")
    local = SimpleNamespace(running={}, adopt=lambda runs: set())   # finds none still going
    Dispatcher(store, local, SimpleNamespace(heartbeat_timeout=10), here)._watch_workers()
    run = store.get(silent)
    assert (run.status, run.error_code, run.error_params) == (
        "interrupted", "serve.store.restarted_at", {"step": 40, "total": 100})
    assert not partial.exists() and store.get(beating).status == "running"
    here.stop()
    assert here.id not in replicas.alive(store, 10)


def test_a_replica_beats_while_its_dispatcher_is_busy(tmp_path):
    """The beat has a thread of its own: a dispatcher tick that takes longer than the timeout
    (a worker starting, torch's imports) must not make a peer take this replica's runs for
    orphans. Here no tick runs at all, and the replica is still there past its timeout."""
    store = RunStore(tmp_path / "runs.db", tmp_path / "ck")
    here = replicas.Replica(store, timeout=3)
    here.start()      # as the dispatcher does when its thread starts
    try:
        time.sleep(4.5)
        assert here.id in replicas.alive(store, 3)
    finally:
        here.stop()
    assert here.id not in replicas.alive(store, 3)


def _start_replica(url: str, home: Path, *ray_address: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "replica_support.py"), url,
                             str(home), *ray_address], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    first = proc.stdout.readline().split()
    assert first[:1] == ["replica"], first
    return proc, first[1]


def test_one_dispatcher_and_another_takes_over_when_it_is_killed(pg_url, tmp_path, queues):
    home = tmp_path / "home"
    a, a_id = _start_replica(pg_url, home)
    try:
        assert a.stdout.readline().strip() == "leading"
        b = JobQueue(settings=settings_for(pg_url, home))
        queues.append(b)
        long_run = b.submit_job(ALICE, STEADY, {"steps": 400, "dt": 0.05}, "cpu")
        waiting = b.submit_job(BOB, STEADY, {"steps": 20, "dt": 0.02}, "cpu")
        first = wait_for(lambda: ((r := b.store.get(long_run)).finished
                                  or (r.progress or {}).get("step", 0) >= 20) and r,
                         "replica A to train the first run")
        assert not first.finished, (first.status, first.error)
        assert first.replica == a_id and not b.replica.leading     # A dispatches, B waits
        assert b.store.get(waiting).status == "queued"             # one CPU slot, taken
        os.kill(a.pid, signal.SIGKILL)     # replica A dies (its worker runs on, for now)
        a.wait(GUARD)
        done = b.wait(waiting, timeout=GUARD)
        assert b.replica.leading and done.status == "done" and done.replica == b.replica.id
        assert [e.kind for e in b.store.events(waiting)].count("start") == 1   # started once
        # A's run: its worker saw its server die, stopped and kept what it had learned
        lost = wait_for(lambda: (r := b.store.get(long_run)).finished and r, "A's run to end")
        assert lost.status == "interrupted" and lost.error_code == "serve.worker.server_stopped"
        assert 20 <= lost.result["steps"] < 400
        assert len(b.store.losses(long_run)[0]) == lost.result["steps"]
    finally:
        if a.poll() is None:
            os.killpg(a.pid, signal.SIGKILL)


@pytest.mark.ray
def test_a_run_on_ray_trains_on_when_its_replica_dies_and_another_takes_it_over(
        pg_url, tmp_path, queues, ray_cluster):  # noqa: F811 - the fixture imported above
    """Replica A (a process of its own on the session's Ray cluster) starts a run and is killed
    (SIGKILL): the run's detached actor trains on in the same process, replica B takes it over
    and writes the rest, and it ends ``done`` with every loss and event in the store, once."""
    home = tmp_path / "home"
    a, a_id = _start_replica(pg_url, home, ray_cluster.get_runtime_context().gcs_address)
    try:
        lines = iter(a.stdout.readline, "")   # any line Ray prints may come first
        assert any(line.strip() == "leading" for line in lines)
        b = JobQueue(settings=settings_for(pg_url, home, executor="ray", heartbeat_timeout=6))
        queues.append(b)
        run_id = b.submit_job(ALICE, STEADY, {"steps": 200, "dt": 0.05}, "cpu")
        started = wait_for(lambda: ((r := b.store.get(run_id)).finished
                                    or (r.progress or {}).get("step", 0) >= 10) and r,
                           "replica A to run it on Ray")
        assert not started.finished, (started.status, started.error)
        assert b.store.get(run_id).replica == a_id and not b.replica.leading
        os.kill(a.pid, signal.SIGKILL)
        a.wait(GUARD)
        run = b.wait(run_id, timeout=GUARD)
        assert (run.status, run.replica) == ("done", b.replica.id), (run.status, run.error)
        (worker,) = b.store.events(run_id, kinds=["worker"])
        assert (run.result["steps"], run.result["pid"]) == (200, worker.data["pid"])  # on
        assert b.store.losses(run_id)[0] == list(range(1, 201))
        kinds = [e.kind for e in b.store.events(run_id)]
        assert kinds.count("start") == 1 and kinds.count("stop") == 0
        assert not b.executor.running and b.replica.leading
    finally:
        if a.poll() is None:
            os.killpg(a.pid, signal.SIGKILL)


def test_runs_are_dispatched_once_by_one_replica_and_another_takes_over(pg_url, tmp_path,
                                                                        queues, monkeypatch):
    """Two app servers on one PostgreSQL, both taking submits: one dispatches, every run starts
    exactly once; the dispatcher stops and the other picks up what was still queued."""
    from inline_executor import use_inline_executor

    use_inline_executor(monkeypatch)
    home = tmp_path / "home"
    a = JobQueue(settings=settings_for(pg_url, home, max_per_owner=50, cpu_slots=2))
    b = JobQueue(settings=settings_for(pg_url, home, max_per_owner=50, cpu_slots=2))
    queues += [a, b]
    wait_for(lambda: a.replica.leading or b.replica.leading, "a dispatcher")
    leader, other = (a, b) if a.replica.leading else (b, a)
    ids = [(a, b)[i % 2].submit_job(f"student-session-{i:02d}", STEADY,
                                    {"steps": 3, "dt": 0.01}, "cpu") for i in range(12)]
    for run_id in ids:
        run = other.wait(run_id, timeout=GUARD)     # the non-dispatcher sees them finish
        assert run.status == "done", (run.status, run.error)
        assert run.replica == leader.replica.id
        assert [e.kind for e in other.store.events(run_id)].count("start") == 1
    assert not other.replica.leading
    # the dispatcher stops (a clean stop) while two runs train and three wait: those two are
    # interrupted, the three start on the other replica, once
    long = [other.submit_job(f"long-session-{i}", STEADY, {"steps": 100000, "dt": 0.01}, "cpu")
            for i in range(2)]
    wait_for(lambda: all(other.store.get(r).status == "running" for r in long), "two running")
    waiting = [other.submit_job(f"late-session-{i}", STEADY, {"steps": 2, "dt": 0.01}, "cpu")
               for i in range(3)]
    assert all(other.store.get(r).status == "queued" for r in waiting)
    leader.shutdown(timeout=5.0)
    for run_id in long:
        assert other.wait(run_id, timeout=GUARD).status == "interrupted"
    for run_id in waiting:
        run = other.wait(run_id, timeout=GUARD)
        assert run.status == "done" and run.replica == other.replica.id
        assert [e.kind for e in other.store.events(run_id)].count("start") == 1
    assert other.replica.leading

def test_any_replica_serves_any_student(pg_url, tmp_path, queues, monkeypatch, finished_run,
                                        cifar_archive, cifar_cache_dir):
    """A run recorded through replica A (its checkpoint in the shared ``home``) opens on
    replica B from the student's ``?sid=`` link, downloads included; a class made on A is on
    B's board; another session sees nothing."""
    from streamlit.testing.v1 import AppTest

    from data_support import pages_queue

    home = tmp_path / "home"
    a = JobQueue(settings=settings_for(pg_url, home), start=False)
    queues.append(a)
    run_id = finished_run.write(a.store, ALICE, name="on replica A")
    teacher = Person("instructor:passphrase", "", instructor=True)
    code = Classroom(a.store).create_class(teacher, "Period 2").code
    Classroom(a.store).join(Person("browser:alice-cookie", ""), code, "Alice", ALICE)

    monkeypatch.setenv("CIFARLAB_STORE_URL", pg_url)
    b = pages_queue(monkeypatch, home, cifar_archive, cifar_cache_dir)   # replica B's pages
    queues.append(b)
    assert b.replica.id != a.replica.id and b.store.path is None
    app = str(ROOT / "app.py")
    seen = {}
    for sid in (ALICE, BOB):
        at = AppTest.from_file(app, default_timeout=90)
        at.query_params["sid"] = sid
        at.switch_page("pages/runs.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        seen[sid] = at
    (table,) = seen[ALICE].dataframe
    assert list(table.value[i18n.t("runs.run_col", "en")]) == [run_id[:8]]
    buttons = seen[ALICE].get("download_button")
    assert buttons and all(not btn.proto.disabled for btn in buttons)
    assert i18n.t("runs.no_runs", "en") in [el.value for el in seen[BOB].info]
    # the instructor's classes and the student's membership, made on A, on B
    assert [c.code for c in Classroom(b.store).my_classes(teacher)] == [code]
    member = Classroom(b.store).student_view(Person("browser:alice-cookie", "")).membership
    assert member is not None and member.code == code
