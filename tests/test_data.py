"""cifarlab.core.data on real data: the offline CIFAR-10 archive, tiny image folders built here, a
fake copy of torchvision's own CIFAR-10 files; the decode-once cache; both input pipelines."""
import hashlib
import json
import math
import multiprocessing
import os
import pickle
import shutil
import signal
import sys
import tarfile
import time
import types
import urllib.error

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image

from cifarlab.core import data as D
from cifarlab.errors import DataError

CIFAR_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                 "ship", "truck")
README_MEAN = (0.4913, 0.4821, 0.4465)     # ../shared/data/README.md, train split
TUTORIAL = D.tutorial_transform()
linux_fork = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses fork")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """These tests check values, not speed: one intra-op thread keeps them quick when other
    processes crowd the cores (spinning thread pools slow small ops down many times)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_tar(folder, dest, prefix="tiny", mode="w:gz"):
    with tarfile.open(dest, mode) as tf:
        tf.add(folder, arcname=prefix)
    return dest


def load_fresh(source, cache, **kw):
    """load() as a new process would: nothing remembered in memory."""
    D.clear_memory_cache()
    return D.load(str(source), cache_dir=cache, **kw)


def same_arrays(a, b):
    return (a.classes == b.classes and np.array_equal(a.train_x, b.train_x)
            and np.array_equal(a.train_y, b.train_y) and np.array_equal(a.test_x, b.test_x)
            and np.array_equal(a.test_y, b.test_y))


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
    ds = D.tutorial_dataset(cifar_data, "train")
    for i, (_, pil) in enumerate(first):
        hwc = np.asarray(pil)
        assert np.array_equal(cifar_data.train_x[i], hwc.transpose(2, 0, 1))
        assert np.array_equal(cifar_data.image("train", i), hwc)
        img, label = ds[i]
        assert label == 0 and isinstance(label, int)
        assert torch.equal(img, TUTORIAL(pil))  # the tutorial's own transform, bit for bit


def test_second_load_reads_the_cache_fast_as_memmaps(cifar_archive, cifar_cache_dir, cifar_data):
    assert D.is_cached(str(cifar_archive), cifar_cache_dir)
    t0 = time.perf_counter()
    again = load_fresh(cifar_archive, cifar_cache_dir)
    seconds = time.perf_counter() - t0
    print(f"warm cache load: {seconds * 1000:.0f} ms")
    assert seconds < 1.0
    assert again is not cifar_data and again.key == cifar_data.key
    for name in ("train_x", "train_y", "test_x", "test_y"):
        assert isinstance(getattr(again, name), np.memmap)
    assert np.array_equal(again.test_x, cifar_data.test_x)
    assert np.array_equal(again.train_y, cifar_data.train_y)
    # within one process: the same object, cheaply
    t0 = time.perf_counter()
    assert D.load(str(cifar_archive), cache_dir=cifar_cache_dir) is again
    assert time.perf_counter() - t0 < 0.05
    meta = json.loads((cifar_cache_dir / "datasets" / again.key / "meta.json").read_text())
    assert meta["complete"] is True
    print(f"decode time when the cache was built: {meta['decode_seconds']:.1f} s")


def test_cifar_data_and_dataset_pickle_as_file_references(cifar_data):
    blob = pickle.dumps(cifar_data)
    assert len(blob) < 10_000  # not 180 MB of pixels
    back = pickle.loads(blob)
    assert isinstance(back.train_x, np.memmap) and back.classes == cifar_data.classes
    assert np.array_equal(back.train_x[12345], cifar_data.train_x[12345])
    ds = D.tutorial_dataset(cifar_data, "test")
    blob = pickle.dumps(ds)  # what a spawned DataLoader worker receives
    assert len(blob) < 10_000
    ds2 = pickle.loads(blob)
    assert len(ds2) == 10_000 and ds2.classes == list(CIFAR_CLASSES)
    for i in (0, 4321, 9999):
        assert torch.equal(ds2[i][0], ds[i][0]) and ds2[i][1] == ds[i][1]


