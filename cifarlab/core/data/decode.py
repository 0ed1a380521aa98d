"""Every image of a source decoded into uint8 N×3×32×32 arrays and int64 labels, in ImageFolder
order; folders and archives by a pool of worker processes, CIFAR-10 itself by torchvision."""
from __future__ import annotations

import concurrent.futures
import io
import multiprocessing
import os
import tarfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from cifarlab.core.data.sources import (IMAGE_SIZE, IMG_EXTENSIONS, SPLITS, WORKER_START,
                                        ProgressFn, Source, check_folder_layout, emit,
                                        folder_members, is_image)
from cifarlab.errors import DataError

_CHUNK = 2500            # images per decode task
_MIN_PARALLEL = 4000     # below this many images, decode in this process


def _decode_items(items: list[tuple[str, Any]]) -> tuple[np.ndarray | None, Any]:
    """Decode (name, bytes-or-path) pairs into N×3×32×32 uint8 (CHW, like the cache):
    (array, how many were converted), or (None, (name, error)) for the first unreadable image."""
    out = np.empty((len(items), 3, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
    converted = 0
    size = (IMAGE_SIZE, IMAGE_SIZE)
    for i, (name, payload) in enumerate(items):
        try:
            fp = io.BytesIO(payload) if isinstance(payload, (bytes, bytearray)) else payload
            with Image.open(fp) as im:
                if im.mode == "RGB" and im.size == size:
                    out[i] = np.asarray(im).transpose(2, 0, 1)
                    continue
                converted += 1
                rgb = im.convert("RGB")
                if rgb.size != size:
                    rgb = rgb.resize(size, Image.Resampling.BICUBIC)
                out[i] = np.asarray(rgb).transpose(2, 0, 1)
        except Exception as exc:  # noqa: BLE001 - any decoder error means "unreadable image"
            return None, (name, f"{type(exc).__name__}: {exc}")
    return out, converted


def _decode_workers() -> int:
    env = os.environ.get("CIFARLAB_DECODE_WORKERS", "").strip()
    if env.isdigit():
        return max(1, int(env))
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def _decode_all(chunks: list[list[tuple[str, Any]]], parallel: bool,
                done: Callable[[int], None]) -> list:
    """Each chunk decoded by a pool of worker processes, or here: small jobs, no pool to be had
    (a daemonic process may not have children) or a pool that broke (a worker died).
    ``done(n)``: n chunks decoded so far."""
    def each(decoded) -> list:
        out = []
        for result in decoded:
            out.append(result)
            done(len(out))
        return out

    workers = _decode_workers()
    if parallel and workers > 1 and not multiprocessing.current_process().daemon:
        try:
            with concurrent.futures.ProcessPoolExecutor(
                    max_workers=workers,
                    mp_context=multiprocessing.get_context(WORKER_START)) as pool:
                return each(pool.map(_decode_items, chunks))
        except Exception:  # noqa: BLE001 - no pool here, or a worker died: decode here instead
            pass
    return each(map(_decode_items, chunks))


def _assemble(entries: dict[str, list[tuple[str, str, int]]], results, classes: list[str],
              where: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """Put decoded chunks (in stream order) into per-split arrays in ImageFolder order;
    ``entries[split]``: (class, relative name, stream position) of every image."""
    converted = 0
    for arr, info in results:
        if arr is None:
            name, error = info
            raise DataError("data.bad_image", field="data", name=name, source=where,
                            reason=error)
        converted += info
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
            arrays[f"{split}_x"][dest[start + sel]] = arr[sel]
        start = end
    notes = [f"{converted} image(s) were not 32×32 RGB and were converted."] if converted else []
    return arrays, notes


def _check_classes(found: dict[str, dict[str, int]], where: str, loose: int) -> list[str]:
    """Class list from {split: {class: n_images}}; DataError for a layout problem of ``where``."""
    if not any(found[s] for s in SPLITS):
        if loose:
            raise DataError("data.loose_images", field="data", source=where, n=loose)
        raise DataError("data.no_class_folders", field="data", source=where)
    for split in SPLITS:
        if not found[split]:
            raise DataError("data.split_missing", field="data", source=where, split=split)
    train, test = set(found["train"]), set(found["test"])
    if train != test:
        raise DataError("data.classes_differ", field="data", source=where,
                        only_train=", ".join(sorted(train - test)) or "—",
                        only_test=", ".join(sorted(test - train)) or "—")
    for split in SPLITS:
        for cls, n in sorted(found[split].items()):
            if n == 0:
                raise DataError("data.empty_class", field="data", source=where,
                                folder=f"{split}/{cls}/",
                                extensions=", ".join(IMG_EXTENSIONS[:3]))
    return sorted(train)


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


def _decode_archive(src: Source, on_progress: ProgressFn | None):
    mode = "r|" if src.path.lower().endswith(".tar") else "r|gz"
    size = max(1, os.path.getsize(src.path))
    try:
        with open(src.path, "rb") as raw, \
                tarfile.open(fileobj=raw, mode=mode) as tf:  # default bufsize: fastest
            members = ((m.name, m.isdir(), lambda m=m: tf.extractfile(m).read()) for m in tf
                       if m.isfile() or m.isdir())
            return _decode_members(members, src.path, on_progress,
                                   lambda: min(99, int(100 * raw.tell() / size)))
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        raise DataError("data.archive_corrupt", field="data", source=src.path,
                        reason=f"{type(err).__name__}: {err}") from None


def _decode_members(members, where: str, on_progress: ProgressFn | None, percent=None):
    """Arrays, classes and notes of the images among ``members`` ((name, is a folder, bytes or
    path on call), in stream order); ``percent()``: how far through the archive."""
    entries: dict[str, list[tuple[str, str, int]]] = {s: [] for s in SPLITS}
    # prefix (the folders above train/ and test/) -> split -> class -> images
    found: dict[tuple[str, ...], dict[str, dict[str, int]]] = {}
    loose: dict[tuple[str, ...], int] = {}
    ignored = 0
    items: list[tuple[str, Any]] = []   # (name, bytes or path) of every image, in stream order
    next_report = time.monotonic() + 1.0
    for name, is_dir, payload in members:
        parts = _split_member(name)
        if parts is None:
            if not is_dir and not is_image(name):
                ignored += 1
            continue
        pre, split, cls, rest = parts
        if cls is None:
            continue
        classes_here = found.setdefault(pre, {s: {} for s in SPLITS})[split]
        if is_dir:
            classes_here.setdefault(cls, 0)
        elif rest is None:   # a file beside the class folders
            if is_image(cls):
                loose[pre] = loose.get(pre, 0) + 1
            else:
                ignored += 1
        elif not is_image(rest):
            ignored += 1
        else:
            classes_here[cls] = classes_here.get(cls, 0) + 1
            entries[split].append((cls, rest, len(items)))
            items.append((name, payload()))
            if percent is not None and time.monotonic() >= next_report:
                next_report, pct = time.monotonic() + 1.0, percent()
                emit(on_progress, f"Reading the archive {where}: {len(items):,} images "
                                  f"({pct}%) ...", fraction=pct / 200)
    with_images = sorted(p for p, splits in found.items()
                         if any(n for cls in splits.values() for n in cls.values()))
    if len(with_images) > 1:
        shown = ", ".join(f"{'/'.join(p) or '.'}/" for p in with_images[:3])
        raise DataError("data.several_data_sets", field="data", source=where, found=shown)
    prefix = with_images[0] if with_images else max(found, key=len, default=())
    classes = _check_classes(found.get(prefix, {s: {} for s in SPLITS}), where,
                             sum(loose.values()))
    chunks = [items[k:k + _CHUNK] for k in range(0, len(items), _CHUNK)]

    def decoded(n: int) -> None:   # the bar's second half: reading took the first
        if percent is not None:
            emit(on_progress, f"Decoding {len(items):,} images ...",
                 fraction=0.5 + 0.5 * n / len(chunks))

    results = _decode_all(chunks, len(items) >= _MIN_PARALLEL, decoded)
    arrays, notes = _assemble(entries, results, classes, where)
    if ignored:
        notes.append(f"{ignored} file(s) that are not images were ignored.")
    return arrays, tuple(classes), notes


def _decode_canonical(root: Path):
    from torchvision.datasets import CIFAR10

    tv_root = root / "torchvision"
    arrays: dict[str, np.ndarray] = {}
    for split in SPLITS:
        try:
            ds = CIFAR10(str(tv_root), train=(split == "train"), download=True)
        except (OSError, ValueError, tarfile.TarError, EOFError) as err:  # URLError: OSError
            raise DataError("data.download_failed", field="data", path=str(tv_root),
                            reason=f"{type(err).__name__}: {err}") from None
        except RuntimeError as err:
            raise DataError("data.download_corrupt", field="data", path=str(tv_root),
                            reason=str(err)) from None
        # N×32×32×3: torchvision checked the files' md5 sums
        arrays[f"{split}_x"] = np.ascontiguousarray(ds.data.transpose(0, 3, 1, 2))
        arrays[f"{split}_y"] = np.asarray(ds.targets, dtype=np.int64)
    return arrays, tuple(str(c) for c in ds.classes), []


def decode_source(src: Source, cache_root: Path, on_progress: ProgressFn | None
                  ) -> tuple[dict[str, np.ndarray], tuple[str, ...], list[str]]:
    """(arrays by name, classes, notes) of every image of ``src``; DataError: what is wrong."""
    if src.kind == "canonical":
        return _decode_canonical(cache_root)
    if src.kind == "archive":
        return _decode_archive(src, on_progress)
    check_folder_layout(src)
    return _decode_members(folder_members(src.path), src.path, on_progress)
