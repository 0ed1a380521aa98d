"""The run store: every training (and timing) run, its step losses, events and result, in SQLite.

    store = RunStore(settings.db_path)             # home/runs.db; checkpoints in home/checkpoints
    run_id = store.create_run(session, "train", cfg.to_dict(), "cpu", owner="cookie-1234")
    store.append_losses(run_id, [1, 2, 3], [2.30, 2.29, 2.31])
    steps, losses = store.losses(run_id, max_points=500)     # downsampled for a chart
    store.get(run_id).status                                  # "queued", "running", "done", ...

The SQLite file (WAL mode, a connection per thread and process, so a ``RunStore`` can be handed
to another thread or pickled to a worker process), its tables and migrations are in
``cifarlab.serve.schema``; ids, statuses, ``Run`` in ``cifarlab.serve.runs``; backups in
``cifarlab.serve.backup``.

A checkpoint's path is always computed here as ``<checkpoint dir>/<validated id>.pth``.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from cifarlab.errors import JobError
from cifarlab.serve.backup import StoreDamaged, open_checked
from cifarlab.serve.runs import (ACTIVE, FINISHED, RUN_ID_RE, STATUSES, Run, RunEvent, new_run_id,
                                 pid_alive, reason, validate_kind, validate_owner,
                                 validate_run_id, validate_session, validate_statuses)
from cifarlab.serve.schema import JSON_COLUMNS, RUN_COLUMNS, SCHEMA_VERSION, Database

__all__ = ["RunStore", "SCHEMA_VERSION", "pid_alive", "validate_run_id"]

_SELECT = f"SELECT {', '.join(RUN_COLUMNS)} FROM runs"
# what set_status may write besides the status (checkpoint and timestamps are the store's)
_STATUS_FIELDS = ("error", "error_code", "error_params", "traceback", "result", "env",
                  "worker_pid", "waited_s", "progress")


def clean_name(name: str | None) -> str | None:
    """A run's name as stored: one line, spaces collapsed, at most 100 characters."""
    if name is None:
        return None
    return " ".join(str(name).split())[:100] or None


