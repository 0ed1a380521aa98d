"""The executor interface: the contract every executor meets, and each one's own parts.

The contract (``executor`` fixture: ``local``, ``ray`` and the tests' ``inline`` stand-in,
tests/inline_executor.py, so that the queue tests run on it mean something): ``launch`` starts a
queued run and refuses one cancelled meanwhile; ``poll`` brings a real training run's events,
losses, outcome and checkpoint into the store (after keep_warm); ``cancel`` stops a run
after its step with its result kept; ``force`` ("cancel", "heartbeat") and ``stop_all``
("shutdown") settle a run with its reason; a failure is one line with its traceback kept apart;
a timing job's time limit reaches the job; a worker that dies fails its run with a reason and
the executor goes on; ``slots_for``. Here the dispatcher's part is played by the test (``Exec``).

Then: choosing one by settings, Ray as an optional extra, the Ray executor's resources
(fractional GPUs on Ray's logical resources), ``ray.init`` in the dispatcher thread with the
server's SIGTERM handler left alone.

The queue's own logic (submit, cancel, restarts, fair order, exclusive jobs, twelve sessions) is
in test_jobs.py, on the inline executor, and what only local worker processes have (process
groups, the priority, a worker killed mid-save) on the local one. Ray tests are marked ``ray``
and share the session's cluster (tests/ray_support.py: 2 CPUs, 1 logical GPU).
"""
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from cifarlab.core import checkpoint as ckpt
from cifarlab.core.config import TrainConfig
from cifarlab.errors import JobError
from cifarlab.serve.database import StoreUnreachable
from cifarlab.serve.executor import KINDS, job_for
from cifarlab.serve.queue import JobQueue, make_executor
from cifarlab.serve.settings import SettingsError, load_settings
from cifarlab.serve.store import RunStore
from executor_jobs import STEPS, WAITING
from inline_executor import InlineExecutor
from ray_support import ray_cluster  # noqa: F401 - the session's Ray cluster (a fixture)
from tutorial_net import Net as TutorialNet

ROOT = Path(__file__).resolve().parents[1]
ALICE = "alice-session-1"
GUARD = 600.0  # a guard against a hang, not a speed check


# -- the contract ---------------------------------------------------------------------------------
QUICK = TrainConfig(epochs=1, train_subset=256, batch_size=32, pipeline="fast", num_workers=0,
                    device="cpu")
REAL = [pytest.param("local", marks=pytest.mark.integration),
        pytest.param("ray", marks=[pytest.mark.ray, pytest.mark.integration])]
ALL = [pytest.param("inline"), *REAL]


class Exec:
    """One executor over a fresh home, with the dispatcher's part played by the test: runs are
    created in the store and launched, and ``until`` polls while it waits."""

    def __init__(self, name: str, home: Path, data: str | None, **overrides):
        if data is not None:
            overrides["data"] = data
        overrides.setdefault("spare_workers", 0)
        self.settings = load_settings(env={}, home=str(home),
                                      executor="ray" if name == "ray" else "local", **overrides)
        self.store = RunStore(self.settings.db_path, self.settings.checkpoint_dir)
        self.ex = (InlineExecutor(self.store, self.settings) if name == "inline"
                   else make_executor(self.store, self.settings))
        assert self.ex.name == name
        self.ex.start()   # Ray: the session's cluster, joined

    def launch(self, kind: str, payload: dict, device: str = "cpu", target: str | None = None,
               session: str = ALICE) -> str:
        run_id = self.store.create_run(session, kind, payload, device)
        run = self.store.get(run_id)
        assert self.ex.launch(run, job_for(run, target or KINDS[kind], self.settings))
        run = self.store.get(run_id)
        # launched: running, or already over (the inline executor's thread may have failed it)
        assert run.status == "running" or run.finished, run.status
        return run_id

    def until(self, predicate, what: str = ""):
        deadline = time.monotonic() + GUARD
        while True:
            self.ex.poll()
            value = predicate()
            if value:
                return value
            assert time.monotonic() < deadline, f"no {what} after {GUARD} s"
            time.sleep(0.05)

    def finished(self, run_id: str):
        return self.until(lambda: (r := self.store.get(run_id)).finished and r, "outcome")

    def worker_pid(self, run_id: str) -> int | None:
        """The pid of the process running the run: the local worker's, the Ray worker's (from
        its "worker" event), this process's for the inline executor."""
        events = self.store.events(run_id, kinds=["worker"])
        return events[0].data["pid"] if events else self.store.get(run_id).worker_pid


