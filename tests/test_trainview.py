"""cifarlab.lab.train: presets, checks, the incremental downsampled loss series, the run view
built from store events, progress, the time split and durations."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from cifarlab import i18n
from cifarlab.lab import train as trainview
from cifarlab.core.config import PRESETS, Limits, TrainConfig, knobs
from cifarlab.lab.train import LossSeries, RunView


def test_presets_are_trainconfigs_and_the_tutorial_is_the_default():
    for name, cfg in PRESETS.items():
        assert isinstance(cfg, TrainConfig)
        assert trainview.matching_preset(trainview.preset_values(name)) == name
    assert PRESETS["tutorial"] == TrainConfig()
    quick = trainview.preset_values("quick")
    assert quick["epochs"] == 1 and quick["train_subset"] == 5000
    assert "seed" not in quick and "device" not in quick   # a preset leaves them as chosen
    assert trainview.matching_preset({**trainview.preset_values("tutorial"), "lr": 0.002}) is None


def test_check_gives_one_coded_problem_per_bad_knob():
    bad = dict(epochs=0, lr=0.0, momentum=1.0, batch_size=0, num_workers=-1, device="tpu",
               pipeline="slow", seed=-1, train_subset=0)
    problems = trainview.check(bad)
    assert set(problems) == set(bad)
    for field, p in problems.items():
        assert p.field == field and p.code == f"config.{field}"
        for lang in i18n.LANGUAGES:
            assert p.text(lang) and "{" not in p.text(lang)
    assert trainview.check(trainview.preset_values("tutorial") | {"seed": 0, "device": "auto"}) == {}


def test_check_batch_against_subset_and_hosting_limits():
    ok = trainview.preset_values("tutorial") | {"seed": 0, "device": "cpu"}
    p = trainview.check(ok | {"train_subset": 32, "batch_size": 64})
    assert p["batch_size"].code == "config.batch_data" and p["batch_size"].params["n"] == 32
    assert trainview.check(ok | {"train_subset": 64, "batch_size": 64}) == {}
    p = trainview.check(ok | {"epochs": 30}, Limits(max_epochs=20))
    assert p["epochs"].code == "config.epochs_limit" and p["epochs"].params == {"n": 20}
    p = trainview.check(ok | {"train_subset": 20000}, Limits(max_train_images=10000))
    assert p["train_subset"].code == "config.subset_limit"
    p = trainview.check(ok, Limits(max_train_images=10000), n_train=50000)  # all 50,000 > limit
    assert p["train_subset"].code == "config.subset_limit"
    p = trainview.check(ok | {"train_subset": 60000}, n_train=50000)
    assert p["train_subset"].code == "config.subset_data"
    p = trainview.check(ok | {"batch_size": 60000}, n_train=50000)
    assert p["batch_size"].params["n"] == 50000
    assert "50.000" in p["batch_size"].text("es") and "50,000" in p["batch_size"].text("en")
    p = trainview.check(ok | {"num_workers": 8}, Limits(max_num_workers=4))
    assert p["num_workers"].code == "config.num_workers_limit"
    p = trainview.check(ok | {"device": "cuda:3"}, Limits(devices=("cpu",)))
    assert p["device"].code == "config.device_missing"


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_every_knob_and_preset_is_in_the_catalogs(lang):
    cat = i18n.catalog(lang)
    for f in knobs():
        assert f.knob.label in cat and f.knob.help in cat, f.name
        assert f"errors.{f.knob.error}" in cat, f.name
    for name in PRESETS:
        assert f"train.preset_{name}" in cat and f"train.preset_{name}_help" in cat


def test_loss_series_keeps_every_point_while_few():
    s = LossSeries(max_points=100)
    s.add([1, 2, 3], [3.0, 2.0, 1.0])
    assert s.points() == ([1, 2, 3], [3.0, 2.0, 1.0])
    s.add([3, 4], [9.0, 0.5])  # step 3 again: ignored
    assert s.points() == ([1, 2, 3, 4], [3.0, 2.0, 1.0, 0.5])
    assert s.last_step == 4 and s.count == 4


def test_loss_series_downsamples_to_bucket_means_incrementally():
    s = LossSeries(max_points=10)
    steps = list(range(1, 1001))
    losses = [float(i) for i in steps]
    for a in range(0, 1000, 37):  # in uneven chunks, as the page reads them
        s.add(steps[a:a + 37], losses[a:a + 37])
    xs, ys = s.points()
    assert len(xs) <= 11
    assert xs[-1] == 1000 and xs == sorted(xs)
    # each point is the mean of the losses of the steps in its bucket
    k = s.stride
    assert k >= 100
    for x, y in zip(xs[:-1], ys[:-1]):
        assert y == pytest.approx((x - k + 1 + x) / 2)
    # the same as feeding it all at once
    t = LossSeries(max_points=10)
    t.add(steps, losses)
    assert t.points() == (xs, ys)


def test_loss_series_keeps_a_nan_visible():
    s = LossSeries(max_points=4)
    s.add(range(1, 9), [1.0, float("nan"), 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    _, ys = s.points()
    assert math.isnan(ys[0]) and ys[-1] == 1.0


def _ev(seq, kind, data):
    return SimpleNamespace(seq=seq, kind=kind, data=data)


def test_run_view_chart_from_events():
    v = RunView(max_points=100)
    v.add_events([_ev(1, "start", {"total_steps": 20, "steps_per_epoch": 10}),
                  _ev(2, "running_loss", {"epoch": 1, "i": 5, "loss": 2.0}),
                  _ev(3, "epoch", {"epoch": 1, "steps": 10, "data_wait_s": 1.0,
                                   "compute_s": 3.0, "complete": True})])
    v.add_events([_ev(3, "epoch", {"epoch": 1, "steps": 10}),    # seen already
                  {"seq": 4, "kind": "running_loss", "data": {"epoch": 2, "i": 5, "loss": 1.5}}])
    v.add_losses(list(range(1, 16)), [1.0] * 15)
    c = v.chart()
    assert c["running_steps"] == [5, 15] and c["running_losses"] == [2.0, 1.5]
    assert c["epoch_marks"] == [10]
    assert c["steps"][-1] == 15 and c["count"] == 15
    assert v.last_seq == 4 and v.last_step == 15 and len(v.epochs) == 1
    split = trainview.time_split(v.epochs)
    assert split["data_share"] == pytest.approx(0.25)


def test_progress_split_durations_and_picking_a_run():
    p = trainview.progress_info({"step": 50, "total_steps": 200, "eta_s": 30.0,
                                 "images_per_second": 1234.5, "elapsed_s": 10})
    assert p["fraction"] == 0.25 and p["eta_s"] == 30.0 and p["total"] == 200
    assert trainview.progress_info(None)["fraction"] == 0.0
    assert trainview.progress_info({"step": 1, "total_steps": 2, "eta_s": None})["eta_s"] is None
    assert trainview.time_split() is None
    r = trainview.time_split([], {"data_wait_seconds": 3.0, "compute_seconds": 1.0})
    assert r["data_share"] == 0.75 and r["total_s"] == 4.0
    assert trainview.duration_parts(83) == [("minutes", 1), ("seconds", 23)]
    assert trainview.duration_parts(0.2) == [("seconds", 0)]
    assert trainview.duration_parts(3600) == [("minutes", 60)]
    assert trainview.duration_parts(None) == [] and trainview.duration_parts(float("inf")) == []
    rows = trainview.per_class_rows({"truck": 0.5, "airplane": 0.7})
    assert rows == [("airplane", 0.7), ("truck", 0.5)]
    runs = [SimpleNamespace(id="c", status="done"), SimpleNamespace(id="b", status="running"),
            SimpleNamespace(id="a", status="done")]
    assert trainview.pick_run(runs) == "b"
    assert trainview.pick_run(runs, "a") == "a"
    assert trainview.pick_run(runs, "gone") == "b"
    assert trainview.pick_run(runs[:1]) == "c" and trainview.pick_run([]) is None


def test_time_split_is_live_from_progress_events():
    live = trainview.time_split([], None, {"data_wait_s": 1.0, "elapsed_s": 4.0})
    assert live["data_wait_s"] == 1.0 and live["compute_s"] == 3.0 and live["data_share"] == 0.25
    # a finished run's result wins over the last progress event
    done = trainview.time_split([], {"data_wait_seconds": 2.0, "compute_seconds": 2.0},
                                {"data_wait_s": 1.0, "elapsed_s": 4.0})
    assert done["data_share"] == 0.5
