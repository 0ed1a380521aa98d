"""The decode-once cache: four ``.npy`` files and ``meta.json``, renamed into place whole; each
file checked against its header and checksum before use. A damaged cache is rebuilt whole."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from cifarlab.core.data.memory import CacheDamaged, Part, attach
from cifarlab.core.data.sources import CACHE_VERSION, IMAGE_SIZE, reason
from cifarlab.errors import DataError

ARRAYS = ("train_x", "train_y", "test_x", "test_y")
# sha256 of each 8 MiB chunk, then of those digests: sha256 runs on the CPU's SHA instructions
# where it has them (bench/bench_cache_check.py: faster than blake2b; threads gained nothing)
DIGEST = "sha256-chunks-8MiB"
_CHUNK = 8 * 2**20


def digest(array: np.ndarray) -> str:
    """The checksum recorded for ``array``'s bytes (C order), named after its method."""
    data = memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
    parts = b"".join(hashlib.sha256(data[i:i + _CHUNK]).digest()
                     for i in range(0, max(1, len(data)), _CHUNK))
    return f"{DIGEST}:{hashlib.sha256(parts).hexdigest()}"


@dataclass(frozen=True, eq=False)
class CifarData:
    """The decoded data set: uint8 N×3×32×32 images and int64 labels per split (read-only)."""

    train_x: np.ndarray = field(repr=False)   # uint8, N×3×32×32, copied from the cache
    train_y: np.ndarray = field(repr=False)   # int64, N
    test_x: np.ndarray = field(repr=False)
    test_y: np.ndarray = field(repr=False)
    classes: tuple[str, ...]     # label order
    source: str                  # human description of where it came from
    key: str                     # cache key (source identity)
    notes: tuple[str, ...] = ()  # e.g. "12 images were not 32×32 RGB and were converted ..."
    # the cache folder the arrays were read from, so that pickling sends it, not 180 MB
    cache_path: str = ""

    @property
    def n_train(self) -> int:
        return int(len(self.train_y))

    @property
    def n_test(self) -> int:
        return int(len(self.test_y))

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def split(self, split: str) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of ``"train"`` or ``"test"``."""
        return getattr(self, f"{split}_x"), getattr(self, f"{split}_y")

    def class_counts(self, split: str = "train") -> dict[str, int]:
        """Images per class, in label order."""
        counts = np.bincount(self.split(split)[1], minlength=len(self.classes))
        return {c: int(counts[i]) for i, c in enumerate(self.classes)}

    def image(self, split: str, index: int) -> np.ndarray:
        """One image as a 32×32×3 (HWC) uint8 array, for showing."""
        return np.ascontiguousarray(self.split(split)[0][index].transpose(1, 2, 0))

    def __reduce__(self):  # a cached data set travels as a reference to its cache
        if self.cache_path:
            return (reopen, (self.cache_path, self.key))
        return (CifarData, (self.train_x, self.train_y, self.test_x, self.test_y, self.classes,
                            self.source, self.key, self.notes))


def reopen(path: str | Path, key: str) -> CifarData:
    """The cached data set at ``path``, checked again; DataError if it is gone or damaged."""
    try:
        got = read_cache(Path(path), key)
        if got is None:
            raise CacheDamaged("the cache is gone or incomplete")
        return got
    except (OSError, CacheDamaged) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise DataError("data.cache_changed", field="data", reason=why) from None


def _verifier(meta: dict):
    """A function that raises CacheDamaged when an array's bytes are not the ones recorded."""
    sums = meta.get("checksums")
    if not isinstance(sums, dict) or not all(isinstance(sums.get(n), str) for n in ARRAYS):
        raise CacheDamaged("meta.json: no checksums (written by an older CIFAR Lab)")

    def verify(name: str, array: np.ndarray) -> None:
        if digest(array) != sums[name]:
            raise CacheDamaged(f"{name}.npy: its content is not what was written (checksum)")
    return verify