@pytest.fixture
def make_exec(request, tmp_path, monkeypatch):
    """``make_exec(name, **settings)``: an ``Exec``; each is stopped afterwards. The real
    executors' workers get the offline CIFAR-10 (decoded once, then memory-mapped)."""
    made = []

    def make(name: str, **overrides) -> Exec:
        data = None
        if name != "inline":
            data = str(request.getfixturevalue("cifar_archive"))
            monkeypatch.setenv("CIFARLAB_CACHE", str(request.getfixturevalue("cifar_cache_dir")))
            request.getfixturevalue("cifar_data")
        if name == "ray":
            request.getfixturevalue("ray_cluster")
        made.append(Exec(name, tmp_path / f"home-{len(made)}", data, **overrides))
        return made[-1]

    yield make
    for e in made:
        e.ex.stop_all(10.0)


@pytest.mark.parametrize("name", REAL)
def test_contract_a_real_run_on_a_warm_worker_reaches_the_store(make_exec, name):
    """A training run on a worker kept warm: its events, step losses, progress, result, the
    environment and the checkpoint (written here: on Ray its bytes travel back) in the store,
    from a process other than this one."""
    e = make_exec(name, spare_workers=1)
    if name == "local":   # Ray keeps no spare: each run's actor is a process of its own
        e.ex.keep_warm(1)
        e.until(e.ex.warm, "warm worker")
    run_id = e.launch("train", QUICK.to_dict())
    run = e.finished(run_id)
    assert run.status == "done", (run.error, run.traceback)
    res = run.result
    assert res["steps"] == 8 and res["images"] == 256 and not res["cancelled"]
    assert 0.0 <= res["test_accuracy"] <= 1.0 and len(res["per_class_accuracy"]) == 10
    assert res["worker_peak_rss_mb"] > 50
    if name == "local":   # a fresh worker per run of a known size (Ray adds its own)
        assert res["worker_peak_rss_mb"] < 1500
    assert run.env["torch"] == torch.__version__ and "env" not in res
    assert run.env["torch_threads"] == e.settings.worker_threads   # the job's, not Ray's
    assert run.progress["step"] == run.progress["total_steps"] == 8
    steps, losses = e.store.losses(run_id)
    assert steps == list(range(1, 9)) and all(0 < v < 10 for v in losses)
    kinds = [ev.kind for ev in e.store.events(run_id) if ev.kind != "worker"]
    assert kinds[0] == "start" and kinds[-1] == "done" and "epoch" in kinds and "eval" in kinds
    path = e.settings.checkpoint_dir / f"{run_id}.pth"
    assert run.checkpoint == str(path) and path.is_file()
    loaded = ckpt.load(path)
    assert loaded.config == QUICK and loaded.results["test_accuracy"] == res["test_accuracy"]
    TutorialNet().load_state_dict(loaded.state_dict)
    pid = e.worker_pid(run_id)
    assert pid and pid != os.getpid()
    if name == "local":   # one job per worker process: it has ended
        import multiprocessing

        e.until(lambda: pid not in [p.pid for p in multiprocessing.active_children()], "exit")
    if name == "ray":
        (worker,) = e.store.events(run_id, kinds=["worker"])
        assert worker.data["executor"] == "ray" and worker.data["node"]


@pytest.mark.parametrize("name", ALL)
def test_contract_launch_refuses_a_run_cancelled_meanwhile(make_exec, name):
    e = make_exec(name)
    run_id = e.store.create_run(ALICE, "steps", {}, "cpu")
    run = e.store.get(run_id)
    assert e.store.set_status(run_id, "cancelled", only_from=["queued"])
    assert e.ex.launch(run, job_for(run, KINDS["steps"], e.settings)) is False
    assert e.store.get(run_id).status == "cancelled" and not e.ex.running


