"""cifarlab.core.data's sources: tiny image folders and archives built here, a fake copy of
torchvision's own CIFAR-10 files, choosing the source, and the errors a student (or the host)
reads when the data is not right."""
import os
import pickle
import shutil
import tarfile
import urllib.error

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image

from cifarlab.core import data as D
from cifarlab.core.data import pipelines as P
from cifarlab.core.data import decode
from cifarlab.core.data import sources
from cifarlab.errors import DataError
from data_support import error as _error
from data_support import linux_fork, load_fresh, make_tar, same_arrays

TUTORIAL = P.tutorial_transform()


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
    ours = P.tutorial_dataset(d, "train")
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
    note = "3 image(s) were not 32×32 RGB and were converted."
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


def test_class_folders_that_are_links_are_followed(tiny_folder, tmp_path):
    linked = tmp_path / "linked"
    for split in ("train", "test"):
        (linked / split).mkdir(parents=True)
        for cls in ("cat", "dog", "frog"):
            (linked / split / cls).symlink_to(tiny_folder / split / cls)
    (linked / "train" / "notes.txt").write_text("not an image")
    via_links = D.load(str(linked), cache_dir=tmp_path / "cache")
    direct = D.load(str(tiny_folder), cache_dir=tmp_path / "cache")
    assert same_arrays(via_links, direct) and via_links.classes == direct.classes
    assert "1 file(s) that are not images were ignored." in via_links.notes
    # the cache key follows the images behind the links too
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(tiny_folder / "train/cat/c0.png")
    changed = load_fresh(linked, tmp_path / "cache")
    assert changed.key != via_links.key and not changed.train_x[0].any()


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
    monkeypatch.setattr(decode, "_CHUNK", 4)          # chunks that straddle classes and splits
    monkeypatch.setattr(decode, "_MIN_PARALLEL", 1)   # and worker processes even for 21 images
    monkeypatch.setenv("CIFARLAB_DECODE_WORKERS", "2")
    for source in (tiny_folder, archive):
        parallel = load_fresh(source, tmp_path / "parallel")
        assert same_arrays(serial, parallel) and parallel.notes == serial.notes
    (tiny_folder / "test/dog/d1.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated jpeg")
    assert "test/dog/d1.jpg" in _error(tiny_folder, tmp_path / "parallel")


# --------------------------------------------------------------------------------------------
# Errors a student can read
# --------------------------------------------------------------------------------------------
def test_error_missing_path(tmp_path):
    msg = _error(tmp_path / "nowhere", tmp_path / "cache")
    assert "does not exist" in msg and str(tmp_path / "nowhere") in msg
    assert "train/<class>/" in msg and "--data" in msg and "CIFARLAB" not in msg
    es = _error(tmp_path / "nowhere", tmp_path / "cache", lang="es")
    assert "no existe" in es and str(tmp_path / "nowhere") in es and "train/<clase>/" in es


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
    assert "train/cat/0001.png" in msg and "--data" in msg and "CIFARLAB" not in msg
    assert "set it to download" in msg   # torchvision's own files: the canonical source
    archive = make_tar(folder, tmp_path / "photos.tar.gz", prefix="photos")
    msg = _error(archive, tmp_path / "cache")
    assert "train/<class>/" in msg and str(archive) in msg and "CIFARLAB" not in msg
    # images straight in train/ and test/, no class folders
    flat = tmp_path / "flat"
    for split in ("train", "test"):
        (flat / split).mkdir(parents=True)
        Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(flat / split / "a.png")
    msg = _error(make_tar(flat, tmp_path / "flat.tar.gz", prefix="flat"), tmp_path / "cache")
    assert "directly in train/ or test/" in msg and "one subfolder per class" in msg
    assert "Found 2 images" in msg
    pt = _error(tmp_path / "flat.tar.gz", tmp_path / "cache", lang="pt")
    assert "Há 2 imagens diretamente em train/ ou test/" in pt


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
    assert "cache folder" in msg and str(blocker) in msg and "CIFARLAB" not in msg


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
    assert sources.source(None, check=False).path == "download"
    for word in ("download", "cifar10", "torchvision", " TorchVision "):
        assert sources.source(word, check=False).path == "download"
    monkeypatch.setenv("CIFARLAB_DATA", str(tiny_folder))
    assert sources.source(None, check=False).path == str(tiny_folder)
    assert sources.source("download", check=False).path == "download"   # the explicit argument wins
    other = tmp_path / "other.tar.gz"
    assert sources.source(str(other), check=False).path == str(other)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert sources.source("~/x.tgz", check=False).path == str(tmp_path / "x.tgz")
    monkeypatch.chdir(tmp_path)
    assert sources.source("rel/data", check=False).path == str(tmp_path / "rel/data")
    monkeypatch.setenv("CIFARLAB_DATA", "")
    assert sources.source(None, check=False).path == "download"


