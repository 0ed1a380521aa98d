"""Rolling backups of the SQLite run store, and recovery of a damaged one from them."""
from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Callable

from cifarlab.errors import JobError
from cifarlab.serve import disk

log = logging.getLogger("cifarlab.serve.backup")

_PREFIX, _SUFFIX = "runs-", ".db"


class StoreDamaged(JobError):
    """A notice for every student: the run store was recovered, or started fresh."""


def backup_dir(db_path: str | os.PathLike) -> Path:
    return Path(db_path).resolve().parent / "backups"


def check_file(path: str | os.PathLike) -> None:
    """sqlite3.DatabaseError unless ``path`` opens and passes ``PRAGMA quick_check``."""
    with closing(sqlite3.connect(path, timeout=15.0)) as conn:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    if rows != [("ok",)]:
        raise sqlite3.DatabaseError("database disk image is malformed: "
                                    + "; ".join(str(r[0]) for r in rows[:3]))


def copy_database(src: str | os.PathLike, dest: Path) -> None:
    """A consistent copy of the SQLite file ``src`` at ``dest`` (written beside it, renamed)."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with (closing(sqlite3.connect(src, timeout=15.0)) as source,
              closing(sqlite3.connect(tmp)) as target):
            source.backup(target)
            target.execute("PRAGMA journal_mode = DELETE")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def generations(folder: Path) -> list[Path]:
    """The copies in ``folder``, newest first."""
    return sorted(folder.glob(f"{_PREFIX}*{_SUFFIX}"), reverse=True) if folder.is_dir() else []


class Backups:
    """A copy of the run store every ``every_s`` seconds while ``start``ed, and one at ``stop``."""

    # keep: the newest copy, and two older in case it is bad too
    def __init__(self, db_path: str | os.PathLike, every_s: float = 300.0, keep: int = 3):
        self.db_path = Path(db_path).resolve()
        self.folder = backup_dir(self.db_path)
        self.every_s = float(every_s)
        self.keep = max(1, int(keep))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._seen: tuple | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="cifarlab-backups", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the timer and make a last copy."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(30.0)
        self.backup_now()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.backup_now()

    def _state(self) -> tuple:
        """What changes whenever the store does (its file's and its write-ahead log's)."""
        out = []
        for p in (self.db_path, self.db_path.with_name(self.db_path.name + "-wal")):
            try:
                st = p.stat()
                out.append((st.st_size, st.st_mtime_ns))
            except FileNotFoundError:
                out.append(None)
        return tuple(out)

    def backup_now(self) -> Path | None:
        """Copy the store unless unchanged since the last copy; the copy's path, or None."""
        with self._lock:
            state = self._state()
            if state == self._seen or not self.db_path.is_file():
                return None
            stamp = time.strftime("%Y%m%d-%H%M%S")
            dest = self.folder / f"{_PREFIX}{stamp}{_SUFFIX}"
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                copy_database(self.db_path, dest)
            except (OSError, sqlite3.Error) as err:
                log.warning("cifarlab: could not back up the run store %s to %s (%s); the "
                            "older copies are kept", self.db_path, dest, err)
                return None
            self._seen = state
            for old in generations(self.folder)[self.keep:]:
                old.unlink(missing_ok=True)
            return dest


def open_checked(db, init: Callable[[], None]) -> StoreDamaged | None:
    """Open (``init``) and check the SQLite store ``db``; a damaged one recovered: the notice."""
    try:
        init()
        check_file(db.path)
        return None
    except sqlite3.DatabaseError as err:
        if disk.is_full(err):
            raise disk.store_full(err, db.path) from None
        name = getattr(err, "sqlite_errorname", "") or ""
        if not (name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT"))
                or "not a database" in str(err) or "malformed" in str(err)):
            raise
        db.close()  # the connection to the damaged file
        notice = recover(db.path, err)
    init()
    return notice


def recover(db_path: str | os.PathLike, why: BaseException) -> StoreDamaged:
    """Move the damaged store aside and put back the newest sound copy, or none (empty)."""
    path = Path(db_path).resolve()
    aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        for suffix in ("", "-wal", "-shm"):  # the log and index belong to the damaged file
            part = path.with_name(path.name + suffix)
            if part.exists():
                os.replace(part, aside.with_name(aside.name + suffix))
    except OSError as err:
        log.error("cifarlab: the run store %s is damaged (%s) and could not be moved aside: %s",
                  path, why, err)
        raise JobError("serve.store.not_recovered", detail=err.strerror or str(err)) from None
    log.error("cifarlab: the run store %s is damaged (%s); it was moved aside to %s", path, why,
              aside)
    for copy in generations(backup_dir(path)):
        try:
            check_file(copy)
            copy_database(copy, path)
        except (OSError, sqlite3.Error) as err:
            log.error("cifarlab: the backup %s cannot be used either (%s)", copy, err)
            path.unlink(missing_ok=True)
            continue
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(copy.stat().st_mtime))
        log.error("cifarlab: the run store was restored from %s (%s); runs started or finished "
                  "after it are lost", copy, when)
        return StoreDamaged("serve.store.recovered", when=when)
    log.error("cifarlab: no usable backup in %s: the run store starts empty",
              backup_dir(path))
    return StoreDamaged("serve.store.started_fresh")
