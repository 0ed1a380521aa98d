"""cifarlab.serve.queue: real runs, cancels, failures, restarts, exclusive jobs, time limits,
twelve sessions pressing Train at once and, on real worker processes, killed workers (and the
checkpoints they were writing), the workers' priority and process groups.

The queue's own logic runs on the inline executor (``make_queue``: each job in a thread of this
process, tests/inline_executor.py: no process spawned); what only worker processes have (a
worker killed, process groups, the priority, a worker killed mid-save) on the local executor
(``make_local_queue``). What every executor must do (the Ray executor included: launch, poll,
cancel, force, slots, warm workers, a real run's events in the store, a worker's memory) is
test_executors.py's contract suite. (What a person may queue, and the scheduler's decisions
without processes, are in test_serve_limits.py; the settings in test_serve_settings.py.) No test
bounds a wall-clock time: runs report their own figures.

Every test gets its own home (run store + checkpoints); the decoded data set is shared through
``$CIFARLAB_CACHE`` (the ``cifar_cache_dir`` fixture), so workers only memory-map it. Queues
whose runs only need some pictures (``make_small_queue``) train on 350 random ones instead.
The load test is ``test_load_twelve_sessions_at_once`` (select it with ``-k load``); the load on
real worker processes is measured by bench/bench_class.py.
"""
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from cifarlab.core import checkpoint as ckpt
from cifarlab.core.config import TrainConfig
from cifarlab.errors import DataError, JobError
from cifarlab.serve import queue as jobs
from cifarlab.serve.queue import KINDS, JobQueue
from cifarlab.serve.settings import load_settings
from cifarlab.serve.store import RunStore
from cifarlab.serve.worker import failure
from executor_jobs import step_through
from inline_executor import InlineExecutor
from tutorial_net import Net as TutorialNet

QUICK = TrainConfig(epochs=1, train_subset=256, batch_size=32, pipeline="fast", num_workers=0,
                    device="cpu")
# long enough to cancel or kill half-way (about 10 s on a 2-core machine)
LONG = TrainConfig(epochs=1, train_subset=20000, batch_size=4, pipeline="fast", num_workers=0,
                   device="cpu")
ALICE, BOB = "alice-session-1", "bob-session-22"
# How long a wait may take before the test calls it a hang: a guard, not a speed check (the
# speeds are benchmarks: bench/bench_jobs.py). Every wait below uses it.
GUARD = 600.0


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The inline runs (threads of this process) train on one CPU thread, as a worker does
    (worker_threads): on a busy 2-core machine a second thread mostly spins, waiting."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def sleepy_job(payload, ctx):
    """A test job kind: ``steps`` steps of ``dt`` seconds, honouring cancels; can fail."""
    if payload.get("fail"):
        raise ValueError(payload["fail"])
    if payload.get("data_error"):
        raise DataError("data.missing_path", path=payload["data_error"])
    if payload.get("coded_error"):
        raise JobError("serve.limits.num_workers", field="num_workers", n=4, limit=3)
    steps = int(payload.get("steps", 10))
    if stopped := step_through(ctx, steps, float(payload.get("dt", 0.05))):
        return {"cancelled": True, "steps": stopped}
    return {"steps": steps, "pid": os.getpid(), "device": ctx.device, "nice": os.nice(0),
            "threads": torch.get_num_threads()}


KINDS["sleepy"] = f"{__name__}:sleepy_job"


def dies_saving_job(payload, ctx):
    """A test job kind killed (SIGKILL, as the OOM killer does) half-way through writing its
    checkpoint the way training writes one."""
    ctx.emit("start", {"total_steps": 1})
    ckpt.atomic_write_bytes(ctx.checkpoint_path, lambda f: (f.write(b"half"), f.flush(),
                                                            os.kill(os.getpid(), signal.SIGKILL)))


KINDS["dies_saving"] = f"{__name__}:dies_saving_job"


def stubborn_job(payload, ctx):
    """A test job kind that starts a child process (as a DataLoader does) and ignores cancels."""
    import subprocess

    child = subprocess.Popen(["sleep", "300"])
    ctx.emit("child", {"pid": child.pid})
    time.sleep(300)
    return {}


KINDS["stubborn"] = f"{__name__}:stubborn_job"


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def small_folder(tmp_path_factory):
    """(folder, its cache): an image folder of random pictures, 30 + 5 of each CIFAR-10 class,
    for the runs of QUICK whose data does not matter: each then evaluates on 50 test images,
    not 10,000."""
    from PIL import Image

    from cifarlab.core.config import CIFAR10_CLASSES

    base = tmp_path_factory.mktemp("small-data")
    rng = np.random.default_rng(3)
    for split, per_class in (("train", 30), ("test", 5)):
        for name in CIFAR10_CLASSES:
            (base / "data" / split / name).mkdir(parents=True)
            for i in range(per_class):
                pixels = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(base / "data" / split / name / f"{i}.png")
    return base / "data", base / "cache"