@pytest.mark.parametrize("name", ALL)
def test_contract_cancel_stops_the_job_and_keeps_its_result(make_exec, name):
    """The store's flag (set by the queue) and ``cancel``: the job sees it at its next check
    and ends ``cancelled`` with what it did; the losses it reported are all there."""
    e = make_exec(name)
    run_id = e.launch("steps", {"steps": 100_000, "dt": 0.02})
    e.until(lambda: e.store.loss_count(run_id) >= 3, "losses")
    assert run_id in e.ex.running
    t0 = time.time()
    assert e.store.request_cancel(run_id)
    t1 = time.time()
    e.ex.cancel(run_id)
    run = e.finished(run_id)
    assert run.status == "cancelled" and run.error is None, run.error
    (stop,) = [ev.data for ev in e.store.events(run_id, kinds=["stop"])]
    assert stop["reason"] == "cancel" and stop["seen_t"] >= t0
    if name != "ray":   # the job reads the store's flag itself: no poll after it missed it
        assert (stop["last_clear_poll_t"] or 0) < t1
    assert run.result["cancelled"] and run.result["steps"] == stop["calls"] < 100_000
    assert e.store.loss_count(run_id) == run.result["steps"]
    e.until(lambda: run_id not in e.ex.running, "the run let go")


@pytest.mark.parametrize("name", ALL)
def test_contract_force_and_stop_all_settle_runs_with_their_reason(make_exec, name):
    """``force`` stops a run now (a cancel ignored past its grace period, a silent heartbeat)
    and ``stop_all`` every run (shutdown): each ends with its status and reason, in any
    language, and no half-written checkpoint stays."""
    e = make_exec(name)
    cases = (("cancel", "cancelled", "serve.worker.cancel_forced", {"seconds": 60.0}),
             ("heartbeat", "failed", "serve.worker.no_heartbeat", {}),
             ("shutdown", "interrupted", "serve.worker.shutdown", {}))
    for why, status, code, params in cases:
        run_id = e.launch("steps", {"steps": 100_000, "dt": 0.02})
        e.until(lambda run_id=run_id: e.store.loss_count(run_id) >= 1, "losses")
        if why == "shutdown":
            e.ex.stop_all(30.0)
        else:
            e.ex.force(run_id, why, 60.0)
        run = e.finished(run_id)
        assert (run.status, run.error_code, run.error_params) == (status, code, params), \
            (why, run.error)
        assert run.error_text("es") and run.error_text("es") != run.error
        assert not e.store.checkpoint_path(run_id).exists()
        e.until(lambda run_id=run_id: run_id not in e.ex.running, "the run let go")


@pytest.mark.parametrize("name", ALL)
def test_contract_a_failure_is_one_line_with_its_traceback_apart(make_exec, name):
    e = make_exec(name)
    run = e.finished(e.launch("steps", {"fail": "boom\nsecond line"}))
    assert run.status == "failed" and run.error == "ValueError: boom"
    assert run.error_code == "serve.worker.exception"
    assert run.error_params == {"name": "ValueError", "message": "boom"}
    assert "Traceback" in run.traceback and "steps_job" in run.traceback


@pytest.mark.parametrize("name", ALL)
def test_contract_a_timing_jobs_time_limit_reaches_the_job(make_exec, name):
    e = make_exec(name, max_timing_seconds=1)
    run_id = e.launch("timing", {"steps": 2000, "dt": 0.05}, target=STEPS)
    run = e.finished(run_id)
    assert run.status == "cancelled" and run.error_code == "serve.worker.time_limit"
    assert run.error_params == {"seconds": 1}
    (stop,) = [ev.data for ev in e.store.events(run_id, kinds=["stop"])]
    assert stop["reason"] == "time_limit" and run.result["steps"] == stop["calls"] < 2000
    assert e.store.loss_count(run_id) == run.result["steps"]


