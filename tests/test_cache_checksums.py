"""Damage to the decoded-data cache that keeps every size: labels overwritten (99, or all 0),
a pixel flipped, checksums missing. Each is caught by the checksum recorded when the cache was
written, said, and the cache rebuilt: never wrong labels, never a
traceback (the command line's `cifarlab train` ended in IndexError before)."""
import gc
import json
import logging
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cifarlab.core import data as D
from cifarlab.core.data import pipelines as P
from cifarlab.core.data import cache as cache_mod
from cifarlab.core.data import memory
from cifarlab.errors import DataError
from data_support import load_fresh, same_arrays

ROOT = Path(__file__).resolve().parents[1]


def _overwrite(path: Path, values: np.ndarray | None = None, flip_at: int | None = None):
    """Change an array file's data in place, its header and size untouched."""
    os.chmod(path, 0o644)
    arr = np.load(path, mmap_mode="r+")
    if values is not None:
        arr[...] = values
    else:
        flat = arr.reshape(-1)
        flat[flip_at] = flat[flip_at] ^ 0xFF
    arr.flush()
    del arr


def _drop_checksums(folder: Path):
    meta = json.loads((folder / "meta.json").read_text())
    del meta["checksums"]
    (folder / "meta.json").write_text(json.dumps(meta))


DAMAGES = {
    "training labels all 99": lambda f: _overwrite(f / "train_y.npy", 99),
    "training labels all 0": lambda f: _overwrite(f / "train_y.npy", 0),
    "test labels all 2": lambda f: _overwrite(f / "test_y.npy", 2),
    "one pixel flipped": lambda f: _overwrite(f / "test_x.npy", flip_at=1234),
    "no checksums recorded": _drop_checksums,
}


def _forget_copies():
    """As a new process would: nothing of the cache held in memory (no shared copy found)."""
    gc.collect()


@pytest.mark.parametrize("share", [True, False], ids=["shared", "private"])
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damage_that_keeps_the_sizes_is_caught_and_rebuilt(tiny_folder, tmp_path, caplog,
                                                           monkeypatch, damage, share):
    monkeypatch.setattr(memory, "SHARE", share)
    cache = tmp_path / "cache"
    good = load_fresh(tiny_folder, cache)
    kept = {n: np.array(getattr(good, n)) for n in cache_mod.ARRAYS}
    final = cache / "datasets" / good.key
    meta = json.loads((final / "meta.json").read_text())
    assert sorted(meta["checksums"]) == sorted(cache_mod.ARRAYS)
    assert all(v.startswith(cache_mod.DIGEST + ":") for v in meta["checksums"].values())
    sizes = {p.name: p.stat().st_size for p in final.glob("*.npy")}
    del good
    _forget_copies()
    DAMAGES[damage](final)
    assert {p.name: p.stat().st_size for p in final.glob("*.npy")} == sizes  # sizes kept
    messages = []
    with caplog.at_level(logging.WARNING, logger="cifarlab.core.data"):
        rebuilt = load_fresh(tiny_folder, cache, on_progress=messages.append)
    for name, array in kept.items():  # the right labels and pixels, not the damaged ones
        assert np.array_equal(getattr(rebuilt, name), array), name
    assert any(m.startswith("Warning: The data cache") and "rebuilding it" in m
               for m in messages)
    assert any("damaged" in r.getMessage() for r in caplog.records)
    # the rebuilt cache is whole again: the next process reads it without a word
    del rebuilt
    _forget_copies()
    messages.clear()
    assert same_arrays(load_fresh(tiny_folder, cache, on_progress=messages.append),
                       load_fresh(tiny_folder, cache))
    assert not any("damaged" in m for m in messages)


def test_a_pickled_reference_to_relabelled_files_is_a_data_error(tiny_folder, tmp_path,
                                                                 monkeypatch):
    """A spawned DataLoader worker reads the arrays again through the data set's reference to
    its cache: a checksum that no longer matches is our DataError there, never wrong labels."""
    monkeypatch.setattr(memory, "SHARE", False)
    cache = tmp_path / "cache"
    good = load_fresh(tiny_folder, cache)
    sent = pickle.dumps(P.tutorial_dataset(good, "train"))
    assert len(sent) < good.train_x.nbytes   # a reference, not the pixels
    assert np.array_equal(pickle.loads(sent).labels, good.train_y)
    _overwrite(cache / "datasets" / good.key / "train_y.npy", 99)
    with pytest.raises(DataError) as info:
        pickle.loads(sent)
    assert info.value.code == "data.cache_changed" and "checksum" in str(info.value)


def test_the_digest_covers_every_byte_and_its_order():
    a = np.arange(3 * 2**20 + 5, dtype=np.int64)  # several chunks and a short last one
    d = cache_mod.digest(a)
    assert d == cache_mod.digest(a.copy()) and d.startswith(cache_mod.DIGEST + ":")
    b = a.copy()
    b[-1] += 1
    c = a.copy()
    c[[0, 1]] = c[[1, 0]]
    assert len({d, cache_mod.digest(b), cache_mod.digest(c)}) == 3
    assert cache_mod.digest(np.zeros(0, np.uint8)).startswith(cache_mod.DIGEST + ":")


@pytest.mark.integration   # a process of its own
def test_cifarlab_train_on_relabelled_cache_rebuilds_it_and_trains(tiny_folder, tmp_path):
    """The hostile test's command: `cifarlab train` with every training label set to 99."""
    cache = tmp_path / "cache"
    key = load_fresh(tiny_folder, cache).key
    _forget_copies()   # no copy made before the damage is left for the command to find
    _overwrite(cache / "datasets" / key / "train_y.npy", 99)
    env = dict(os.environ, CIFARLAB_CACHE=str(cache), PYTHONPATH=str(ROOT))
    env.pop("CIFARLAB_DATA", None)
    proc = subprocess.run([sys.executable, "-m", "cifarlab", "train", "--data", str(tiny_folder),
                           "--epochs", "1", "--out", str(tmp_path / "net.pth")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in proc.stderr and "IndexError" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert "damaged" in proc.stderr and "rebuilding it" in proc.stderr
    assert "Finished Training" in proc.stdout
    assert D.is_cached(str(tiny_folder), cache)
    assert int(D.load(str(tiny_folder), cache_dir=cache).train_y.max()) == 2
