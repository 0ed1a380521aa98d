"""One path for a config (docs/architecture.md, "How a run travels"): checked at the form for
its messages and once at submit, the authority; the store, the job and the worker carry what
was admitted and trust it; the device is resolved once, at submit; ``net`` and ``model`` never
disagree, and runs and checkpoints written with both still load.

The queues here run no dispatcher (``start=False``); the worker's part runs in this process,
so that what it calls can be counted."""
import dataclasses
import json

import pytest
import torch
from sqlalchemy import update

from cifarlab.core import checkpoint as ckpt
from cifarlab.core import config as config_mod
from cifarlab.core import devices
from cifarlab.core.config import ModelSpec, TrainConfig
from cifarlab.core.model import Net
from cifarlab.core.modelspec import net_spec
from cifarlab.errors import ConfigError, JobError
from cifarlab.serve import admission, worker
from cifarlab.serve.executor import KINDS, TRAIN, job_for
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.schema import RUNS
from cifarlab.serve.settings import load_settings

QUICK = TrainConfig(epochs=1, train_subset=256, batch_size=32, pipeline="fast", num_workers=0)
ALICE = "alice-session-1"


@pytest.fixture
def queue(tmp_path):
    settings = load_settings(env={}, home=str(tmp_path / "home"),
                             data=str(tmp_path / "no-data-here"))
    q = JobQueue(settings=settings, start=False)
    yield q
    q.shutdown()


