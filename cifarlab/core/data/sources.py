"""Where the data comes from (``--data`` > ``$CIFARLAB_DATA`` > ``"download"``): the canonical
CIFAR-10, an image folder or an archive of one; its identity names its cache."""
from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

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

ProgressFn = Callable[[str], None]
# how decode and DataLoader workers start: forked on Linux (even where this process was spawned,
# and so inherited spawn: a spawned worker re-imports torch, seconds each), else the default
WORKER_START = ("fork" if sys.platform.startswith("linux")
                and "fork" in multiprocessing.get_all_start_methods() else None)


class ProgressLine(str):
    """A progress line (a plain string) that also says how far the work is (0 to 1, or None)."""

    fraction: float | None = None


def emit(on_progress: ProgressFn | None, message: str, warning: bool = False,
         fraction: float | None = None) -> None:
    """A progress line or warning: logged, and passed to ``on_progress`` when there is one."""
    (log.warning if warning else log.info)("%s", message)
    if on_progress is not None:
        line = ProgressLine(("Warning: " if warning else "") + message)
        line.fraction = None if fraction is None else min(1.0, max(0.0, float(fraction)))
        on_progress(line)


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


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir`` > ``$CIFARLAB_CACHE`` > ``~/.cache/cifarlab``, absolute."""
    value = cache_dir if cache_dir is not None else (os.environ.get("CIFARLAB_CACHE") or
                                                     "~/.cache/cifarlab")
    return Path(os.path.abspath(os.path.expanduser(str(value))))


def _archive_suffix(path: str) -> str | None:
    low = path.lower()
    return next((s for s in ARCHIVE_SUFFIXES if low.endswith(s)), None)


def is_image(name: str) -> bool:
    return name.lower().endswith(IMG_EXTENSIONS)


@dataclass(frozen=True)
class Source:
    kind: str                   # "canonical" | "archive" | "folder" | "missing"
    path: str                   # "download" or the absolute path
    origin: str                 # "--data" | "CIFARLAB_DATA" | "default"

    @property
    def description(self) -> str:
        """Stored in the cache's meta.json and shown by the CLI (the host's view)."""
        if self.kind == "canonical":
            return "CIFAR-10 (torchvision download)"
        if self.kind == "archive":
            return f"image-folder archive {self.path}"
        return f"image folder {self.path}"


def source(data, check: bool = True) -> Source:
    """The source ``data`` names; with ``check``, DataError unless it exists and is usable."""
    path, origin = _resolve(data)
    if path == CANONICAL:
        return Source("canonical", CANONICAL, origin)
    if not os.path.exists(path):
        if check:
            # the environment variable is the host's business: students read "the settings"
            code = "data.missing_path_setting" if origin == "CIFARLAB_DATA" else "data.missing_path"
            raise DataError(code, field="data", path=path)
        return Source("missing", path, origin)
    if os.path.isdir(path):
        return Source("folder", path, origin)
    if _archive_suffix(path) is None:
        if check:
            raise DataError("data.not_archive", field="data", path=path)
        return Source("missing", path, origin)
    return Source("archive", path, origin)


def check_folder_layout(src: Source) -> None:
    """DataError unless the folder holds train/ and test/."""
    if not all(os.path.isdir(os.path.join(src.path, s)) for s in SPLITS):
        raise DataError("data.no_splits", field="data", path=src.path)


def folder_members(root: str):
    """(name below ``root``, is a folder, the image's path on call) of what ``train/`` and
    ``test/`` hold, sorted; hidden names left out, linked class folders followed."""
    for split in SPLITS:
        for e in sorted(os.scandir(os.path.join(root, split)), key=lambda e: e.name):
            if e.name.startswith("."):
                continue
            yield f"{split}/{e.name}", e.is_dir(), None
            if not e.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(e.path):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
                for name in sorted(f for f in filenames if not f.startswith(".")):
                    full = os.path.join(dirpath, name)
                    yield f"{rel}/{name}", False, lambda full=full: full


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:40] or "data"


def reason(err: OSError) -> str:
    """An OSError in words, without the path it names (the message names what it needs)."""
    return err.strerror or type(err).__name__


def identity(src: Source) -> tuple[str, dict]:
    """(cache key, identity facts) of a source; the key changes whenever the data can have."""
    if src.kind == "canonical":
        return CANONICAL_KEY, {"kind": "canonical", "name": CANONICAL_KEY}
    if src.kind == "archive":
        try:
            st = os.stat(src.path)
            with open(src.path, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError as err:
            raise DataError("data.source_unreadable", field="data", path=src.path,
                            reason=reason(err)) from None
        ident = {"kind": "archive", "path": src.path, "size": st.st_size,
                 "mtime_ns": st.st_mtime_ns, "sha256": digest}
        stem = os.path.basename(src.path)
        stem = stem[: -len(_archive_suffix(stem) or "")] or stem
    else:
        check_folder_layout(src)
        listing = hashlib.sha256()   # of what decoding reads, class folders that are links too
        for name, _, path in folder_members(src.path):
            try:  # a file's size and time; a class folder, or a file beside them: its name
                stamp = "{0.st_size} {0.st_mtime_ns}".format(os.stat(path())) if path else ""
            except OSError:
                continue
            listing.update(f"{name} {stamp}\n".encode("utf-8", "surrogateescape"))
        ident = {"kind": "folder", "path": src.path, "listing_sha256": listing.hexdigest()}
        stem = os.path.basename(src.path.rstrip(os.sep)) or "folder"
    ident["cache_version"] = CACHE_VERSION
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]
    return f"{src.kind}-{_slug(stem)}-{digest}", ident
