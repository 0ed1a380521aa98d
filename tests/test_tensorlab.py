"""cifarlab.lab.tensors: rank examples cut from real images, tensor facts, and real (tiny) copy and
.item() measurements; the CUDA paths are checked for what they ask of torch without a GPU."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cifarlab import i18n
from cifarlab.lab import tensors as tensorlab
from cifarlab.core.data.pipelines import normalize
from cifarlab.errors import CifarLabError


def test_rank_examples_shapes_and_values(cifar_data):
    examples = tensorlab.rank_examples(cifar_data, batch=5)
    assert [e.rank for e in examples] == [0, 1, 2, 3, 4]
    assert [e.shape for e in examples] == [(), (32,), (32, 32), (3, 32, 32), (5, 3, 32, 32)]
    for e in examples:
        assert e.values.shape == e.shape and e.values.dtype == np.float32
        assert e.values.size == int(np.prod(e.shape)) if e.shape else e.values.size == 1
    batch = examples[4]
    expected = normalize(torch.from_numpy(np.array(cifar_data.train_x[:5]))).numpy()
    np.testing.assert_array_equal(batch.values, expected)
    assert batch.values.min() >= -1 and batch.values.max() <= 1
    # every lower rank is a slice of the batch, as its code says
    assert examples[3].values.tolist() == batch.values[0].tolist()
    assert examples[2].values.tolist() == batch.values[0, 0].tolist()
    assert examples[1].values.tolist() == batch.values[0, 0, 0].tolist()
    assert float(examples[0].values) == float(batch.values[0, 0, 0, 0])
    assert [e.code for e in examples] == ["images[0, 0, 0, 0]", "images[0, 0, 0]",
                                          "images[0, 0]", "images[0]", "images"]
    assert batch.labels == tuple(int(v) for v in cifar_data.train_y[:5])
    assert batch.pixels.shape == (5, 32, 32, 3) and batch.pixels.dtype == np.uint8
    np.testing.assert_array_equal(batch.pixels[1], cifar_data.image("train", 1))
    assert examples[3].pixels.shape == (1, 32, 32, 3) and examples[2].pixels is None


def test_rank_examples_first_images_clamped(cifar_data):
    batch = tensorlab.rank_examples(cifar_data, batch=3)[4]
    assert batch.labels == tuple(int(cifar_data.train_y[i]) for i in (0, 1, 2))
    np.testing.assert_array_equal(batch.pixels[1], cifar_data.image("train", 1))
    assert tensorlab.rank_examples(cifar_data, batch=1000)[4].shape[0] == 64
    assert tensorlab.rank_examples(cifar_data, batch=0)[4].shape[0] == 1


def test_transfer_costs_on_the_cpu_measures_both_ways():
    df = tensorlab.transfer_costs("cpu", total_mb=1, chunks=64, repeats=2, max_seconds=1)
    assert list(df["method"]) == ["one_big", "many_small"]
    assert list(df["copies"]) == [1, 64]
    assert (df["seconds"] > 0).all() and (df["gb_per_s"] > 0).all()
    assert (df["total_bytes"] == df["copies"] * df["bytes_per_copy"]).all()
    assert df["total_bytes"].nunique() == 1 and abs(df["total_bytes"].iloc[0] - 1e6) < 64
    assert set(df["path"]) == {"cpu → cpu"} and set(df["memory"]) == {"ram"}
    assert (df["repeats"] >= 1).all() and (df["repeats"] <= 2).all()
    np.testing.assert_allclose(df["us_per_copy"] * df["copies"], df["seconds"] * 1e6)


def test_many_tiny_copies_cost_more_than_one_big_copy():
    # 1 MB in 16,384 pieces of 61 bytes: the fixed cost per copy dominates, even on the CPU
    df = tensorlab.transfer_costs("cpu", total_mb=1, chunks=16384, repeats=3, max_seconds=2)
    big, small = df.set_index("method")["seconds"][["one_big", "many_small"]]
    assert small > big


def test_transfer_costs_copies_the_bytes(monkeypatch):
    """The timed copies really fill the destination (checked through a spy on copy_)."""
    seen = []
    real = torch.Tensor.copy_

    def spy(self, src, non_blocking=False):
        seen.append(src.numel())
        return real(self, src, non_blocking=non_blocking)

    monkeypatch.setattr(torch.Tensor, "copy_", spy)
    df = tensorlab.transfer_costs("cpu", total_mb=0.01, chunks=10, repeats=1, max_seconds=1)
    total = int(df["total_bytes"].iloc[0])
    # warm-up (≤4 copies each) + one timed repeat of 1 and of 10 copies
    assert sum(1 for n in seen if n == total) >= 2
    assert sum(1 for n in seen if n == total // 10) >= 10


def test_transfer_costs_names_a_missing_device():
    with pytest.raises(CifarLabError, match="cuda:7"):
        tensorlab.transfer_costs("cuda:7", total_mb=1, chunks=4)


def test_item_sync_cost_counts_calls_and_agrees():
    res = tensorlab.item_sync_cost("cpu", steps=25, size=16, repeats=2, max_seconds=2)
    assert res["steps"] == 25 and res["device"] == "cpu"
    assert res["item_calls_with"] == 25 and res["item_calls_without"] == 1
    assert res["with_item_s"] > 0 and res["without_item_s"] > 0
    fig, _ = tensorlab.item_figure(res, i18n.translator("en"))    # its bars say ms a step
    assert fig.data[0].text[0] == f"{i18n.number(res['with_item_s'] * 1e3 / 25, 'en', 3)} ms/step"
    # the same sum computed two ways (float64 in Python vs float32 on the device)
    assert res["total_with"] == pytest.approx(res["total_without"], rel=1e-5)
    assert 1 <= res["repeats"] <= 2


def test_item_sync_cost_is_bounded_by_max_seconds():
    # one repeat (two loops of 50 steps) takes far longer than the budget: it stops after it
    res = tensorlab.item_sync_cost("cpu", steps=50, size=8, repeats=100, max_seconds=1e-6)
    assert res["repeats"] == 1
    res = tensorlab.item_sync_cost("cpu", steps=2, size=8, repeats=5, max_seconds=600)
    assert res["repeats"] == 5                       # a budget never reached: all repeats


def test_cuda_path_synchronises_and_pins_without_a_gpu(monkeypatch):
    """The CUDA branch as far as it can run on a CPU-only machine: it resolves the device, pins
    the host memory and synchronises through devices.synchronize. Here cuda:0 is faked by
    routing the 'device' tensors to the CPU."""
    import cifarlab.lab.tensors as tl

    synced = []
    pinned = []
    monkeypatch.setattr(tl, "resolve_device", lambda d: torch.device("cuda:0"))
    monkeypatch.setattr(tl, "synchronize", lambda d: synced.append(str(d)))
    monkeypatch.setattr("cifarlab.core.devices.synchronize", lambda d: synced.append(str(d)))
    real_empty = torch.empty

    def empty(*args, device=None, **kw):
        return real_empty(*args, **kw)

    def pin(self):
        pinned.append(self.numel())
        return self.clone()

    monkeypatch.setattr(tl.torch, "empty", empty)
    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    df = tl.transfer_costs("cuda:0", total_mb=0.1, chunks=8, repeats=1, max_seconds=1)
    assert list(zip(df["memory"], df["method"])) == [
        ("pageable", "one_big"), ("pageable", "many_small"),
        ("pinned", "one_big"), ("pinned", "many_small")]
    assert set(df["path"]) == {"cpu → cuda:0"}
    assert pinned == [int(df["total_bytes"].iloc[0])]
    # a synchronise before each clock read: start and stop of every timing, plus warm-ups
    assert synced.count("cuda:0") >= 4 * 2
