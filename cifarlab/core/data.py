"""CIFAR-10 for CIFAR Lab: where it comes from, a decode-once cache, and two input pipelines.

Sources (``resolve_source``: the ``--data`` argument > ``$CIFARLAB_DATA`` > ``"download"``):

- ``"download"`` (also ``"cifar10"``, ``"torchvision"``): the canonical CIFAR-10 through
  ``torchvision.datasets.CIFAR10(root=<cache>/torchvision, download=True)``;
- a folder, or a ``.tar.gz``/``.tgz``/``.tar`` archive, holding ``train/<class>/<image>`` and
  ``test/<class>/<image>`` (the image-folder layout; classes sorted alphabetically give the
  label numbers, which for CIFAR-10's class names is CIFAR-10's own order).

``load()`` decodes every image once into uint8 arrays (N×3×32×32) plus int64 labels and caches
them under ``$CIFARLAB_CACHE`` (else ``~/.cache/cifarlab``) in ``datasets/<key>/``: four ``.npy``
files and ``meta.json``. The cache is written into a temporary folder beside it and renamed into
place, ``meta.json`` (with ``"complete": true``) written last, under a lock file, so a process
killed half-way never leaves a cache that is read as valid and two processes decoding at once
corrupt nothing. Later loads memory-map the arrays (``np.load(mmap_mode="r")``); within one
process ``load()`` returns the same ``CifarData`` object again.

Pipelines:

- ``tutorial``: the tutorial's own: a torchvision ``VisionDataset`` that returns
  ``(transform(PIL.Image.fromarray(hwc_uint8)), label)`` like torchvision's ``CIFAR10``, with
  ``ToTensor()`` + ``Normalize((0.5,)*3, (0.5,)*3)``, fed by a ``DataLoader``
  (``tutorial_loader``);
- ``fast``: ``FastLoader``: the uint8 tensor kept (on the device), one ``randperm`` per epoch,
  one ``index_select`` and a two-op normalisation per batch.

Both draw the epoch order as successive ``torch.randperm(n, generator=Generator().manual_seed(
seed))``, so for the same seed both pipelines serve the same images in the same order.

``on_progress`` callbacks are called with one string (progress lines and warnings); warnings
are also logged on the ``cifarlab.core.data`` logger.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import io
import json
import logging
import math
import mmap
import multiprocessing
import os
import re
import shutil
import sys
import tarfile
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
import torchvision
import torchvision.transforms as transforms
from PIL import Image

from cifarlab.errors import DataError

log = logging.getLogger("cifarlab.core.data")

CACHE_VERSION = 1
CANONICAL = "download"
CANONICAL_KEYWORDS = ("download", "cifar10", "cifar-10", "torchvision")
CANONICAL_KEY = "torchvision-cifar10"
SPLITS = ("train", "test")
IMAGE_SIZE = 32
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp",
                  ".gif")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")
_CHUNK = 2500            # images per decode task
_MIN_PARALLEL = 4000     # below this many images, decode in this process

LAYOUT_HELP = (
    "Expected an image-folder data set: a folder or .tar.gz archive holding train/<class>/ and "
    "test/<class>/ with the images inside, for example train/cat/0001.png and "
    "test/cat/0001.png, one subfolder per class (the same classes in both). Point --data or "
    "CIFARLAB_DATA at it, or use --data download for the canonical CIFAR-10.")

ProgressFn = Callable[[str], None]


# ---------------------------------------------------------------------------------------------
# The data set
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class CifarData:
    """The decoded data set: uint8 N×3×32×32 images and int64 labels per split."""

    train_x: np.ndarray          # uint8, N×3×32×32, memory-mapped from the cache
    train_y: np.ndarray          # int64, N
    test_x: np.ndarray
    test_y: np.ndarray
    classes: tuple[str, ...]     # label order
    source: str                  # human description of where it came from
    key: str                     # cache key (source identity)
    notes: tuple[str, ...] = ()  # e.g. "12 images were not 32×32 RGB and were converted ..."

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
        if split == "train":
            return self.train_x, self.train_y
        if split == "test":
            return self.test_x, self.test_y
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")

    def class_counts(self, split: str = "train") -> dict[str, int]:
        """Images per class, in label order."""
        y = self.split(split)[1]
        counts = np.bincount(np.asarray(y, dtype=np.int64), minlength=len(self.classes))
        return {c: int(counts[i]) for i, c in enumerate(self.classes)}

    def image(self, split: str, index: int) -> np.ndarray:
        """One image as a 32×32×3 (HWC) uint8 array, for showing."""
        return np.ascontiguousarray(self.split(split)[0][index].transpose(1, 2, 0))

    def __reduce__(self):  # memory-mapped arrays travel as file references, not 180 MB
        return (_rebuild_data, (_pack_array(self.train_x), _pack_array(self.train_y),
                                _pack_array(self.test_x), _pack_array(self.test_y),
                                self.classes, self.source, self.key, self.notes))

    def __repr__(self) -> str:
        return (f"CifarData({self.n_train} train + {self.n_test} test images, "
                f"{len(self.classes)} classes, source={self.source!r}, key={self.key!r})")


def _pack_array(a: np.ndarray) -> Any:
    """A whole-file read-only memmap becomes (path, offset, shape, dtype); anything else stays."""
    if (isinstance(a, np.memmap) and isinstance(a.base, mmap.mmap) and a.filename
            and a.flags.c_contiguous):
        return ("cifarlab-memmap", str(a.filename), int(a.offset), tuple(a.shape), a.dtype.str)
    return a


def _unpack_array(p: Any) -> np.ndarray:
    if isinstance(p, tuple) and len(p) == 5 and p[0] == "cifarlab-memmap":
        _, filename, offset, shape, dtype = p
        return np.memmap(filename, dtype=np.dtype(dtype), mode="r", offset=offset, shape=shape)
    return p


def _rebuild_data(train_x, train_y, test_x, test_y, classes, source, key, notes) -> CifarData:
    return CifarData(_unpack_array(train_x), _unpack_array(train_y), _unpack_array(test_x),
                     _unpack_array(test_y), tuple(classes), source, key, tuple(notes))


# ---------------------------------------------------------------------------------------------
# Where the data comes from
# ---------------------------------------------------------------------------------------------
def _resolve(data: str | os.PathLike | None) -> tuple[str, str]:
    """(source, chosen_by): source is "download" or an absolute path."""
    if data is not None and str(data).strip():
        value, origin = str(data).strip(), "--data"
    elif os.environ.get("CIFARLAB_DATA", "").strip():
        value, origin = os.environ["CIFARLAB_DATA"].strip(), "CIFARLAB_DATA"
    else:
        return CANONICAL, "default"
    if value.lower() in CANONICAL_KEYWORDS:
        return CANONICAL, origin
    return os.path.abspath(os.path.expanduser(value)), origin


def resolve_source(data: str | os.PathLike | None = None) -> str:
    """``data`` (the CLI's ``--data``) > ``$CIFARLAB_DATA`` > ``"download"``.

    Returns ``"download"`` for the canonical CIFAR-10 (keywords ``download``, ``cifar10``,
    ``torchvision``), else the path with ``~`` expanded, made absolute. Existence is checked by
    ``load()``.
    """
    return _resolve(data)[0]


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir`` > ``$CIFARLAB_CACHE`` > ``~/.cache/cifarlab``, absolute."""
    value = cache_dir if cache_dir is not None else (os.environ.get("CIFARLAB_CACHE") or
                                                     "~/.cache/cifarlab")
    return Path(os.path.abspath(os.path.expanduser(str(value))))


def _archive_suffix(path: str) -> str | None:
    low = path.lower()
    return next((s for s in ARCHIVE_SUFFIXES if low.endswith(s)), None)


def _missing_path_error(path: str, origin: str) -> DataError:
    where = {"--data": "given with --data", "CIFARLAB_DATA": "set in CIFARLAB_DATA"}.get(origin,
                                                                                         "given")
    return DataError(
        f"The data path {path} ({where}) does not exist. " + LAYOUT_HELP, field="data")


@dataclass(frozen=True)
class _Source:
    kind: str                   # "canonical" | "archive" | "folder"
    path: str                   # "download" or the absolute path
    origin: str                 # "--data" | "CIFARLAB_DATA" | "default"
    root: str = ""              # folder: the folder holding train/ and test/

    @property
    def description(self) -> str:
        if self.kind == "canonical":
            return "CIFAR-10 (torchvision download)"
        if self.kind == "archive":
            return f"image-folder archive {self.path}"
        return f"image folder {self.root}"


def _source(data, check: bool = True) -> _Source:
    path, origin = _resolve(data)
    if path == CANONICAL:
        return _Source("canonical", CANONICAL, origin)
    if not os.path.exists(path):
        if check:
            raise _missing_path_error(path, origin)
        return _Source("missing", path, origin)
    if os.path.isdir(path):
        return _Source("folder", path, origin, _folder_root(path) or path)
    if _archive_suffix(path) is None:
        if check:
            raise DataError(
                f"{path} is a file but not a .tar.gz archive (or a folder). " + LAYOUT_HELP,
                field="data")
        return _Source("missing", path, origin)
    return _Source("archive", path, origin)


def _folder_root(path: str) -> str | None:
    """The folder holding train/ and test/: ``path`` itself, or its only subfolder."""
    if all(os.path.isdir(os.path.join(path, s)) for s in SPLITS):
        return path
    try:
        subdirs = [e.path for e in os.scandir(path)
                   if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return None
    if len(subdirs) == 1 and all(os.path.isdir(os.path.join(subdirs[0], s)) for s in SPLITS):
        return subdirs[0]
    return None


# ---------------------------------------------------------------------------------------------
# Source identity -> cache key
# ---------------------------------------------------------------------------------------------
def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:40] or "data"


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def _identity(src: _Source) -> tuple[str, dict]:
    """(cache key, identity facts) of a source; the key changes whenever the data can have."""
    if src.kind == "canonical":
        return CANONICAL_KEY, {"kind": "canonical", "name": CANONICAL_KEY}
    if src.kind == "archive":
        st = os.stat(src.path)
        try:
            digest = _file_sha256(src.path)
        except OSError as err:
            raise DataError(f"Could not read the archive {src.path}: {err}.", field="data")
        ident = {"kind": "archive", "path": src.path, "size": st.st_size,
                 "mtime_ns": st.st_mtime_ns, "sha256": digest}
        stem = os.path.basename(src.path)
        stem = stem[: -len(_archive_suffix(stem) or "")] or stem
    else:
        _check_folder_layout(src)
        listing = hashlib.sha256()
        for split in SPLITS:
            base = os.path.join(src.root, split)
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames.sort()
                rel_dir = os.path.relpath(dirpath, src.root)
                listing.update(f"D {rel_dir}\n".encode("utf-8", "surrogateescape"))
                for name in sorted(filenames):
                    try:
                        st = os.stat(os.path.join(dirpath, name))
                    except OSError:
                        continue
                    listing.update(f"F {rel_dir}/{name} {st.st_size} {st.st_mtime_ns}\n"
                                   .encode("utf-8", "surrogateescape"))
        ident = {"kind": "folder", "path": src.root, "listing_sha256": listing.hexdigest()}
        stem = os.path.basename(src.root.rstrip(os.sep)) or "folder"
    ident["cache_version"] = CACHE_VERSION
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]
    return f"{src.kind}-{_slug(stem)}-{digest}", ident