class Counter:
    """Wraps a function, counting its calls."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


def tampered(config: TrainConfig, **changes) -> TrainConfig:
    """A config changed after it was built (what a caller that skips the form could send)."""
    out = dataclasses.replace(config)
    for name, value in changes.items():
        object.__setattr__(out, name, value)
    return out


def no_runtime_check(*args, **kwargs):
    raise AssertionError("check_runtime: the queue's path never checks a config twice")


# -- submit: the one check --------------------------------------------------------------------

def test_a_config_that_skips_the_form_is_refused_once_at_submit(queue, monkeypatch):
    validate = Counter(admission.validate)
    monkeypatch.setattr(admission, "validate", validate)
    monkeypatch.setattr(TrainConfig, "check_runtime", no_runtime_check)
    bad_spec = dataclasses.replace(ModelSpec())
    object.__setattr__(bad_spec, "channels", (0, 16))
    cases = [(tampered(QUICK, epochs=10**6), "config.epochs", "epochs"),
             (tampered(QUICK, lr=-1.0), "config.lr", "lr"),
             (tampered(QUICK, net="bn3"), "config.net_model", "net"),   # bn3 on the tutorial's
             (tampered(QUICK, model=bad_spec), "config.model_channels", "model.channels"),
             (tampered(QUICK, model=None), "config.model", "model"),
             (tampered(QUICK, device="tpu"), "config.device", "device")]
    for config, code, field in cases:
        before = validate.calls
        with pytest.raises(JobError) as err:
            queue.submit(ALICE, config)
        assert (err.value.code, err.value.field) == (code, field)
        assert validate.calls == before + 1          # checked once, and refused there
    with pytest.raises(JobError) as err:
        queue.submit(ALICE, QUICK.to_dict())         # not a config at all
    assert err.value.code == "serve.limits.not_a_config"
    with pytest.raises(JobError) as err:             # only through submit
        queue.submit_job(ALICE, TRAIN, {**QUICK.to_dict(), "batch_size": 0}, "auto")
    assert err.value.code == "serve.queue.unknown_kind"
    assert queue.store.counts()["queued"] == 0       # nothing refused was stored

    before = validate.calls
    run_id = queue.submit(ALICE, QUICK)
    assert validate.calls == before + 1
    assert queue.store.get(run_id).config == QUICK.to_dict()    # as admitted


def test_the_device_is_resolved_once_at_submit_and_recorded(queue, monkeypatch):
    resolve = Counter(devices.resolve_device)
    monkeypatch.setattr(devices, "resolve_device", resolve)
    run = queue.store.get(queue.submit(ALICE, QUICK))          # "auto"
    here = str(devices.resolve_device.fn("auto"))
    assert resolve.calls == 1
    # recorded on the run (the config keeps the student's choice: "the same settings" again)
    assert run.device == here and run.config["device"] == "auto"
    job = job_for(run, KINDS[TRAIN], queue.settings)
    assert job["device"] == here and job["payload"] == QUICK.to_dict()

    # behind a cluster's executor: "auto" takes its GPU, among its devices, not this machine's
    monkeypatch.setattr(queue.executor, "devices", lambda: ["cpu", "cuda:0"])
    run = queue.store.get(queue.submit(ALICE, QUICK))
    assert run.device == "cuda:0"
    assert resolve.calls == 1
    with pytest.raises(JobError) as err:
        queue.submit(ALICE, QUICK.replace(device="cuda:1"))
    assert err.value.code == "config.device_missing" and err.value.field == "device"


# -- the worker: trusts what was admitted ------------------------------------------------------

def test_the_worker_trains_the_admitted_config_as_it_is(queue, cifar_data, monkeypatch):
    run_id = queue.submit(ALICE, QUICK)
    run = queue.store.get(run_id)
    job = job_for(run, KINDS[TRAIN], queue.settings)
    assert TrainConfig.admitted(job["payload"]) == QUICK
    trained = QUICK.replace(device=job["device"])       # placed where the submit resolved
    # the job is the one channel: a store row changed after the job was made is not read
    with queue.store._write() as c:
        c.execute(update(RUNS).where(RUNS.c.id == run_id).values(
            config=json.dumps({**run.config, "epochs": 99, "lr": -1.0})))
    queue.store.set_status(run_id, "running", only_from=["queued"])

    checks = {name: Counter(getattr(config_mod, name))
              for name in ("validate", "_field_problems", "trick_problems")}
    for name, counter in checks.items():
        monkeypatch.setattr(config_mod, name, counter)
    monkeypatch.setattr(TrainConfig, "check_runtime", no_runtime_check)
    resolve = Counter(devices.resolve_device)
    monkeypatch.setattr(devices, "resolve_device", resolve)
    ctx = worker.JobContext(queue.store, run_id, job["device"], data=cifar_data)
    worker.settle(queue.store, ctx, *worker.run_job(job["target"], job["payload"], ctx))

    assert {name: c.calls for name, c in checks.items()} == \
        {"validate": 0, "_field_problems": 0, "trick_problems": 0}
    assert resolve.calls == 0
    done = queue.store.get(run_id)
    assert done.status == "done", (done.error, done.traceback)
    assert done.result["config"] == trained.to_dict()              # trained as admitted
    assert done.result["device"] == job["device"] == "cpu" and done.result["steps"] == 8
    monkeypatch.undo()
    assert ckpt.load(queue.store.checkpoint_path(run_id)).config == trained


def test_core_train_checks_a_config_nobody_admitted(cifar_data):
    from cifarlab.core.train import train

    missing = next(d for d in ("cuda:7", "mps", "cuda:0") if d not in devices.device_ids())
    with pytest.raises(Exception) as err:
        train(QUICK.replace(device=missing), cifar_data, evaluate_after=False)
    assert getattr(err.value, "code", None) == "devices.missing"
    with pytest.raises(ConfigError) as err:
        train(QUICK.replace(train_subset=None, batch_size=60_000), cifar_data,
              evaluate_after=False)
    assert err.value.problems[0].code == "config.batch_data"


# -- net and model: one network ---------------------------------------------------------------

def test_net_sets_the_network_when_the_config_is_built_and_never_swaps_it():
    assert TrainConfig(net="bn3").model == net_spec("bn3")
    assert TrainConfig(net="bn3", model=net_spec("bn3")) == TrainConfig(net="bn3")
    with pytest.raises(ConfigError) as err:            # a contradicting pair: refused
        TrainConfig(net="bn3", model=ModelSpec())
    assert err.value.problems[0].code == "config.net_model"
    with pytest.raises(ConfigError):
        TrainConfig(model=net_spec("airbench"))         # the tutorial's net, airbench's shape
    small = TrainConfig(model=ModelSpec(channels=(4, 8)))
    assert small.net == "tutorial"                      # a resized tutorial network
    # a new net brings its network; the same net keeps a resized one
    assert small.replace(net="bn3").model == net_spec("bn3")
    assert small.replace(net="bn3").replace(net="tutorial").model == ModelSpec()
    assert small.replace(net="tutorial", lr=0.01).model == ModelSpec(channels=(4, 8))


LEGACY = {**QUICK.to_dict(), "net": "bn3", "model": ModelSpec().to_dict(), "lr": 0.1}


def test_old_runs_with_a_net_beside_the_tutorials_model_still_load(queue, tmp_path):
    """Stored before the network lived in one place: a named net beside the tutorial's spec
    meant that net's network. Read by the pages (from_dict), by a worker (admitted)."""
    from cifarlab.lab.runs import config_of

    want = TrainConfig(**{**QUICK.knob_values(), "net": "bn3", "lr": 0.1})
    assert TrainConfig.from_dict(LEGACY) == want
    assert TrainConfig.admitted(json.loads(json.dumps(LEGACY))) == want
    both = {**LEGACY, "model": net_spec("bn3").to_dict()}     # what runs stored: both agreeing
    assert TrainConfig.from_dict(both) == TrainConfig.admitted(both) == want
    run_id = queue.store.create_run(ALICE, TRAIN, {**LEGACY, "device": "auto"}, "cpu")
    run = queue.store.get(run_id)
    assert config_of(run) == want
    job = job_for(run, KINDS[TRAIN], queue.settings)
    assert TrainConfig.admitted(job["payload"]).on_device(job["device"]) == \
        want.replace(device="cpu")


def test_an_old_checkpoint_with_net_and_model_loads(tmp_path):
    torch.manual_seed(0)
    net = Net(net_spec("bn3"))
    path = ckpt.save(tmp_path / "old.pth", net, TrainConfig(net="bn3"), ["c"] * 10)
    blob = torch.load(path, weights_only=True)
    blob["config"] = dict(LEGACY)                  # as an older version wrote it
    torch.save(blob, path)
    loaded = ckpt.load(path, max_params=None)
    assert loaded.config.net == "bn3" and loaded.config.model == net_spec("bn3")
    x = torch.zeros(2, 3, 32, 32)
    torch.testing.assert_close(loaded.model().eval()(x), net.eval()(x))


def test_the_command_line_sends_a_model_only_when_a_model_flag_is_typed():
    from cifarlab.cli import build_parser, config_from_args

    parser = build_parser()
    assert config_from_args(parser.parse_args(["train", "--net", "bn3"])).model == \
        net_spec("bn3")
    assert config_from_args(parser.parse_args(["train", "--channels", "8,16"])).model == \
        ModelSpec(channels=(8, 16))
    with pytest.raises(ConfigError) as err:      # bn3 resized: a pair that disagrees
        config_from_args(parser.parse_args(["train", "--net", "bn3", "--channels", "8,16"]))
    assert err.value.problems[0].field == "net"
