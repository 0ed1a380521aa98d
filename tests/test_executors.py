"""The executor interface's own parts: choosing one by settings, Ray as an optional extra, the
Ray executor's resources (fractional GPUs on Ray's logical resources), ``ray.init`` in the
dispatcher thread with the server's SIGTERM handler left alone.

The queue's behaviour on both executors (submit, cancel, killed workers, restarts, fair order,
twelve sessions) is in test_jobs.py. Ray tests are marked ``ray`` and share the session's
cluster (tests/ray_support.py: 2 CPUs, 1 logical GPU).
"""
import importlib.util
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cifarlab.errors import JobError
from cifarlab.serve.executor import job_for
from cifarlab.serve.kinds import register_kind
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.settings import SettingsError, load_settings
from cifarlab.serve.store import RunStore
from ray_support import ray_cluster  # noqa: F401 - the session's Ray cluster (a fixture)

ROOT = Path(__file__).resolve().parents[1]
ALICE = "alice-session-1"
GUARD = 600.0  # a guard against a hang, not a speed check


def waiting_job(payload, ctx):
    """A test job kind: emits "start", then waits (in small steps) until cancelled."""
    ctx.emit("start", {"total_steps": 0})
    steps = 0
    while not ctx.should_stop():
        time.sleep(0.02)
        steps += 1
    return {"cancelled": True, "steps": steps}


register_kind("waiting", f"{__name__}:waiting_job")


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
def test_four_quarter_gpu_runs_share_one_gpu_and_the_fifth_waits(ray_cluster, tmp_path,
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
        assert ex.launch(run, job_for(run, f"{__name__}:waiting_job", settings))

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
    assert admission.placed_device("auto", cluster) == "cuda:0"
    assert admission.placed_device("auto", ["cpu"]) == "cpu"
    assert admission.placed_device("CUDA:0", cluster) == "cuda:0"
    with pytest.raises(JobError) as err:
        admission.placed_device("cuda:1", cluster)
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
def test_the_ray_executor_offers_the_clusters_devices(ray_cluster, tmp_path):
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
        ray_cluster, tmp_path, cifar_archive, cifar_cache_dir):
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
