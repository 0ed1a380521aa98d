"""What checking the data cache's content costs on the real 184 MB cache.

    python bench/bench_cache_check.py                      # the offline CIFAR-10 archive
    python bench/bench_cache_check.py --data PATH --repeats 7

The decoded cache records a checksum of each array when it is written
(``cifarlab.core.data.cache.digest``) and checks every copy made from its files against it. This
measures, in one run, alternating so that the machine's load falls on each the same:

1. **the digest alone** over the arrays already in memory ("warm"): the method used
   (sha256 of 8 MiB chunks on up to 4 threads, then of their digests), the same on one thread,
   and plain sha256, blake2b and zlib.crc32 over each array, for comparison;
2. **a whole open from the files** (a private copy, as a process does where the shared copy is
   not possible), with and without the check: "cold", the files first dropped from the page
   cache (``posix_fadvise(DONTNEED)``, these files only), and "warm", the files in the page
   cache.

Each figure is the median (min, max) of ``--repeats`` rounds. It prints the machine (CPU, cores)
and the load average before and after: on a shared machine read the ratios, not the absolute
times.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_ARCHIVE = ROOT.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"

import numpy as np

from cifarlab.core import data as D
from cifarlab.core.data import cache, memory


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def evict(folder: Path) -> None:
    """Drop the cache's files from the page cache (only these files), so the next read is
    from the disk."""
    for p in folder.glob("*.npy"):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def whole(fn):
    def run(arrays):
        for a in arrays.values():
            fn(memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8)))
    return run


def one_thread(arrays) -> None:
    saved = os.cpu_count
    os.cpu_count = lambda: 1
    try:
        for a in arrays.values():
            cache.digest(a)
    finally:
        os.cpu_count = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_ARCHIVE))
    ap.add_argument("--cache", default=os.environ.get("CIFARLAB_CACHE"))
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    data = D.load(args.data, cache_dir=args.cache)
    folder = Path(data.cache_path)
    key = data.key
    arrays = {n: np.array(getattr(data, n)) for n in cache.ARRAYS}
    total = sum(a.nbytes for a in arrays.values())
    del data
    memory.SHARE = False   # every open makes its own copy from the files (and checks it)
    load0 = os.getloadavg()
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores; {platform.python_implementation()} "
          f"{platform.python_version()}, numpy {np.__version__}")
    print(f"cache: {folder} ({total / 1e6:.1f} MB in {len(arrays)} arrays)")
    print(f"load average before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")

    digests = {
        f"{cache.DIGEST} (used)": lambda: [cache.digest(a) for a in arrays.values()],
        f"{cache.DIGEST}, 1 thread": lambda: one_thread(arrays),
        "sha256, whole arrays": lambda: whole(hashlib.sha256)(arrays),
        "blake2b, whole arrays": lambda: whole(hashlib.blake2b)(arrays),
        "zlib.crc32 (not a hash)": lambda: whole(zlib.crc32)(arrays),
    }

    def open_checked():
        cache.read_cache(folder, key)

    def open_unchecked():
        meta, parts = cache.check_cache(folder, key)
        memory.attach(folder, "bench", parts, verify=lambda name, array: None)

    opens = {
        "open, checked, cold": (evict, open_checked),
        "open, unchecked, cold": (evict, open_unchecked),
        "open, checked, warm": (None, open_checked),
        "open, unchecked, warm": (None, open_unchecked),
    }
    times: dict[str, list[float]] = {name: [] for name in [*digests, *opens]}
    open_checked()   # the files in the page cache, and numpy's and hashlib's code paths warm
    for _ in range(args.repeats):
        for name, fn in digests.items():
            times[name].append(timed(fn))
        for name, (before, fn) in opens.items():
            if before is not None:
                before(folder)
            times[name].append(timed(fn))
    load1 = os.getloadavg()

    def row(name: str) -> str:
        t = times[name]
        return (f"| {name} | {statistics.median(t) * 1000:.0f} ms ({min(t) * 1000:.0f}, "
                f"{max(t) * 1000:.0f}) | {total / statistics.median(t) / 1e9:.2f} GB/s |")

    print(f"\n{args.repeats} rounds; median (min, max)\n")
    print("| digest of the arrays in memory | time | rate |\n|---|---:|---:|")
    for name in digests:
        print(row(name))
    print("\n| opening the cache from its files | time | rate |\n|---|---:|---:|")
    for name in opens:
        print(row(name))
    med = {n: statistics.median(t) for n, t in times.items()}
    for temp in ("cold", "warm"):
        extra = med[f"open, checked, {temp}"] - med[f"open, unchecked, {temp}"]
        print(f"\nthe check adds {extra * 1000:.0f} ms to a {temp} open "
              f"({med[f'open, checked, {temp}'] / med[f'open, unchecked, {temp}']:.2f}x)")
    print(f"\nload average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
