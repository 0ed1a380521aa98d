"""cifarlab.core.data's cache on disk: the completion marker, killed writers, concurrent first
uses, and damage: a file short at open is rebuilt, and one truncated while in use cannot kill the
process that read it (no SIGBUS)."""
import gc
import hashlib
import json
import logging
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from cifarlab.core import data as D
from cifarlab.core.data import pipelines as P
from cifarlab.core.data import cache as cache_mod
from cifarlab.errors import DataError
from data_support import backing, linux_fork, load_fresh, same_arrays, truncate

ROOT = Path(__file__).resolve().parents[1]


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
    truncate(final / "train_x.npy", 200)
    assert not D.is_cached(str(tiny_folder), cache)
    assert same_arrays(good, load_fresh(tiny_folder, cache))
    # nor a marker that is there but whose arrays are torn
    truncate(final / "test_x.npy", 300)
    assert not D.is_cached(str(tiny_folder), cache)
    assert same_arrays(good, load_fresh(tiny_folder, cache))


def _killed_while_writing(source, cache):
    """Runs in a forked child: dies (SIGKILL) just before writing the completion marker."""
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    cache_mod.json = types.SimpleNamespace(dump=die, dumps=json.dumps, loads=json.loads)
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
    assert entries == [key, f"{key}.lock"] + ([f"{key}.shared"] if len(entries) == 3 else [])
    assert load_fresh(tiny_folder, cache).key == key


# --------------------------------------------------------------------------------------------
# Damage: a file short at open is rebuilt; one truncated while in use kills nobody
# --------------------------------------------------------------------------------------------
def _pixel_total(d):
    return sum(int(x.sum(dtype=np.int64)) for x in (d.train_x, d.test_x))


# A fresh interpreter: loads the cache, says what backs train_x, waits while the parent damages the
# files, then reads every image and prints their total. "private": with the shared copy turned
# off; "mmap": train_x.npy memory-mapped, as the cache used to be read.
_READER = textwrap.dedent("""
    import os, sys
    import numpy as np
    from cifarlab.core import data as D
    from cifarlab.core.data import memory
    from data_support import backing
    source, cache, how = sys.argv[1:4]
    memory.SHARE = how != "private"
    d = D.load(source, cache_dir=cache)
    xs = [d.train_x, d.test_x]
    if how == "mmap":
        xs[0] = np.load(os.path.join(d.cache_path, "train_x.npy"), mmap_mode="r")
    print("loaded", backing(xs[0]), flush=True)
    sys.stdin.readline()
    total = 0
    for x in xs:
        for i in range(len(x)):
            total += int(x[i].sum(dtype=np.int64))
    print(total, flush=True)
""")