# --------------------------------------------------------------------------------------------
# Image folders and archives (tiny, built here)
# --------------------------------------------------------------------------------------------
def test_tiny_folder_loads_like_imagefolder(tiny_folder, tmp_path):
    messages = []
    d = D.load(str(tiny_folder), cache_dir=tmp_path / "cache", on_progress=messages.append)
    assert d.classes == ("cat", "dog", "frog")
    assert (d.n_train, d.n_test) == (14, 7)
    assert d.class_counts("train") == {"cat": 5, "dog": 5, "frog": 4}
    assert d.class_counts("test") == {"cat": 2, "dog": 2, "frog": 3}
    assert d.key.startswith("folder-") and str(tiny_folder) in d.source
    ours = D.tutorial_dataset(d, "train")
    tv = torchvision.datasets.ImageFolder(str(tiny_folder / "train"), transform=TUTORIAL)
    assert tv.classes == list(d.classes)
    compared = 0
    for i, (path, label) in enumerate(tv.samples):
        assert ours[i][1] == label == int(d.train_y[i])
        with Image.open(path) as im:
            plain = im.mode == "RGB" and im.size == (32, 32)
        if plain:  # ImageFolder only converts the mode; ours also resizes to 32×32
            assert torch.equal(ours[i][0], tv[i][0])
            compared += 1
    assert compared == 12


def test_odd_images_are_converted_and_reported(tiny_folder, tmp_path, caplog):
    messages = []
    with caplog.at_level("WARNING", logger="cifarlab.core.data"):
        d = D.load(str(tiny_folder), cache_dir=tmp_path / "cache", on_progress=messages.append)
    note = ("3 image(s) were not 32×32 RGB and were converted (1 resized to 32×32, 2 converted "
            "to RGB).")
    assert note in d.notes
    assert any(m.startswith("Warning:") and "3 image(s)" in m for m in messages)
    assert any("3 image(s)" in r.getMessage() for r in caplog.records)
    with Image.open(tiny_folder / "train/cat/c_big.png") as im:
        big = np.asarray(im.convert("RGB").resize((32, 32), Image.Resampling.BICUBIC))
    assert np.array_equal(d.image("train", 4), big)           # cat: c0..c3, c_big
    with Image.open(tiny_folder / "train/dog/d_gray.png") as im:
        gray = np.asarray(im)
    assert np.array_equal(d.train_x[9], np.stack([gray] * 3))  # dog: d0..d3, d_gray
    with Image.open(tiny_folder / "test/frog/f_rgba.png") as im:
        rgb = np.asarray(im)[..., :3]
    assert np.array_equal(d.image("test", 6), rgb)             # test: 2 cat, 2 dog, f0 f1 f_rgba
    # the notes survive the cache
    assert load_fresh(tiny_folder, tmp_path / "cache").notes == d.notes


@pytest.mark.parametrize("name,mode,prefix", [("tiny.tar.gz", "w:gz", "tiny"),
                                              ("flat.tgz", "w:gz", "."),
                                              ("plain.tar", "w", "data")])
def test_folder_and_archive_give_identical_arrays(tiny_folder, tmp_path, name, mode, prefix):
    cache = tmp_path / "cache"
    from_folder = D.load(str(tiny_folder), cache_dir=cache)
    archive = make_tar(tiny_folder, tmp_path / name, prefix=prefix, mode=mode)
    from_archive = D.load(str(archive), cache_dir=cache)
    assert same_arrays(from_folder, from_archive)
    assert from_archive.notes == from_folder.notes
    assert from_archive.key != from_folder.key and from_archive.key.startswith("archive-")


