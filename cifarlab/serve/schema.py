"""The run store's SQLite file: connections, WAL mode, the tables, and the migrations that bring
an older ``runs.db`` up to date (``RunStore`` in ``cifarlab.serve.store`` holds the queries).

One file, WAL mode (readers never block the writer and the writer never blocks readers),
``synchronous=NORMAL`` and a busy timeout: the serving process (scheduler + pages) and one
worker process per run use it at the same time. Each thread of each process opens its own
connection (a ``Database`` can be handed to another thread, or pickled to another process, and
reconnects there); a connection is never shared across processes.

A new file gets schema 1 and then every migration, in order, so a store created today and one
created before a migration end up with the same tables. ``PRAGMA user_version`` says how far a
file has come; a file from a newer CIFAR Lab (a higher version) is refused, never changed.

- 1: runs, losses, events.
- 2: ``owner`` (the person behind a run, counted by the per-person limits across tabs; an older
  run's owner is its session), ``image_epochs`` (the compute a run asked for), ``error_code`` and
  ``error_params`` (why it failed, in any language).
- 3: the classroom (``cifarlab.serve.classroom``): ``classes`` (code, title, open, the pushed
  preset and its locked knobs, the class limits, the pinned run, a ``version`` each edit bumps),
  ``class_members`` (who joined which class, under which nickname), ``class_runs`` (the runs
  submitted while a member: the board and the challenge find them), ``challenges``.
"""
from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from cifarlab.errors import JobError
from cifarlab.serve import disk

SCHEMA_VERSION = 3
BUSY_TIMEOUT_S = 15.0

_SCHEMA_1 = """
CREATE TABLE runs (
    id               TEXT PRIMARY KEY CHECK (length(id) = 32),
    session          TEXT NOT NULL,
    kind             TEXT NOT NULL,
    name             TEXT,
    status           TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed',
                                                      'cancelled', 'interrupted')),
    device           TEXT NOT NULL,
    holds            TEXT,                   -- JSON list: devices it keeps to itself (exclusive)
    config           TEXT NOT NULL,          -- JSON: the TrainConfig (or job payload)
    created_at       REAL NOT NULL,
    started_at       REAL,
    finished_at      REAL,
    error            TEXT,                   -- one line, in English
    traceback        TEXT,                   -- for the host only
    result           TEXT,                   -- JSON: TrainResult.summary() or the job's dict
    env              TEXT,                   -- JSON: versions, CPU, GPU
    checkpoint       TEXT,                   -- set by the store: <checkpoint dir>/<id>.pth
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    worker_pid       INTEGER,
    heartbeat        REAL,
    progress         TEXT,                   -- JSON: the latest progress event
    waited_s         REAL                    -- seconds from queued to started
);
CREATE INDEX runs_by_session ON runs (session, created_at);
CREATE INDEX runs_by_status ON runs (status, device, created_at);
CREATE TABLE losses (
    run_id TEXT NOT NULL,
    step   INTEGER NOT NULL,
    loss   REAL,                             -- NULL stores a NaN (an exploded loss)
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
CREATE TABLE events (
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,                 -- 1, 2, 3, ... per run
    kind   TEXT NOT NULL,                    -- start | running_loss | epoch | eval | done | ...
    data   TEXT NOT NULL,                    -- JSON
    t      REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
"""

