"""The run store: every training (and timing) run, its step losses, events and result, in SQLite.

    store = RunStore(settings.db_path)             # home/runs.db; checkpoints in home/checkpoints
    run_id = store.create_run(session, "train", cfg.to_dict(), "cpu")
    store.append_losses(run_id, [1, 2, 3], [2.30, 2.29, 2.31])
    steps, losses = store.losses(run_id, max_points=500)     # downsampled for a chart
    store.get(run_id).status                                  # "queued", "running", "done", ...

One file, WAL mode (readers never block the writer and the writer never blocks readers),
``synchronous=NORMAL`` and a busy timeout: the serving process (scheduler + pages) and one
worker process per run use it at the same time. Each thread of each process opens its own
connection (a ``RunStore`` can be handed to another thread, or pickled to another process, and
reconnects there); a connection is never shared across processes.

Run ids are 32 lowercase hex digits (``uuid4().hex``). Every id that comes from outside goes
through ``validate_run_id`` before it is used, and a checkpoint's path is always computed here as
``<checkpoint dir>/<validated id>.pth``: nothing a browser sends ever becomes a file path.

Statuses: ``queued`` → ``running`` → ``done`` | ``failed`` | ``cancelled``; ``interrupted`` when
the server stopped under a running run. A queued run can also go straight to ``cancelled``.
"""
from __future__ import annotations

import json
import math
import os
import re
import sqlite3
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from cifarlab.errors import JobError

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 15.0

RUN_ID_RE = re.compile(r"[0-9a-f]{32}")
SESSION_RE = re.compile(r"[A-Za-z0-9_-]{8,64}")
KIND_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")

STATUSES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
ACTIVE = ("queued", "running")
FINISHED = ("done", "failed", "cancelled", "interrupted")

