"""cifarlab.core.data on the offline CIFAR-10 archive: sizes, pixels, the cache read back, and
both input pipelines. (Tiny folders and archives, errors: test_data_sources.py; the cache's
safety: test_data_cache.py.)"""
import json
import math
import multiprocessing
import pickle
import tarfile
import time

import numpy as np
import pytest
import torch
from PIL import Image

from cifarlab.core import data as D
from cifarlab.core.data import pipelines as P
from cifarlab.errors import DataError
from data_support import CIFAR_CLASSES, backing, linux_fork, load_fresh

README_MEAN = (0.4913, 0.4821, 0.4465)     # ../shared/data/README.md, train split
TUTORIAL = P.tutorial_transform()


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """These tests check values, not speed: one intra-op thread keeps them quick when other
    processes crowd the cores (spinning thread pools slow small ops down many times)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# --------------------------------------------------------------------------------------------
# The full offline archive
# --------------------------------------------------------------------------------------------
def test_full_archive_sizes_shapes_and_classes(cifar_data):
    d = cifar_data
    assert (d.n_train, d.n_test) == (50_000, 10_000)
    assert d.train_x.shape == (50_000, 3, 32, 32) and d.test_x.shape == (10_000, 3, 32, 32)
    assert d.train_x.dtype == np.uint8 and d.test_x.dtype == np.uint8
    assert d.train_y.dtype == np.int64 and d.test_y.dtype == np.int64
    assert d.classes == CIFAR_CLASSES
    assert d.class_counts("train") == {c: 5000 for c in CIFAR_CLASSES}
    assert d.class_counts("test") == {c: 1000 for c in CIFAR_CLASSES}
    assert d.notes == ()  # every image there is 32×32 RGB
    assert "cifar10-jpeg.tar.gz" in d.source and d.key.startswith("archive-")


def test_full_archive_pixel_mean_matches_readme(cifar_data):
    x = cifar_data.train_x
    sums = x.reshape(len(x), 3, -1).sum(axis=(0, 2), dtype=np.uint64)
    mean = sums / (x.shape[0] * 32 * 32 * 255)
    np.testing.assert_allclose(mean, README_MEAN, atol=2e-3)


def _first_archive_images(archive, n):
    out = []
    with tarfile.open(archive, "r|gz") as tf:
        for m in tf:
            if m.isfile():
                with Image.open(tf.extractfile(m)) as im:
                    out.append((m.name, im.convert("RGB")))
                if len(out) == n:
                    return out
    return out


def test_archive_pixels_are_exactly_pil_and_the_tutorial_item(cifar_archive, cifar_data):
    first = _first_archive_images(cifar_archive, 5)
    assert [name for name, _ in first] == [f"train/airplane/{i:04d}.jpg" for i in range(5)]
    ds = P.tutorial_dataset(cifar_data, "train")
    for i, (_, pil) in enumerate(first):
        hwc = np.asarray(pil)
        assert np.array_equal(cifar_data.train_x[i], hwc.transpose(2, 0, 1))
        assert np.array_equal(cifar_data.image("train", i), hwc)
        img, label = ds[i]
        assert label == 0 and isinstance(label, int)
        assert torch.equal(img, TUTORIAL(pil))  # the tutorial's own transform, bit for bit


def test_second_load_reads_the_cache_into_memory_read_only(cifar_archive, cifar_cache_dir,
                                                           cifar_data):
    assert D.is_cached(str(cifar_archive), cifar_cache_dir)
    t0 = time.perf_counter()
    again = load_fresh(cifar_archive, cifar_cache_dir)
    print(f"warm cache load: {(time.perf_counter() - t0) * 1000:.0f} ms")
    assert again is not cifar_data and again.key == cifar_data.key
    for name in ("train_x", "train_y", "test_x", "test_y"):
        arr = getattr(again, name)
        # in memory no file backs (a mapped file could be cut under it), and read-only
        assert not isinstance(arr, np.memmap) and not arr.flags.writeable
        assert not (backing(arr) or "").startswith(str(cifar_cache_dir))
    with pytest.raises(ValueError):
        again.test_x[0, 0, 0, 0] = 1
    assert np.array_equal(again.test_x, cifar_data.test_x)
    assert np.array_equal(again.train_y, cifar_data.train_y)
    meta = json.loads((cifar_cache_dir / "datasets" / again.key / "meta.json").read_text())
    assert meta["complete"] is True
    print(f"decode time when the cache was built: {meta['decode_seconds']:.1f} s")


def test_cifar_data_and_dataset_pickle_as_file_references(cifar_data):
    blob = pickle.dumps(cifar_data)
    assert len(blob) < 10_000  # not 180 MB of pixels
    back = pickle.loads(blob)
    assert back.classes == cifar_data.classes and not back.train_x.flags.writeable
    assert back.cache_path == cifar_data.cache_path and back.cache_path
    assert np.array_equal(back.train_x[12345], cifar_data.train_x[12345])
    ds = P.tutorial_dataset(cifar_data, "test")
    blob = pickle.dumps(ds)  # what a spawned DataLoader worker receives
    assert len(blob) < 10_000
    ds2 = pickle.loads(blob)
    assert len(ds2) == 10_000 and ds2.classes == list(CIFAR_CLASSES)
    for i in (0, 4321, 9999):
        assert torch.equal(ds2[i][0], ds[i][0]) and ds2[i][1] == ds[i][1]


# --------------------------------------------------------------------------------------------
# Pipelines
# --------------------------------------------------------------------------------------------
def test_subset_indices_are_fixed_sorted_and_checked():
    a = P.subset_indices(50_000, 1000)
    assert np.array_equal(a, P.subset_indices(50_000, 1000))
    assert a.dtype == np.int64 and len(np.unique(a)) == 1000 and np.all(np.diff(a) > 0)
    assert a.min() >= 0 and a.max() < 50_000
    assert not np.array_equal(a, P.subset_indices(50_000, 1000, seed=1))
    assert np.array_equal(P.subset_indices(10, 10), np.arange(10))
    with pytest.raises(DataError) as info:
        P.subset_indices(50_000, 60_000)
    assert info.value.code == "data.subset_too_large" and info.value.field == "train_subset"
    assert str(info.value) == "The subset (60,000 images) is larger than the data (50,000 images)."
    assert "60.000" in info.value.text("es") and "50.000" in info.value.text("pt")
    with pytest.raises(DataError, match="between 0 and 9"):
        P.FastLoader(D.CifarData(np.zeros((10, 3, 32, 32), np.uint8), np.zeros(10, np.int64),
                                 np.zeros((1, 3, 32, 32), np.uint8), np.zeros(1, np.int64),
                                 ("a",), "test", "k"), subset=[3, 10])


def test_results_are_saved_as_plain_values():
    """Any key as its text: a run must not fail at its save for a key JSON would refuse."""
    from cifarlab.core.checkpoint import _plain

    assert _plain({np.int64(1): np.float32(0.5), (1, 2): [torch.tensor(2)], None: "x"}) == \
        {"1": 0.5, "(1, 2)": [2], "None": "x"}


def test_normalize_is_the_tutorial_transform(cifar_data):
    idx = [0, 1, 777, 25_000, 49_999]
    for i in idx:
        pil = Image.fromarray(cifar_data.image("train", i))
        assert torch.equal(P.normalize(torch.from_numpy(np.array(cifar_data.train_x[i]))),
                           TUTORIAL(pil))
    # the fast loader's two-op form, on every byte value
    values = torch.arange(256, dtype=torch.uint8).reshape(1, 1, 16, 16).expand(1, 3, 16, 16)
    fast = values.float().mul_(2.0 / 255.0).sub_(1.0)
    assert torch.allclose(fast, P.normalize(values), rtol=0, atol=1e-6)


def test_tutorial_loader_with_two_workers(cifar_data):
    loader = P.tutorial_loader(cifar_data, "train", batch_size=4, num_workers=2, shuffle=True,
                               seed=11, subset=42)
    assert len(loader) == 11 and loader.num_workers == 2
    first = [(x.clone(), y.clone()) for x, y in loader]
    assert [tuple(x.shape) for x, _ in first] == [(4, 3, 32, 32)] * 10 + [(2, 3, 32, 32)]
    assert all(x.dtype == torch.float32 and y.dtype == torch.int64 for x, y in first)
    assert all(-1.0 <= float(x.min()) and float(x.max()) <= 1.0 for x, _ in first)
    second_epoch = [y for _, y in loader]
    again = P.tutorial_loader(cifar_data, "train", 4, 2, True, 11, subset=42)
    repeat = [(x, y) for x, y in again]
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
               for a, b in zip(first, repeat))                      # same seed: same order
    assert not all(torch.equal(a[1], b) for a, b in zip(first, second_epoch))  # new epoch
    subset = P.subset_indices(cifar_data.n_train, 42)
    labels = sorted(torch.cat([y for _, y in first]).tolist())
    assert labels == sorted(cifar_data.train_y[subset].tolist())


def test_fast_loader_serves_the_tutorial_pipelines_batches(cifar_data):
    kw = dict(batch_size=8, shuffle=True, seed=5, subset=100)
    tutorial = P.tutorial_loader(cifar_data, "train", num_workers=0, **kw)
    fast = P.FastLoader(cifar_data, "train", **kw)
    assert len(fast) == len(tutorial) == 13
    for _epoch in range(2):
        pairs = list(zip(tutorial, fast))
        assert len(pairs) == 13
        for (tx, ty), (fx, fy) in pairs:
            assert fx.dtype == torch.float32 and fy.dtype == torch.int64
            assert torch.equal(ty, fy)
            assert torch.allclose(fx, tx, rtol=0, atol=1e-6)
    # and on the test split, unshuffled, in order
    fast = P.FastLoader(cifar_data, "test", batch_size=1000, shuffle=False)
    x, y = next(iter(fast))
    assert torch.equal(y, torch.from_numpy(np.array(cifar_data.test_y[:1000])))
    assert torch.allclose(x, P.normalize(torch.from_numpy(np.array(cifar_data.test_x[:1000]))),
                          rtol=0, atol=1e-6)


def test_fast_loader_epochs(cifar_data):
    loader = P.FastLoader(cifar_data, "test", batch_size=64, device="cpu", seed=3)
    assert len(loader) == math.ceil(10_000 / 64) == 157
    orders = []
    for _ in range(2):
        sizes, labels = [], []
        for x, y in loader:
            assert x.shape[1:] == (3, 32, 32)
            sizes.append(len(y))
            labels.append(y)
        assert sizes == [64] * 156 + [10_000 - 156 * 64]            # last partial batch kept
        order = loader.last_epoch_indices
        assert np.array_equal(np.sort(order), np.arange(10_000))    # every image once
        assert torch.equal(torch.cat(labels), torch.from_numpy(cifar_data.test_y[order]))
        orders.append(order)
    assert not np.array_equal(orders[0], orders[1])                  # a new order each epoch
    same = P.FastLoader(cifar_data, "test", batch_size=64, seed=3)
    list(same)
    assert np.array_equal(same.last_epoch_indices, orders[0])        # same seed, same order
    other = P.FastLoader(cifar_data, "test", batch_size=64, seed=4)
    list(other)
    assert not np.array_equal(other.last_epoch_indices, orders[0])
    plain = P.FastLoader(cifar_data, "test", batch_size=64, shuffle=False)
    list(plain)
    assert np.array_equal(plain.last_epoch_indices, np.arange(10_000))


def test_fast_loader_subset(cifar_data):
    loader = P.FastLoader(cifar_data, "train", batch_size=7, subset=50, seed=9)
    subset = P.subset_indices(cifar_data.n_train, 50)
    assert np.array_equal(loader.indices, subset) and len(loader) == 8
    for _ in range(2):
        x = torch.cat([x for x, _ in loader])
        assert len(x) == 50
        assert np.array_equal(np.sort(loader.last_epoch_indices), subset)
    loader2 = P.FastLoader(cifar_data, "train", batch_size=7, subset=50, seed=10)
    assert np.array_equal(loader2.indices, subset)   # the same images for every training seed


def test_fast_loader_is_fast_on_cpu(cifar_data):
    """At batch 4 on CPU the loader is a small share of a training step, even a tiny model's.

    A ratio of two rates measured in one run, each per second of this thread's CPU time, so
    that a busy machine slows both alike (the rates themselves are printed, not asserted;
    measured here: loader 22,000–37,000 batches, 1,700 steps per CPU second, a ratio of 13–22).
    """
    loader = P.FastLoader(cifar_data, "train", batch_size=4, device="cpu", seed=0)
    model = torch.nn.Linear(3 * 32 * 32, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def rates(n, with_model):
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        for _, (x, y) in zip(range(n), loader):
            if with_model:
                opt.zero_grad()
                loss_fn(model(x.view(len(x), -1)), y).backward()
                opt.step()
        return n / (time.thread_time() - cpu0), n / (time.perf_counter() - wall0)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # batch 4: threads only add synchronisation; and all work is ours
    try:
        rates(200, True)  # warm up
        loader_cpu, loader_wall = max(rates(5000, False) for _ in range(3))
        steps_cpu, steps_wall = max(rates(2000, True) for _ in range(3))
    finally:
        torch.set_num_threads(threads)
    print(f"fast pipeline, batch 4, CPU: loader alone {loader_cpu:.0f} batches per CPU second "
          f"({loader_wall:.0f}/s wall); with a linear model {steps_cpu:.0f} steps per CPU "
          f"second ({steps_wall:.0f}/s wall)")
    assert loader_cpu > 5 * steps_cpu   # the loader at most a fifth of a step


def _labels_and_sums(loader):
    return [(y.tolist(), [round(float(v), 3) for v in x.sum(dim=(1, 2, 3))]) for x, y in loader]


def test_tutorial_loader_with_spawned_workers(cifar_data, monkeypatch):
    """Spawned workers get the data set by pickle: file references, reopened there."""
    kw = dict(batch_size=8, shuffle=True, seed=3, subset=64)
    monkeypatch.setattr(P, "WORKER_START", "spawn")   # the start method off Linux
    spawned = P.tutorial_loader(cifar_data, "train", num_workers=2, **kw)
    assert spawned.multiprocessing_context.get_start_method() == "spawn"
    in_process = P.tutorial_loader(cifar_data, "train", num_workers=0, **kw)
    assert _labels_and_sums(spawned) == _labels_and_sums(in_process)


@linux_fork
def test_tutorial_loader_when_this_process_was_started_with_spawn(cifar_data):
    """A process started with spawn has spawn as its default start method; the loader still
    forks its workers (no torch re-import) and serves the same batches."""
    before = multiprocessing.get_start_method()
    multiprocessing.set_start_method("spawn", force=True)
    try:
        loader = P.tutorial_loader(cifar_data, "train", 8, 2, True, 3, subset=64)
        assert loader.multiprocessing_context.get_start_method() == "fork"
        got = _labels_and_sums(loader)
    finally:
        multiprocessing.set_start_method(before, force=True)
    expected = _labels_and_sums(P.tutorial_loader(cifar_data, "train", 8, 0, True, 3, subset=64))
    assert got == expected