@pytest.mark.parametrize("name", REAL)
def test_contract_a_worker_that_dies_fails_its_run_and_the_executor_goes_on(make_exec, name,
                                                                          monkeypatch):
    """SIGKILL (as the OOM killer sends it) to the process running a run: the run fails with a
    reason a student can read in their language, and the next run is served."""
    e = make_exec(name)
    victim = e.launch("steps", {"steps": 100_000, "dt": 0.02})
    e.until(lambda: e.store.loss_count(victim) >= 1, "losses")
    pid = e.until(lambda: e.worker_pid(victim), "worker pid")
    assert pid != os.getpid()
    os.kill(pid, signal.SIGKILL)
    run = e.finished(victim)
    assert run.status == "failed"
    if name == "local":
        assert "The worker process was killed (signal 9" in run.error
        assert run.error_code == "serve.worker.killed_oom"
        assert "(señal 9, SIGKILL)" in run.error_text("es")
    else:  # Ray's word for it, as a catalog message; Ray's own text kept for the host
        assert run.error_code == "serve.executor.worker_died"
        assert run.error_params["name"] in run.traceback
        assert "El proceso de Ray que entrenaba esta ejecución murió" in run.error_text("es")
    # set after the first worker started (and with it, the fork server): the next one sees it
    monkeypatch.setenv("CIFARLAB_TEST_MARK", "set-later")
    nxt = e.finished(e.launch("steps", {"steps": 2}))
    assert nxt.status == "done", nxt.error
    if name == "local":   # a worker started for its job (no spare here) skips the warm-up
        assert nxt.result["warmed"] is False
        assert nxt.result["mark"] == "set-later"


@pytest.mark.integration   # starts a worker process
def test_a_worker_started_while_the_store_fails_is_still_watched_and_stopped(make_exec,
                                                                              monkeypatch):
    """The local executor starts a fresh worker, then the store fails to take its pid (a
    database restarting): the launch fails, but the worker is already the executor's, so
    ``stop_all`` still stops it and settles its run rather than leaving a run ``running``
    that nothing watches."""
    e = make_exec("local", spare_workers=0)
    run_id = e.store.create_run(ALICE, "steps", {"steps": 100_000, "dt": 0.02}, "cpu")

    def store_down(*args, **kwargs):
        raise StoreUnreachable("serve.store.unreachable")

    # on the class: the store itself travels to the worker, pickled
    monkeypatch.setattr(RunStore, "set_worker_pid", store_down)
    run = e.store.get(run_id)
    with pytest.raises(JobError):
        e.ex.launch(run, job_for(run, KINDS["steps"], e.settings))
    assert run_id in e.ex.running
    process = e.ex.running[run_id].process
    e.ex.stop_all(30.0)
    process.join(GUARD)
    assert not process.is_alive()
    assert e.finished(run_id).status == "interrupted"


@pytest.mark.parametrize("name", ALL)
def test_contract_slots(make_exec, name):
    """Local workers and inline threads: the settings' slots; Ray: the cluster's CPUs ÷
    ``worker_threads`` (the session's cluster has 2)."""
    e = make_exec(name, cpu_slots=3, gpu_slots=2)
    want = 2 if name == "ray" else 3
    assert e.ex.slots_for("cpu") == want
    if name != "ray":
        assert e.ex.slots_for("cuda:0") == 2 and e.ex.slots_for("mps") == 1


def test_settings_choose_the_executor_and_the_gpu_share(tmp_path):
    s = load_settings(env={"CIFARLAB_EXECUTOR": "Ray", "CIFARLAB_RAY_ADDRESS": "ray-head:6379",
                           "CIFARLAB_GPU_SHARE": "4"}, home=str(tmp_path))
    assert (s.executor, s.ray_address, s.gpu_share) == ("ray", "ray-head:6379", 4)
    d = load_settings(env={}, home=str(tmp_path))
    assert (d.executor, d.ray_address, d.gpu_share) == ("local", None, 1)
    with pytest.raises(SettingsError) as got:
        load_settings(env={"CIFARLAB_EXECUTOR": "dask"}, home=str(tmp_path))
    assert got.value.code == "serve.settings.choice"
    assert "CIFARLAB_EXECUTOR must be one of local, ray, got 'dask'" in str(got.value)
    assert "debe ser uno de local, ray" in got.value.text("es")
    with pytest.raises(SettingsError, match="from 1 to 16"):
        load_settings(env={"CIFARLAB_GPU_SHARE": "0"}, home=str(tmp_path))