def _check_file(path: Path, shape: tuple[int, ...], dtype: np.dtype) -> Part:
    """The file's header and size checked against ``shape`` and ``dtype``, else CacheDamaged."""
    fmt = np.lib.format
    read_header = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
    try:
        with open(path, "rb", buffering=0) as f:
            got_shape, fortran, got_dtype = read_header[fmt.read_magic(f)](f)
            offset, size = f.tell(), os.fstat(f.fileno()).st_size
    except OSError as err:
        raise CacheDamaged(f"{path.name}: {err.strerror or err}") from None
    except (KeyError, ValueError, EOFError) as err:   # KeyError: a version np.save never writes
        raise CacheDamaged(f"{path.name}: torn header ({err})") from None
    if fortran:
        raise CacheDamaged(f"{path.name}: Fortran order")
    if tuple(got_shape) != shape or got_dtype != dtype:
        raise CacheDamaged(f"{path.name}: holds {got_dtype} {got_shape}, expected {dtype} "
                           f"{shape}")
    nbytes = math.prod(shape) * dtype.itemsize
    if size != offset + nbytes:
        raise CacheDamaged(f"{path.name}: {size} bytes, its header promises {offset + nbytes}")
    return Part(path, offset, nbytes, shape, dtype)


def check_cache(path: Path, key: str) -> tuple[dict, dict[str, Part]] | None:
    """(meta, parts) if the cache is complete and every file what it promises; None if absent
    or incomplete (a writer at work, or killed); else CacheDamaged. Reads no pixels."""
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(meta, dict) and meta.get("complete") is True
            and meta.get("cache_version") == CACHE_VERSION and meta.get("key") == key):
        return None
    try:
        n_train, n_test = int(meta["n_train"]), int(meta["n_test"])
        image, u8, i64 = (3, IMAGE_SIZE, IMAGE_SIZE), np.dtype(np.uint8), np.dtype(np.int64)
        expected = {"train_x": ((n_train, *image), u8), "train_y": ((n_train,), i64),
                    "test_x": ((n_test, *image), u8), "test_y": ((n_test,), i64)}
        if not isinstance(meta["classes"], list):
            raise TypeError("classes is not a list")
    except (KeyError, TypeError, ValueError) as err:
        raise CacheDamaged(f"meta.json: {type(err).__name__}: {err}") from None
    return meta, {name: _check_file(path / f"{name}.npy", shape, dtype)
                  for name, (shape, dtype) in expected.items()}


def read_cache(path: Path, key: str) -> CifarData | None:
    """The cached data set at ``path``, checked, in memory; None if absent, or CacheDamaged."""
    checked = check_cache(path, key)
    if checked is None:
        return None
    meta, parts = checked
    # the stamp tells this cache's content from a rebuilt one's (a shared copy must match it)
    arrays = attach(path, f"{key}@{meta.get('created')}", parts, verify=_verifier(meta))
    return CifarData(**arrays, classes=tuple(str(c) for c in meta["classes"]),
                     source=str(meta.get("source", key)), key=key,
                     notes=tuple(str(n) for n in meta.get("notes", ())), cache_path=str(path))


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on a lock file (its folder made) while the block runs; closing
    the file releases it. DataError if the folder cannot be written."""
    with contextlib.ExitStack() as held:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fcntl.flock(held.enter_context(open(path, "a")), fcntl.LOCK_EX)
        except OSError as err:
            raise DataError("data.cache_write", field="data", path=str(path.parent),
                            reason=reason(err)) from None
        yield


def write_cache(final: Path, key: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Write into a fresh temp folder beside ``final``, marker last, then rename into place
    (under the key's lock: temp folders left by a killed writer go first)."""
    parent = final.parent
    for stale in (*parent.glob(f".tmp-{key}-*"), *parent.glob(f".old-{key}-*")):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache is readable like any file
        for name in ARRAYS:
            with open(tmp / f"{name}.npy", "wb") as f:
                np.save(f, np.ascontiguousarray(arrays[name]), allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
            # read-only: a stray `cp` or editor cannot truncate it in place (root still can;
            # that is what the checks on reading are for)
            os.chmod(tmp / f"{name}.npy", 0o444)
        meta = dict(meta, complete=True,
                    checksums={name: digest(arrays[name]) for name in ARRAYS})
        with open(tmp / "meta.json.part", "w") as f:  # the completion marker: written last,
            json.dump(meta, f, indent=1)              # and whole or not at all
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp / "meta.json.part", tmp / "meta.json")
        if final.exists():  # an incomplete, stale or damaged cache: move it aside, then drop it
            trash = Path(tempfile.mkdtemp(prefix=f".old-{key}-", dir=parent))
            os.replace(final, trash / "old")
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            with contextlib.suppress(CacheDamaged):  # lost a race to a valid cache: fine
                if check_cache(final, key) is not None:
                    return
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
