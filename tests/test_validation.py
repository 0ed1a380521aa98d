"""The validation split (TrainConfig.val_fraction): held out of training by the seed, measured each
epoch, and nothing changed at the tutorial's 0."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cifarlab.core.evaluate import validation_split
from cifarlab.core.config import TrainConfig
from cifarlab.core.data.pipelines import FastLoader, tutorial_loader
from cifarlab.core.evaluate import predict
from cifarlab.core.train import make_loader, train
from test_diverged import tiny_data

BASE = dict(epochs=2, batch_size=8, device="cpu", num_workers=0, log_every=4)


@pytest.mark.parametrize("subset", [None, 60])
def test_the_split_is_disjoint_and_fixed_by_the_seed(subset):
    cfg = TrainConfig(val_fraction=0.2, train_subset=subset, seed=3)
    tr, va = validation_split(cfg, 96)
    pool = 60 if subset else 96
    assert len(va) == round(pool * 0.2) and len(tr) + len(va) == pool
    assert not set(tr) & set(va)
    again = validation_split(cfg, 96)
    assert np.array_equal(again[0], tr) and np.array_equal(again[1], va)
    other = validation_split(cfg.replace(seed=4), 96)[1]
    assert not np.array_equal(other, va)
    if subset:   # carved from the train_subset's images, not from the whole set
        from cifarlab.core.data.pipelines import subset_indices
        assert set(tr) | set(va) == set(subset_indices(96, 60))
    assert validation_split(TrainConfig(), 96) == (None, None)
    assert cfg.images_per_epoch(96) == len(tr)


@pytest.mark.parametrize("pipeline", ["tutorial", "fast"])
def test_the_loader_never_yields_a_validation_image(pipeline):
    data = tiny_data(96)
    cfg = TrainConfig(val_fraction=0.25, pipeline=pipeline, **BASE)
    tr, va = validation_split(cfg, 96)
    seen = []
    for x, _ in make_loader(cfg, data, torch.device("cpu")):
        seen.append(x)
    x = torch.cat(seen)
    # the images the loader gave, matched back to their rows of the (normalised) training set
    from cifarlab.core.data.pipelines import normalize
    every = normalize(torch.from_numpy(np.array(data.train_x))).flatten(1)
    got = {int(torch.cdist(row.flatten()[None].float(), every).argmin()) for row in x}
    assert got == set(tr.tolist()) and not got & set(va.tolist())


def test_the_epoch_carries_validation_metrics_equal_to_an_independent_evaluation():
    data = tiny_data(96)
    cfg = TrainConfig(val_fraction=0.2, **BASE)
    events = []
    result = train(cfg, data, on_event=events.append, evaluate_after=False)
    _, va = validation_split(cfg, 96)
    start = next(e for e in events if e.kind == "start").data
    assert start["n_val"] == len(va) and start["n_train"] == 96 - len(va)
    assert result.steps == 2 * -(-(96 - len(va)) // 8)
    last = result.epochs[-1]
    probs = predict(result.model, data.train_x[va], "cpu")
    labels = np.asarray(data.train_y)[va]
    assert last["val_accuracy"] == pytest.approx(float((probs.argmax(1) == labels).mean()))
    nll = -np.log(probs[np.arange(len(va)), labels]).mean()
    assert last["val_loss"] == pytest.approx(float(nll), rel=1e-4)
    epochs = [e.data for e in events if e.kind == "epoch"]
    assert all("val_loss" in e and "val_accuracy" in e for e in epochs)
    assert result.summary()["epochs"][-1]["val_loss"] == last["val_loss"]


@pytest.mark.parametrize("pipeline", ["tutorial", "fast"])
def test_the_default_trains_exactly_as_before(pipeline):
    data = tiny_data(96)
    cfg = TrainConfig(pipeline=pipeline, train_subset=80, **BASE)
    assert cfg.val_fraction == 0.0
    # at 0 the loader is the one the train_subset alone makes, batch for batch
    ours = make_loader(cfg, data, torch.device("cpu"))
    if pipeline == "fast":
        direct = FastLoader(data, "train", 8, device="cpu", seed=0, subset=80)
    else:
        direct = tutorial_loader(data, "train", 8, 0, True, 0, subset=80)
    for (a, la), (b, lb) in zip(ours, direct, strict=True):
        assert torch.equal(a, b) and torch.equal(la, lb)
    plain = train(cfg, data, evaluate_after=False)
    again = train(cfg, data, evaluate_after=False)
    assert plain.losses == again.losses and "val_loss" not in plain.epochs[0]
    held = train(cfg.replace(val_fraction=0.2), data, evaluate_after=False)
    assert len(held.losses) < len(plain.losses)


# ------------------------------------------------------------------ the live chart's two curves

def _view(epochs):
    from cifarlab.lab.train import RunView
    from test_trainview import _ev

    v = RunView(max_points=100)
    v.add_events([_ev(1, "start", {"total_steps": 30, "steps_per_epoch": 10, "n_val": 24})])
    v.series.add(list(range(1, 31)), [2.0 - i / 40 for i in range(30)])
    v.add_events([_ev(2 + i, "epoch", e) for i, e in enumerate(epochs)])
    return v


OVER = [{"epoch": 1, "steps": 10, "mean_loss": 1.9, "val_loss": 1.95, "val_accuracy": 0.3},
        {"epoch": 2, "steps": 10, "mean_loss": 1.5, "val_loss": 1.7, "val_accuracy": 0.4},
        {"epoch": 3, "steps": 10, "mean_loss": 1.1, "val_loss": 1.8125, "val_accuracy": 0.375}]


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_the_chart_draws_training_and_validation_per_epoch_in_the_language(lang):
    from cifarlab import i18n
    from cifarlab.lab import train_live

    t = i18n.translator(lang)
    v = _view(OVER)
    fig = train_live.loss_figure(v.chart(), lang)[1]
    train_line, val_line = fig.data[-2:]
    assert train_line.name == t("train.val_train_series") and "markers" in train_line.mode
    assert val_line.name == t("train.val_val_series") and "markers" in val_line.mode
    assert list(train_line.x) == list(val_line.x) == [10, 20, 30]     # each epoch's last step
    assert list(train_line.y) == [1.9, 1.5, 1.1] and list(val_line.y) == [1.95, 1.7, 1.8125]
    caption = train_live.chart_texts(v, 2000, lang)[0]
    assert t("train.val_gap_over", best=2, val=i18n.significant(1.8125, lang),
             train=i18n.significant(1.1, lang)) in caption
    if lang != "en":
        assert "1.81" not in caption and "1,81" in caption     # the language's decimals
    table = train_live.epochs_table(v.epochs, lang)
    assert list(table.columns)[2:4] == [t("train.val_loss_col"), t("train.val_accuracy_col")]
    assert table.iloc[2].tolist()[2:4] == [i18n.number(1.8125, lang),
                                           i18n.percent(0.375, lang, 1)]


def test_the_gap_in_words_and_nothing_without_validation():
    from cifarlab import i18n
    from cifarlab.lab import train_live

    close = [dict(e, val_loss=e["mean_loss"] * 1.02) for e in OVER]
    wide = [dict(e, val_loss=e["mean_loss"] * 1.3) for e in OVER]
    say = train_live.validation_caption
    assert say(close, "en") == i18n.t("train.val_gap_close", "en", val=i18n.significant(
        1.1 * 1.02, "en"), train=i18n.significant(1.1, "en"))
    assert say(wide, "en") == i18n.t("train.val_gap_wide", "en", val=i18n.significant(
        1.1 * 1.3, "en"), train=i18n.significant(1.1, "en"))
    plain = [{k: v for k, v in e.items() if not k.startswith("val")} for e in OVER]
    assert say(plain, "en") is None
    v = _view(plain)
    v.start.pop("n_val")
    assert len(train_live.loss_figure(v.chart(), "en")[1].data) == 1     # the step losses only
    assert len(train_live.epochs_table(v.epochs, "en").columns) == 5
    assert i18n.t("train.val_held", "en", n=24) in train_live.chart_texts(_view([]), 2000,
                                                                         "en")[0]
