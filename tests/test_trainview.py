"""cifarlab.lab.train: presets, checks, the incremental downsampled loss series, the run view
built from store events, progress, the time split; cifarlab.lab.train_live: the live view's
figures and words in each language."""
from __future__ import annotations

import math
from types import SimpleNamespace

from functools import partial

import numpy as np
import pytest

from cifarlab import i18n
from cifarlab.lab import train as trainview
from cifarlab.core.config import PRESETS, Limits, TrainConfig, knobs
from cifarlab.lab.train import LossSeries, RunView
from cifarlab.lab.train_form import TrainForm, preset_values


def test_presets_are_trainconfigs_and_the_tutorial_is_the_default():
    for name, cfg in PRESETS.items():
        assert isinstance(cfg, TrainConfig)
        form = TrainForm()
        form.apply_preset(name)
        assert form.preset_name() == name
    assert PRESETS["tutorial"] == TrainConfig()
    quick = preset_values("quick")
    assert quick["epochs"] == 1 and quick["train_subset"] == 5000
    assert "seed" not in quick and "device" not in quick   # a preset leaves them as chosen
    form = TrainForm()
    form.take({"lr": 0.002})
    assert form.preset_name() is None


def check(values, limits=None, n_train=None):
    return TrainForm(limits=limits, n_train=n_train).check(values)


def test_check_gives_one_coded_problem_per_bad_knob():
    bad = dict(epochs=0, lr=0.0, momentum=1.0, batch_size=0, num_workers=-1, device="tpu",
               pipeline="slow", seed=-1, train_subset=0)
    problems = check(bad)
    assert set(problems) == set(bad)
    for field, p in problems.items():
        assert p.field == field and p.code == f"config.{field}"
        for lang in i18n.LANGUAGES:
            assert p.text(lang) and "{" not in p.text(lang)
    tutorial = preset_values("tutorial") | {"seed": 0, "device": "auto"}
    assert check(tutorial) == {}


def test_check_batch_against_subset_and_hosting_limits():
    ok = preset_values("tutorial") | {"seed": 0, "device": "cpu"}
    p = check(ok | {"train_subset": 32, "batch_size": 64})
    assert p["batch_size"].code == "config.batch_data" and p["batch_size"].params["n"] == 32
    assert check(ok | {"train_subset": 64, "batch_size": 64}) == {}
    p = check(ok | {"epochs": 30}, Limits(max_epochs=20))
    assert p["epochs"].code == "config.epochs_limit" and p["epochs"].params == {"n": 20}
    p = check(ok | {"train_subset": 20000}, Limits(max_train_images=10000))
    assert p["train_subset"].code == "config.subset_limit"
    p = check(ok, Limits(max_train_images=10000), n_train=50000)  # all 50,000 > limit
    assert p["train_subset"].code == "config.subset_limit"
    p = check(ok | {"train_subset": 60000}, n_train=50000)
    assert p["train_subset"].code == "config.subset_data"
    p = check(ok | {"batch_size": 60000}, n_train=50000)
    assert p["batch_size"].params["n"] == 50000
    assert "50.000" in p["batch_size"].text("es") and "50,000" in p["batch_size"].text("en")
    p = check(ok | {"num_workers": 8}, Limits(max_num_workers=4))
    assert p["num_workers"].code == "config.num_workers_limit"
    p = check(ok | {"device": "cuda:3"}, Limits(devices=("cpu",)))
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
                  _ev(4, "running_loss", {"epoch": 2, "i": 5, "loss": 1.5})])
    v.series.add(list(range(1, 16)), [1.0] * 15)
    c = v.chart()
    assert c["running_steps"] == [5, 15] and c["running_losses"] == [2.0, 1.5]
    assert c["epoch_marks"] == [10]
    assert c["steps"][-1] == 15 and c["count"] == 15
    assert v.last_seq == 4 and v.last_step == 15 and len(v.epochs) == 1
    split = trainview.time_split(v.epochs)
    assert split["data_share"] == pytest.approx(0.25)