def _queue_factory(tmp_path, cifar_archive, cifar_cache_dir, monkeypatch, executor,
                   small=None):
    # workers map the decoded data
    monkeypatch.setenv("CIFARLAB_CACHE", str(small[1] if small else cifar_cache_dir))
    queues = []

    def make(home=None, start=True, **overrides):
        settings = load_settings(env={}, home=str(home or tmp_path / "home"),
                                 data=str(small[0] if small else cifar_archive), **overrides)
        with monkeypatch.context() as m:
            if executor == "inline":
                m.setattr(jobs, "make_executor", InlineExecutor)
            queue = JobQueue(settings=settings, start=start)
        assert queue.executor.name == executor
        queues.append(queue)
        return queue

    return make, queues


@pytest.fixture
def make_queue(tmp_path, cifar_data, cifar_archive, cifar_cache_dir, monkeypatch):
    """JobQueue(settings with these overrides) over a fresh home, its jobs run inline (in
    threads of this process); all shut down afterwards."""
    make, queues = _queue_factory(tmp_path, cifar_archive, cifar_cache_dir, monkeypatch, "inline")
    yield make
    for queue in queues:
        queue.shutdown()


@pytest.fixture
def make_small_queue(tmp_path, small_folder, cifar_archive, cifar_cache_dir, monkeypatch):
    """``make_queue`` on ``small_folder``'s pictures."""
    make, queues = _queue_factory(tmp_path, cifar_archive, cifar_cache_dir, monkeypatch,
                                  "inline", small=small_folder)
    yield make
    for queue in queues:
        queue.shutdown()


@pytest.fixture
def make_local_queue(tmp_path, cifar_data, cifar_archive, cifar_cache_dir, monkeypatch):
    """``make_queue`` on the local executor (spawned worker processes)."""
    make, queues = _queue_factory(tmp_path, cifar_archive, cifar_cache_dir, monkeypatch, "local")
    yield make
    for queue in queues:
        queue.shutdown()


def worker_pid(queue, run_id):
    """The pid of the local worker process running the run; None until known."""
    return queue.store.get(run_id).worker_pid


