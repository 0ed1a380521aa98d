"""cifarlab.lab.data: class browsing, ToTensor/Normalize statistics on real images, the batch the
tutorial's DataLoader delivers, and real (tiny) throughput measurements of both pipelines."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision

from cifarlab import i18n
from cifarlab.lab import data as loading


def test_class_counts_figure(cifar_data):
    t = i18n.translator("es")
    train, test = loading.counts_figure(cifar_data, t).data
    assert (train.name, test.name) == (t("data.split_train"), t("data.split_test"))
    assert list(train.x) == [t(f"classes.{c}") for c in cifar_data.classes]
    assert sum(train.y) == cifar_data.n_train == 50000
    assert list(test.y) == [1000] * 10


def test_class_sample_is_of_that_class_and_reproducible(cifar_data):
    idx, pics = loading.class_sample(cifar_data, 3, n=24, seed=0)
    assert pics.shape == (24, 32, 32, 3) and pics.dtype == np.uint8
    assert len(set(idx.tolist())) == 24
    assert (cifar_data.train_y[idx] == 3).all()
    for k in (0, 7, 23):
        np.testing.assert_array_equal(pics[k], cifar_data.image("train", int(idx[k])))
    again, _ = loading.class_sample(cifar_data, 3, n=24, seed=0)
    other, _ = loading.class_sample(cifar_data, 3, n=24, seed=1)
    assert again.tolist() == idx.tolist() and other.tolist() != idx.tolist()
    ship, _ = loading.class_sample(cifar_data, 8, n=24, seed=0)
    assert set(ship.tolist()).isdisjoint(idx.tolist())


def test_transform_stats_ranges_on_real_images(cifar_data):
    idx, pics = loading.class_sample(cifar_data, 0, n=16, seed=2)
    stats = loading.transform_stats(pics, bins=16)
    assert list(stats) == ["raw", "to_tensor", "normalize"]
    raw, tt, nm = stats["raw"], stats["to_tensor"], stats["normalize"]
    assert raw["dtype"] == "uint8" and tt["dtype"] == nm["dtype"] == "float32"
    assert raw["shape"] == (32, 32, 3) and tt["shape"] == nm["shape"] == (3, 32, 32)
    # ToTensor gives [0, 1]; Normalize((.5,)*3, (.5,)*3) gives [-1, 1]; real photos reach both ends
    assert 0 <= tt["min"] < 0.05 and 0.95 < tt["max"] <= 1
    assert -1 <= nm["min"] < -0.9 and 0.9 < nm["max"] <= 1
    assert nm["min"] == pytest.approx(2 * tt["min"] - 1, abs=1e-6)
    assert tt["max"] == pytest.approx(raw["max"] / 255, abs=1e-6)
    for s, low, high in ((raw, 0, 255), (tt, 0, 1), (nm, -1, 1)):
        assert s["edges"][0] == low and s["edges"][-1] == high and len(s["edges"]) == 17
        assert s["counts"].shape == (3, 16)
        # every value of every channel lands in a bin
        assert (s["counts"].sum(axis=1) == 16 * 32 * 32).all()
    # the histogram's shape does not change, only its axis: the same counts bin for bin
    np.testing.assert_array_equal(tt["counts"], nm["counts"])
    np.testing.assert_allclose(nm["mean"], 2 * np.array(tt["mean"]) - 1, atol=1e-5)
    np.testing.assert_allclose(tt["mean"], np.array(raw["mean"]) / 255, atol=1e-5)


def test_transform_stats_one_image_and_table(cifar_data):
    stats = loading.transform_stats(cifar_data.image("train", 0))
    assert stats["raw"]["counts"].sum() == 3 * 32 * 32
    t = i18n.translator("en")
    table = loading.ranges_table(stats, t)
    assert list(table[t("data.stage_col")]) == [t("data.raw_pixels"), t("data.after_to_tensor"),
                                                t("data.after_normalize")]
    assert float(table["max"].iloc[0]) <= 255 and float(table["max"].iloc[1]) <= 1
    assert float(table["min"].iloc[2]) >= -1


@pytest.mark.parametrize("batch_size", [4, 8, 1])
def test_loader_batch_is_the_tutorial_loaders_first_batch(cifar_data, batch_size):
    from cifarlab.core.data.pipelines import tutorial_loader

    got = loading.loader_batch(cifar_data, batch_size, seed=3)
    assert got["shape_text"] == f"torch.Size([{batch_size}, 3, 32, 32])"
    assert got["dtype"] == "torch.float32"
    images, labels = next(iter(tutorial_loader(cifar_data, "train", batch_size, 0, seed=3)))
    assert got["labels"] == labels.tolist()
    assert got["label_names"] == [cifar_data.classes[i] for i in labels.tolist()]
    assert -1 <= got["min"] and got["max"] <= 1
    assert got["batches_per_epoch"] == -(-50000 // batch_size)
    # imshow: img / 2 + 0.5 gives back the stored pixels (÷ 255), channels last
    grid = torchvision.utils.make_grid(images, nrow=min(8, batch_size)) / 2 + 0.5
    np.testing.assert_allclose(got["grid"], grid.permute(1, 2, 0).numpy(), atol=1e-6)


def test_unnormalize_and_upscale():
    x = torch.tensor([-1.0, 0.0, 1.0]).view(3, 1, 1)
    np.testing.assert_allclose(loading.unnormalize(x)[0, 0], [0.0, 0.5, 1.0])
    big = loading.upscale(np.arange(12, dtype=np.uint8).reshape(2, 2, 3), 3)
    assert big.shape == (6, 6, 3) and big[5, 5].tolist() == [9, 10, 11]
    assert loading.upscale(np.zeros((5, 32, 32, 3), np.uint8), 2).shape == (5, 64, 64, 3)


@pytest.mark.parametrize("pipeline, workers", [("tutorial", 0), ("tutorial", 1), ("fast", 0)])
def test_loader_throughput_is_positive_and_bounded(cifar_data, pipeline, workers):
    res = loading.loader_throughput(cifar_data, pipeline, batch_size=4, num_workers=workers,
                                    max_batches=5, max_seconds=5, subset=200)
    assert res["pipeline"] == pipeline and res["num_workers"] == workers
    assert res["batches"] == 5 and res["images"] == 20
    assert res["images_per_second"] > 0 and res["seconds"] > 0 and res["startup_seconds"] > 0
    assert res["images_per_second"] == pytest.approx(res["images"] / res["seconds"])


def test_loader_throughput_stops_at_the_time_budget(cifar_data):
    res = loading.loader_throughput(cifar_data, "tutorial", batch_size=1, num_workers=0,
                                    max_batches=10**6, max_seconds=0.05)
    # stopped by its budget (not by running out of batches): the run reports both figures
    assert 1 <= res["batches"] < 10**6 and res["seconds"] >= 0.05


def test_loader_throughput_with_a_single_batch_epoch(cifar_data):
    res = loading.loader_throughput(cifar_data, "fast", batch_size=8, max_batches=5,
                                    subset=8)
    assert res["batches"] == 1 and res["images"] == 8 and res["images_per_second"] > 0


def test_fast_pipeline_ignores_workers(cifar_data):
    res = loading.loader_throughput(cifar_data, "fast", num_workers=4, max_batches=2, subset=64)
    assert res["num_workers"] == 0


def test_sweep_loaders(cifar_data):
    df = loading.sweep_loaders(cifar_data, batch_size=4, workers=(0, 2), max_batches=3,
                               max_seconds=2, subset=100)
    assert list(df["pipeline"]) == ["tutorial", "tutorial", "fast"]
    assert list(df["num_workers"]) == [0, 2, 0]
    assert (df["images_per_second"] > 0).all() and (df["batches"] == 3).all()
    assert list(df.columns) == ["pipeline", "batch_size", "num_workers", "images_per_second",
                                "batches", "images", "seconds", "startup_seconds"]