@pytest.mark.integration  # starts a Python process
def test_the_local_queue_never_imports_ray(tmp_path):
    """Ray is an optional extra: the default server runs without it (imported lazily, by the
    Ray executor alone: pyproject's import-linter contract says who may import it)."""
    code = textwrap.dedent(f"""
        import sys
        from cifarlab.serve.queue import JobQueue
        from cifarlab.serve.settings import load_settings
        q = JobQueue(settings=load_settings(env={{}}, home={str(tmp_path)!r}), start=False)
        assert q.executor.name == "local", q.executor.name
        assert "ray" not in sys.modules, "ray was imported"
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_executor_ray_without_ray_installed_says_how_to_install_it(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(JobError) as got:
        JobQueue(settings=load_settings(env={}, home=str(tmp_path), executor="ray"), start=False)
    assert got.value.code == "serve.executor.ray_missing"
    assert "pip install -r requirements-ray.txt" in got.value.text("pt")


@pytest.mark.ray
def test_four_quarter_gpu_runs_share_one_gpu_and_the_fifth_waits(ray_cluster, tmp_path,  # noqa: F811 - the fixture imported above
                                                                cifar_archive, cifar_data):
    """gpu_share = 4 on a node with one (logical) GPU: four runs hold a quarter each and run at
    once; the fifth waits in Ray until one of them ends. A timing run takes a whole GPU."""
    from cifarlab.serve.ray_executor import RayExecutor

    settings = load_settings(env={}, home=str(tmp_path / "home"), data=str(cifar_archive),
                             executor="ray", gpu_share=4)
    store = RunStore(settings.db_path)
    ex = RayExecutor(store, settings)
    ex.start()  # the session's Ray: joined, not started
    ids = [store.create_run(ALICE, "waiting", {}, "cuda:0") for _ in range(5)]
    timing = store.get(store.create_run(ALICE, "timing", {}, "cuda:0", exclusive=["cpu"]))
    assert ex.resources_for(timing) == {"num_gpus": 1.0, "num_cpus": settings.worker_threads}
    assert ex.slots_for("cuda:0") == 4 and ex.slots_for("cpu") == 2 // settings.worker_threads
    for run_id in ids:
        run = store.get(run_id)
        assert ex.resources_for(run) == {"num_gpus": 0.25, "num_cpus": 0.25}
        assert ex.launch(run, job_for(run, WAITING, settings))

    def started():
        return [r for r in ids if store.events(r, kinds=["start"])]

    def wait_for(predicate):  # the dispatcher's part: poll the executor while waiting
        deadline = time.monotonic() + GUARD
        while not (ex.poll(), predicate())[1]:
            assert time.monotonic() < deadline, [
                (store.get(r).status, [e.kind for e in store.events(r)]) for r in ids]
            time.sleep(0.05)

    try:
        wait_for(lambda: len(started()) >= 4)
        assert len(started()) == 4
        first_four = started()
        (fifth,) = set(ids) - set(first_four)
        # the four hold the whole GPU between them, so Ray keeps the fifth waiting
        assert ray_cluster.available_resources().get("GPU", 0.0) == 0.0
        assert not store.events(fifth, kinds=["worker"])
        ex.cancel(first_four[0])   # one ends (cancelled: it keeps its result) ...
        wait_for(lambda: store.get(first_four[0]).status == "cancelled")
        wait_for(lambda: fifth in started())   # ... and the fifth takes its quarter
        assert all(store.get(r).status == "running" for r in first_four[1:] + [fifth])
    finally:
        for run_id in ids:
            ex.cancel(run_id)
        wait_for(lambda: not ex.running)
        ex.stop_all(5.0)
    assert [store.get(r).status for r in ids] == ["cancelled"] * 5
    assert all(store.get(r).result["cancelled"] for r in ids)


def test_a_run_is_placed_among_the_executors_devices_not_this_machines(tmp_path):
    """A CPU-only web server in front of a GPU cluster: the run's device is checked against
    the cluster's ("auto" takes its GPU); the local executor keeps this machine's devices."""
    from cifarlab.core.config import TrainConfig
    from cifarlab.core.devices import list_devices
    from cifarlab.serve import admission

    settings = load_settings(env={}, home=str(tmp_path / "home"))
    cluster = ["cpu", "cuda:0"]
    assert admission.resolve_device("auto", cluster) == "cuda:0"
    assert admission.resolve_device("auto", ["cpu"]) == "cpu"
    assert admission.resolve_device("CUDA:0", cluster) == "cuda:0"
    with pytest.raises(JobError) as err:
        admission.resolve_device("cuda:1", cluster)
    assert err.value.code == "config.device_missing" and err.value.params["present"] == \
        "cpu, cuda:0"
    on_gpu = TrainConfig(device="cuda:0")
    admission.check_config(on_gpu, 50_000, settings, cluster)        # the cluster has one
    with pytest.raises(JobError) as err:
        admission.check_config(on_gpu, 50_000, settings, ["cpu"])
    assert err.value.field == "device"
    if not any(d.id.startswith("cuda") for d in list_devices()):     # and this machine not
        with pytest.raises(JobError):
            admission.check_config(on_gpu, 50_000, settings)
    queue = JobQueue(RunStore(settings.db_path), settings, start=False)
    assert queue.executor.devices() is None
    assert queue.devices() == [d.id for d in list_devices()]


@pytest.mark.ray
def test_the_ray_executor_offers_the_clusters_devices(ray_cluster, tmp_path):  # noqa: F811 - the fixture imported above
    from cifarlab.serve.ray_executor import RayExecutor

    settings = load_settings(env={}, home=str(tmp_path / "home"), executor="ray")
    ex = RayExecutor(RunStore(settings.db_path), settings)
    assert ex.devices() is None                  # not read before it starts
    ex.start()   # the session's Ray (1 logical GPU): joined, not started
    try:
        assert ex.devices() == ["cpu", "cuda:0"]
    finally:
        ex.stop_all(5.0)


@pytest.mark.ray
def test_ray_init_in_the_dispatcher_thread_leaves_the_servers_sigterm_handler(
        ray_cluster, tmp_path, cifar_archive, cifar_cache_dir):  # noqa: F811 - the fixture imported above
    """A server of its own (a fresh process): the queue's dispatcher thread starts Ray (not the
    caller's thread, which may be a page's script run), the server's SIGTERM handler still
    answers afterwards, one run goes through, and shutdown stops Ray in that thread."""
    code = textwrap.dedent(f"""
        import os, signal, threading, time
        got = []
        signal.signal(signal.SIGTERM, lambda *a: got.append("sigterm"))
        from cifarlab.core.config import TrainConfig
        from cifarlab.serve.queue import JobQueue
        from cifarlab.serve.settings import load_settings
        settings = load_settings(env={{}}, home={str(tmp_path / "home")!r},
                                 data={str(cifar_archive)!r}, executor="ray", spare_workers=0)
        queue = JobQueue(settings=settings)
        run_id = queue.submit("sigterm-session", TrainConfig(epochs=1, train_subset=64,
                              batch_size=32, pipeline="fast", num_workers=0))
        run = queue.wait(run_id, timeout=600)
        import ray
        assert ray.is_initialized()
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        queue.shutdown()
        print(run.status, got, ray.is_initialized(), threading.current_thread().name)
    """)
    env = dict(os.environ, CIFARLAB_CACHE=str(cifar_cache_dir))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env=env, timeout=GUARD)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "done ['sigterm'] False MainThread"