def _quick_stamp(src: _Source) -> tuple:
    """Cheap stand-in for the identity, for the in-process memo (no hashing, no full listing)."""
    if src.kind == "canonical":
        return (CANONICAL_KEY,)
    if src.kind == "archive":
        st = os.stat(src.path)
        return (st.st_size, st.st_mtime_ns, st.st_ino)
    stamp = []
    for split in SPLITS:
        base = os.path.join(src.root, split)
        try:
            stamp.append((split, os.stat(base).st_mtime_ns))
            for e in sorted(os.scandir(base), key=lambda e: e.name):
                stamp.append((e.name, e.stat().st_mtime_ns))
        except OSError:
            stamp.append((split, None))
    return tuple(stamp)


# ---------------------------------------------------------------------------------------------
# The cache on disk
# ---------------------------------------------------------------------------------------------
_ARRAYS = ("train_x", "train_y", "test_x", "test_y")


def _datasets_dir(root: Path) -> Path:
    return root / "datasets"


def _read_cache(path: Path, key: str) -> CifarData | None:
    """The cached data set at ``path``, memory-mapped; None unless complete and consistent."""
    meta_path = path / "meta.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(meta, dict) and meta.get("complete") is True
            and meta.get("cache_version") == CACHE_VERSION and meta.get("key") == key):
        return None
    try:
        arrays = {name: np.load(path / f"{name}.npy", mmap_mode="r", allow_pickle=False)
                  for name in _ARRAYS}
        n_train, n_test = int(meta["n_train"]), int(meta["n_test"])
        classes = tuple(str(c) for c in meta["classes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    expect = {"train_x": ((n_train, 3, IMAGE_SIZE, IMAGE_SIZE), np.uint8),
              "train_y": ((n_train,), np.int64),
              "test_x": ((n_test, 3, IMAGE_SIZE, IMAGE_SIZE), np.uint8),
              "test_y": ((n_test,), np.int64)}
    for name, (shape, dtype) in expect.items():
        if arrays[name].shape != shape or arrays[name].dtype != dtype:
            return None
    return CifarData(arrays["train_x"], arrays["train_y"], arrays["test_x"], arrays["test_y"],
                     classes, str(meta.get("source", key)), key,
                     tuple(str(n) for n in meta.get("notes", ())))


class _FileLock:
    """An exclusive ``flock`` on a lock file (a no-op where fcntl is missing: the rename into
    place still keeps the cache consistent, two processes may just both decode)."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> "_FileLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return self
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            import fcntl
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def _write_cache(final: Path, key: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Write into a fresh temp folder beside ``final``, marker last, then rename into place."""
    parent = final.parent
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache is readable like any file
        for name in _ARRAYS:
            with open(tmp / f"{name}.npy", "wb") as f:
                np.save(f, np.ascontiguousarray(arrays[name]), allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
        meta = dict(meta, complete=True)
        with open(tmp / "meta.json.part", "w") as f:  # the completion marker: written last,
            json.dump(meta, f, indent=1)              # and whole or not at all
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp / "meta.json.part", tmp / "meta.json")
        if final.exists():  # an incomplete or stale cache: move it aside, then drop it
            trash = Path(tempfile.mkdtemp(prefix=f".old-{key}-", dir=parent))
            os.replace(final, trash / "old")
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            if _read_cache(final, key) is None:  # lost a race to a valid cache: fine; else raise
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _remove_stale_temps(parent: Path, key: str) -> None:
    """Temp folders of a process killed while writing this key (we hold its lock)."""
    for prefix in (f".tmp-{key}-", f".old-{key}-"):
        for p in parent.glob(prefix + "*"):
            shutil.rmtree(p, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------
_LOCK = threading.RLock()
_MEMO: dict[tuple, CifarData] = {}


def clear_memory_cache() -> None:
    """Forget the data sets loaded in this process (the disk cache stays)."""
    with _LOCK:
        _MEMO.clear()


def load(data: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None,
         on_progress: ProgressFn | None = None) -> CifarData:
    """The data set from ``resolve_source(data)``, decoded once and cached.

    The first use decodes every image (about 7 s for the 60,000 JPEGs of the offline archive on
    2 cores) and writes the cache; later uses memory-map it. Raises ``DataError`` with what went
    wrong and how to fix it.
    """
    src = _source(data)
    root = cache_root(cache_dir)
    with _LOCK:
        try:
            memo_key = (src.kind, src.path, str(root), _quick_stamp(src))
        except OSError as err:
            raise DataError(f"Could not read {src.path}: {err}.", field="data")
        hit = _MEMO.get(memo_key)
        if hit is not None:
            return hit
        key, ident = _identity(src)
        final = _datasets_dir(root) / key
        result = _read_cache(final, key)
        if result is None:
            result = _build_locked(src, key, ident, root, final, on_progress)
        _MEMO[memo_key] = result
        return result


def is_cached(data: str | os.PathLike | None = None,
              cache_dir: str | os.PathLike | None = None) -> bool:
    """Whether the source's decoded cache is complete on disk (False for a missing source)."""
    try:
        src = _source(data)
        key, _ = _identity(src)
    except (DataError, OSError):
        return False
    return _read_cache(_datasets_dir(cache_root(cache_dir)) / key, key) is not None


def describe_source(data: str | os.PathLike | None = None,
                    cache_dir: str | os.PathLike | None = None) -> str:
    """One or two sentences for the home page: where the data comes from and whether it is
    decoded yet. Never raises."""
    src = _source(data, check=False)
    chosen = {"--data": " (chosen with --data)",
              "CIFARLAB_DATA": " (chosen by the CIFARLAB_DATA environment variable)",
              "default": ""}[src.origin]
    if src.kind == "missing":
        exists = os.path.exists(src.path)
        return (f"Data: {src.path}{chosen}, which "
                f"{'is not a folder or .tar.gz archive' if exists else 'does not exist'}. "
                "Set CIFARLAB_DATA to an image-folder data set, or leave it unset to download "
                "CIFAR-10.")
    root = cache_root(cache_dir)
    cached = is_cached(src.path, cache_dir)
    if src.kind == "canonical":
        state = "downloaded and cached" if cached else "not downloaded yet"
        where = root / "torchvision"
        return (f"Data: the canonical CIFAR-10 from torchvision{chosen}, downloaded once into "
                f"{where} (needs internet the first time); {state}.")
    state = ("decoded and cached" if cached else
             "not decoded yet (the first use decodes it once, about 10 s)")
    if src.kind == "archive":
        try:
            size = f", {os.path.getsize(src.path) / 1e6:.1f} MB"
        except OSError:
            size = ""
        return f"Data: the image-folder archive {src.path}{size}{chosen}; {state}."
    return f"Data: the image folder {src.root}{chosen}; {state}."


def _emit(on_progress: ProgressFn | None, message: str, warning: bool = False) -> None:
    (log.warning if warning else log.info)("%s", message)
    if on_progress is not None:
        on_progress(("Warning: " if warning else "") + message)


def _build_locked(src: _Source, key: str, ident: dict, root: Path, final: Path,
                  on_progress: ProgressFn | None) -> CifarData:
    parent = final.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataError(f"Could not create the cache folder {parent}: {err}. Set CIFARLAB_CACHE "
                        "to a folder you can write to.", field="data")
    lock = _FileLock(parent / f"{key}.lock")
    try:
        lock.__enter__()
    except OSError as err:
        raise DataError(f"Could not write to the cache folder {parent}: {err}. Set "
                        "CIFARLAB_CACHE to a folder you can write to.", field="data")
    try:
        result = _read_cache(final, key)  # another process may have built it while we waited
        if result is not None:
            return result
        _remove_stale_temps(parent, key)
        t0 = time.perf_counter()
        _emit(on_progress, f"Decoding {src.description} once into the cache {final} ...")
        if src.kind == "canonical":
            decoded = _decode_canonical(root, on_progress)
        elif src.kind == "archive":
            decoded = _decode_archive(src, on_progress)
        else:
            decoded = _decode_folder(src, on_progress)
        seconds = time.perf_counter() - t0
        arrays, classes, notes = decoded
        for note in notes:
            _emit(on_progress, note, warning=True)
        meta = {"cache_version": CACHE_VERSION, "key": key, "source": src.description,
                "identity": ident, "classes": list(classes), "notes": list(notes),
                "n_train": int(len(arrays["train_y"])), "n_test": int(len(arrays["test_y"])),
                "decode_seconds": round(seconds, 3), "created": time.time()}
        try:
            _write_cache(final, key, arrays, meta)
        except OSError as err:
            raise DataError(f"Could not write the cache {final}: {err}. Set CIFARLAB_CACHE to a "
                            "folder with at least 250 MB free that you can write to.",
                            field="data")
        _emit(on_progress, f"Decoded {meta['n_train']:,} + {meta['n_test']:,} images in "
                           f"{seconds:.1f} s.")
        result = _read_cache(final, key)
        if result is None:  # pragma: no cover - only if someone deletes it under us
            raise DataError(f"The cache {final} vanished right after being written.")
        return result
    finally:
        lock.__exit__(None, None, None)


# ---------------------------------------------------------------------------------------------
# Decoding images
# ---------------------------------------------------------------------------------------------
def _decode_items(items: list[tuple[str, Any]]) -> tuple[np.ndarray | None, Any]:
    """Decode (name, bytes-or-path) pairs into N×3×32×32 uint8 (CHW, like the cache).

    Returns (array, (n_not_rgb, n_resized, n_converted)) or (None, (name, error)) for the first
    unreadable image. Runs in decode worker processes.
    """
    out = np.empty((len(items), 3, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
    not_rgb = resized = converted = 0
    size = (IMAGE_SIZE, IMAGE_SIZE)
    for i, (name, payload) in enumerate(items):
        try:
            fp = io.BytesIO(payload) if isinstance(payload, (bytes, bytearray)) else payload
            with Image.open(fp) as im:
                if im.mode == "RGB" and im.size == size:
                    out[i] = np.asarray(im).transpose(2, 0, 1)
                    continue
                converted += 1
                if im.mode != "RGB":
                    not_rgb += 1
                rgb = im.convert("RGB")
                if rgb.size != size:
                    resized += 1
                    rgb = rgb.resize(size, Image.Resampling.BICUBIC)
                out[i] = np.asarray(rgb).transpose(2, 0, 1)
        except Exception as exc:  # noqa: BLE001 - any decoder error means "unreadable image"
            return None, (name, f"{type(exc).__name__}: {exc}")
    return out, (not_rgb, resized, converted)


class _Decoder:
    """Decodes chunks of images in worker processes (or here, for small jobs / no fork)."""

    def __init__(self, workers: int):
        self.workers = workers
        self.pool: concurrent.futures.ProcessPoolExecutor | None = None
        self.jobs: list[tuple[list, Any]] = []

    def submit(self, items: list[tuple[str, Any]], parallel: bool) -> None:
        if parallel and self.workers > 1 and self.pool is None:
            self.pool = _make_pool(self.workers)
            if self.pool is None:
                self.workers = 1
        if self.pool is not None:
            try:
                self.jobs.append((items, self.pool.submit(_decode_items, items)))
                return
            except Exception:  # noqa: BLE001 - a broken pool: decode here instead
                self._drop_pool()
        self.jobs.append((items, _decode_items(items)))

    def results(self) -> list[tuple[np.ndarray | None, Any]]:
        out = []
        for items, job in self.jobs:
            if isinstance(job, concurrent.futures.Future):
                try:
                    job = job.result()
                except Exception:  # noqa: BLE001 - worker died: redo it here
                    self._drop_pool()
                    job = _decode_items(items)
            out.append(job)
        self.jobs = []
        return out

    def _drop_pool(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None
        self.workers = 1

    def close(self) -> None:
        self.jobs = []
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def _decode_workers() -> int:
    env = os.environ.get("CIFARLAB_DECODE_WORKERS", "").strip()
    if env.isdigit():
        return max(1, int(env))
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def _make_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor | None:
    if multiprocessing.current_process().daemon:  # daemonic processes may not have children
        return None
    methods = multiprocessing.get_all_start_methods()
    # fork: no re-import of torch in the workers (they only run PIL and numpy)
    method = "fork" if sys.platform.startswith("linux") and "fork" in methods else "spawn"
    try:
        return concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context(method))
    except (OSError, ValueError, NotImplementedError):
        return None


def _conversion_note(counts: tuple[int, int, int]) -> str | None:
    not_rgb, resized, converted = counts
    if not converted:
        return None
    parts = []
    if resized:
        parts.append(f"{resized} resized to 32×32")
    if not_rgb:
        parts.append(f"{not_rgb} converted to RGB")
    return (f"{converted} image(s) were not 32×32 RGB and were converted "
            f"({', '.join(parts)}).")


def _assemble(entries: dict[str, list[tuple[str, str, int]]], results, classes: list[str],
              label: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """Put decoded chunks (N×3×32×32, in stream order) into per-split arrays in ImageFolder
    order (classes sorted, then file names sorted).

    ``entries[split]``: (class, relative name, stream position) of every image.
    """
    counts = np.zeros(3, dtype=np.int64)
    for arr, info in results:
        if arr is None:
            name, error = info
            raise DataError(f"Could not read the image {name} in {label}: {error}. Remove or "
                            "replace that file.", field="data")
        counts += np.asarray(info, dtype=np.int64)
    total = sum(len(arr) for arr, _ in results)
    split_of = np.full(total, -1, dtype=np.int64)   # stream position -> split number
    dest = np.zeros(total, dtype=np.int64)          # stream position -> row in its split
    class_index = {c: i for i, c in enumerate(classes)}
    arrays: dict[str, np.ndarray] = {}
    for s, split in enumerate(SPLITS):
        rows = sorted(entries[split], key=lambda e: (e[0], e[1]))
        pos = np.fromiter((r[2] for r in rows), dtype=np.int64, count=len(rows))
        split_of[pos] = s
        dest[pos] = np.arange(len(rows))
        arrays[f"{split}_x"] = np.empty((len(rows), 3, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
        arrays[f"{split}_y"] = np.fromiter((class_index[r[0]] for r in rows), dtype=np.int64,
                                           count=len(rows))
    start = 0
    for k in range(len(results)):
        arr = results[k][0]
        results[k] = (None, None)  # let each chunk go once it is copied
        end = start + len(arr)
        for s, split in enumerate(SPLITS):
            sel = np.flatnonzero(split_of[start:end] == s)
            if not len(sel):
                continue
            d, x = dest[start + sel], arrays[f"{split}_x"]
            if (sel[-1] - sel[0] == len(sel) - 1 and d[-1] - d[0] == len(d) - 1
                    and (len(d) < 2 or bool(np.all(np.diff(d) == 1)))):
                x[d[0]:d[-1] + 1] = arr[sel[0]:sel[-1] + 1]   # the usual case: a plain copy
            else:
                x[d] = arr[sel]
        start = end
    note = _conversion_note(tuple(int(c) for c in counts))
    return arrays, [note] if note else []


def _check_classes(found: dict[str, dict[str, int]], label: str, loose: int) -> list[str]:
    """Class list from {split: {class: n_images}}; DataError for the layout problems."""
    if not any(found[s] for s in SPLITS):
        extra = (f" Found {loose} image(s) directly in train/ or test/: put them into one "
                 "subfolder per class." if loose else "")
        raise DataError(f"{label} has no train/<class>/ and test/<class>/ folders with images."
                        f"{extra} " + LAYOUT_HELP, field="data")
    for split in SPLITS:
        if not found[split]:
            raise DataError(f"{label} has no {split}/<class>/ folders (the other split is "
                            "there). " + LAYOUT_HELP, field="data")
    train, test = set(found["train"]), set(found["test"])
    if train != test:
        only_train = ", ".join(sorted(train - test)) or "none"
        only_test = ", ".join(sorted(test - train)) or "none"
        raise DataError(f"The train and test folders of {label} have different classes "
                        f"(only in train: {only_train}; only in test: {only_test}). Both need "
                        "the same class subfolders, e.g. train/cat/ and test/cat/.",
                        field="data")
    for split in SPLITS:
        for cls, n in sorted(found[split].items()):
            if n == 0:
                raise DataError(f"The class folder {split}/{cls}/ in {label} holds no images "
                                f"({', '.join(IMG_EXTENSIONS[:3])}, ...). Add images to it or "
                                "remove that class from both train/ and test/.", field="data")
    return sorted(train)


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMG_EXTENSIONS)


def _check_folder_layout(src: _Source) -> None:
    if src.root and all(os.path.isdir(os.path.join(src.root, s)) for s in SPLITS):
        return
    hint = ""
    if os.path.exists(os.path.join(src.path, "data_batch_1")) or os.path.isdir(
            os.path.join(src.path, "cifar-10-batches-py")):
        hint = (" This looks like torchvision's own CIFAR-10 files: use --data download with "
                "CIFARLAB_CACHE pointing at the folder above torchvision/ instead.")
    raise DataError(f"The folder {src.path} has no train/ and test/ subfolders.{hint} "
                    + LAYOUT_HELP, field="data")


def _decode_folder(src: _Source, on_progress: ProgressFn | None):
    _check_folder_layout(src)
    entries: dict[str, list[tuple[str, str, int]]] = {s: [] for s in SPLITS}
    found: dict[str, dict[str, int]] = {s: {} for s in SPLITS}
    items: list[tuple[str, str]] = []
    loose = ignored = 0
    for split in SPLITS:
        base = os.path.join(src.root, split)
        for e in sorted(os.scandir(base), key=lambda e: e.name):
            if e.name.startswith("."):
                continue
            if not e.is_dir():
                if _is_image(e.name):
                    loose += 1
                else:
                    ignored += 1
                continue
            found[split][e.name] = 0
            for dirpath, dirnames, filenames in os.walk(e.path):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in sorted(filenames):
                    if name.startswith("."):
                        continue
                    if not _is_image(name):
                        ignored += 1
                        continue
                    full = os.path.join(dirpath, name)
                    rel = os.path.relpath(full, e.path).replace(os.sep, "/")
                    entries[split].append((e.name, rel, len(items)))
                    items.append((os.path.relpath(full, src.root), full))
                    found[split][e.name] += 1
    classes = _check_classes(found, f"the folder {src.root}", loose)
    total = len(items)
    decoder = _Decoder(_decode_workers())
    try:
        parallel = total >= _MIN_PARALLEL
        for start in range(0, total, _CHUNK):
            decoder.submit(items[start:start + _CHUNK], parallel)
        results = decoder.results()
    finally:
        decoder.close()
    arrays, notes = _assemble(entries, results, classes, f"the folder {src.root}")
    if ignored:
        notes.append(f"{ignored} file(s) that are not images were ignored.")
    return arrays, tuple(classes), notes


def _split_member(name: str) -> tuple[tuple[str, ...], str, str | None, str | None] | None:
    """(prefix, split, class, rest) of an archive member inside some .../train|test/...;
    class/rest None where the name stops early. None when there is no train/test part."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or parts[0] == "__MACOSX" or any(p.startswith(".") for p in parts):
        return None
    for i, p in enumerate(parts):
        if p in SPLITS:
            cls = parts[i + 1] if len(parts) > i + 1 else None
            rest = "/".join(parts[i + 2:]) if len(parts) > i + 2 else None
            return tuple(parts[:i]), p, cls, rest
    return None


def _decode_archive(src: _Source, on_progress: ProgressFn | None):
    label = f"the archive {src.path}"
    mode = "r|" if src.path.lower().endswith(".tar") else "r|gz"
    entries: dict[str, list[tuple[str, str, int]]] = {s: [] for s in SPLITS}
    # prefix (the folders above train/ and test/) -> split -> class -> images
    found: dict[tuple[str, ...], dict[str, dict[str, int]]] = {}
    loose: dict[tuple[str, ...], int] = {}
    ignored = 0
    batch: list[tuple[str, bytes]] = []
    n_items = 0
    decoder = _Decoder(_decode_workers())
    size = max(1, os.path.getsize(src.path))
    next_report = time.monotonic() + 1.0
    try:
        with open(src.path, "rb") as raw, \
                tarfile.open(fileobj=raw, mode=mode) as tf:  # default bufsize: fastest
            for member in tf:
                where = _split_member(member.name)
                if where is None or not (member.isfile() or member.isdir()):
                    if member.isfile() and not _is_image(member.name):
                        ignored += 1
                    continue
                pre, split, cls, rest = where
                if cls is None:
                    continue
                classes_here = found.setdefault(pre, {s: {} for s in SPLITS})[split]
                if rest is None:
                    if member.isdir():
                        classes_here.setdefault(cls, 0)
                    elif _is_image(cls):
                        loose[pre] = loose.get(pre, 0) + 1
                    else:
                        ignored += 1
                    continue
                if member.isdir():
                    classes_here.setdefault(cls, 0)
                    continue
                if not _is_image(rest):
                    ignored += 1
                    continue
                f = tf.extractfile(member)
                blob = f.read() if f is not None else b""
                classes_here[cls] = classes_here.get(cls, 0) + 1
                entries[split].append((cls, rest, n_items))
                batch.append((member.name, blob))
                n_items += 1
                if len(batch) >= _CHUNK:
                    decoder.submit(batch, parallel=True)
                    batch = []
                    if on_progress is not None and time.monotonic() >= next_report:
                        next_report = time.monotonic() + 1.0
                        pct = min(99, int(100 * raw.tell() / size))
                        _emit(on_progress, f"Reading {label}: {n_items:,} images ({pct}%) ...")
        if batch:
            decoder.submit(batch, parallel=n_items >= _MIN_PARALLEL)
        with_images = sorted(p for p, splits in found.items()
                             if any(n for cls in splits.values() for n in cls.values()))
        if len(with_images) > 1:
            shown = " and ".join(f"{'/'.join(p) or '.'}/" for p in with_images[:3])
            raise DataError(f"{label} holds more than one data set ({shown} each have train/ or "
                            "test/ with images). Keep one. " + LAYOUT_HELP, field="data")
        prefix = with_images[0] if with_images else max(found, key=len, default=())
        classes = _check_classes(found.get(prefix, {s: {} for s in SPLITS}), label,
                                 sum(loose.values()))
        if on_progress is not None:
            _emit(on_progress, f"Decoding the last of {n_items:,} images ...")
        results = decoder.results()
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        raise DataError(
            f"Could not read {label} ({type(err).__name__}: {err}): it is not a .tar.gz "
            "archive, or it is incomplete or corrupt. Copy or download it again, or point "
            "--data/CIFARLAB_DATA at an image folder instead.", field="data") from None
    finally:
        decoder.close()
    arrays, notes = _assemble(entries, results, classes, label)
    if ignored:
        notes.append(f"{ignored} file(s) that are not images were ignored.")
    return arrays, tuple(classes), notes


def _decode_canonical(root: Path, on_progress: ProgressFn | None):
    from torchvision.datasets import CIFAR10

    tv_root = root / "torchvision"
    arrays: dict[str, np.ndarray] = {}
    classes: tuple[str, ...] = CIFAR10_CLASSES
    for split in SPLITS:
        try:
            ds = CIFAR10(str(tv_root), train=(split == "train"), download=True)
        except (OSError, ValueError, tarfile.TarError, EOFError) as err:  # URLError: OSError
            raise DataError(
                f"Could not download CIFAR-10 into {tv_root} ({type(err).__name__}: {err}). "
                "No internet? Download cifar-10-python.tar.gz elsewhere and put it there, or "
                "point CIFARLAB_DATA (or --data) at an image-folder data set: a folder or "
                ".tar.gz with train/<class>/ and test/<class>/.", field="data") from None
        except RuntimeError as err:
            raise DataError(
                f"The CIFAR-10 files in {tv_root} are missing or corrupt ({err}). Delete that "
                "folder and try again with internet, or point CIFARLAB_DATA (or --data) at an "
                "image-folder data set.", field="data") from None
        data = np.asarray(ds.data, dtype=np.uint8)
        if data.ndim != 4 or data.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE, 3):
            raise DataError(f"torchvision's CIFAR-10 in {tv_root} has images of shape "
                            f"{data.shape[1:]}, not 32×32×3.", field="data")
        arrays[f"{split}_x"] = np.ascontiguousarray(data.transpose(0, 3, 1, 2))
        arrays[f"{split}_y"] = np.asarray(ds.targets, dtype=np.int64)
        classes = tuple(str(c) for c in ds.classes)
    return arrays, classes, []


# ---------------------------------------------------------------------------------------------
# Pipelines
# ---------------------------------------------------------------------------------------------
def tutorial_transform() -> transforms.Compose:
    """The tutorial's transform."""
    return transforms.Compose(
        [transforms.ToTensor(),
         transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])


def normalize(x: torch.Tensor) -> torch.Tensor:
    """uint8 images (…×3×H×W) -> float32, exactly ``Normalize((.5,)*3, (.5,)*3)(ToTensor(x))``:
    ``x / 255``, then ``(x - 0.5) / 0.5`` (the same float32 operations, so the same bits)."""
    return x.to(torch.float32).div(255).sub_(0.5).div_(0.5)


def _as_data(data: "CifarData | str | os.PathLike | None") -> CifarData:
    return data if isinstance(data, CifarData) else load(data)


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")


def subset_indices(n: int, size: int, seed: int = 0) -> np.ndarray:
    """A fixed random subset of ``size`` of ``range(n)``, sorted, int64.

    Depends only on (n, size, seed) (NumPy's legacy ``RandomState``, whose stream never
    changes), so every training seed sees the same images.
    """
    if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
        raise DataError(f"The subset size must be a whole number of at least 1 (got {size!r}).",
                        field="train_subset")
    if size > n:
        raise DataError(f"The subset ({size} images) is larger than the data ({n} images).",
                        field="train_subset")
    if size == n:
        return np.arange(n, dtype=np.int64)
    perm = np.random.RandomState(seed).permutation(n)
    return np.sort(perm[:size]).astype(np.int64)


def _subset(n: int, subset: int | Sequence[int] | np.ndarray | None) -> np.ndarray | None:
    """None (everything), a size (-> subset_indices) or explicit indices."""
    if subset is None:
        return None
    if isinstance(subset, (int, np.integer)) and not isinstance(subset, bool):
        return subset_indices(n, int(subset))
    idx = np.asarray(subset, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise DataError(f"Subset indices must be between 0 and {n - 1}.", field="train_subset")
    return idx


class CifarImages(torchvision.datasets.VisionDataset):
    """The decoded images as a torchvision data set, item for item like ``CIFAR10``:
    ``(transform(PIL.Image.fromarray(hwc_uint8)), int label)``.

    ``.data`` is the N×3×32×32 uint8 array (memory-mapped); pickling it (spawned DataLoader
    workers) sends the file's path, not the pixels.
    """

    def __init__(self, data: CifarData, split: str = "train",
                 transform: Callable | None = None, target_transform: Callable | None = None):
        _check_split(split)
        super().__init__(root=data.source, transform=transform,
                         target_transform=target_transform)
        self.split = split
        self.train = split == "train"
        self.data, self.labels = data.split(split)
        self.classes = list(data.classes)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    @property
    def targets(self) -> list[int]:
        return [int(t) for t in self.labels]

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        img = Image.fromarray(np.ascontiguousarray(self.data[index].transpose(1, 2, 0)))
        target = int(self.labels[index])
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __len__(self) -> int:
        return len(self.labels)

    def extra_repr(self) -> str:
        return f"Split: {self.split.capitalize()}"

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["data"] = _pack_array(self.data)
        state["labels"] = _pack_array(self.labels)
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        state["data"] = _unpack_array(state["data"])
        state["labels"] = _unpack_array(state["labels"])
        self.__dict__.update(state)


def tutorial_dataset(data: "CifarData | str | None", split: str = "train") -> CifarImages:
    """The split as the tutorial's data set: items are ``(ToTensor+Normalize(image), label)``."""
    return CifarImages(_as_data(data), split, transform=tutorial_transform())


def tutorial_loader(data: "CifarData | str | None", split: str = "train", batch_size: int = 4,
                    num_workers: int = 2, shuffle: bool = True, seed: int = 0,
                    subset: int | Sequence[int] | None = None, pin_memory: bool = False,
                    persistent_workers: bool | None = None,
                    multiprocessing_context: str | None = None
                    ) -> torch.utils.data.DataLoader:
    """The tutorial's ``DataLoader`` over ``tutorial_dataset(data, split)``.

    ``shuffle`` draws each epoch's order as ``torch.randperm(n, generator)`` from a generator
    seeded with ``seed`` (the same order as ``FastLoader`` with that seed); ``subset`` (a size
    or indices) restricts it to ``subset_indices``. ``pin_memory``: pass True when training on
    CUDA. ``persistent_workers`` defaults to keeping the workers between epochs when there
    are any. Workers are forked on Linux even where this process's default start method is
    spawn (a process started with spawn inherits it): a spawned worker re-imports torch,
    seconds per worker. Pass ``multiprocessing_context="spawn"`` to spawn them anyway; the
    data set then travels as file references (see ``CifarImages``).
    """
    ds: torch.utils.data.Dataset = tutorial_dataset(data, split)
    idx = _subset(len(ds), subset)
    if idx is not None:
        ds = torch.utils.data.Subset(ds, idx.tolist())
    if persistent_workers is None:
        persistent_workers = num_workers > 0
    sampler = SeededShuffle(len(ds), seed) if shuffle else None
    return torch.utils.data.DataLoader(
        ds, batch_size=batch_size, shuffle=False, sampler=sampler, num_workers=num_workers,
        pin_memory=bool(pin_memory) and torch.cuda.is_available(),
        persistent_workers=bool(persistent_workers and num_workers > 0),
        generator=_generator(seed + 1),  # worker seeds only: the order comes from the sampler
        multiprocessing_context=(multiprocessing_context or _default_worker_context())
        if num_workers > 0 else None)


def _default_worker_context() -> str | None:
    """"fork" on Linux (what a fresh interpreter there uses), else the platform's default."""
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return None


def _generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(int(seed) % (2 ** 63))
    return g


class SeededShuffle(torch.utils.data.Sampler):
    """``shuffle=True``, reproducibly: epoch k visits the data in the order of the k-th
    ``torch.randperm(n)`` drawn from a generator seeded with ``seed``, exactly one draw per
    epoch (``RandomSampler`` draws a second, empty one at the end of each epoch), which is
    also the order ``FastLoader`` serves."""

    def __init__(self, n: int, seed: int = 0):
        self.n = int(n)
        self.generator = _generator(seed)

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        return iter(torch.randperm(self.n, generator=self.generator).tolist())


class FastLoader:
    """The fast pipeline: the decoded uint8 images held as one tensor (on ``device`` when
    ``resident``), one ``randperm`` per epoch, and per batch one ``index_select`` plus a two-op
    normalisation (within 1e-6 of the tutorial's transform).

    Iterating yields ``(images float32 B×3×32×32, labels int64 B)`` on ``device``; ``len()`` is
    the number of batches, the last partial batch kept. ``last_epoch_indices`` holds the data
    set indices served by the latest epoch, in order.
    """

    def __init__(self, data: "CifarData | str | None", split: str = "train",
                 batch_size: int = 4, device: "str | torch.device" = "cpu",
                 shuffle: bool = True, seed: int = 0,
                 subset: int | Sequence[int] | None = None, resident: bool = True):
        _check_split(split)
        if (not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool)
                or batch_size < 1):
            raise ValueError("batch_size must be a positive whole number")
        batch_size = int(batch_size)
        data = _as_data(data)
        x, y = data.split(split)
        idx = _subset(len(y), subset)
        self.indices = idx if idx is not None else np.arange(len(y), dtype=np.int64)
        # a private, writable copy (fancy indexing already copies)
        x_np = np.ascontiguousarray(x[idx], dtype=np.uint8) if idx is not None else np.array(x)
        y_np = np.ascontiguousarray(y[idx], dtype=np.int64) if idx is not None else np.array(y)
        self.device = torch.device(device)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.resident = resident
        self.classes = data.classes
        self.n = int(len(y_np))
        self.epoch = 0
        self.last_epoch_indices: np.ndarray | None = None
        self._generator = _generator(seed)
        x_t, y_t = torch.from_numpy(x_np), torch.from_numpy(y_np)
        self._on_device = resident or self.device.type == "cpu"
        if self._on_device:
            self.x, self.y = x_t.to(self.device), y_t.to(self.device)
        else:
            pin = self.device.type == "cuda"
            self.x = x_t.pin_memory() if pin else x_t
            self.y = y_t.pin_memory() if pin else y_t
        self._scale = 2.0 / 255.0

    def __len__(self) -> int:
        return math.ceil(self.n / self.batch_size)

    @property
    def dataset_size(self) -> int:
        return self.n

    def _order(self) -> torch.Tensor:
        if self.shuffle:
            return torch.randperm(self.n, generator=self._generator)
        return torch.arange(self.n)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        perm = self._order()
        self.last_epoch_indices = self.indices[perm.numpy()]
        self.epoch += 1
        if self._on_device:
            perm = perm.to(self.device)
        return self._batches(perm)

    def _batches(self, perm: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        x, y, scale, dev = self.x, self.y, self._scale, self.device
        index_select = torch.index_select
        if self._on_device:
            for idx in perm.split(self.batch_size):
                yield (index_select(x, 0, idx).float().mul_(scale).sub_(1.0),
                       index_select(y, 0, idx))
        else:
            for idx in perm.split(self.batch_size):
                xb = index_select(x, 0, idx).to(dev, non_blocking=True)
                yb = index_select(y, 0, idx).to(dev, non_blocking=True)
                yield xb.float().mul_(scale).sub_(1.0), yb