def test_archive_extras_are_ignored_but_two_data_sets_are_an_error(tiny_folder, tmp_path):
    (tiny_folder / "README.txt").write_text("about this data")
    (tiny_folder / "docs/test").mkdir(parents=True)
    (tiny_folder / "docs/test/notes.txt").write_text("not an image")
    (tiny_folder / "train/cat/labels.csv").write_text("a,b")
    archive = make_tar(tiny_folder, tmp_path / "extras.tar.gz")
    d = D.load(str(archive), cache_dir=tmp_path / "cache")
    assert d.n_train == 14 and "3 file(s) that are not images were ignored." in d.notes
    two = tmp_path / "two.tar.gz"
    with tarfile.open(two, "w:gz") as tf:
        tf.add(tiny_folder, arcname="first")
        tf.add(tiny_folder, arcname="second")
    msg = _error(two, tmp_path / "cache")
    assert "more than one data set" in msg and "first/" in msg and "second/" in msg


def test_a_folder_whose_only_subfolder_holds_the_data(tiny_folder, tmp_path):
    outer = tmp_path / "outer"
    outer.mkdir()
    shutil.copytree(tiny_folder, outer / "cifar")
    d = D.load(str(outer), cache_dir=tmp_path / "cache")
    assert d.n_train == 14 and str(outer / "cifar") in d.source


def test_cache_key_follows_the_archive_content(tiny_folder, tmp_path):
    cache = tmp_path / "cache"
    archive = make_tar(tiny_folder, tmp_path / "tiny.tar.gz")
    first = load_fresh(archive, cache)
    assert load_fresh(archive, cache).key == first.key  # stable while nothing changes
    st = os.stat(archive)
    # change one image, rebuild the archive and give it back its old modification time
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(tiny_folder / "train/cat/c0.png")
    make_tar(tiny_folder, archive)
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = load_fresh(archive, cache)
    assert second.key != first.key
    assert not second.train_x[0].any() and first.train_x[0].any()
    assert np.array_equal(second.train_x[1:], first.train_x[1:])
    # a folder's key follows its listing too
    f1 = load_fresh(tiny_folder, cache)
    (tiny_folder / "test/cat/c9.png").write_bytes((tiny_folder / "test/cat/c0.png").read_bytes())
    f2 = load_fresh(tiny_folder, cache)
    assert f2.key != f1.key and f2.n_test == f1.n_test + 1


@linux_fork
def test_parallel_decoding_in_small_chunks_gives_the_same_arrays(tiny_folder, tmp_path,
                                                                 monkeypatch):
    serial = D.load(str(tiny_folder), cache_dir=tmp_path / "serial")
    archive = make_tar(tiny_folder, tmp_path / "tiny.tar.gz")
    monkeypatch.setattr(D, "_CHUNK", 4)          # chunks that straddle classes and splits
    monkeypatch.setattr(D, "_MIN_PARALLEL", 1)   # and worker processes even for 21 images
    monkeypatch.setenv("CIFARLAB_DECODE_WORKERS", "2")
    for source in (tiny_folder, archive):
        parallel = load_fresh(source, tmp_path / "parallel")
        assert same_arrays(serial, parallel) and parallel.notes == serial.notes
    (tiny_folder / "test/dog/d1.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated jpeg")
    assert "test/dog/d1.jpg" in _error(tiny_folder, tmp_path / "parallel")


# --------------------------------------------------------------------------------------------
# The cache: completion marker, killed writers, concurrent first uses
# --------------------------------------------------------------------------------------------
def test_cache_without_completion_marker_is_ignored_and_rebuilt(tiny_folder, tmp_path):
    cache = tmp_path / "cache"
    good = load_fresh(tiny_folder, cache)
    final = cache / "datasets" / good.key
    (final / "meta.json").unlink()
    assert not D.is_cached(str(tiny_folder), cache)
    rebuilt = load_fresh(tiny_folder, cache)
    assert same_arrays(good, rebuilt) and D.is_cached(str(tiny_folder), cache)
    # a marker that says incomplete, beside a torn array file, is not trusted either
    meta = json.loads((final / "meta.json").read_text())
    (final / "meta.json").write_text(json.dumps(dict(meta, complete=False)))
    with open(final / "train_x.npy", "r+b") as f:
        f.truncate(200)
    assert not D.is_cached(str(tiny_folder), cache)
    assert same_arrays(good, load_fresh(tiny_folder, cache))
    # nor a marker that is there but whose arrays are torn
    with open(final / "test_x.npy", "r+b") as f:
        f.truncate(300)
    assert not D.is_cached(str(tiny_folder), cache)
    assert same_arrays(good, load_fresh(tiny_folder, cache))