def test_load_honours_the_env_var_and_the_argument_wins(tiny_folder, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CIFARLAB_DATA", str(tiny_folder))
    from_env = D.load(cache_dir=cache)
    assert from_env.key.startswith("folder-") and from_env.n_train == 14
    archive = make_tar(tiny_folder, tmp_path / "tiny.tar.gz")
    assert D.load(str(archive), cache_dir=cache).key.startswith("archive-")
    monkeypatch.setenv("CIFARLAB_DATA", str(tmp_path / "missing"))
    with pytest.raises(DataError, match="set in the server's settings, does not exist") as info:
        D.load(cache_dir=cache)
    assert str(tmp_path / "missing") in str(info.value) and "CIFARLAB" not in str(info.value)
    monkeypatch.setenv("CIFARLAB_CACHE", str(cache))
    assert D.load(str(archive)).key.startswith("archive-")     # $CIFARLAB_CACHE is the default


def test_source_facts_and_is_cached(tiny_folder, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("CIFARLAB_DATA", str(tiny_folder))
    facts = D.source_facts(cache_dir=cache)
    assert facts["kind"] == "folder" and facts["name"] == tiny_folder.name
    assert not facts["cached"] and not D.is_cached(cache_dir=cache)
    D.load(cache_dir=cache)
    assert D.is_cached(cache_dir=cache) and D.source_facts(cache_dir=cache)["cached"]
    archive = make_tar(tiny_folder, tmp_path / "t.tar.gz")
    facts = D.source_facts(str(archive), cache_dir=cache)
    assert facts["kind"] == "archive" and facts["name"] == "t.tar.gz" and facts["size_mb"] > 0
    gone = D.source_facts(str(tmp_path / "gone"), cache_dir=cache)
    assert gone["kind"] == "missing" and gone["name"] == "gone" and not gone["exists"]
    assert not D.is_cached(str(tmp_path / "gone"), cache_dir=cache)
    monkeypatch.delenv("CIFARLAB_DATA")
    assert D.source_facts(cache_dir=cache)["kind"] == "canonical"


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
    d = D.load(cache_dir=cache)
    assert calls == [str(cache / "torchvision")] * 2  # download=True, for train and test
    assert d.key == "torchvision-cifar10" and "torchvision" in d.source
    assert d.classes == tuple(SHORT_NAMES)
    assert np.array_equal(d.train_x, train_x) and np.array_equal(d.test_x, test_x)
    assert d.train_y.tolist() == train_y and d.test_y.tolist() == test_y
    # the same pixels torchvision hands the tutorial (HWC), and the tutorial item
    tv = CIFAR10(str(cache / "torchvision"), train=True, download=True)
    assert np.array_equal(d.image("train", 3), tv.data[3])
    assert torch.equal(P.tutorial_dataset(d, "train")[3][0], TUTORIAL(Image.fromarray(tv.data[3])))
    # later loads never touch torchvision
    monkeypatch.setattr(CIFAR10, "__init__", lambda *a, **k: pytest.fail("not cached"))
    again = load_fresh("cifar10", cache)
    assert same_arrays(d, again) and not again.train_x.flags.writeable


def test_canonical_source_without_internet_says_what_to_do(tmp_path, monkeypatch):
    from torchvision.datasets import CIFAR10

    def offline(self):
        raise urllib.error.URLError(OSError(-3, "Temporary failure in name resolution"))

    monkeypatch.setattr(CIFAR10, "download", offline)
    msg = _error("download", tmp_path / "cache")
    assert "No internet?" in msg and "--data" in msg and "train/<class>/" in msg
    assert str(tmp_path / "cache" / "torchvision") in msg and "CIFARLAB" not in msg
    assert not D.is_cached("download", tmp_path / "cache")




def test_decoding_reports_how_far_it_is(tiny_folder, tmp_path, monkeypatch):
    """The first decode shows a progress bar on the pages (ui.data): its lines carry a
    fraction that only grows, and stay plain strings for the command line."""
    import tarfile

    from cifarlab.core.data import decode

    archive = tmp_path / "tiny.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(tiny_folder, arcname="tiny")
    monkeypatch.setattr(decode, "_CHUNK", 2)                 # a report after every 2 images
    import itertools

    ticks = itertools.count(0.0, 5.0)                         # and a clock that always moved on
    monkeypatch.setattr(decode.time, "monotonic", lambda: next(ticks))
    lines = []
    D.load(str(archive), cache_dir=tmp_path / "cache", on_progress=lines.append)
    fractions = [line.fraction for line in lines if getattr(line, "fraction", None) is not None]
    assert fractions[0] == 0.0 and fractions[-1] == pytest.approx(1.0)
    assert len(fractions) >= 4 and fractions == sorted(fractions)
    # reading fills the first half, each decoded chunk moves the second
    decoding = [line.fraction for line in lines if line.endswith(" images ...")
                and line.startswith("Decoding ")]
    assert len(decoding) >= 2 and decoding[0] > 0.5
    assert all(isinstance(line, str) for line in lines)
    assert any(line.startswith("Reading ") for line in lines)
