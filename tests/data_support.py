"""Helpers shared by the tests of cifarlab.core.data (tests/test_data*.py), and the page tests'
fresh run store (``pages_queue``)."""
import os
import sys
import tarfile

import numpy as np
import pytest

from cifarlab.core import data as D
from cifarlab.errors import DataError

CIFAR_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                 "ship", "truck")
linux_fork = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses fork")


def make_tar(folder, dest, prefix="tiny", mode="w:gz"):
    with tarfile.open(dest, mode) as tf:
        tf.add(folder, arcname=prefix)
    return dest


def load_fresh(source, cache, **kw):
    """load(), the source as a path."""
    return D.load(str(source), cache_dir=cache, **kw)


def same_arrays(a, b):
    return (a.classes == b.classes and np.array_equal(a.train_x, b.train_x)
            and np.array_equal(a.train_y, b.train_y) and np.array_equal(a.test_x, b.test_x)
            and np.array_equal(a.test_y, b.test_y))


def error(source, cache, *, lang=None):
    """The DataError load() raises, as the command line prints it (or in ``lang``)."""
    with pytest.raises(DataError) as info:
        D.load(str(source), cache_dir=cache)
    return str(info.value) if lang is None else info.value.text(lang)


def truncate(path, size):
    """Cut a file short in place, as a hostile or careless hand would (cache files are
    read-only: make it writable first, which a non-root hand must)."""
    os.chmod(path, 0o644)
    os.truncate(path, size)


def backing(arr):
    """What backs ``arr``'s memory, from /proc/self/maps: a file's path, "/memfd:<name>
    (deleted)" for a memfd, or "" for anonymous memory. None where /proc is missing."""
    try:
        maps = open("/proc/self/maps").read().splitlines()
    except OSError:
        return None
    addr = arr.__array_interface__["data"][0]
    for line in maps:
        fields = line.split(maxsplit=5)
        lo, hi = (int(v, 16) for v in fields[0].split("-"))
        if lo <= addr < hi:
            return fields[5] if len(fields) > 5 else ""
    return None


def pages_queue(mp, home, cifar_archive, cifar_cache_dir):
    """The pages' job queue over a fresh CIFARLAB_HOME (``mp``: a MonkeyPatch the caller
    undoes), its jobs run inline (tests/inline_executor.py: no worker process), no shared view;
    another test module's queue is shut down."""
    from cifarlab.serve import queue as jobs
    from cifarlab.serve.settings import load_settings
    from inline_executor import use_inline_executor

    use_inline_executor(mp)

    mp.setenv("CIFARLAB_HOME", str(home))
    mp.setenv("CIFARLAB_DATA", str(cifar_archive))
    mp.setenv("CIFARLAB_CACHE", str(cifar_cache_dir))
    mp.setenv("CIFARLAB_SPARE_WORKERS", "0")
    mp.setenv("CIFARLAB_SHARED_VIEW", "0")
    queue = jobs.get_queue()
    if queue.settings.home != load_settings().home:   # another test module's queue
        queue.shutdown()
        queue = jobs.get_queue()
    return queue


def random_data(n: int = 96, seed: int = 7, n_test: int = 40):
    """A CifarData of ``n`` random pictures, labels 0..9 in turn; its first ``n_test`` as the
    test split: for training loops whose accuracy does not matter."""
    from cifarlab.core.config import CIFAR10_CLASSES

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    y = (np.arange(n) % 10).astype(np.int64)
    return D.CifarData(x, y, x[:n_test], y[:n_test], CIFAR10_CLASSES, "tiny", "tiny")