def test_progress_split_and_picking_a_run():
    p = trainview.progress_info({"step": 50, "total_steps": 200,
                                 "images_per_second": 1234.5, "elapsed_s": 10})
    assert p["fraction"] == 0.25 and p["total"] == 200
    assert trainview.progress_info(None)["fraction"] == 0.0
    assert trainview.time_split() is None
    r = trainview.time_split([], {"data_wait_seconds": 3.0, "compute_seconds": 1.0})
    assert r["data_share"] == 0.75 and r["total_s"] == 4.0
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


# -- the live view: what a poll reads, when figures are redrawn, how often it polls ----------------

class _CountingStore:
    """A RunStore that counts the rows each read hands back, to see that a view reads only
    what is new."""

    def __init__(self, store):
        self.store, self.rows = store, {"events": 0, "losses": 0}
        self.loss_reads = 0

    def events(self, run_id, since_seq=0):
        out = self.store.events(run_id, since_seq=since_seq)
        self.rows["events"] += len(out)
        return out

    def losses(self, run_id, since_step=0):
        self.loss_reads += 1
        steps, losses = self.store.losses(run_id, since_step=since_step)
        self.rows["losses"] += len(steps)
        return steps, losses


@pytest.fixture
def run_store(tmp_path):
    from cifarlab.serve.store import RunStore

    store = RunStore(tmp_path / "runs.db")
    run_id = store.create_run("view-session-1", "train", {"epochs": 1}, "cpu")
    return store, run_id


def test_update_reads_only_new_rows(run_store):
    store, run_id = run_store
    counting = _CountingStore(store)
    view = RunView(max_points=100)
    events, losses = partial(counting.events, run_id), partial(counting.losses, run_id)
    assert view.update(events, losses) is False
    store.record(run_id, steps=range(1, 51), losses=[2.0] * 50,
                 events=[("start", {"total_steps": 100, "steps_per_epoch": 100})],
                 progress={"step": 50, "total_steps": 100})
    assert view.update(events, losses, step=50) is True
    assert counting.rows == {"events": 1, "losses": 50}
    # nothing new: no rows come back
    assert view.update(events, losses, step=50) is False
    assert counting.rows == {"events": 1, "losses": 50}
    # the run's progress says no step is new: the losses are not even asked for
    reads = counting.loss_reads
    view.update(events, losses, step=50)
    assert counting.loss_reads == reads
    store.record(run_id, steps=range(51, 101), losses=[1.0] * 50,
                 events=[("epoch", {"epoch": 1, "steps": 100})],
                 progress={"step": 100, "total_steps": 100})
    assert view.update(events, losses, step=100) is True
    assert counting.rows == {"events": 2, "losses": 100}       # each row read once
    assert view.last_step == 100 and view.series.count == 100 and len(view.epochs) == 1
    # step=None (a finished run) reads whatever is there
    store.record(run_id, steps=[101], losses=[0.5])
    assert view.update(events, losses) is True and view.last_step == 101


def test_chart_is_numpy_arrays_ready_to_plot():
    v = RunView(max_points=10)
    v.series.add(list(range(1, 101)), [float(i) for i in range(1, 101)])
    c = v.chart()
    assert c["steps"].dtype == np.int32 and c["losses"].dtype == np.float32
    assert len(c["steps"]) <= 11 and c["steps"][-1] == 100
    xs, ys = v.series.points()
    assert c["steps"].tolist() == xs and c["losses"].tolist() == pytest.approx(ys)


def test_chart_stamp_changes_with_new_data_at_most_every_so_often():
    v = RunView()
    first = v.chart_stamp(now=0.0, every_s=2.0)
    assert v.chart_stamp(now=0.5, every_s=2.0) == first        # nothing new
    v.series.add([1, 2], [1.0, 1.0])
    assert v.chart_stamp(now=1.0, every_s=2.0) == first        # new, but too soon
    second = v.chart_stamp(now=2.0, every_s=2.0)
    assert second != first                                     # new, and due
    v.series.add([3], [1.0])
    assert v.chart_stamp(now=2.5, every_s=2.0) == second
    v.add_events([_ev(1, "done", {})])
    assert v.chart_stamp(now=2.6, every_s=2.0, final=True) != second  # the end: at once
    assert v.chart_stamp(now=2.7, every_s=2.0, final=True) == v.chart_stamp(3.0, 2.0, True)


