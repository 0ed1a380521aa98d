"""A runs.db as an older CIFAR Lab left it: version 1's tables, as they were written then, brought
forward by the migrations to ``version`` (``RunStore(..., upto=version)``)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from cifarlab.serve.schema import stored_version
from cifarlab.serve.store import RunStore

VERSION_1 = """
CREATE TABLE runs (
    id               TEXT PRIMARY KEY CHECK (length(id) = 32),
    session          TEXT NOT NULL,
    kind             TEXT NOT NULL,
    name             TEXT,
    status           TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed',
                                                      'cancelled', 'interrupted')),
    device           TEXT NOT NULL,
    holds            TEXT,
    config           TEXT NOT NULL,
    created_at       REAL NOT NULL,
    started_at       REAL,
    finished_at      REAL,
    error            TEXT,
    traceback        TEXT,
    result           TEXT,
    env              TEXT,
    checkpoint       TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    worker_pid       INTEGER,
    heartbeat        REAL,
    progress         TEXT,
    waited_s         REAL
);
CREATE INDEX runs_by_session ON runs (session, created_at);
CREATE INDEX runs_by_status ON runs (status, device, created_at);
CREATE TABLE losses (
    run_id TEXT NOT NULL,
    step   INTEGER NOT NULL,
    loss   REAL,
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
CREATE TABLE events (
    run_id TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    kind   TEXT NOT NULL,
    data   TEXT NOT NULL,
    t      REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
PRAGMA user_version = 1;
"""


def old_store(path: Path, version: int = 1) -> RunStore:
    """A SQLite run store at ``path`` at schema ``version`` (1 to the current one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(VERSION_1)
    conn.close()
    return RunStore(path, upto=version)


def schema_version(store: RunStore) -> int:
    with store._read() as c:
        return stored_version(c)
