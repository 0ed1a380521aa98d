"""The cached arrays in memory no file backs (a mapped file truncated in place is a SIGBUS): one
sealed ``memfd`` that later processes find through ``<key>.shared``, else a private copy."""
from __future__ import annotations

import fcntl
import json
import logging
import mmap
import os
import secrets
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

log = logging.getLogger("cifarlab.core.data")

SHARE = True  # tests turn this off to exercise the private copy
_PAGE = mmap.PAGESIZE


class CacheDamaged(Exception):
    """A complete cache whose files do not match what they promise (internal: rebuilt)."""


@dataclass(frozen=True)
class Part:
    """One array of the cache: where its data lies in its (checked) file, and what it is."""

    file: Path
    offset: int
    nbytes: int
    shape: tuple[int, ...]
    dtype: np.dtype


def attach(folder: Path, stamp: str, parts: dict[str, Part],
           verify: Callable[[str, np.ndarray], None]) -> dict[str, np.ndarray]:
    """The read-only arrays of the checked cache ``folder``, shared if possible; ``verify``
    checks every copy made from the files (a sealed copy found again cannot change)."""
    if SHARE:
        try:
            mapping, offsets = _shared(folder, stamp, parts, verify)
        except (OSError, ValueError) as err:  # no memfd, /proc, seals or room: go private
            log.debug("no shared copy of %s (%s); reading it privately", folder, err)
        else:
            return {n: _view(mapping, offsets[n], part) for n, part in parts.items()}
    arrays = {n: _read_private(part) for n, part in parts.items()}
    for n, array in arrays.items():
        verify(n, array)
    return arrays


def _view(buffer, offset: int, part: Part) -> np.ndarray:
    count = part.nbytes // part.dtype.itemsize
    return np.frombuffer(buffer, part.dtype, count, offset).reshape(part.shape)


def _read_private(part: Part) -> np.ndarray:
    """The part read into this process's memory; a file that shrank meanwhile is CacheDamaged."""
    out = np.fromfile(part.file, part.dtype, part.nbytes // part.dtype.itemsize, offset=part.offset)
    if out.nbytes != part.nbytes:
        raise CacheDamaged(f"{part.file.name}: ended after {out.nbytes} of {part.nbytes} "
                           "data bytes")
    out = out.reshape(part.shape)
    out.flags.writeable = False
    return out


def _shared(folder: Path, stamp: str, parts: dict[str, Part],
            verify: Callable[[str, np.ndarray], None]) -> tuple[mmap.mmap, dict[str, int]]:
    """The recorded shared copy if it is still there and right, else a new one, recorded."""
    if not hasattr(os, "memfd_create"):
        raise OSError("no memfd on this platform")
    offsets, total = {}, 0
    for pname in sorted(parts):   # each part page-aligned
        offsets[pname] = total
        total += -(-parts[pname].nbytes // _PAGE) * _PAGE
    record = folder.parent / f"{folder.name}.shared"
    want = {"stamp": stamp, "offsets": offsets, "size": total}   # what its record must say
    fd = _open_recorded(record, want)
    name = None
    if fd is None:
        fd, name = _make_copy(folder.name, parts, offsets, total)
    try:
        mapping = mmap.mmap(fd, total, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    except BaseException:
        os.close(fd)
        raise
    # our descriptor stays open while the mapping lives: others find it in /proc/<pid>/fd
    weakref.finalize(mapping, os.close, fd)
    if name is not None:
        for pname, part in parts.items():
            verify(pname, _view(mapping, offsets[pname], part))
        _record(record, {"pid": os.getpid(), "fd": fd, "name": name, **want})
    return mapping, offsets


def _open_recorded(record: Path, want: dict) -> int | None:
    """A descriptor to the recorded memfd, or None if the record is absent, stale (its process
    ended or closed it; a pid or descriptor reused: the name tells) or not ``want``'s copy."""
    try:
        info = json.loads(record.read_text())
        if any(info[k] != v for k, v in want.items()):
            return None
        fd = os.open(f"/proc/{int(info['pid'])}/fd/{int(info['fd'])}", os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        if (os.readlink(f"/proc/self/fd/{fd}") == f"/memfd:{info['name']} (deleted)"
                and fcntl.fcntl(fd, fcntl.F_GET_SEALS) & seals == seals
                and os.fstat(fd).st_size == want["size"]):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _make_copy(key: str, parts: dict[str, Part], offsets: dict[str, int], total: int
               ) -> tuple[int, str]:
    """(descriptor, name) of a new sealed memfd holding every part; CacheDamaged if one is short."""
    name = f"cifarlab-{key}-{secrets.token_hex(6)}"
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, total)
        for pname, part in parts.items():
            os.lseek(fd, offsets[pname], os.SEEK_SET)
            with open(part.file, "rb", buffering=0) as f:
                done = 0
                while done < part.nbytes:  # a syscall: a file cut meanwhile reads short
                    n = os.sendfile(fd, f.fileno(), part.offset + done, part.nbytes - done)
                    if not n:
                        raise CacheDamaged(f"{part.file.name}: ended after {done} of "
                                           f"{part.nbytes} data bytes")
                    done += n
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                    | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd, name


def _record(record: Path, info: dict) -> None:
    """Say where the new copy is (atomically; the last writer wins, both copies are good)."""
    tmp = record.with_name(f".{record.name}.{os.getpid()}")
    try:
        tmp.write_text(json.dumps(info))
        os.replace(tmp, record)
    except OSError as err:  # a read-only cache folder: this process keeps its copy unshared
        log.debug("could not record the shared copy in %s: %s", record, err)
        tmp.unlink(missing_ok=True)