def test_memoized_builds_once_per_key_and_hands_back_the_last_value():
    v = RunView()
    calls = []

    def build(old):
        calls.append(old)
        return (old or 0) + 1

    assert v.memoized("fig", ("a", "en"), build) == 1
    assert v.memoized("fig", ("a", "en"), build) == 1          # same key: not built again
    assert v.memoized("fig", ("b", "en"), build) == 2          # new key: built from the old
    assert calls == [None, 1]
    assert v.memoized("other", 1, lambda old: "x") == "x"      # names are separate


def test_poll_interval_follows_the_runs():
    runs = [SimpleNamespace(status="done"), SimpleNamespace(status="failed")]
    assert trainview.poll_interval(runs, 2.0, 10.0) == 10.0
    assert trainview.poll_interval(runs + [SimpleNamespace(status="queued")], 2.0, 10.0) == 2.0
    assert trainview.poll_interval([SimpleNamespace(status="running")], 2.0, None) == 2.0
    assert trainview.poll_interval([], 2.0, None) is None


def _run(status="running", progress=None, cancel=False):
    return SimpleNamespace(status=status, progress=progress, cancel_requested=cancel)


def test_phase_says_where_a_run_is():
    v = RunView()
    assert trainview.phase(_run("queued"), v) == "queued"
    assert trainview.phase(_run("running"), v) == "starting"              # no step yet
    assert trainview.phase(_run(progress={"step": 5, "total_steps": 10}), v) == "training"
    assert trainview.phase(_run(progress={"step": 10, "total_steps": 10}), v) == "evaluating"
    assert trainview.phase(_run(progress={"step": 5, "total_steps": 10}, cancel=True),
                           v) == "cancelling"
    v.add_events([_ev(1, "epoch", {"epoch": 1, "steps": 5, "complete": False})])  # stopped early
    assert trainview.phase(_run(progress={"step": 5, "total_steps": 10}), v) == "evaluating"
    for final in ("done", "cancelled", "failed", "interrupted"):
        assert trainview.phase(_run(final), v) == final


def test_freeze_long_lived_freezes_again_only_when_modules_were_loaded():
    import gc
    import sys
    import types

    try:
        trainview.freeze_long_lived()
        assert trainview.freeze_long_lived() is False          # nothing new: nothing to do
        frozen = gc.get_freeze_count()
        keep = [[] for _ in range(100)]                        # made after the freeze
        # no freeze: the 100 new lists stay out (frozen objects another thread frees leave it,
        # so the count may fall, never rise by them)
        assert trainview.freeze_long_lived() is False
        assert gc.get_freeze_count() < frozen + len(keep)
        sys.modules["cifarlab_test_new_module"] = types.ModuleType("cifarlab_test_new_module")
        assert trainview.freeze_long_lived() is True           # a page imported something
        assert gc.get_freeze_count() >= frozen + len(keep)
    finally:
        sys.modules.pop("cifarlab_test_new_module", None)
        gc.unfreeze()


# ------------------------------------------------------------------ the live view's figures

def test_the_loss_figure_is_updated_in_place_while_its_layout_fits():
    from cifarlab.lab import train_live

    v = RunView(max_points=100)
    v.add_events([_ev(1, "start", {"total_steps": 20, "steps_per_epoch": 10})])
    v.series.add(list(range(1, 6)), [2.0, 1.9, 1.8, 1.7, 1.6])
    first = train_live.loss_figure(v.chart(), "es")
    fig = first[1]
    assert fig.layout.separators == i18n.separators("es")
    assert fig.layout.title.text == i18n.t("train.loss_curve", "es")
    assert fig.layout.template.layout.to_plotly_json() == {}   # plotly's theme: not sent
    v.series.add([6, 7], [1.5, 1.4])
    again = train_live.loss_figure(v.chart(), "es", first)
    assert again is first and list(again[1].data[0].y)[-1] == pytest.approx(1.4)
    v.add_events([_ev(2, "epoch", {"epoch": 1, "steps": 10, "complete": True})])
    marked = train_live.loss_figure(v.chart(), "es", first)   # an epoch line: a new layout
    assert marked is not first and marked[1].layout.annotations[0].text == \
        i18n.t("train.chart_epoch_end", "es", n=1)
    assert train_live.loss_figure(v.chart(), "pt", marked)[0][0] == "pt"


