"""A full disk, said in words (the path only in the host's log)."""
from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Iterable

from cifarlab.errors import JobError

log = logging.getLogger("cifarlab.serve.disk")

# Room a run needs besides its checkpoint: its losses and events in the run store (tens of bytes
# a step), SQLite's write-ahead log, and some slack for everything else on the disk.
MARGIN_BYTES = 32 * 2**20


def free_bytes(folder: str | os.PathLike) -> int:
    """Bytes free for us on the file system of ``folder`` (or of its nearest existing parent)."""
    path = Path(folder)
    while not path.exists() and path.parent != path:
        path = path.parent
    return shutil.disk_usage(path).free


def run_bytes(config=None) -> int:
    """What a run will write: its checkpoint (none for ``config`` None: a timing) and a margin."""
    if config is None:
        return MARGIN_BYTES
    from cifarlab.core.checkpoint import METADATA_BYTES, network_params

    return network_params(config, 10) * 4 + METADATA_BYTES + MARGIN_BYTES


def check_room(folders: Iterable[str | os.PathLike], need: int) -> None:
    """Refuse a run before it starts, not lose its weights at its end, on too full a disk."""
    for folder in folders:
        free = free_bytes(folder)
        if free < need:
            log.error("cifarlab: the server's disk is full: %s has %.1f MB free, a run needs "
                      "%.1f MB; refusing new runs until space is freed", folder, free / 1e6,
                      need / 1e6)
            raise JobError("serve.store.no_room", free_mb=free / 1e6, need_mb=need / 1e6)


def is_full(err: BaseException) -> bool:
    """Whether a SQLite error says the disk is full."""
    return (getattr(err, "sqlite_errorname", "") == "SQLITE_FULL"
            or "database or disk is full" in str(err))


def store_full(err: BaseException, path: str | os.PathLike) -> JobError:
    """The error for a full disk under the run store (the path only in the host's log)."""
    log.error("cifarlab: the server's disk is full: cannot write the run store %s (%s)", path, err)
    return JobError("serve.store.disk_full")