def wait_for(predicate, timeout=GUARD, poll=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s")


# -- lifecycle ----------------------------------------------------------------------------------
def test_queue_run_done_with_result_losses_and_checkpoint(make_small_queue):
    queue = make_small_queue()
    run_id = queue.submit(ALICE, QUICK, name="first run")
    assert queue.store.get(run_id).status in ("queued", "running")
    run = queue.wait(run_id, timeout=GUARD)
    assert run.status == "done", run.error
    assert run.error is None and run.name == "first run" and run.device == "cpu"
    assert run.config == QUICK.to_dict()
    assert run.waited_s is not None and run.waited_s >= 0
    assert run.finished_at >= run.started_at >= run.created_at
    res = run.result
    assert res["steps"] == 8 and res["images"] == 256 and not res["cancelled"]
    assert 0.0 <= res["test_accuracy"] <= 1.0 and len(res["per_class_accuracy"]) == 10
    assert run.env["torch"] == torch.__version__ and "env" not in res
    assert run.progress["step"] == run.progress["total_steps"] == 8
    steps, losses = queue.store.losses(run_id)
    assert steps == list(range(1, 9)) and all(0 < v < 10 for v in losses)
    kinds = [e.kind for e in queue.store.events(run_id) if e.kind != "worker"]
    assert kinds[0] == "start" and kinds[-1] == "done" and "epoch" in kinds and "eval" in kinds
    epoch = queue.store.events(run_id, kinds=["epoch"])[0].data
    assert "accuracy" in epoch  # evaluated after each epoch
    # the checkpoint: home/checkpoints/<id>.pth, loads here and into the tutorial's own Net
    path = queue.settings.checkpoint_dir / f"{run_id}.pth"
    assert run.checkpoint == str(path) and path.is_file()
    loaded = ckpt.load(path)
    assert loaded.config == QUICK and loaded.results["test_accuracy"] == res["test_accuracy"]
    TutorialNet().load_state_dict(loaded.state_dict)
    # (that a real worker process ran it, and ended: test_executors.py's contract suite)
    assert queue.queue_position(run_id) is None


def test_cancel_stops_at_the_next_step_and_keeps_a_partial_result(make_queue, figures):
    """The worker reads the cancel from the store (no poll after the request misses it) and
    training stops right after the step during which it was seen; the run reports when."""
    queue = make_queue()
    run_id = queue.submit(ALICE, LONG)
    wait_for(lambda: queue.store.loss_count(run_id) >= 50, timeout=GUARD)
    with pytest.raises(JobError, match="no such run"):
        queue.cancel(BOB, run_id)  # not Bob's run
    t0 = time.time()
    assert queue.cancel(ALICE, run_id) == "cancelling"
    t1 = time.time()
    run = queue.wait(run_id, timeout=GUARD)
    assert run.status == "cancelled", run.error
    res = run.result
    (stop,) = [e.data for e in queue.store.events(run_id, kinds=["stop"])]
    assert stop["reason"] == "cancel"
    # seen by a poll after the request; the job reads the store itself (as a local worker
    # does), so no poll after it had committed missed it (Ray relays it: test_executors.py)
    assert stop["seen_t"] >= t0
    assert (stop["last_clear_poll_t"] or 0) < t1
    # training stopped after the step during which it saw the cancel: one call per step
    assert res["steps"] == stop["calls"] and res["cancelled"] and 0 < res["steps"] < 5000
    stopped = queue.store.events(run_id, kinds=["epoch"])[0]
    figures(f"cancel: seen {stop['seen_t'] - t0:.2f} s after the request, training stopped "
            f"{stopped.t - t0:.2f} s after it at step {res['steps']}; then "
            f"{res['eval_seconds']:.2f} s to evaluate what it had learned")
    assert res["test_accuracy"] is not None and run.checkpoint
    assert queue.store.loss_count(run_id) == res["steps"]
    assert queue.cancel(ALICE, run_id) == "cancelled"  # cancelling again changes nothing


def test_failures_are_one_line_with_the_traceback_kept_apart(make_queue):
    queue = make_queue()
    a = queue.submit_job(ALICE, "sleepy", {"fail": "boom\nsecond line"}, "cpu")
    b = queue.submit_job(BOB, "sleepy", {"data_error": "/x"}, "cpu")
    c = queue.submit_job(BOB, "sleepy", {"coded_error": True}, "cpu")
    run = queue.wait(a, timeout=GUARD)
    assert run.status == "failed" and run.error == "ValueError: boom"
    assert run.error_code == "serve.worker.exception" and run.error_text("es") == "ValueError: boom"
    assert "Traceback" in run.traceback and "sleepy_job" in run.traceback
    run = queue.wait(b, timeout=GUARD)
    assert run.status == "failed" and run.error.startswith("The data path /x does not exist.")
    run = queue.wait(c, timeout=GUARD)   # one of our errors: kept as its code, in any language
    assert run.status == "failed" and run.error_code == "serve.limits.num_workers"
    assert run.error_params == {"n": 4, "limit": 3}
    assert run.error == str(JobError("serve.limits.num_workers", n=4, limit=3))
    assert "como máximo 3 procesos del DataLoader" in run.error_text("es")
    assert failure(KeyError("k"))["error"] == "KeyError: 'k'"
    assert failure(RuntimeError())["error"] == "RuntimeError"


def test_killed_worker_fails_with_a_reason_and_the_queue_goes_on(make_local_queue):
    queue = make_local_queue()
    victim = queue.submit(ALICE, LONG)
    wait_for(lambda: queue.store.loss_count(victim) >= 20, timeout=GUARD)
    pid = wait_for(lambda: worker_pid(queue, victim), timeout=GUARD)
    os.kill(pid, signal.SIGKILL)
    run = queue.wait(victim, timeout=GUARD)
    assert run.status == "failed"
    assert "The worker process was killed (signal 9" in run.error
    assert run.error_code == "serve.worker.killed_oom"
    assert "(señal 9, SIGKILL)" in run.error_text("es")
    # the server is fine and serves the next run
    nxt = queue.submit(ALICE, QUICK)
    assert queue.wait(nxt, timeout=GUARD).status == "done"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_forced_stop_takes_the_workers_children_along(make_local_queue, monkeypatch):
    """A run that ignores its cancel is killed after the grace period, and so are the
    processes it started (no orphaned DataLoader workers); on shutdown likewise."""
    from cifarlab.serve import dispatcher

    monkeypatch.setattr(dispatcher, "CANCEL_GRACE_S", 1.0)
    queue = make_local_queue()

    def child_of(run_id):
        events = [e for e in queue.store.events(run_id) if e.kind == "child"]
        return events[0].data["pid"] if events else None

    first = queue.submit_job(ALICE, "stubborn", {}, "cpu")
    pid = wait_for(lambda: child_of(first), timeout=GUARD)
    assert process_alive(pid)
    assert queue.cancel(ALICE, first) == "cancelling"
    run = queue.wait(first, timeout=GUARD)
    assert run.status == "cancelled" and "stopped by force" in run.error
    wait_for(lambda: not process_alive(pid), timeout=GUARD)

    second = queue.submit_job(BOB, "stubborn", {}, "cpu")
    pid = wait_for(lambda: child_of(second), timeout=GUARD)
    queue.shutdown()
    assert queue.store.get(second).status == "interrupted"
    wait_for(lambda: not process_alive(pid), timeout=GUARD)


def test_restart_marks_leftovers_interrupted_and_runs_the_queue(make_small_queue, tmp_path):
    home = tmp_path / "home"
    store = RunStore(home / "runs.db")
    # what a server that died leaves behind: a "running" run whose worker is gone, a queue
    gone = store.create_run(ALICE, "train", QUICK.to_dict(), "cpu")
    store.set_status(gone, "running", worker_pid=2 ** 22 + 12345)  # no such process
    waiting = [store.create_run(s, "train", QUICK.to_dict(), "cpu") for s in (ALICE, BOB)]
    queue = make_small_queue(home=home)
    assert queue.interrupted == [gone]
    run = queue.store.get(gone)
    assert run.status == "interrupted" and "restarted" in run.error
    for run_id in waiting:
        run = queue.wait(run_id, timeout=GUARD)
        assert run.status == "done", run.error


def test_shutdown_interrupts_running_runs_and_keeps_queued_ones(make_queue, tmp_path):
    home = tmp_path / "home"
    first = make_queue(home=home, cpu_slots=1)
    running = first.submit(ALICE, LONG)
    queued = first.submit(BOB, LONG)
    wait_for(lambda: first.store.get(running).status == "running", timeout=GUARD)
    first.shutdown()
    assert first.store.get(running).status == "interrupted"
    assert first.store.get(queued).status == "queued"
    second = make_queue(home=home, cpu_slots=1)
    wait_for(lambda: second.store.get(queued).status == "running", timeout=GUARD)
    assert second.cancel(BOB, queued) == "cancelling"
    assert second.wait(queued, timeout=GUARD).status == "cancelled"


def test_workers_run_below_the_servers_priority(make_local_queue, tmp_path):
    """A spawned worker lowers its own priority by worker_nice (a warm spare and a cold start
    alike), so the web server stays responsive while every slot trains."""
    here = os.nice(0)
    warm = make_local_queue(worker_nice=7)
    assert warm.wait_warm()
    run = warm.wait(warm.submit_job(ALICE, "sleepy", {"steps": 1}, "cpu"), timeout=GUARD)
    assert run.status == "done", run.error
    assert run.result["pid"] == run.worker_pid and run.result["nice"] == min(19, here + 7)
    assert run.result["threads"] == warm.settings.worker_threads
    cold = make_local_queue(home=tmp_path / "cold", spare_workers=0, worker_nice=3)
    run = cold.wait(cold.submit_job(ALICE, "sleepy", {"steps": 1}, "cpu"), timeout=GUARD)
    assert run.status == "done" and run.result["nice"] == min(19, here + 3)
    assert os.nice(0) == here                                   # the server itself is untouched


def test_a_worker_killed_while_saving_leaves_no_half_checkpoint(make_local_queue):
    queue = make_local_queue()
    run = queue.wait(queue.submit_job(ALICE, "dies_saving", {}, "cpu"), timeout=GUARD)
    assert run.status == "failed" and run.error_code == "serve.worker.killed_oom"
    assert run.checkpoint is None
    assert list(queue.settings.checkpoint_dir.glob(".*.tmp")) == []
    assert not queue.store.checkpoint_path(run.id).exists()


def test_a_queue_starting_removes_half_checkpoints_left_before(make_local_queue, tmp_path):
    home = tmp_path / "home"
    store = RunStore(home / "runs.db")
    left = store.create_run(ALICE, "train", QUICK.to_dict(), "cpu")
    store.set_status(left, "running", worker_pid=2 ** 22 + 12345)   # its worker is gone
    store.checkpoint_dir.mkdir(parents=True)
    half = store.checkpoint_dir / f".{left}.pth.q1w2e3.tmp"        # core.checkpoint's temp name
    half.write_bytes(b"half")
    queue = make_local_queue(home=home, start=False)
    assert queue.interrupted == [left] and not half.exists()


def test_a_timing_job_is_stopped_at_the_time_limit(make_queue, monkeypatch):
    """max_timing_seconds bounds a timing job while it runs too (an estimate can be wrong): it
    stops at its next check after the limit, keeps what it measured, and says why."""
    from cifarlab.serve import executor

    monkeypatch.setitem(executor.KINDS, "timing", f"{__name__}:sleepy_job")  # a timing stand-in
    queue = make_queue(max_timing_seconds=1)
    run = queue.wait(queue.submit_job(ALICE, "timing", {"steps": 2000, "dt": 0.05}, "cpu",
                                      exclusive=["cpu"]), timeout=GUARD)
    assert run.status == "cancelled" and run.error_code == "serve.worker.time_limit"
    assert run.error_params == {"seconds": 1} and "(1 s)" in run.error_text("pt")
    (stop,) = [e.data for e in queue.store.events(run.id, kinds=["stop"])]
    assert stop["reason"] == "time_limit" and run.result["steps"] == stop["calls"] < 2000
    assert queue.store.loss_count(run.id) == run.result["steps"]    # what it measured is kept


def test_exclusive_job_waits_for_an_idle_device_and_holds_it(make_queue):
    queue = make_queue(cpu_slots=2, max_per_owner=5, spare_workers=2)
    queue.wait_warm()
    long = {"steps": 30, "dt": 0.05}
    short = {"steps": 10, "dt": 0.05}
    a = queue.submit_job(ALICE, "sleepy", long, "cpu")
    b = queue.submit_job(BOB, "sleepy", long, "cpu")
    x = queue.submit_job(ALICE, "sleepy", short, "cpu", exclusive=["cpu"])
    c = queue.submit_job(BOB, "sleepy", short, "cpu")
    runs = {k: queue.wait(v, timeout=GUARD) for k, v in dict(a=a, b=b, x=x, c=c).items()}
    assert all(r.status == "done" for r in runs.values()), [r.error for r in runs.values()]
    # a and b shared the two CPU slots
    assert runs["b"].started_at < runs["a"].finished_at
    # the exclusive job waited until both were done, then had the CPU to itself
    assert runs["x"].started_at >= max(runs["a"].finished_at, runs["b"].finished_at)
    assert runs["x"].waited_s > 1.0
    # c, queued after it, did not overtake it although a slot was free, and waited for it
    assert runs["c"].started_at >= runs["x"].finished_at
    assert runs["x"].holds and not runs["c"].holds


# -- load -----------------------------------------------------------------------------------------
def test_load_twelve_sessions_at_once(make_small_queue, figures):
    """12 students press Train at the same moment on short runs: every run is queued, none is
    lost, they start first come first served. The queue's logic is the point here, so the runs
    train inline (threads of this process). What 12 or 30 runs cost on real worker processes
    (the server's memory, each worker's peak, the waits) is measured by bench/bench_class.py
    (``--students 12 --images 256`` is this test's load); a worker's own peak memory is also
    checked by test_executors.py's contract suite."""
    queue = make_small_queue()
    sessions = [f"student-{i:02d}-session" for i in range(12)]
    t0 = time.time()
    barrier = threading.Barrier(12)

    def press_train(session):
        barrier.wait()
        return queue.submit(session, QUICK)

    with ThreadPoolExecutor(12) as pool:
        ids = list(pool.map(press_train, sessions))
    assert len(set(ids)) == 12
    submitted = sorted(queue.store.list_runs(), key=lambda r: r.created_at)
    runs = [queue.wait(r.id, timeout=GUARD) for r in submitted]
    total = time.time() - t0
    assert [r.status for r in runs] == ["done"] * 12, [r.error for r in runs]
    # first come first served: they started in the order they were queued
    assert [r.id for r in sorted(runs, key=lambda r: r.started_at)] == [r.id for r in runs]
    # nothing lost: every result and every step loss is there
    for r in runs:
        assert r.result["steps"] == 8 and r.result["test_accuracy"] is not None
        assert queue.store.losses(r.id)[0] == list(range(1, 9))
        assert os.path.isfile(r.checkpoint)
    assert {r.session for r in runs} == set(sessions)
    waits = [r.waited_s for r in runs]
    figures(f"load ({queue.executor.name}): 12 runs in {total:.1f} s "
            f"({queue.settings.cpu_slots} CPU slot(s)); wait per run: min {min(waits):.1f} s, "
            f"median {sorted(waits)[6]:.1f} s, max {max(waits):.1f} s")
