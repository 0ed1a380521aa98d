"""cifarlab.serve.queue and cifarlab.serve.settings: real runs in spawned worker processes, cancels, killed
workers, restarts, limits, sessions, exclusive jobs, and twelve sessions pressing Train at once.

Every test gets its own home (run store + checkpoints); the decoded data set is shared through
``$CIFARLAB_CACHE`` (the ``cifar_cache_dir`` fixture), so workers only memory-map it.
The load test is ``test_load_twelve_sessions_at_once`` (select it with ``-k load``).
"""
import os
import resource
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from cifarlab.core import checkpoint as ckpt
from cifarlab.core.config import TrainConfig
from cifarlab.core.devices import resolve_device
from cifarlab.errors import DataError, JobError
from cifarlab.serve.queue import JobQueue, failure_reason, register_kind
from cifarlab.serve.settings import SettingsError, load_settings
from cifarlab.serve.store import RunStore
from tutorial_net import Net as TutorialNet

QUICK = TrainConfig(epochs=1, train_subset=256, batch_size=32, pipeline="fast", num_workers=0)
# long enough to cancel or kill half-way (about 10 s on a 2-core machine)
LONG = TrainConfig(epochs=1, train_subset=20000, batch_size=4, pipeline="fast", num_workers=0)
ALICE, BOB = "alice-session-1", "bob-session-22"
AUTO = str(resolve_device("auto"))  # where "auto" runs land on this machine


def sleepy_job(payload, ctx):
    """A test job kind: ``steps`` steps of ``dt`` seconds, honouring cancels; can fail."""
    if payload.get("fail"):
        raise ValueError(payload["fail"])
    if payload.get("data_error"):
        raise DataError(payload["data_error"])
    steps, dt = int(payload.get("steps", 10)), float(payload.get("dt", 0.05))
    ctx.emit("start", {"total_steps": steps})
    for i in range(1, steps + 1):
        time.sleep(dt)
        ctx.emit("losses", {"steps": [i], "losses": [1.0 / i]})
        ctx.emit("progress", {"step": i, "total_steps": steps})
        if ctx.should_stop():
            return {"cancelled": True, "steps": i}
    return {"steps": steps, "pid": os.getpid(), "device": ctx.device}


register_kind("sleepy", f"{__name__}:sleepy_job")


def stubborn_job(payload, ctx):
    """A test job kind that starts a child process (as a DataLoader does) and ignores cancels."""
    import subprocess

    child = subprocess.Popen(["sleep", "300"])
    ctx.emit("child", {"pid": child.pid})
    time.sleep(300)
    return {}


register_kind("stubborn", f"{__name__}:stubborn_job")


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def make_queue(tmp_path, cifar_data, cifar_archive, cifar_cache_dir, monkeypatch):
    """JobQueue(settings with these overrides) over a fresh home; all shut down afterwards."""
    monkeypatch.setenv("CIFARLAB_CACHE", str(cifar_cache_dir))  # workers map the decoded data
    queues = []

    def make(home=None, start=True, **overrides):
        settings = load_settings(env={}, home=str(home or tmp_path / "home"),
                                 data=str(cifar_archive), **overrides)
        queue = JobQueue(settings=settings, start=start)
        queues.append(queue)
        return queue

    yield make
    for queue in queues:
        queue.shutdown()