# version -> the statements that bring a file from version - 1 to it
MIGRATIONS: dict[int, str] = {
    2: """
ALTER TABLE runs ADD COLUMN owner TEXT;
UPDATE runs SET owner = session;
ALTER TABLE runs ADD COLUMN image_epochs INTEGER;
ALTER TABLE runs ADD COLUMN error_code TEXT;
ALTER TABLE runs ADD COLUMN error_params TEXT;   -- JSON
CREATE INDEX runs_by_owner ON runs (owner, created_at);
""",
    3: """
CREATE TABLE classes (
    code       TEXT PRIMARY KEY,          -- blue-fox-42
    title      TEXT NOT NULL,
    created_by TEXT NOT NULL,             -- the instructor (Person.id)
    is_open    INTEGER NOT NULL DEFAULT 1,
    version    INTEGER NOT NULL DEFAULT 1,
    preset     TEXT NOT NULL DEFAULT '{}', -- JSON: knob -> value
    locked     TEXT NOT NULL DEFAULT '[]', -- JSON: knob names
    limits     TEXT NOT NULL DEFAULT '{}', -- JSON: ClassLimits
    pinned     TEXT,                      -- the run on the projector
    created_at REAL NOT NULL
);
CREATE INDEX classes_by_creator ON classes (created_by, created_at);
CREATE TABLE class_members (
    code      TEXT NOT NULL,
    person    TEXT NOT NULL,              -- Person.id, the owner of their runs
    nickname  TEXT NOT NULL,
    nick_key  TEXT NOT NULL,              -- casefolded: one nickname per class
    joined_at REAL NOT NULL,
    active    INTEGER NOT NULL DEFAULT 1, -- 0 once left (their runs stay on the boards)
    PRIMARY KEY (code, person),
    UNIQUE (code, nick_key)
);
CREATE INDEX class_members_by_person ON class_members (person, active);
CREATE TABLE class_runs (
    run_id     TEXT PRIMARY KEY,
    code       TEXT NOT NULL,
    person     TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX class_runs_by_code ON class_runs (code, created_at);
CREATE INDEX class_runs_by_person ON class_runs (person, code);
CREATE TABLE challenges (
    id        INTEGER PRIMARY KEY,
    code      TEXT NOT NULL,
    goal      TEXT NOT NULL,              -- JSON: Goal
    opened_by TEXT NOT NULL,
    opened_at REAL NOT NULL,
    closed_at REAL
);
CREATE INDEX challenges_by_code ON challenges (code, id);
""",
}

RUN_COLUMNS = ("id", "session", "owner", "kind", "name", "status", "device", "holds", "config",
               "image_epochs", "created_at", "started_at", "finished_at", "error", "error_code",
               "error_params", "traceback", "result", "env", "checkpoint", "cancel_requested",
               "worker_pid", "heartbeat", "progress", "waited_s")
JSON_COLUMNS = ("config", "result", "env", "progress", "holds", "error_params")


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def migrate(conn: sqlite3.Connection, path: Path, upto: int = SCHEMA_VERSION) -> int:
    """Create or upgrade the tables inside the caller's write transaction; returns the version
    the file had. ``upto`` stops early (tests make an old file that way)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise JobError("serve.store.newer_schema", path=str(path), version=version,
                       known=SCHEMA_VERSION)
    if version == 0:
        _run_script(conn, _SCHEMA_1)
    for target in range(max(version, 1) + 1, upto + 1):
        _run_script(conn, MIGRATIONS[target])
    if upto != version:
        conn.execute(f"PRAGMA user_version = {int(upto)}")
    return version


class Database:
    """The SQLite file at ``path``, its tables brought up to ``upto``; one connection per
    thread and process."""

    def __init__(self, path: str | os.PathLike, upto: int = SCHEMA_VERSION):
        self.path = Path(path).resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        mode = self._conn().execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # e.g. a network file system without shared memory
            raise JobError("serve.store.no_wal", path=str(self.path), mode=str(mode))
        with self._write() as c:
            migrate(c, self.path, upto)

    def __getstate__(self) -> dict:  # a connection never travels: the copy opens its own
        return {k: v for k, v in self.__dict__.items() if k != "_local"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection:
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA synchronous = NORMAL")
            local.conn, local.pid = conn, os.getpid()
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction. A full disk is ``JobError("serve.store.disk_full")`` (the
        transaction rolled back, nothing half-written), not SQLite's English error."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite may have rolled it back itself (SQLITE_FULL)
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as err:
            if disk.is_full(err):
                raise disk.store_full(err, self.path) from None
            raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """Several SELECTs that see one consistent snapshot."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (the next call opens a new one)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def journal_mode(self) -> str:
        return self._conn().execute("PRAGMA journal_mode").fetchone()[0]

    def schema_version(self) -> int:
        return self._conn().execute("PRAGMA user_version").fetchone()[0]