def _killed_while_writing(source, cache):
    """Runs in a forked child: dies (SIGKILL) just before writing the completion marker."""
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    D.json = types.SimpleNamespace(dump=die, dumps=json.dumps, loads=json.loads)
    D.clear_memory_cache()
    D.load(source, cache_dir=cache)


@linux_fork
def test_a_writer_killed_before_the_marker_leaves_nothing_valid(tiny_folder, tmp_path):
    cache = tmp_path / "cache"
    child = multiprocessing.get_context("fork").Process(
        target=_killed_while_writing, args=(str(tiny_folder), cache))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    datasets = cache / "datasets"
    leftovers = [p for p in datasets.iterdir() if p.name.startswith(".tmp-")]
    assert leftovers and (leftovers[0] / "train_x.npy").exists()
    assert not (leftovers[0] / "meta.json").exists()
    assert not D.is_cached(str(tiny_folder), cache)
    d = load_fresh(tiny_folder, cache)
    assert d.n_train == 14 and D.is_cached(str(tiny_folder), cache)
    assert not [p for p in datasets.iterdir() if p.name.startswith(".")]


def _load_digest(source, cache, queue):
    D.clear_memory_cache()
    d = D.load(source, cache_dir=cache)
    queue.put((d.key, hashlib.sha256(np.ascontiguousarray(d.train_x).tobytes()
                                     + np.ascontiguousarray(d.test_y).tobytes()).hexdigest()))


@linux_fork
def test_concurrent_first_uses_agree_and_leave_one_cache(tiny_folder, tmp_path):
    cache = tmp_path / "cache"
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_load_digest, args=(str(tiny_folder), cache, queue))
             for _ in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert len(set(results)) == 1
    key = results[0][0]
    entries = sorted(p.name for p in (cache / "datasets").iterdir())
    assert entries == [key, f"{key}.lock"]
    assert load_fresh(tiny_folder, cache).key == key


# --------------------------------------------------------------------------------------------
# Errors a student can read
# --------------------------------------------------------------------------------------------
def _error(source, cache):
    D.clear_memory_cache()
    with pytest.raises(DataError) as info:
        D.load(str(source), cache_dir=cache)
    return str(info.value)


def test_error_missing_path(tmp_path):
    msg = _error(tmp_path / "nowhere", tmp_path / "cache")
    assert "does not exist" in msg and str(tmp_path / "nowhere") in msg
    assert "train/<class>/" in msg and "CIFARLAB_DATA" in msg