def wait_for(predicate, timeout=60.0, poll=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s")


# -- settings -----------------------------------------------------------------------------------
def test_settings_defaults_environment_and_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings(env={})
    cores = len(os.sched_getaffinity(0))
    assert s.home == tmp_path / "var" and s.db_path == tmp_path / "var" / "runs.db"
    assert s.cpu_slots == max(1, cores // 2) and s.gpu_slots == 1
    assert s.worker_threads == max(1, cores // s.cpu_slots)
    assert (s.max_queue, s.max_per_session, s.max_epochs, s.max_train_images) == (50, 2, 20, 50000)
    assert s.shared_view is False and s.data is None and s.spare_workers == 1
    assert s.slots_for("cpu") == s.cpu_slots and s.slots_for("cuda:1") == 1
    assert s.slots_for("mps") == 1

    (tmp_path / "cifarlab.toml").write_text(
        'home = "store"\ncpu_slots = 3\nshared_view = true\nmax_epochs = 5\n')
    s = load_settings(env={})
    assert s.home == tmp_path / "store" and s.cpu_slots == 3 and s.shared_view
    assert s.max_epochs == 5
    # the environment wins over the file
    s = load_settings(env={"CIFARLAB_CPU_SLOTS": "7", "CIFARLAB_SHARED_VIEW": "off",
                           "CIFARLAB_HOME": str(tmp_path / "h2"), "CIFARLAB_DATA": "/data/x"})
    assert s.cpu_slots == 7 and not s.shared_view and s.home == tmp_path / "h2"
    assert s.data == "/data/x"
    other = tmp_path / "elsewhere.toml"
    other.write_text('[cifarlab]\nmax_queue = 9\n')
    assert load_settings(env={"CIFARLAB_CONFIG": str(other)}).max_queue == 9


@pytest.mark.parametrize("env, message", [
    ({"CIFARLAB_CPU_SLOTS": "x"}, "CIFARLAB_CPU_SLOTS must be a whole number ≥ 1, got 'x'"),
    ({"CIFARLAB_CPU_SLOTS": "0"}, "CIFARLAB_CPU_SLOTS must be a whole number ≥ 1, got '0'"),
    ({"CIFARLAB_MAX_QUEUE": "2.5"}, "CIFARLAB_MAX_QUEUE must be a whole number ≥ 1, got '2.5'"),
    ({"CIFARLAB_SPARE_WORKERS": "-1"}, "CIFARLAB_SPARE_WORKERS must be a whole number ≥ 0"),
    ({"CIFARLAB_SHARED_VIEW": "maybe"}, "CIFARLAB_SHARED_VIEW must be true or false, got 'maybe'"),
    ({"CIFARLAB_HEARTBEAT_TIMEOUT": "soon"}, "CIFARLAB_HEARTBEAT_TIMEOUT must be a number"),
    ({"CIFARLAB_CONFIG": "/nonexistent/cifarlab.toml"}, "no file there"),
])
def test_bad_settings_say_which_and_why(env, message):
    with pytest.raises(SettingsError) as info:
        load_settings(env=env)
    assert message in str(info.value)


def test_bad_settings_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("cpu_slots = 'four'\n")
    with pytest.raises(SettingsError, match="cpu_slots in .* must be a whole number"):
        load_settings(env={}, config_file=bad)
    bad.write_text("cpu_slotz = 4\n")
    with pytest.raises(SettingsError, match="unknown setting.*cpu_slotz"):
        load_settings(env={}, config_file=bad)
    bad.write_text("cpu_slots = \n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(env={}, config_file=bad)


# -- lifecycle ----------------------------------------------------------------------------------
def test_queue_run_done_with_result_losses_and_checkpoint(make_queue):
    queue = make_queue()
    run_id = queue.submit(ALICE, QUICK, name="first run")
    assert queue.store.get(run_id).status in ("queued", "running")
    run = queue.wait(run_id, timeout=90)
    assert run.status == "done", run.error
    assert run.error is None and run.name == "first run" and run.device == AUTO
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
    kinds = [e.kind for e in queue.store.events(run_id)]
    assert kinds[0] == "start" and kinds[-1] == "done" and "epoch" in kinds and "eval" in kinds
    epoch = queue.store.events(run_id, kinds=["epoch"])[0].data
    assert "accuracy" in epoch  # evaluated after each epoch
    # the checkpoint: home/checkpoints/<id>.pth, loads here and into the tutorial's own Net
    path = queue.settings.checkpoint_dir / f"{run_id}.pth"
    assert run.checkpoint == str(path) and path.is_file()
    loaded = ckpt.load(path)
    assert loaded.config == QUICK.replace(device=AUTO) and loaded.results["test_accuracy"] == res["test_accuracy"]
    TutorialNet().load_state_dict(loaded.state_dict)
    # the worker was a process of its own, and it is gone
    assert run.worker_pid and run.worker_pid != os.getpid()
    wait_for(lambda: run.worker_pid not in [p.pid for p in _children()], timeout=10)
    assert queue.queue_position(run_id) is None


def _children():
    import multiprocessing

    return multiprocessing.active_children()


def test_cancel_stops_within_two_seconds_and_keeps_a_partial_result(make_queue):
    queue = make_queue()
    run_id = queue.submit(ALICE, LONG)
    wait_for(lambda: queue.store.loss_count(run_id) >= 50, timeout=90)
    with pytest.raises(JobError, match="no such run"):
        queue.cancel(BOB, run_id)  # not Bob's run
    t0 = time.time()
    assert queue.cancel(ALICE, run_id) == "cancelling"
    run = queue.wait(run_id, timeout=30)
    seconds = time.time() - t0
    assert run.status == "cancelled", run.error
    stopped = queue.store.events(run_id, kinds=["epoch"])[0]
    res = run.result
    print(f"\ncancel: training stopped {stopped.t - t0:.2f} s after the request; the run was "
          f"recorded as cancelled after {seconds:.2f} s, {res['eval_seconds']:.2f} s of which "
          "evaluated what it had learned")
    assert stopped.t - t0 < 2.0  # the training loop stopped within 2 s
    # ... and the run was cancelled within 2 s, plus the final evaluation that keeps the
    # partial result (10,000 test images: well under a second on an idle 2-core machine)
    assert seconds - res["eval_seconds"] < 2.0
    assert res["cancelled"] and 0 < res["steps"] < 5000
    assert res["test_accuracy"] is not None and run.checkpoint
    assert queue.store.loss_count(run_id) == res["steps"]
    assert queue.cancel(ALICE, run_id) == "cancelled"  # cancelling again changes nothing


def test_failures_are_one_line_with_the_traceback_kept_apart(make_queue):
    queue = make_queue()
    a = queue.submit_job(ALICE, "sleepy", {"fail": "boom\nsecond line"}, "cpu")
    b = queue.submit_job(BOB, "sleepy", {"data_error": "The data path /x does not exist."}, "cpu")
    run = queue.wait(a, timeout=60)
    assert run.status == "failed" and run.error == "ValueError: boom"
    assert "Traceback" in run.traceback and "sleepy_job" in run.traceback
    run = queue.wait(b, timeout=60)
    assert run.status == "failed" and run.error == "The data path /x does not exist."
    assert failure_reason(KeyError("k")) == "KeyError: 'k'"
    assert failure_reason(RuntimeError()) == "RuntimeError"


def test_killed_worker_fails_with_a_reason_and_the_queue_goes_on(make_queue):
    queue = make_queue()
    victim = queue.submit(ALICE, LONG)
    wait_for(lambda: queue.store.loss_count(victim) >= 20, timeout=90)
    pid = queue.store.get(victim).worker_pid
    os.kill(pid, signal.SIGKILL)
    run = queue.wait(victim, timeout=10)
    assert run.status == "failed"
    assert "The worker process was killed (signal 9" in run.error
    # the server is fine and serves the next run
    nxt = queue.submit(ALICE, QUICK)
    assert queue.wait(nxt, timeout=90).status == "done"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_forced_stop_takes_the_workers_children_along(make_queue, monkeypatch):
    """A run that ignores its cancel is killed after the grace period, and so are the
    processes it started (no orphaned DataLoader workers); on shutdown likewise."""
    from cifarlab.serve import queue as jobs

    monkeypatch.setattr(jobs, "CANCEL_GRACE_S", 1.0)
    queue = make_queue()

    def child_of(run_id):
        events = [e for e in queue.store.events(run_id) if e.kind == "child"]
        return events[0].data["pid"] if events else None

    first = queue.submit_job(ALICE, "stubborn", {}, "cpu")
    pid = wait_for(lambda: child_of(first), timeout=90)
    assert process_alive(pid)
    assert queue.cancel(ALICE, first) == "cancelling"
    run = queue.wait(first, timeout=30)
    assert run.status == "cancelled" and "stopped by force" in run.error
    wait_for(lambda: not process_alive(pid), timeout=10)

    second = queue.submit_job(BOB, "stubborn", {}, "cpu")
    pid = wait_for(lambda: child_of(second), timeout=90)
    queue.shutdown()
    assert queue.store.get(second).status == "interrupted"
    wait_for(lambda: not process_alive(pid), timeout=10)


def test_restart_marks_leftovers_interrupted_and_runs_the_queue(make_queue, tmp_path):
    home = tmp_path / "home"
    store = RunStore(home / "runs.db")
    # what a server that died leaves behind: a "running" run whose worker is gone, a queue
    gone = store.create_run(ALICE, "train", QUICK.to_dict(), "cpu")
    store.set_status(gone, "running", worker_pid=2 ** 22 + 12345)  # no such process
    waiting = [store.create_run(s, "train", QUICK.to_dict(), "cpu") for s in (ALICE, BOB)]
    queue = make_queue(home=home)
    assert queue.interrupted == [gone]
    run = queue.store.get(gone)
    assert run.status == "interrupted" and "restarted" in run.error
    for run_id in waiting:
        run = queue.wait(run_id, timeout=90)
        assert run.status == "done", run.error


def test_shutdown_interrupts_running_runs_and_keeps_queued_ones(make_queue, tmp_path):
    home = tmp_path / "home"
    first = make_queue(home=home, cpu_slots=1)
    running = first.submit(ALICE, LONG)
    queued = first.submit(BOB, LONG)
    wait_for(lambda: first.store.get(running).status == "running", timeout=60)
    first.shutdown()
    assert first.store.get(running).status == "interrupted"
    assert first.store.get(queued).status == "queued"
    second = make_queue(home=home, cpu_slots=1)
    wait_for(lambda: second.store.get(queued).status == "running", timeout=60)
    assert second.cancel(BOB, queued) == "cancelling"
    assert second.wait(queued, timeout=30).status == "cancelled"


# -- limits and sessions -------------------------------------------------------------------------
def test_limits_are_enforced_with_clear_messages(make_queue):
    queue = make_queue(start=False, max_queue=3, max_per_session=2, max_epochs=3,
                       max_train_images=1000)
    small = QUICK
    with pytest.raises(JobError, match="at most 3 epochs per run \\(you asked for 4\\)"):
        queue.submit(ALICE, small.replace(epochs=4))
    with pytest.raises(JobError, match="at most 1,000 images per run \\(this run would use "
                                       "2,000\\)") as info:
        queue.submit(ALICE, small.replace(train_subset=2000))
    assert info.value.field == "train_subset"
    with pytest.raises(JobError, match="would use 50,000"):
        queue.submit(ALICE, small.replace(train_subset=None))
    with pytest.raises(JobError, match="no device 'cuda:7'") as info:
        queue.submit(ALICE, small.replace(device="cuda:7"))
    assert info.value.field == "device"
    with pytest.raises(JobError, match="batch size \\(512\\) is larger"):
        queue.submit(ALICE, small.replace(batch_size=512))
    with pytest.raises(JobError, match="no valid id"):
        queue.submit("bad id!", small)
    with pytest.raises(JobError, match="Unknown job kind"):
        queue.submit_job(ALICE, "mine_bitcoin", {}, "cpu")
    assert queue.store.counts()["queued"] == 0  # nothing refused was queued

    queue.submit(ALICE, small)
    queue.submit(ALICE, small)
    with pytest.raises(JobError, match="You already have 2 run\\(s\\) queued or running, and "
                                       "this server allows 2 at a time per person"):
        queue.submit(ALICE, small)
    queue.submit(BOB, small)
    t0 = time.monotonic()
    with pytest.raises(JobError) as info:
        queue.submit("carol-session", small)
    assert str(info.value) == "The queue is full (3 runs waiting). Try again in a few minutes."
    assert time.monotonic() - t0 < 1.0  # an answer, never a hang
    # auto resolved to a real device when queued
    assert all(r.device in ("cpu", "cuda:0", "mps") for r in queue.store.list_runs())


def test_sessions_never_see_or_touch_each_others_runs(make_queue, tmp_path):
    queue = make_queue(start=False)
    a = queue.submit(ALICE, QUICK)
    b = queue.submit(BOB, QUICK)
    assert [r.id for r in queue.runs(ALICE)] == [a]
    assert [r.id for r in queue.runs(BOB)] == [b]
    assert [r.id for r in queue.store.list_runs(ALICE)] == [a]
    timing = queue.submit_job(ALICE, "sleepy", {}, "cpu")
    assert [r.id for r in queue.runs(ALICE, kind="train")] == [a]
    assert [r.id for r in queue.runs(ALICE, kind="sleepy")] == [timing]
    assert [r.id for r in queue.runs(ALICE)] == [timing, a]          # newest first
    queue.cancel(ALICE, timing)
    queue.delete(ALICE, timing)
    for call in (queue.get, queue.cancel, queue.delete):
        with pytest.raises(JobError, match="no such run"):
            call(ALICE, b)
    assert queue.store.get(b).status == "queued"
    assert queue.cancel(BOB, b) == "cancelled"  # a queued run is cancelled at once
    queue.delete(BOB, b)
    assert queue.store.get(b) is None
    with pytest.raises(JobError, match="not a run id"):
        queue.cancel(ALICE, "../" + a[3:])
    # the class view: everyone sees everyone's runs, read-only
    shared = make_queue(home=tmp_path / "home", start=False, shared_view=True)
    c = shared.submit(BOB, QUICK)
    assert {r.id for r in shared.runs(ALICE)} == {a, c}
    assert shared.get(ALICE, c).id == c
    assert not shared.can_control(ALICE, shared.get(ALICE, c)) and shared.can_control(BOB,
                                                                                    shared.get(BOB, c))
    with pytest.raises(JobError, match="only change your own"):
        shared.cancel(ALICE, c)


def test_exclusive_job_waits_for_an_idle_device_and_holds_it(make_queue):
    queue = make_queue(cpu_slots=2, max_per_session=5, spare_workers=2)
    queue.wait_warm()
    long = {"steps": 30, "dt": 0.05}
    short = {"steps": 10, "dt": 0.05}
    a = queue.submit_job(ALICE, "sleepy", long, "cpu")
    b = queue.submit_job(BOB, "sleepy", long, "cpu")
    x = queue.submit_job(ALICE, "sleepy", short, "cpu", exclusive=True)
    c = queue.submit_job(BOB, "sleepy", short, "cpu")
    runs = {k: queue.wait(v, timeout=90) for k, v in dict(a=a, b=b, x=x, c=c).items()}
    assert all(r.status == "done" for r in runs.values()), [r.error for r in runs.values()]
    # a and b shared the two CPU slots
    assert runs["b"].started_at < runs["a"].finished_at
    # the exclusive job waited until both were done, then had the CPU to itself
    assert runs["x"].started_at >= max(runs["a"].finished_at, runs["b"].finished_at)
    assert runs["x"].waited_s > 1.0
    # c, queued after it, did not overtake it although a slot was free, and waited for it
    assert runs["c"].started_at >= runs["x"].finished_at
    assert runs["x"].exclusive and not runs["c"].exclusive


def test_scheduling_is_fifo_per_device_with_slots_and_multi_device_exclusive(make_queue):
    """The scheduler's decisions alone (no processes): devices as a server with a GPU has them."""
    queue = make_queue(start=False, cpu_slots=2, gpu_slots=1)
    started = []

    def launch(run):  # stands in for starting a worker process
        assert queue.store.set_status(run.id, "running", only_from=["queued"])
        started.append(run.name)
        return True

    queue._launch = launch
    plan = [("c1", "cpu", False), ("g1", "cuda:0", False), ("c2", "cpu", False),
            ("g2", "cuda:0", False), ("timing", "cuda:0", ["cpu", "cuda:0"]), ("c3", "cpu", False)]
    ids = {name: queue.store.create_run(ALICE, "sleepy", {}, device, name=name, exclusive=excl)
           for name, device, excl in plan}
    assert queue.store.get(ids["timing"]).holds == ("cpu", "cuda:0")

    def tick_after(*finished):
        for name in finished:
            queue.store.set_status(ids[name], "done")
        started.clear()
        queue._start_queued()
        return list(started)

    assert tick_after() == ["c1", "g1", "c2"]   # two CPU slots, one GPU slot
    assert tick_after("g1") == ["g2"]
    assert tick_after("c1") == []        # the timing job needs the CPU and the GPU idle, and c3,
    assert tick_after("c2") == []        # queued after it, does not overtake it on the CPU
    assert queue.queue_position(ids["c3"]) == 1
    assert tick_after("g2") == ["timing"]
    assert tick_after() == []            # nothing starts beside it on either device
    assert tick_after("timing") == ["c3"]


# -- load -----------------------------------------------------------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def test_load_twelve_sessions_at_once(make_queue, figures):
    """12 students press Train at the same moment on short runs."""
    queue = make_queue()
    time.sleep(0.5)
    rss_before = _rss_mb()
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
    runs = [queue.wait(r.id, timeout=240) for r in submitted]
    total = time.time() - t0
    rss_after = _rss_mb()
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
    peak_server = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_worker = max(r.result["worker_peak_rss_mb"] for r in runs)  # each worker's own peak
    figures(f"load: 12 runs in {total:.1f} s ({queue.settings.cpu_slots} CPU slot(s)); wait per "
          f"run: min {min(waits):.1f} s, median {sorted(waits)[6]:.1f} s, max {max(waits):.1f} s;"
          f" run time: median {sorted(r.seconds() for r in runs)[6]:.2f} s; server RSS "
          f"{rss_before:.0f} -> {rss_after:.0f} MB (peak {peak_server:.0f} MB); largest worker "
          f"peak RSS {peak_worker:.0f} MB")
    assert rss_after - rss_before < 300
    assert 50 < peak_worker < 1500