_SCHEMA = """
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
    error            TEXT,                   -- one line a student can read
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

_RUN_COLUMNS = ("id", "session", "kind", "name", "status", "device", "holds", "config",
                "created_at", "started_at", "finished_at", "error", "traceback", "result", "env",
                "checkpoint", "cancel_requested", "worker_pid", "heartbeat", "progress",
                "waited_s")
_JSON_COLUMNS = ("config", "result", "env", "progress", "holds")
# what set_status may write besides the status (checkpoint and timestamps are the store's)
_STATUS_FIELDS = ("error", "traceback", "result", "env", "worker_pid", "waited_s", "progress")


def validate_run_id(run_id: Any) -> str:
    """``run_id`` if it is 32 lowercase hex digits, else JobError (it never reaches a path)."""
    if isinstance(run_id, str) and RUN_ID_RE.fullmatch(run_id):
        return run_id
    shown = repr(run_id)[:40]
    raise JobError(f"{shown} is not a run id (a run id is 32 letters and digits, 0-9 and a-f).",
                   field="run_id")


def validate_session(session: Any) -> str:
    if isinstance(session, str) and SESSION_RE.fullmatch(session):
        return session
    raise JobError("This browser session has no valid id (8 to 64 letters, digits, '-' or '_'). "
                   "Reload the page.", field="session")


def new_run_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Run:
    """One row of ``runs``, with its JSON fields parsed."""

    id: str
    session: str
    kind: str
    name: str | None
    status: str
    device: str
    holds: tuple[str, ...]        # devices it keeps to itself while it runs (exclusive jobs)
    config: dict
    created_at: float
    started_at: float | None
    finished_at: float | None
    error: str | None
    traceback: str | None = field(repr=False)
    result: dict | None = field(repr=False)
    env: dict | None = field(repr=False)
    checkpoint: str | None
    cancel_requested: bool
    worker_pid: int | None
    heartbeat: float | None
    progress: dict | None
    waited_s: float | None

    @property
    def exclusive(self) -> bool:
        return bool(self.holds)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def seconds(self, now: float | None = None) -> float | None:
        """Seconds it has been running (or ran); None while queued."""
        if self.started_at is None:
            return None
        end = self.finished_at if self.finished_at is not None else (now or time.time())
        return max(0.0, end - self.started_at)


@dataclass(frozen=True)
class RunEvent:
    seq: int
    kind: str
    data: dict
    t: float


class RunStore:
    """SQLite run store at ``path``; checkpoints in ``checkpoint_dir`` (default: beside it)."""

    def __init__(self, path: str | os.PathLike, checkpoint_dir: str | os.PathLike | None = None):
        self.path = Path(path).resolve()
        self.checkpoint_dir = (Path(checkpoint_dir) if checkpoint_dir is not None
                               else self.path.parent / "checkpoints").resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._init_schema()

    # -- connections -------------------------------------------------------------------------
    def __getstate__(self) -> dict:
        return {"path": self.path, "checkpoint_dir": self.checkpoint_dir}

    def __setstate__(self, state: dict) -> None:
        self.path = state["path"]
        self.checkpoint_dir = state["checkpoint_dir"]
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

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.conn = None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """Several SELECTs that see one consistent snapshot."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def _init_schema(self) -> None:
        conn = self._conn()
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # e.g. a network file system without shared memory
            raise JobError(f"The run store '{self.path}' cannot use SQLite's WAL mode (got "
                           f"'{mode}'). Put CIFARLAB_HOME on a local disk.")
        with self._write() as c:
            version = c.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        c.execute(statement)
                c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version > SCHEMA_VERSION:
                raise JobError(f"The run store '{self.path}' was written by a newer CIFAR Lab "
                               f"(schema {version}, this one knows {SCHEMA_VERSION}).")

    def journal_mode(self) -> str:
        return self._conn().execute("PRAGMA journal_mode").fetchone()[0]

    def schema_version(self) -> int:
        return self._conn().execute("PRAGMA user_version").fetchone()[0]

    # -- paths -------------------------------------------------------------------------------
    def checkpoint_path(self, run_id: str) -> Path:
        """``<checkpoint dir>/<id>.pth``, for a validated id only."""
        return self.checkpoint_dir / f"{validate_run_id(run_id)}.pth"

    # -- runs --------------------------------------------------------------------------------
    def create_run(self, session: str, kind: str, config: dict, device: str,
                   name: str | None = None, exclusive: bool | Iterable[str] = False) -> str:
        """Queue a new run; returns its id.

        ``exclusive``: True keeps ``device`` to itself while it runs; a list of devices keeps
        each of them (and ``device``): it starts only when they are all idle, and nothing else
        starts on them until it has finished.
        """
        validate_session(session)
        if not isinstance(kind, str) or not KIND_RE.fullmatch(kind):
            raise JobError(f"{kind!r} is not a job kind.", field="kind")
        if name is not None:
            name = " ".join(str(name).split())[:100] or None
        if isinstance(exclusive, bool):
            holds = [str(device)] if exclusive else []
        else:
            holds = sorted({str(d) for d in exclusive} | {str(device)})
        run_id = new_run_id()
        with self._write() as c:
            c.execute("INSERT INTO runs (id, session, kind, name, status, device, holds, "
                      "config, created_at) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
                      (run_id, session, kind, name, str(device), _dumps(holds or None),
                       _dumps(config), time.time()))
        return run_id

    def get(self, run_id: str) -> Run | None:
        """The run, or None when there is no such run."""
        validate_run_id(run_id)
        row = self._conn().execute(f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs WHERE id = ?",
                                   (run_id,)).fetchone()
        return _run(row) if row else None

    def list_runs(self, session: str | None = None, statuses: Iterable[str] | None = None,
                  kind: str | None = None, limit: int | None = None) -> list[Run]:
        """Runs, newest first; ``session=None`` lists everyone's."""
        where, args = [], []
        if session is not None:
            where.append("session = ?")
            args.append(validate_session(session))
        if statuses is not None:
            statuses = _statuses(statuses)
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            args.extend(statuses)
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        sql = f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, rowid DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_run(row) for row in self._conn().execute(sql, args)]

    def queued(self) -> list[Run]:
        """Queued runs, first come first served (oldest first)."""
        return [_run(row) for row in self._conn().execute(
            f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs WHERE status = 'queued' "
            "ORDER BY created_at, rowid")]

    def set_status(self, run_id: str, status: str, *, only_from: Sequence[str] | None = None,
                   **fields: Any) -> bool:
        """Move a run to ``status``; True if it changed.

        ``only_from``: change it only if it is in one of these statuses now (so a late writer
        never overwrites an outcome already recorded). ``fields``: error, traceback, result,
        env, worker_pid, waited_s, progress. Timestamps are set here: ``running`` sets
        started_at (and waited_s, the time since it was queued, unless given) and a heartbeat;
        a finished status sets finished_at and records the checkpoint if its file exists.
        """
        validate_run_id(run_id)
        (status,) = _statuses([status])
        unknown = set(fields) - set(_STATUS_FIELDS)
        if unknown:
            raise TypeError(f"set_status() got unknown field(s): {', '.join(sorted(unknown))}")
        now = time.time()
        sets, args = ["status = ?"], [status]
        for key, value in fields.items():
            sets.append(f"{key} = ?")
            args.append(_dumps(value) if key in _JSON_COLUMNS else value)
        if status == "running":
            sets += ["started_at = ?", "heartbeat = ?"]
            args += [now, now]
            if "waited_s" not in fields:
                sets.append("waited_s = max(0, ? - created_at)")
                args.append(now)
        elif status in FINISHED:
            sets.append("finished_at = ?")
            args.append(now)
            path = self.checkpoint_path(run_id)
            sets.append("checkpoint = ?")
            args.append(str(path) if path.is_file() else None)
        sql = f"UPDATE runs SET {', '.join(sets)} WHERE id = ?"
        args.append(run_id)
        if only_from is not None:
            allowed = _statuses(only_from)
            sql += f" AND status IN ({', '.join('?' * len(allowed))})"
            args.extend(allowed)
        with self._write() as c:
            return c.execute(sql, args).rowcount == 1

    def set_worker_pid(self, run_id: str, pid: int) -> None:
        validate_run_id(run_id)
        with self._write() as c:
            c.execute("UPDATE runs SET worker_pid = ? WHERE id = ?", (int(pid), run_id))

    def heartbeat(self, run_id: str) -> None:
        validate_run_id(run_id)
        with self._write() as c:
            c.execute("UPDATE runs SET heartbeat = ? WHERE id = ?", (time.time(), run_id))

    # -- losses and events -------------------------------------------------------------------
    def record(self, run_id: str, *, steps: Sequence[int] = (), losses: Sequence[float] = (),
               events: Iterable[tuple[str, dict]] = (), progress: dict | None = None) -> None:
        """Write a batch in one transaction: step losses, events, the latest progress."""
        validate_run_id(run_id)
        steps, losses, events = list(steps), list(losses), list(events)
        if len(steps) != len(losses):
            raise ValueError(f"{len(steps)} steps but {len(losses)} losses")
        now = time.time()
        with self._write() as c:
            if steps:
                c.executemany("INSERT OR REPLACE INTO losses (run_id, step, loss) VALUES (?, ?, ?)",
                              [(run_id, int(s), _finite_or_none(v)) for s, v in zip(steps, losses)])
            if events:
                seq = c.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?",
                                (run_id,)).fetchone()[0]
                c.executemany("INSERT INTO events (run_id, seq, kind, data, t) VALUES (?, ?, ?, ?, ?)",
                              [(run_id, seq + i, str(kind), _dumps(data), now)
                               for i, (kind, data) in enumerate(events, 1)])
            if progress is not None:
                c.execute("UPDATE runs SET progress = ?, heartbeat = ? WHERE id = ?",
                          (_dumps(progress), now, run_id))

    def append_losses(self, run_id: str, steps: Sequence[int], losses: Sequence[float]) -> None:
        """Step losses, in one transaction (executemany)."""
        self.record(run_id, steps=steps, losses=losses)

    def add_event(self, run_id: str, kind: str, data: dict) -> None:
        self.record(run_id, events=[(kind, data)])

    def losses(self, run_id: str, since_step: int = 0,
               max_points: int | None = None) -> tuple[list[int], list[float]]:
        """(steps, losses) after ``since_step``, in step order.

        With ``max_points``, at most that many: every k-th point (the first included) and
        always the last, so a chart of a long run stays light and still ends where the run is.
        A NaN loss (the loss exploded) comes back as ``nan``.
        """
        validate_run_id(run_id)
        with self._read() as c:
            n = c.execute("SELECT COUNT(*) FROM losses WHERE run_id = ? AND step > ?",
                          (run_id, int(since_step))).fetchone()[0]
            if max_points is not None and n > max(1, int(max_points)):
                m = max(1, int(max_points))
                k = math.ceil(n / (m - 1)) if m > 1 else 0  # m - 1 evenly spaced + the last
                rows = c.execute(
                    "SELECT step, loss FROM (SELECT step, loss, ROW_NUMBER() OVER (ORDER BY step) "
                    "AS rn FROM losses WHERE run_id = ? AND step > ?) "
                    "WHERE (? > 0 AND (rn - 1) % ? = 0) OR rn = ? ORDER BY step",
                    (run_id, int(since_step), k, max(k, 1), n)).fetchall()
            else:
                rows = c.execute("SELECT step, loss FROM losses WHERE run_id = ? AND step > ? "
                                 "ORDER BY step", (run_id, int(since_step))).fetchall()
        return [r[0] for r in rows], [math.nan if r[1] is None else r[1] for r in rows]

    def loss_count(self, run_id: str) -> int:
        validate_run_id(run_id)
        return self._conn().execute("SELECT COUNT(*) FROM losses WHERE run_id = ?",
                                    (run_id,)).fetchone()[0]

    def events(self, run_id: str, kinds: Iterable[str] | None = None,
               since_seq: int = 0) -> list[RunEvent]:
        """Events after ``since_seq`` (pass the last seq you saw to get only new ones)."""
        validate_run_id(run_id)
        sql = "SELECT seq, kind, data, t FROM events WHERE run_id = ? AND seq > ?"
        args: list[Any] = [run_id, int(since_seq)]
        if kinds is not None:
            kinds = list(kinds)
            sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
            args.extend(kinds)
        rows = self._conn().execute(sql + " ORDER BY seq", args).fetchall()
        return [RunEvent(seq, kind, json.loads(data), t) for seq, kind, data, t in rows]

    # -- cancel, delete ----------------------------------------------------------------------
    def request_cancel(self, run_id: str) -> bool:
        """Ask a running run's worker to stop (it polls this); True if the run is active."""
        validate_run_id(run_id)
        with self._write() as c:
            return c.execute("UPDATE runs SET cancel_requested = 1 WHERE id = ? AND status IN "
                             "('queued', 'running')", (run_id,)).rowcount == 1

    def cancel_requested(self, run_id: str) -> bool:
        validate_run_id(run_id)
        row = self._conn().execute("SELECT cancel_requested FROM runs WHERE id = ?",
                                   (run_id,)).fetchone()
        return bool(row and row[0])

    def delete_run(self, run_id: str) -> bool:
        """Delete a finished run, its losses, events and checkpoint file; False if none."""
        validate_run_id(run_id)
        path = self.checkpoint_path(run_id)
        with self._write() as c:
            row = c.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                return False
            if row[0] in ACTIVE:
                raise JobError("This run is still queued or running: cancel it first, then "
                               "delete it.", field="run_id")
            c.execute("DELETE FROM losses WHERE run_id = ?", (run_id,))
            c.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
            c.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        path.unlink(missing_ok=True)
        return True

    # -- the queue ---------------------------------------------------------------------------
    def queue_position(self, run_id: str) -> int | None:
        """1 for the next queued run on its device, 2 for the one after, ...; None if not queued."""
        validate_run_id(run_id)
        row = self._conn().execute(
            "SELECT (SELECT COUNT(*) FROM runs q WHERE q.status = 'queued' AND q.device = r.device"
            " AND (q.created_at < r.created_at OR (q.created_at = r.created_at AND q.rowid <= "
            "r.rowid))) FROM runs r WHERE r.id = ? AND r.status = 'queued'", (run_id,)).fetchone()
        return row[0] if row else None

    def counts(self, session: str | None = None) -> dict[str, int]:
        """How many runs are in each status (all sessions, or one)."""
        sql, args = "SELECT status, COUNT(*) FROM runs", []
        if session is not None:
            sql += " WHERE session = ?"
            args.append(validate_session(session))
        out = dict.fromkeys(STATUSES, 0)
        out.update(dict(self._conn().execute(sql + " GROUP BY status", args).fetchall()))
        return out

    def running_by_device(self) -> dict[str, tuple[int, bool]]:
        """device -> (runs running on it, whether a running exclusive job holds it)."""
        out: dict[str, tuple[int, bool]] = {}
        rows = self._conn().execute("SELECT device, holds FROM runs WHERE status = 'running'")
        for device, holds in rows.fetchall():
            n, held = out.get(device, (0, False))
            out[device] = (n + 1, held)
            for d in json.loads(holds) if holds else ():
                out[d] = (out.get(d, (0, False))[0], True)
        return out

    def mark_interrupted_on_start(self, stale_after: float | None = None) -> list[str]:
        """After a restart: runs left ``running`` whose worker is gone become ``interrupted``.

        A worker counts as gone when its process no longer exists (or is a zombie), or, with
        ``stale_after``, when its heartbeat is older than that many seconds. Queued runs stay
        queued and run after the restart. Returns the ids marked.
        """
        now = time.time()
        marked = []
        for run in self.list_runs(statuses=["running"]):
            gone = not pid_alive(run.worker_pid)
            stale = (stale_after is not None
                     and (run.heartbeat is None or now - run.heartbeat > stale_after))
            if gone or stale:
                step = (run.progress or {}).get("step")
                total = (run.progress or {}).get("total_steps")
                where = f" at step {step} of {total}" if step is not None and total else ""
                reason = (f"The server restarted while this run was training{where}, so it was "
                          "stopped. Start it again to train it to the end.")
                if self.set_status(run.id, "interrupted", only_from=["running"], error=reason):
                    marked.append(run.id)
        return marked


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this id exists and is not a zombie."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _statuses(values: Iterable[str]) -> list[str]:
    values = [values] if isinstance(values, str) else list(values)
    bad = [v for v in values if v not in STATUSES]
    if bad:
        raise ValueError(f"unknown status(es) {bad}; known: {', '.join(STATUSES)}")
    return values


def _run(row: Sequence[Any]) -> Run:
    d = dict(zip(_RUN_COLUMNS, row))
    for key in _JSON_COLUMNS:
        d[key] = json.loads(d[key]) if d[key] is not None else None
    d["holds"] = tuple(d["holds"] or ())
    d["cancel_requested"] = bool(d["cancel_requested"])
    return Run(**d)


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=_json_default)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)


def _finite_or_none(value: float) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value
