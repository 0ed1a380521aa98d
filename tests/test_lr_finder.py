"""The learning-rate finder (cifarlab/core/lr_finder.py) against a hand-written sweep in plain
torch, its explosion stop, cancel and seed; its suggestion on curves of known shape; its
settings refused in words; and as a queued job (the inline executor: no worker process) that
meets the run limits and never lands on a class's board. Random pictures, no real data set."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from cifarlab import i18n
from cifarlab.core import data as data_mod
from cifarlab.core import lr_finder
from cifarlab.core.config import TrainConfig
from cifarlab.core.model import Net
from cifarlab.core.train import make_loader
from cifarlab.errors import ConfigError, JobError
from cifarlab.lab import train_lr_finder as finder
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.settings import load_settings
from data_support import random_data
from inline_executor import use_inline_executor

CONFIG = TrainConfig(batch_size=8, num_workers=0, device="cpu", seed=3)


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread, as a worker trains (``worker_threads``): two threads spin against each
    other on a busy 2-core machine, a hundred times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_each_step_trains_at_its_exponential_lr_as_plain_torch_does():
    data, n, lo, hi = random_data(), 12, 1e-4, 1.0
    got = lr_finder.find_lr(CONFIG, data, steps=n, lr_min=lo, lr_max=hi)
    want = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
    assert got["lrs"] == pytest.approx(want, rel=1e-12)
    assert got["lrs"][0] == pytest.approx(lo) and got["lrs"][-1] == pytest.approx(hi)
    # the same sweep by hand: the tutorial's net and SGD, the lr set before each step
    torch.manual_seed(CONFIG.seed)
    net = Net(CONFIG.model, num_classes=10)
    opt = torch.optim.SGD(net.parameters(), lr=CONFIG.lr, momentum=CONFIG.momentum)
    batches, losses = iter(make_loader(CONFIG, data, torch.device("cpu"))), []
    for i in range(n):
        try:
            x, y = next(batches)
        except StopIteration:   # 96 images are 12 batches of 8: never reached
            raise AssertionError("the loader ran dry") from None
        for g in opt.param_groups:
            g["lr"] = want[i]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert got["losses"] == losses if got["stop"] is None else got["losses"] == losses[
        :got["steps"]]
    # the smoothed loss: the debiased moving average of those losses
    avg, smooth = 0.0, []
    for i, v in enumerate(got["losses"]):
        avg = lr_finder.BETA * avg + (1 - lr_finder.BETA) * v
        smooth.append(avg / (1 - lr_finder.BETA ** (i + 1)))
    assert got["smoothed"] == pytest.approx(smooth, rel=1e-12)
    assert got["images"] == 8 * got["steps"] and got["config"] == CONFIG.to_dict()


def _scripted(monkeypatch, losses):
    """core.train.train_step returning these losses in turn (the sweep's stop rules alone)."""
    from cifarlab.core import train

    it = iter(losses)
    monkeypatch.setattr(train, "train_step", lambda *a: torch.tensor(next(it)))


def test_the_sweep_stops_when_the_smoothed_loss_passes_four_times_its_best(monkeypatch):
    _scripted(monkeypatch, [2.3] * 10 + [2.0] * 5 + [60.0, 90.0, 200.0] + [1.0] * 10)
    got = lr_finder.find_lr(CONFIG, random_data(), steps=28, lr_min=1e-3, lr_max=10.0)
    best = min(got["smoothed"][:-1])
    assert got["stop"] == "exploded" and got["smoothed"][-1] > 4 * best
    assert all(s <= 4 * best for s in got["smoothed"][:-1])   # not a step earlier
    assert got["steps"] == len(got["lrs"]) == len(got["losses"]) < 28


def test_a_loss_that_is_no_number_ends_the_sweep(monkeypatch):
    _scripted(monkeypatch, [2.3] * 6 + [float("nan")] + [2.3] * 5)
    got = lr_finder.find_lr(CONFIG, random_data(), steps=12, lr_min=1e-3, lr_max=10.0)
    assert got["stop"] == "nan" and got["steps"] == 7 and got["losses"][-1] is None
    assert len(got["smoothed"]) == 6 and got["suggestion"] == pytest.approx(got["lrs"][5] / 10)
    json.dumps(got, allow_nan=False)   # what the run store keeps: plain JSON


def test_the_same_seed_sweeps_the_same_curve():
    data = random_data()
    got = lr_finder.find_lr(CONFIG, data, steps=15, lr_min=1e-3, lr_max=0.1)
    again = lr_finder.find_lr(CONFIG, data, steps=15, lr_min=1e-3, lr_max=0.1)
    assert again["losses"] == got["losses"] and again["suggestion"] == got["suggestion"]
    other = lr_finder.find_lr(CONFIG.replace(seed=4), data, steps=15, lr_min=1e-3, lr_max=0.1)
    assert other["losses"][:3] != got["losses"][:3]


def test_a_cancel_stops_between_steps_keeping_what_was_swept():
    calls = []
    got = lr_finder.find_lr(CONFIG, random_data(), steps=20, lr_min=1e-4, lr_max=1e-2,
                            should_stop=lambda: len(calls) >= 3 or calls.append(1) is not None,
                            on_step=lambda i, n: None)
    assert got["stop"] == "cancelled" and got["cancelled"] and got["steps"] == 3
    assert len(got["lrs"]) == len(got["losses"]) == len(got["smoothed"]) == 3


def _curve(n=100):
    """Flat, then falling (fastest at index 50), then exploding: a finder's textbook curve."""
    lrs = [lr_finder.lr_at(i, n, 1e-5, 10.0) for i in range(n)]
    x = np.arange(n)
    loss = 2.3 - 1.0 / (1 + np.exp(-(x - 50) / 4)) + np.where(x > 75, (x - 75) ** 2 * 0.02, 0)
    return lrs, list(loss)


def test_the_suggestion_is_the_steepest_fall_before_the_minimum():
    lrs, loss = _curve()
    lr, rule = lr_finder.suggest(lrs, loss)
    assert rule == "steepest" and lr == pytest.approx(lrs[50])
    low = int(np.argmin(loss))
    assert 50 < low <= 76 and lr < lrs[low]
    # flat until it explodes: its minimum is noise; a tenth of the lr before it climbs
    flat = [2.3 + 0.01 * math.sin(i) for i in range(60)] + [2.6, 9.0]
    lr, rule = lr_finder.suggest(lrs[:62], flat)
    assert rule == "edge_tenth" and lr == pytest.approx(lrs[59] / 10)
    assert lr_finder.suggest(lrs[:30], flat[:30]) == (pytest.approx(lrs[29] / 10), "edge_tenth")
    assert lr_finder.suggest(lrs[:2], loss[:2]) == (None, None)


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_bad_sweep_settings_are_refused_in_words(lang):
    for steps in (5, 201, 10.5, True, None):
        [p] = lr_finder.problems(steps, 1e-5, 1.0)
        assert p.field == "lr_find_steps"
        assert p.text(lang) == i18n.t("errors.lr_find.steps", lang, lo=10, hi=200)
    for lo, hi in ((1.0, 0.1), (0.1, 0.1), (0, 1.0), (1e-5, 11.0), (None, 1.0),
                   (float("nan"), 1.0), ("0.1", 1.0)):
        [p] = lr_finder.problems(100, lo, hi)
        assert p.field == "lr_find_range" and i18n.number(10, lang) in p.text(lang)
    with pytest.raises(ConfigError) as info:
        lr_finder.find_lr(CONFIG, random_data(), steps=300)
    assert info.value.field == "lr_find_steps"
    # the page's boxes: decimals in either notation; what is wrong, box by box
    assert finder.read(40, "0,0001", "1") == ({"steps": 40, "lr_min": 1e-4, "lr_max": 1.0}, {})
    sweep, problems = finder.read(40, "abc", "1")
    assert sweep is None and list(problems) == ["lr_find_range"]


def test_the_figure_and_the_words_of_a_sweep():
    lrs, loss = _curve()
    result = {"lrs": lrs, "losses": loss, "smoothed": loss, "stop": "exploded", "steps": 100,
              "lr_at_min": lrs[int(np.argmin(loss))], "lr_max": 10.0}
    result["suggestion"], result["rule"] = lr_finder.suggest(lrs, loss)
    fig = finder.figure(result, "es")
    assert fig.layout.xaxis.type == "log" and fig.layout.separators == ",."
    names = [d.name for d in fig.data]
    lr = finder.suggested(result)
    assert lr == float(f"{lrs[50]:.2g}")
    assert i18n.t("train.lr_find.suggested", "es", lr=i18n.significant(
        result["suggestion"], "es", 2)) in names
    star = fig.data[names.index(next(n for n in names if n.startswith("Sugerida")))]
    assert star.x[0] == pytest.approx(result["suggestion"]) and star.y[0] == pytest.approx(
        loss[50])
    lines = finder.summary(result, "pt")
    assert lines[0] == i18n.t("train.lr_find.stop_exploded", "pt", n=100,
                              lr=i18n.significant(lrs[-1], "pt", 2))
    assert i18n.significant(lr, "pt", 2) in lines[1]
    assert len(finder.table(result, "en")) == 100


# ----------------------------------------------------------------------------- the queue
@pytest.fixture
def queue(tmp_path, monkeypatch):
    """A JobQueue running its jobs inline, whose data set is 96 random pictures."""
    use_inline_executor(monkeypatch)
    monkeypatch.setattr(data_mod, "load", lambda *a, **k: random_data())
    q = JobQueue(settings=load_settings(env={}, home=str(tmp_path / "home"),
                                        data=str(tmp_path / "nowhere"), spare_workers=0,
                                        max_per_owner=1))
    yield q
    q.shutdown()


def test_a_sweep_runs_as_a_queued_job_and_its_curve_lands_in_the_store(queue):
    sweep = {"steps": 15, "lr_min": 1e-4, "lr_max": 1.0}
    run_id = queue.submit("alice-session-1", CONFIG, owner="alice", sweep=sweep)
    run = queue.wait(run_id, timeout=120)
    assert (run.kind, run.status) == ("lr_find", "done")
    assert run.config == {"config": CONFIG.to_dict()} | sweep
    assert run.result["steps"] == 15 == len(run.result["lrs"]) and run.result["suggestion"]
    assert run.progress["step"] == 15 == run.progress["total_steps"]
    assert [r.id for r in queue.runs("alice-session-1", kind="lr_find")] == [run_id]
    assert queue.runs("alice-session-1", kind="train") == []    # not a training run
    # its images count in the owner's hour: steps × batch size
    assert [n for _, n in queue.store.image_epochs_since("alice", 0)] == [15 * 8]


def test_a_sweep_meets_the_limits_of_a_run(queue):
    def refused(**kw) -> JobError:
        with pytest.raises(JobError) as info:
            queue.submit("bob-session-22", kw.pop("config", CONFIG), owner="bob", **kw)
        return info.value

    assert refused(sweep={"steps": 500, "lr_min": 1e-4, "lr_max": 1.0}).field == "lr_find_steps"
    err = refused(sweep={"steps": 50, "lr_min": 1.0, "lr_max": 0.1})
    assert (err.code, err.field) == ("lr_find.range", "lr_find_range")
    err = refused(config=CONFIG.replace(epochs=50), sweep={"steps": 50, "lr_min": 1e-4,
                                                           "lr_max": 1.0})
    assert err.code == "config.epochs_limit"
    with pytest.raises(JobError) as info:   # only through submit
        queue.submit_job("bob-session-22", "lr_find", {"steps": 50}, "cpu", owner="bob")
    assert info.value.code == "serve.queue.unknown_kind"
    queue.dispatcher.stop(5)   # nothing starts now: the first sweep stays queued
    queue.submit("bob-session-22", CONFIG, owner="bob", sweep={"steps": 10, "lr_min": 1e-4,
                                                                "lr_max": 1.0})
    err = refused(sweep={"steps": 10, "lr_min": 1e-4, "lr_max": 1.0})   # max_per_owner = 1
    assert err.code == "serve.limits.per_owner"


def test_a_class_member_sweeps_under_the_class_rules_and_off_its_board(queue):
    from cifarlab.serve.classroom import tables
    from cifarlab.serve.classroom.facade import Classroom
    from cifarlab.serve.identity import Person

    teacher = Person("user:teacher@school.edu", "teacher@school.edu", instructor=True)
    ana = Person("browser:ana-cookie-1", "Ana")
    cr = Classroom(queue.store)
    info = cr.create_class(teacher, "Period 3")
    code = info.code
    cr.push_preset(teacher, code, {"lr": 0.01}, locked=["lr"], expected_version=info.version)
    cr.join(ana, code, "Ana", client_key=ana.id)
    sweep = {"steps": 10, "lr_min": 1e-4, "lr_max": 1.0}
    with pytest.raises(JobError) as info:   # the locked knob holds for a sweep too
        queue.submit("ana-session-1", CONFIG, owner=ana.id, sweep=sweep)
    assert (info.value.code, info.value.field) == ("class.knob_locked", "lr")
    run_id = queue.submit("ana-session-1", CONFIG.replace(lr=0.01), owner=ana.id, sweep=sweep)
    assert queue.wait(run_id, timeout=120).status == "done"
    assert tables.class_of_run(queue.store, run_id) is None   # a probe, not a class run