def test_split_per_class_and_epochs_in_the_language():
    from cifarlab.lab import train_live
    from cifarlab.lab.results.figures import accuracy_figure

    split = trainview.time_split([], {"data_wait_seconds": 3.0, "compute_seconds": 1.0})
    lang_, fig = train_live.split_figure(split, "pt")
    assert [b.name for b in fig.data] == [i18n.t("train.data_wait", "pt"),
                                          i18n.t("train.compute", "pt")]
    v = RunView()
    done = SimpleNamespace(finished=True, result={"data_wait_seconds": 3.0,
                                                  "compute_seconds": 1.0}, progress=None)
    assert train_live.split_chart(v, SimpleNamespace(finished=False, result=None,
                                                     progress=None), 1, "pt") == (None, None)
    fig, caption = train_live.split_chart(v, done, 2, "pt")
    assert i18n.t("train.data_bound", "pt") in caption and fig.data[0].x == (3.0,)
    v.add_events([_ev(1, "start", {"steps_per_epoch": 500})])
    caption, printed = train_live.chart_texts(v, 2000, "es")    # too short for a report
    assert i18n.t("train.running_loss_none", "es", n=2000, steps=500) in caption and not printed
    v.add_events([_ev(2, "running_loss", {"epoch": 1, "i": 2000, "loss": 2.1834})])
    assert train_live.chart_texts(v, 2000, "es")[1] == i18n.t(
        "train.running_loss_line", "es", epoch=1, i=" 2000", loss="2.183")
    bars = accuracy_figure({"airplane": 0.7, "cat": 0.41}, i18n.translator("es")).data[0]
    assert list(bars.x) == [i18n.t("classes.airplane", "es"), i18n.t("classes.cat", "es")]
    assert list(bars.text) == ["70", "41"]
    table = train_live.epochs_table([{"epoch": 1, "mean_loss": 1.23456, "seconds": 12.3,
                                      "images_per_second": 1234.4, "accuracy": 0.5}], "es")
    assert list(table.columns)[0] == i18n.t("train.epoch_col", "es")
    assert table.iloc[0].tolist() == ["1", "1,2346", "12,3", "1.234", i18n.percent(0.5, "es")]
    assert i18n.t("train.chance", "es") in train_live.result_lines(
        {"train_seconds": 12.0, "images_per_second": 99}, "es")


def test_what_the_live_view_says_of_each_phase():
    from cifarlab.lab import train_live

    run = SimpleNamespace(status="cancelled", result={"steps": 7}, progress={"total_steps": 20},
                          error=None, cancel_requested=False,
                          error_text=lambda lang: None)
    assert train_live.run_note(run, "cancelled", "en") == (
        "warning", i18n.t("train.cancelled_partial", "en", step=7, total=20), "stop_circle")
    run.result = None
    assert train_live.run_note(run, "cancelled", "en")[1] == \
        i18n.t("train.cancelled_queued", "en")
    assert train_live.run_note(run, "queued", "es")[1] == i18n.t("train.queue_wait", "es")
    run.error_text = lambda lang: f"out of memory ({lang})"   # the reason in the page's language
    assert train_live.run_note(run, "failed", "pt") == (
        "error", i18n.t("train.failed_reason", "pt", reason="out of memory (pt)"), "error")
    assert train_live.run_note(run, "done", "en")[0] == "success"
    assert train_live.run_note(run, "training", "en") is None


def test_run_views_keep_the_last_few_runs():
    views = trainview.RunViews(keep=2, max_points=50)
    a = views.of("a")
    assert views.of("a") is a and a.series.max_points == 50
    views.of("b")
    views.of("c")
    assert list(views) == ["b", "c"]


def test_a_runs_label_counts_its_epochs_as_the_language_does():
    from cifarlab.lab.train_live import run_label

    run = SimpleNamespace(config={"epochs": 1, "batch_size": 4, "lr": 0.001, "train_subset": 300},
                          name="", created_at=0.0, status="done")
    one = {lang: run_label(run, lang, 50000) for lang in ("en", "es", "pt")}
    assert "1 epoch, batch 4, lr 0.001, 300 images" in one["en"]
    assert "1 época, lote 4, lr 0,001, 300 imágenes" in one["es"]
    run.config["epochs"] = 2
    assert "2 épocas, lote 4" in run_label(run, "pt", 50000)