def _reader_after_damage(source, cache, damage, how):
    """(returncode, what backed its train_x, stdout) of a reader process whose cache files
    ``damage()`` cuts short after it loaded them."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), str(ROOT / "tests")]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    child = subprocess.Popen([sys.executable, "-c", _READER, str(source), str(cache), how],
                             cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        first = child.stdout.readline().split(" ", 1)
        assert first[0] == "loaded", first
        damage()
        out, _ = child.communicate("go\n", timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, first[1].strip(), out


@pytest.mark.skipif(not hasattr(signal, "SIGBUS"), reason="no SIGBUS on this platform")
def test_mapping_the_cache_file_was_the_hazard(tiny_folder, tmp_path):
    """The control: a reader that memory-maps a cache file dies of SIGBUS when the file is cut
    under it (so the next test can fail)."""
    cache = tmp_path / "cache"
    d = load_fresh(tiny_folder, cache)
    code, backed_by, _ = _reader_after_damage(
        tiny_folder, cache, lambda: truncate(os.path.join(d.cache_path, "train_x.npy"), 200),
        "mmap")
    assert backed_by == os.path.join(d.cache_path, "train_x.npy")
    assert code == -signal.SIGBUS


@pytest.mark.skipif(not hasattr(signal, "SIGBUS"), reason="no SIGBUS on this platform")
@pytest.mark.parametrize("how", ["shared", "private"])
def test_a_cache_truncated_while_in_use_kills_nobody_and_is_rebuilt(tiny_folder, tmp_path,
                                                                     caplog, how):
    cache = tmp_path / "cache"
    good = load_fresh(tiny_folder, cache)
    final = cache / "datasets" / good.key
    expected = _pixel_total(good)

    def cut():
        truncate(final / "train_x.npy", 200)   # what the hostile test did: past the header
        truncate(final / "test_x.npy", 0)
    code, backed_by, out = _reader_after_damage(tiny_folder, cache, cut, how)
    assert code == 0 and code != -signal.SIGBUS   # every image read, no SIGBUS
    assert int(out.split()[-1]) == expected
    if how == "shared" and backing(good.train_x) is not None:
        # the reader mapped the very copy this process made (one copy for all processes)
        assert backed_by == backing(good.train_x) and backed_by.startswith("/memfd:cifarlab-")
    else:
        assert "train_x.npy" not in backed_by
    # the next load sees the damage, says so, and rebuilds; the new files replace the old
    assert not D.is_cached(str(tiny_folder), cache)
    messages = []
    with caplog.at_level(logging.WARNING, logger="cifarlab.core.data"):
        rebuilt = load_fresh(tiny_folder, cache, on_progress=messages.append)
    assert same_arrays(good, rebuilt) and _pixel_total(rebuilt) == expected
    assert any("damaged" in r.getMessage() and "train_x.npy" in r.getMessage()
               for r in caplog.records)
    assert any(m.startswith("Warning: The data cache") for m in messages)
    assert D.is_cached(str(tiny_folder), cache)
    assert os.path.getsize(final / "train_x.npy") == 128 + 14 * 3 * 32 * 32
    assert not os.stat(final / "train_x.npy").st_mode & 0o222  # read-only: cp can't cut it


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="no memfd here: private copies")
def test_the_shared_copy_is_sealed_found_again_and_replaced_when_stale(tiny_folder, tmp_path):
    cache = tmp_path / "cache"
    first = load_fresh(tiny_folder, cache)
    record = json.loads((cache / "datasets" / f"{first.key}.shared").read_text())
    assert record["pid"] == os.getpid()
    path = f"/proc/{record['pid']}/fd/{record['fd']}"
    assert backing(first.train_x) == f"/memfd:{record['name']} (deleted)"
    with pytest.raises(PermissionError):   # sealed: not even root can cut it
        os.truncate(path, 100)
    fd = os.open(path, os.O_RDWR)
    try:
        with pytest.raises(PermissionError):   # nor write into it
            os.write(fd, b"x")
    finally:
        os.close(fd)
    # a second load (as another process would) maps the same copy
    second = load_fresh(tiny_folder, cache)
    assert backing(second.train_x) == backing(first.train_x) and same_arrays(first, second)
    # once nobody here holds it, the record is stale: the next load makes and records a new one
    del first, second
    gc.collect()
    third = load_fresh(tiny_folder, cache)
    again = json.loads((cache / "datasets" / f"{third.key}.shared").read_text())
    assert again["name"] != record["name"]
    assert backing(third.train_x) == f"/memfd:{again['name']} (deleted)"
    assert int(third.train_y.sum()) == int(load_fresh(tiny_folder, cache).train_y.sum())


def _rewrite(path, array):
    os.chmod(path, 0o644)
    np.save(path, array)


def _append(path, extra):
    os.chmod(path, 0o644)
    with open(path, "ab") as f:
        f.write(extra)


DAMAGES = {
    "short data": lambda f: truncate(f / "train_x.npy", 128 + 3 * 32 * 32 + 17),
    "empty file": lambda f: truncate(f / "test_y.npy", 0),
    "torn header": lambda f: truncate(f / "train_y.npy", 40),
    "longer than promised": lambda f: _append(f / "test_x.npy", b"\0" * 4096),
    "missing file": lambda f: os.remove(f / "train_y.npy"),
    "header disagrees with meta.json": lambda f: _rewrite(f / "test_y.npy", np.zeros(3, np.int64)),
    "wrong dtype": lambda f: _rewrite(f / "train_y.npy", np.zeros(14, np.int32)),
    "torn meta.json": lambda f: (f / "meta.json").write_text(
        json.dumps(dict(json.loads((f / "meta.json").read_text()), n_test="seven"))),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_cache_damaged_before_opening_is_rebuilt_with_a_note(tiny_folder, tmp_path, caplog,
                                                               damage):
    cache = tmp_path / "cache"
    good = load_fresh(tiny_folder, cache)
    final = cache / "datasets" / good.key
    DAMAGES[damage](final)
    assert not D.is_cached(str(tiny_folder), cache)
    with caplog.at_level(logging.WARNING, logger="cifarlab.core.data"):
        rebuilt = load_fresh(tiny_folder, cache)
    assert same_arrays(good, rebuilt) and rebuilt.notes == good.notes
    notes = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(notes) == 1 and "rebuilding it" in notes[0]
    assert D.is_cached(str(tiny_folder), cache)


def test_a_pickled_reference_to_a_damaged_cache_is_a_data_error(tiny_folder, tmp_path):
    cache = tmp_path / "cache"
    good = load_fresh(tiny_folder, cache)
    blob = pickle.dumps(P.tutorial_dataset(good, "train"))
    assert len(blob) < 2000  # a reference to the file, not the pixels
    truncate(cache / "datasets" / good.key / "train_x.npy", 1000)
    with pytest.raises(DataError) as info:
        pickle.loads(blob)
    assert info.value.code == "data.cache_changed" and "train_x.npy" in str(info.value)
    assert str(cache) not in str(info.value)
    load_fresh(tiny_folder, cache)  # rebuilt: the same content under the same name
    again = pickle.loads(blob)
    assert np.array_equal(again.data, good.train_x) and again[3][1] == int(good.train_y[3])