class RunStore(Database):
    """SQLite run store at ``path``; checkpoints in ``checkpoint_dir`` (default: beside it).
    A damaged file is moved aside and the store recovered (``cifarlab.serve.backup``):
    ``recovery`` then says what was lost, in words."""

    recovery: StoreDamaged | None = None

    def __init__(self, path: str | os.PathLike, checkpoint_dir: str | os.PathLike | None = None,
                 upto: int = SCHEMA_VERSION):
        path = Path(path).resolve()
        self.checkpoint_dir = (Path(checkpoint_dir) if checkpoint_dir is not None
                               else path.parent / "checkpoints").resolve()
        self.recovery = open_checked(self, super().__init__, path, upto)

    # -- paths -------------------------------------------------------------------------------
    def checkpoint_path(self, run_id: str) -> Path:
        """``<checkpoint dir>/<id>.pth``, for a validated id only."""
        return self.checkpoint_dir / f"{validate_run_id(run_id)}.pth"

    def remove_partial_checkpoints(self, run_id: str | None = None) -> list[Path]:
        """Delete checkpoints a worker was still writing when it died (``.<id>.pth.*.tmp``,
        see ``cifarlab.core.checkpoint``): one run's, or every one whose run is not running
        (and any whose name is not a run's). Returns the files removed."""
        if run_id is not None:
            files = self.checkpoint_dir.glob(f".{validate_run_id(run_id)}.pth.*.tmp")
        else:
            running = {r.id for r in self.list_runs(statuses=["running"])}
            files = (p for p in self.checkpoint_dir.glob(".*.pth.*.tmp")
                     if p.name[1:33] not in running or not RUN_ID_RE.fullmatch(p.name[1:33]))
        removed = []
        for path in files:
            try:
                path.unlink()
                removed.append(path)
            except FileNotFoundError:  # its writer finished (renamed it) just now
                pass
        return removed

    # -- runs --------------------------------------------------------------------------------
    def rename(self, run_id: str, name: str | None) -> None:
        """Give a run a name (None or blank: no name, the page shows its id)."""
        with self._write() as c:
            c.execute("UPDATE runs SET name = ? WHERE id = ?",
                      (clean_name(name), validate_run_id(run_id)))

    def create_run(self, session: str, kind: str, config: dict, device: str,
                   name: str | None = None, exclusive: bool | Iterable[str] = False,
                   owner: str | None = None, image_epochs: int | None = None) -> str:
        """Queue a new run; returns its id. ``owner``: the person (default: the session).

        ``exclusive``: True keeps ``device`` to itself while it runs; a list of devices keeps
        each of them (and ``device``): it starts only when they are all idle, and nothing else
        starts on them until it has finished.
        """
        validate_session(session)
        owner = validate_owner(session if owner is None else owner)
        validate_kind(kind)
        name = clean_name(name)
        if isinstance(exclusive, bool):
            holds = [str(device)] if exclusive else []
        else:
            holds = sorted({str(d) for d in exclusive} | {str(device)})
        run_id = new_run_id()
        with self._write() as c:
            c.execute("INSERT INTO runs (id, session, owner, kind, name, status, device, holds, "
                      "config, image_epochs, created_at) "
                      "VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
                      (run_id, session, owner, kind, name, str(device), _dumps(holds or None),
                       _dumps(config), None if image_epochs is None else int(image_epochs),
                       time.time()))
        return run_id

    def get(self, run_id: str) -> Run | None:
        """The run, or None when there is no such run."""
        validate_run_id(run_id)
        row = self._conn().execute(f"{_SELECT} WHERE id = ?", (run_id,)).fetchone()
        return _run(row) if row else None

    def list_runs(self, session: str | None = None, statuses: Iterable[str] | None = None,
                  kind: str | None = None, limit: int | None = None) -> list[Run]:
        """Runs, newest first; ``session=None`` lists everyone's."""
        where, args = [], []
        if session is not None:
            where.append("session = ?")
            args.append(validate_session(session))
        if statuses is not None:
            statuses = validate_statuses(statuses)
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            args.extend(statuses)
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        sql = _SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, rowid DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_run(row) for row in self._conn().execute(sql, args)]

    def queued(self) -> list[Run]:
        """Queued runs, first come first served (oldest first)."""
        return [_run(row) for row in self._conn().execute(
            f"{_SELECT} WHERE status = 'queued' ORDER BY created_at, rowid")]

    def set_status(self, run_id: str, status: str, *, only_from: Sequence[str] | None = None,
                   **fields: Any) -> bool:
        """Move a run to ``status``; True if it changed.

        ``only_from``: change it only if it is in one of these statuses now (so a late writer
        never overwrites an outcome already recorded). ``fields``: error, error_code,
        error_params (see ``runs.reason``), traceback, result, env, worker_pid, waited_s,
        progress. Timestamps are set here: ``running`` sets started_at (and waited_s, the time
        since it was queued, unless given) and a heartbeat; a finished status sets finished_at
        and records the checkpoint if its file exists.
        """
        validate_run_id(run_id)
        (status,) = validate_statuses([status])
        unknown = sorted(set(fields) - set(_STATUS_FIELDS))
        if unknown:  # checkpoint paths and timestamps are the store's to set
            raise JobError("serve.store.bad_fields", fields=", ".join(unknown))
        now = time.time()
        sets, args = ["status = ?"], [status]
        for key, value in fields.items():
            sets.append(f"{key} = ?")
            args.append(_dumps(value) if key in JSON_COLUMNS else value)
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
            allowed = validate_statuses(only_from)
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
            raise JobError("serve.store.steps_losses", steps=len(steps), losses=len(losses))
        now = time.time()
        with self._write() as c:
            if steps:
                c.executemany("INSERT OR REPLACE INTO losses (run_id, step, loss) VALUES (?, ?, ?)",
                              [(run_id, int(s), _finite_or_none(v)) for s, v in zip(steps, losses)])
            if events:
                seq = c.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?",
                                (run_id,)).fetchone()[0]
                c.executemany("INSERT INTO events (run_id, seq, kind, data, t) "
                              "VALUES (?, ?, ?, ?, ?)",
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
                raise JobError("serve.store.still_active", field="run_id")
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

    def counts(self, session: str | None = None, owner: str | None = None) -> dict[str, int]:
        """How many runs are in each status (all of them, one session's, or one owner's)."""
        sql, where, args = "SELECT status, COUNT(*) FROM runs", [], []
        if session is not None:
            where.append("session = ?")
            args.append(validate_session(session))
        if owner is not None:
            where.append("owner = ?")
            args.append(validate_owner(owner))
        if where:
            sql += " WHERE " + " AND ".join(where)
        out = dict.fromkeys(STATUSES, 0)
        out.update(dict(self._conn().execute(sql + " GROUP BY status", args).fetchall()))
        return out

    def image_epochs_since(self, owner: str, since: float) -> list[tuple[float, int]]:
        """(created_at, image_epochs) of the owner's runs created since ``since`` that used or
        will use compute: queued, running or finished, but not those ended before they started
        (cancelled while queued). Oldest first."""
        rows = self._conn().execute(
            "SELECT created_at, image_epochs FROM runs WHERE owner = ? AND created_at >= ? AND "
            "image_epochs > 0 AND NOT (started_at IS NULL AND status NOT IN ('queued', "
            "'running')) ORDER BY created_at", (validate_owner(owner), float(since)))
        return [(t, int(n)) for t, n in rows.fetchall()]

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
                why = (reason("serve.store.restarted_at", step=step, total=total)
                       if step is not None and total else reason("serve.store.restarted"))
                if self.set_status(run.id, "interrupted", only_from=["running"], **why):
                    marked.append(run.id)
        return marked


def _run(row: Sequence[Any]) -> Run:
    d = dict(zip(RUN_COLUMNS, row))
    for key in JSON_COLUMNS:
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
    return str(obj)  # a Path, or anything else: its text


def _finite_or_none(value: float) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value
