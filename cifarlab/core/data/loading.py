"""``load`` (decoded once, cached, checked), ``is_cached`` and ``source_facts``."""
from __future__ import annotations

import os
import time
from pathlib import Path

from cifarlab.core.data.cache import (CacheDamaged, CifarData, check_cache, file_lock,
                                      read_cache, reopen, write_cache)
from cifarlab.core.data.decode import decode_source
from cifarlab.core.data.sources import (CACHE_VERSION, ProgressFn, Source, cache_root, emit,
                                        identity, reason, source)
from cifarlab.errors import DataError


def load(data: str | os.PathLike | None = None, cache_dir: str | os.PathLike | None = None,
         on_progress: ProgressFn | None = None) -> CifarData:
    """The data set ``data`` names, decoded and cached on first use, read from the checked cache
    after (a damaged one is rebuilt); callers keep it (each call checks the source again)."""
    src = source(data)
    root = cache_root(cache_dir)
    key, ident = identity(src)
    final = root / "datasets" / key
    result = _read_whole(final, key, on_progress, say_damage=True)
    if result is None:  # absent, incomplete or damaged
        result = _build_locked(src, key, ident, root, final, on_progress)
    return result


def is_cached(data: str | os.PathLike | None = None,
              cache_dir: str | os.PathLike | None = None) -> bool:
    """Whether the source's cache is complete and whole on disk (headers and sizes, no pixels)."""
    try:
        src = source(data)
        key, _ = identity(src)
        return check_cache(cache_root(cache_dir) / "datasets" / key, key) is not None
    except (DataError, OSError, CacheDamaged):
        return False


def source_facts(data: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None) -> dict:
    """Where the data comes from, as facts a page words itself (never the server path): kind,
    name, size_mb, cached, exists (a "missing" path that is there). Never raises."""
    src = source(data, check=False)
    facts = {"kind": src.kind, "name": None, "size_mb": None, "cached": False, "exists": True}
    if src.kind == "missing":
        facts.update(name=os.path.basename(os.path.normpath(src.path)),
                     exists=os.path.exists(src.path))
        return facts
    facts["cached"] = is_cached(src.path, cache_dir)
    if src.kind == "archive":
        facts["name"] = os.path.basename(src.path)
        try:
            facts["size_mb"] = os.path.getsize(src.path) / 1e6
        except OSError:
            pass
    elif src.kind == "folder":
        facts["name"] = os.path.basename(os.path.normpath(src.path))
    return facts


def _build_locked(src: Source, key: str, ident: dict, root: Path, final: Path,
                  on_progress: ProgressFn | None) -> CifarData:
    with file_lock(final.parent / f"{key}.lock"):
        # another process may have built (or repaired) it while we waited; a damaged one was
        # said so before taking the lock, and write_cache replaces it whole
        result = _read_whole(final, key)
        if result is not None:
            return result
        t0 = time.perf_counter()
        emit(on_progress, f"Decoding {src.description} once into the cache {final} ...",
             fraction=0.0)
        arrays, classes, notes = decode_source(src, root, on_progress)
        seconds = time.perf_counter() - t0
        for note in notes:
            emit(on_progress, note, warning=True)
        meta = {"cache_version": CACHE_VERSION, "key": key, "source": src.description,
                "identity": ident, "classes": list(classes), "notes": list(notes),
                "n_train": int(len(arrays["train_y"])), "n_test": int(len(arrays["test_y"])),
                "decode_seconds": round(seconds, 3), "created": time.time()}
        try:
            write_cache(final, key, arrays, meta)
        except OSError as err:
            raise DataError("data.cache_write", field="data", path=str(final.parent),
                            reason=reason(err)) from None
        emit(on_progress, f"Decoded {meta['n_train']:,} + {meta['n_test']:,} images in "
                          f"{seconds:.1f} s.")
        del arrays  # the copy read back below is the one kept
        return reopen(final, key)


def _read_whole(final: Path, key: str, on_progress: ProgressFn | None = None,
                say_damage: bool = False) -> CifarData | None:
    """The cache read, or None if absent, incomplete or damaged (``say_damage``: a warning)."""
    try:
        return read_cache(final, key)
    except CacheDamaged as err:
        if say_damage:
            emit(on_progress, f"The data cache {final} is damaged ({err}); rebuilding it.",
                 warning=True)
        return None
