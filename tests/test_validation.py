"""The validation split (TrainConfig.val_fraction): held out of training by the seed, measured each
epoch, and nothing changed at the tutorial's 0."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cifarlab.core import validation
from cifarlab.core.config import TrainConfig
from cifarlab.core.data import FastLoader, tutorial_loader
from cifarlab.core.evaluate import predict
from cifarlab.core.train import make_loader, train
from test_diverged import tiny_data

BASE = dict(epochs=2, batch_size=8, device="cpu", num_workers=0, log_every=4)


@pytest.mark.parametrize("subset", [None, 60])
def test_the_split_is_disjoint_and_fixed_by_the_seed(subset):
    cfg = TrainConfig(val_fraction=0.2, train_subset=subset, seed=3)
    tr, va = validation.split(cfg, 96)
    pool = 60 if subset else 96
    assert len(va) == round(pool * 0.2) and len(tr) + len(va) == pool
    assert not set(tr) & set(va)
    again = validation.split(cfg, 96)
    assert np.array_equal(again[0], tr) and np.array_equal(again[1], va)
    other = validation.split(cfg.replace(seed=4), 96)[1]
    assert not np.array_equal(other, va)
    if subset:   # carved from the train_subset's images, not from the whole set
        from cifarlab.core.data.pipelines import subset_indices
        assert set(tr) | set(va) == set(subset_indices(96, 60))
    assert validation.split(TrainConfig(), 96) == (None, None)
    assert cfg.images_per_epoch(96) == len(tr)


@pytest.mark.parametrize("pipeline", ["tutorial", "fast"])
def test_the_loader_never_yields_a_validation_image(pipeline):
    data = tiny_data(96)
    cfg = TrainConfig(val_fraction=0.25, pipeline=pipeline, **BASE)
    tr, va = validation.split(cfg, 96)
    seen = []
    for x, _ in make_loader(cfg, data, torch.device("cpu")):
        seen.append(x)
    x = torch.cat(seen)
    # the images the loader gave, matched back to their rows of the (normalised) training set
    from cifarlab.core.data import normalize
    every = normalize(torch.from_numpy(np.array(data.train_x))).flatten(1)
    got = {int(torch.cdist(row.flatten()[None].float(), every).argmin()) for row in x}
    assert got == set(tr.tolist()) and not got & set(va.tolist())


def test_the_epoch_carries_validation_metrics_equal_to_an_independent_evaluation():
    data = tiny_data(96)
    cfg = TrainConfig(val_fraction=0.2, **BASE)
    events = []
    result = train(cfg, data, on_event=events.append, evaluate_after=False)
    _, va = validation.split(cfg, 96)
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
