"""The time estimate (cifarlab/lab/eta.py): a run's own steady speed after its start-up, history
only from runs with the same settings on the same device, one answer for the form and the live
view; and the worker's start-up mark that it reads (cifarlab/core/train.py)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cifarlab import i18n
from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.core.data import CifarData
from cifarlab.core.train import WARM_STEPS, train
from cifarlab.lab import eta


def stream(step_seconds, total: int, warm: int = WARM_STEPS, every: int = 5):
    """Progress events as the worker sends them: one every ``every`` steps, the start-up mark
    (``steady_step``/``steady_s``) fixed at the first one past ``warm`` steps."""
    out, mark, now = [], None, 0.0
    for step, seconds in enumerate(step_seconds, 1):
        now += seconds
        if step % every and step != total:
            continue
        if mark is None and step >= warm:
            mark = (step, now)
        out.append({"step": step, "total_steps": total, "elapsed_s": now,
                    "steady_step": mark and mark[0], "steady_s": mark and mark[1]})
    return out


def warm_then_steady(total=1000, first=3.0, slow=10, step=0.01):
    """A run whose first ``slow`` steps take ``first`` seconds in all (loader workers starting),
    then ``step`` seconds each."""
    return [first / slow] * slow + [step] * (total - slow)


def at_step(events, step):
    return next(e for e in events if e["step"] >= step)


def test_a_slow_start_does_not_inflate_the_time_left():
    """The first run said "35 min left" and took 6: its start-up counted as its speed."""
    times = warm_then_steady()
    events = stream(times, 1000)
    quarter = at_step(events, 250)
    truth = sum(times[quarter["step"]:])
    est = eta.estimate(None, None, progress=quarter)
    assert est["kind"] == "run"
    assert est["left_s"] == pytest.approx(truth, rel=0.01)
    assert est["total_s"] == pytest.approx(sum(times), rel=0.01)
    naive = (1000 - quarter["step"]) * quarter["elapsed_s"] / quarter["step"]
    assert naive > 2 * truth   # what the whole-run average said
    assert eta.estimate(None, None, progress=events[-1])["left_s"] == 0


def test_estimating_until_the_steady_speed_is_measured():
    events = stream(warm_then_steady(total=1000), 1000)
    assert eta.estimate(None, None, progress=at_step(events, 5))["kind"] == "estimating"
    early = at_step(events, 25)           # past start-up, but only a few steady steps
    assert early["steady_step"] is not None
    assert eta.estimate(None, None, progress=early)["kind"] == "estimating"
    assert eta.estimate(None, None, progress={})["kind"] == "estimating"
    # a fast run: enough steps, yet less than MIN_STEADY_S seconds of them
    fast = stream([0.002] * 1000, 1000)
    assert eta.estimate(None, None, progress=at_step(fast, 500))["kind"] == "estimating"
    assert eta.estimate(None, None, progress=fast[-1])["kind"] == "run"


def test_a_steady_speed_that_changes_is_followed():
    """Load arriving half way: the speed since start-up slows with it (not a stale figure)."""
    times = warm_then_steady(total=2000, step=0.01)
    times[1000:] = [0.03] * 1000
    events = stream(times, 2000)
    before = eta.estimate(None, None, progress=at_step(events, 1000))["left_s"]
    after = eta.estimate(None, None, progress=at_step(events, 1600))["left_s"]
    assert before == pytest.approx(1000 * 0.01, rel=0.02)
    assert after > 400 * 0.01 * 1.3      # slower than the quiet speed said


def measured(wall, device="cpu", **knobs):
    return {"config": TrainConfig(**knobs).to_dict(), "device": device,
            "images_per_second": 999.0, "train_seconds": wall - 5, "wall_seconds": wall}


def test_history_only_from_runs_with_the_same_settings_and_device():
    """The tutorial preset promised 18 min from other runs when its only run took 6 min."""
    tutorial = TrainConfig()
    runs = [measured(365.0), measured(380.0, lr=0.01, seed=3, device="cpu"),  # time-free knobs
            measured(9000.0, train_subset=500),                    # other subset: left out
            measured(100.0, batch_size=64), measured(60.0, epochs=1),
            measured(30.0, device="cuda:0"), measured(2000.0, pipeline="fast"),
            measured(0.0)]                                         # nothing measured
    est = eta.estimate(tutorial, "cpu", runs)
    assert est == {"kind": "history", "seconds": pytest.approx(372.5), "runs": 2}
    assert eta.estimate(tutorial, "cuda:0", runs)["seconds"] == 30.0
    assert eta.estimate(TrainConfig(batch_size=16), "cpu", runs) == {"kind": "unknown"}
    assert eta.estimate(tutorial, None, runs) == {"kind": "unknown"}   # no device here


def test_the_form_never_gives_a_second_figure_beside_a_running_run():
    cfg = TrainConfig()
    runs = [measured(365.0)]
    mine = SimpleNamespace(status="running", device="cpu",
                           config=TrainConfig(lr=0.05, device="cpu").to_dict())
    assert eta.for_form(cfg, "cpu", runs, [mine]) == {"kind": "below"}
    other = SimpleNamespace(status="running", device="cpu",
                            config=TrainConfig(batch_size=8).to_dict())
    elsewhere = SimpleNamespace(status="running", device="cuda:0", config=cfg.to_dict())
    done = SimpleNamespace(status="done", device="cpu", config=cfg.to_dict())
    assert eta.for_form(cfg, "cpu", runs, [other, elsewhere, done])["kind"] == "history"


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_each_answer_in_words(lang):
    t = i18n.translator(lang)
    assert eta.text({"kind": "run", "left_s": 256.4, "total_s": 300}, lang) == \
        t("eta.left", time=i18n.duration(256.4, lang))
    assert eta.text({"kind": "run", "left_s": 0.0, "total_s": 9}, lang) == \
        t("eta.left", time=i18n.duration(1.0, lang))
    assert eta.text({"kind": "history", "seconds": 365.0, "runs": 1}, lang) == \
        t("eta.history", time=i18n.duration(365.0, lang), runs=t("counts.runs", n=1))
    for kind in ("estimating", "below", "unknown"):
        assert eta.text({"kind": kind}, lang) == t(f"eta.{kind}")


def test_the_worker_marks_where_start_up_ended():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (256, 3, 32, 32), dtype=np.uint8)
    y = (np.arange(256) % 10).astype(np.int64)
    data = CifarData(x, y, x[:20], y[:20], CIFAR10_CLASSES, "tiny", "tiny")
    seen = []
    train(TrainConfig(epochs=1, batch_size=4, num_workers=0, pipeline="fast"), data,
          on_event=lambda e: seen.append(e.data) if e.kind == "progress" else None,
          evaluate_after=False)
    marks = {(p["steady_step"], p["steady_s"]) for p in seen if p["steady_step"] is not None}
    assert len(marks) == 1          # set once, never moved
    ((s0, t0),) = marks
    assert WARM_STEPS <= s0 <= 64 and 0 <= t0 <= seen[-1]["elapsed_s"]
    assert all(p["steady_step"] is None for p in seen if p["step"] < WARM_STEPS)
    assert "eta_s" not in seen[-1]   # one estimate, made by lab/eta.py