def test_error_corrupt_and_truncated_archives(tiny_folder, tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(np.random.default_rng(0).integers(0, 256, 5000, np.uint8).tobytes())
    msg = _error(junk, tmp_path / "cache")
    assert "corrupt" in msg and str(junk) in msg
    good = make_tar(tiny_folder, tmp_path / "good.tar.gz").read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good[: len(good) // 2])
    assert "corrupt" in _error(cut, tmp_path / "cache")
    other = tmp_path / "data.zip"
    other.write_bytes(b"PK\x03\x04")
    assert ".tar.gz" in _error(other, tmp_path / "cache")


def test_error_folder_or_archive_without_train_and_test(tmp_path):
    folder = tmp_path / "photos"
    (folder / "cats").mkdir(parents=True)
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(folder / "cats/a.png")
    msg = _error(folder, tmp_path / "cache")
    assert "no train/ and test/" in msg
    assert "train/cat/0001.png" in msg and "CIFARLAB_DATA" in msg and "--data" in msg
    archive = make_tar(folder, tmp_path / "photos.tar.gz", prefix="photos")
    msg = _error(archive, tmp_path / "cache")
    assert "train/<class>/" in msg and "CIFARLAB_DATA" in msg
    # images straight in train/ and test/, no class folders
    flat = tmp_path / "flat"
    for split in ("train", "test"):
        (flat / split).mkdir(parents=True)
        Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(flat / split / "a.png")
    msg = _error(make_tar(flat, tmp_path / "flat.tar.gz", prefix="flat"), tmp_path / "cache")
    assert "directly in train/ or test/" in msg and "one subfolder per class" in msg


def test_error_train_and_test_classes_differ(tiny_folder, tmp_path):
    shutil.rmtree(tiny_folder / "test/frog")
    msg = _error(tiny_folder, tmp_path / "cache")
    assert "different classes" in msg and "only in train: frog" in msg
    archive = make_tar(tiny_folder, tmp_path / "tiny.tar.gz")
    assert "only in train: frog" in _error(archive, tmp_path / "cache")


def test_error_empty_class_folder(tiny_folder, tmp_path):
    for split in ("train", "test"):
        (tiny_folder / split / "zebra").mkdir()
    msg = _error(tiny_folder, tmp_path / "cache")
    assert "train/zebra/" in msg and "holds no images" in msg
    archive = make_tar(tiny_folder, tmp_path / "tiny.tar.gz")
    assert "train/zebra/" in _error(archive, tmp_path / "cache")


def test_error_cache_folder_not_writable(tiny_folder, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    msg = _error(tiny_folder, blocker)
    assert "CIFARLAB_CACHE" in msg and str(blocker) in msg


def test_error_unreadable_image_is_named(tiny_folder, tmp_path):
    (tiny_folder / "train/dog/d2.png").write_bytes(b"\x89PNG\r\n\x1a\n this is not a png")
    msg = _error(tiny_folder, tmp_path / "cache")
    assert "train/dog/d2.png" in msg and "Remove or replace" in msg
    archive = make_tar(tiny_folder, tmp_path / "tiny.tar.gz")
    assert "tiny/train/dog/d2.png" in _error(archive, tmp_path / "cache")


# --------------------------------------------------------------------------------------------
# Choosing the source
# --------------------------------------------------------------------------------------------
def test_resolve_source_precedence(tiny_folder, tmp_path, monkeypatch):
    monkeypatch.delenv("CIFARLAB_DATA", raising=False)
    assert D.resolve_source() == "download"
    for word in ("download", "cifar10", "torchvision", " TorchVision "):
        assert D.resolve_source(word) == "download"
    monkeypatch.setenv("CIFARLAB_DATA", str(tiny_folder))
    assert D.resolve_source() == str(tiny_folder)
    assert D.resolve_source("download") == "download"         # the explicit argument wins
    other = tmp_path / "other.tar.gz"
    assert D.resolve_source(str(other)) == str(other)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert D.resolve_source("~/x.tgz") == str(tmp_path / "x.tgz")
    monkeypatch.chdir(tmp_path)
    assert D.resolve_source("rel/data") == str(tmp_path / "rel/data")
    monkeypatch.setenv("CIFARLAB_DATA", "")
    assert D.resolve_source() == "download"


def test_load_honours_the_env_var_and_the_argument_wins(tiny_folder, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CIFARLAB_DATA", str(tiny_folder))
    from_env = D.load(cache_dir=cache)
    assert from_env.key.startswith("folder-") and from_env.n_train == 14
    archive = make_tar(tiny_folder, tmp_path / "tiny.tar.gz")
    assert D.load(str(archive), cache_dir=cache).key.startswith("archive-")
    monkeypatch.setenv("CIFARLAB_DATA", str(tmp_path / "missing"))
    with pytest.raises(DataError, match="set in CIFARLAB_DATA"):
        D.load(cache_dir=cache)
    monkeypatch.setenv("CIFARLAB_CACHE", str(cache))
    assert D.load(str(archive)).key.startswith("archive-")     # $CIFARLAB_CACHE is the default


def test_describe_source_and_is_cached(tiny_folder, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CIFARLAB_DATA", str(tiny_folder))
    text = D.describe_source(cache_dir=cache)
    assert str(tiny_folder) in text and "CIFARLAB_DATA" in text and "not decoded yet" in text
    assert not D.is_cached(cache_dir=cache)
    D.load(cache_dir=cache)
    assert D.is_cached(cache_dir=cache)
    assert "decoded and cached" in D.describe_source(cache_dir=cache)
    archive = make_tar(tiny_folder, tmp_path / "t.tar.gz")
    assert "MB" in D.describe_source(str(archive), cache_dir=cache)
    assert "does not exist" in D.describe_source(str(tmp_path / "gone"), cache_dir=cache)
    assert not D.is_cached(str(tmp_path / "gone"), cache_dir=cache)
    monkeypatch.delenv("CIFARLAB_DATA")
    text = D.describe_source(cache_dir=cache)
    assert "torchvision" in text and "internet" in text


# --------------------------------------------------------------------------------------------
# The canonical source: torchvision's CIFAR10
# --------------------------------------------------------------------------------------------
SHORT_NAMES = ["plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def _write_fake_torchvision_cifar(root, rng):
    """torchvision's own format: pickled dicts, rows of 3072 bytes (R plane, G, B), labels."""
    base = root / "cifar-10-batches-py"
    base.mkdir(parents=True)
    train_x = rng.integers(0, 256, (10, 3, 32, 32), dtype=np.uint8)
    train_y = [int(v) for v in rng.integers(0, 10, 10)]
    for k in range(5):
        part = slice(2 * k, 2 * k + 2)
        with open(base / f"data_batch_{k + 1}", "wb") as f:
            pickle.dump({"batch_label": f"training batch {k + 1} of 5",
                         "data": train_x[part].reshape(2, 3072), "labels": train_y[part],
                         "filenames": [f"img{i}.png" for i in range(2)]}, f)
    test_x = rng.integers(0, 256, (3, 3, 32, 32), dtype=np.uint8)
    test_y = [7, 0, 3]
    with open(base / "test_batch", "wb") as f:
        pickle.dump({"batch_label": "testing batch 1 of 1", "data": test_x.reshape(3, 3072),
                     "labels": test_y}, f)
    with open(base / "batches.meta", "wb") as f:
        pickle.dump({"label_names": SHORT_NAMES, "num_cases_per_batch": 2, "num_vis": 3072}, f)
    return train_x, train_y, test_x, test_y


def test_canonical_source_reads_torchvision_cifar10(tmp_path, monkeypatch):
    from torchvision.datasets import CIFAR10, cifar

    cache = tmp_path / "cache"
    train_x, train_y, test_x, test_y = _write_fake_torchvision_cifar(
        cache / "torchvision", np.random.default_rng(5))
    calls = []
    monkeypatch.setattr(CIFAR10, "_check_integrity", lambda self: True)  # md5s can't match
    monkeypatch.setattr(cifar, "check_integrity", lambda *a, **k: True)
    monkeypatch.setattr(CIFAR10, "download", lambda self: calls.append(self.root))
    monkeypatch.delenv("CIFARLAB_DATA", raising=False)
    D.clear_memory_cache()
    d = D.load(cache_dir=cache)
    assert calls == [str(cache / "torchvision")] * 2  # download=True, for train and test
    assert d.key == "torchvision-cifar10" and "torchvision" in d.source
    assert d.classes == tuple(SHORT_NAMES)
    assert np.array_equal(d.train_x, train_x) and np.array_equal(d.test_x, test_x)
    assert d.train_y.tolist() == train_y and d.test_y.tolist() == test_y
    # the same pixels torchvision hands the tutorial (HWC), and the tutorial item
    tv = CIFAR10(str(cache / "torchvision"), train=True, download=True)
    assert np.array_equal(d.image("train", 3), tv.data[3])
    assert torch.equal(D.tutorial_dataset(d, "train")[3][0], TUTORIAL(Image.fromarray(tv.data[3])))
    # later loads never touch torchvision
    monkeypatch.setattr(CIFAR10, "__init__", lambda *a, **k: pytest.fail("not cached"))
    again = load_fresh("cifar10", cache)
    assert same_arrays(d, again) and isinstance(again.train_x, np.memmap)


def test_canonical_source_without_internet_says_what_to_do(tmp_path, monkeypatch):
    from torchvision.datasets import CIFAR10

    def offline(self):
        raise urllib.error.URLError(OSError(-3, "Temporary failure in name resolution"))

    monkeypatch.setattr(CIFAR10, "download", offline)
    msg = _error("download", tmp_path / "cache")
    assert "No internet?" in msg and "CIFARLAB_DATA" in msg and "train/<class>/" in msg
    assert not D.is_cached("download", tmp_path / "cache")


# --------------------------------------------------------------------------------------------
# Pipelines
# --------------------------------------------------------------------------------------------
def test_subset_indices_are_fixed_sorted_and_checked():
    a = D.subset_indices(50_000, 1000)
    assert np.array_equal(a, D.subset_indices(50_000, 1000))
    assert a.dtype == np.int64 and len(np.unique(a)) == 1000 and np.all(np.diff(a) > 0)
    assert a.min() >= 0 and a.max() < 50_000
    assert not np.array_equal(a, D.subset_indices(50_000, 1000, seed=1))
    assert np.array_equal(D.subset_indices(10, 10), np.arange(10))
    with pytest.raises(DataError):
        D.subset_indices(10, 11)
    with pytest.raises(DataError):
        D.subset_indices(10, 0)


def test_normalize_is_the_tutorial_transform(cifar_data):
    idx = [0, 1, 777, 25_000, 49_999]
    for i in idx:
        pil = Image.fromarray(cifar_data.image("train", i))
        assert torch.equal(D.normalize(torch.from_numpy(np.array(cifar_data.train_x[i]))),
                           TUTORIAL(pil))
    # the fast loader's two-op form, on every byte value
    values = torch.arange(256, dtype=torch.uint8).reshape(1, 1, 16, 16).expand(1, 3, 16, 16)
    fast = values.float().mul_(2.0 / 255.0).sub_(1.0)
    assert torch.allclose(fast, D.normalize(values), rtol=0, atol=1e-6)


def test_tutorial_loader_with_two_workers(cifar_data):
    loader = D.tutorial_loader(cifar_data, "train", batch_size=4, num_workers=2, shuffle=True,
                               seed=11, subset=42)
    assert len(loader) == 11 and loader.num_workers == 2
    first = [(x.clone(), y.clone()) for x, y in loader]
    assert [tuple(x.shape) for x, _ in first] == [(4, 3, 32, 32)] * 10 + [(2, 3, 32, 32)]
    assert all(x.dtype == torch.float32 and y.dtype == torch.int64 for x, y in first)
    assert all(-1.0 <= float(x.min()) and float(x.max()) <= 1.0 for x, _ in first)
    second_epoch = [y for _, y in loader]
    again = D.tutorial_loader(cifar_data, "train", 4, 2, True, 11, subset=42)
    repeat = [(x, y) for x, y in again]
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
               for a, b in zip(first, repeat))                      # same seed: same order
    assert not all(torch.equal(a[1], b) for a, b in zip(first, second_epoch))  # new epoch
    subset = D.subset_indices(cifar_data.n_train, 42)
    labels = sorted(torch.cat([y for _, y in first]).tolist())
    assert labels == sorted(cifar_data.train_y[subset].tolist())


def test_fast_loader_serves_the_tutorial_pipelines_batches(cifar_data):
    kw = dict(batch_size=8, shuffle=True, seed=5, subset=100)
    tutorial = D.tutorial_loader(cifar_data, "train", num_workers=0, **kw)
    fast = D.FastLoader(cifar_data, "train", **kw)
    assert len(fast) == len(tutorial) == 13
    for epoch in range(2):
        pairs = list(zip(tutorial, fast))
        assert len(pairs) == 13
        for (tx, ty), (fx, fy) in pairs:
            assert fx.dtype == torch.float32 and fy.dtype == torch.int64
            assert torch.equal(ty, fy)
            assert torch.allclose(fx, tx, rtol=0, atol=1e-6)
    # and on the test split, unshuffled, in order
    fast = D.FastLoader(cifar_data, "test", batch_size=1000, shuffle=False)
    x, y = next(iter(fast))
    assert torch.equal(y, torch.from_numpy(np.array(cifar_data.test_y[:1000])))
    assert torch.allclose(x, D.normalize(torch.from_numpy(np.array(cifar_data.test_x[:1000]))),
                          rtol=0, atol=1e-6)


def test_fast_loader_epochs(cifar_data):
    loader = D.FastLoader(cifar_data, "test", batch_size=64, device="cpu", seed=3)
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
    same = D.FastLoader(cifar_data, "test", batch_size=64, seed=3)
    list(same)
    assert np.array_equal(same.last_epoch_indices, orders[0])        # same seed, same order
    other = D.FastLoader(cifar_data, "test", batch_size=64, seed=4)
    list(other)
    assert not np.array_equal(other.last_epoch_indices, orders[0])
    plain = D.FastLoader(cifar_data, "test", batch_size=64, shuffle=False, resident=False)
    list(plain)
    assert np.array_equal(plain.last_epoch_indices, np.arange(10_000))


def test_fast_loader_subset(cifar_data):
    loader = D.FastLoader(cifar_data, "train", batch_size=7, subset=50, seed=9)
    subset = D.subset_indices(cifar_data.n_train, 50)
    assert np.array_equal(loader.indices, subset) and len(loader) == 8
    for _ in range(2):
        x = torch.cat([x for x, _ in loader])
        assert len(x) == 50
        assert np.array_equal(np.sort(loader.last_epoch_indices), subset)
    loader2 = D.FastLoader(cifar_data, "train", batch_size=7, subset=50, seed=10)
    assert np.array_equal(loader2.indices, subset)   # the same images for every training seed


def test_fast_loader_is_fast_on_cpu(cifar_data):
    """>1000 steps/s at batch 4 with a tiny model on CPU, the loader taking a small share.

    Counted per second of this thread's CPU time, so that other processes busy on the same
    cores do not fail it; wall-clock rates are printed beside them.
    """
    loader = D.FastLoader(cifar_data, "train", batch_size=4, device="cpu", seed=0)
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
    assert loader_cpu > 5000
    assert steps_cpu > 1000


def _labels_and_sums(loader):
    return [(y.tolist(), [round(float(v), 3) for v in x.sum(dim=(1, 2, 3))]) for x, y in loader]


def test_tutorial_loader_with_spawned_workers(cifar_data):
    """Spawned workers get the data set by pickle: file references, reopened there."""
    kw = dict(batch_size=8, shuffle=True, seed=3, subset=64)
    spawned = D.tutorial_loader(cifar_data, "train", num_workers=2,
                                multiprocessing_context="spawn", **kw)
    assert spawned.multiprocessing_context.get_start_method() == "spawn"
    in_process = D.tutorial_loader(cifar_data, "train", num_workers=0, **kw)
    assert _labels_and_sums(spawned) == _labels_and_sums(in_process)


@linux_fork
def test_tutorial_loader_when_this_process_was_started_with_spawn(cifar_data):
    """A process started with spawn has spawn as its default start method; the loader still
    forks its workers (no torch re-import) and serves the same batches."""
    before = multiprocessing.get_start_method()
    multiprocessing.set_start_method("spawn", force=True)
    try:
        loader = D.tutorial_loader(cifar_data, "train", 8, 2, True, 3, subset=64)
        assert loader.multiprocessing_context.get_start_method() == "fork"
        got = _labels_and_sums(loader)
    finally:
        multiprocessing.set_start_method(before, force=True)
    expected = _labels_and_sums(D.tutorial_loader(cifar_data, "train", 8, 0, True, 3, subset=64))
    assert got == expected
