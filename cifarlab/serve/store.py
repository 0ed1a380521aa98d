"""The run store: every run, its step losses, events and result. A checkpoint's path is always
computed here, ``<checkpoint dir>/<validated id>.pth``, never taken from a browser."""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Sequence

from sqlalchemy import case, delete, func, insert, select, text, update
from sqlalchemy.dialects import postgresql, sqlite

from cifarlab.errors import JobError
from cifarlab.serve.backup import StoreDamaged, open_checked
from cifarlab.serve.database import Database, store_url
from cifarlab.serve.runs import (ACTIVE, FINISHED, RUN_ID_RE, STATUSES, Run, RunEvent,
                                 pid_alive, reason, validate_owner, validate_run_id,
                                 validate_session)
from cifarlab.serve.schema import (COUNTERS, EVENTS, JSON_COLUMNS, LOSSES, QUEUE_POSITION,
                                   REPLICAS, RUNS, SCHEMA_VERSION, USED_COMPUTE)

R = RUNS.c
_SELECT = select(RUNS)
# newest first; equal times (a microsecond apart at most) in a fixed order
_NEWEST = (R.created_at.desc(), R.id.desc())
# what set_status may write besides the status (checkpoint and timestamps are the store's)
_STATUS_FIELDS = ("error", "error_code", "error_params", "traceback", "result", "env",
                  "worker_pid", "waited_s", "progress")
HOST = socket.gethostname()


def clean_name(name: str | None) -> str | None:
    """A run's name as stored: one line, spaces collapsed, at most 100 characters."""
    return None if name is None else " ".join(str(name).split())[:100] or None


def _run(row: Any) -> Run:
    d = dict(row._mapping)
    for key in JSON_COLUMNS:
        d[key] = json.loads(d[key]) if d[key] is not None else None
    d["holds"] = tuple(d["holds"] or ())
    d["cancel_requested"] = bool(d["cancel_requested"])
    return Run(**d)


def _dumps(value: Any) -> str | None:
    # numpy values as lists, a Path (or anything else) as its text
    return None if value is None else json.dumps(
        value, default=lambda obj: obj.tolist() if hasattr(obj, "tolist") else str(obj))


class RunStore(Database):
    """The run store at ``location``; a damaged SQLite file is recovered (``recovery``)."""

    recovery: StoreDamaged | None = None
    replica: str | None = None   # set by the queue: its runs are recorded as this replica's

    def __init__(self, location: str | os.PathLike, checkpoint_dir: str | os.PathLike | None = None,
                 upto: int = SCHEMA_VERSION):
        sqlite = store_url(location).get_backend_name() == "sqlite"
        if not sqlite and checkpoint_dir is None:   # before connecting: a caller's mistake
            raise ValueError("a database server's run store needs checkpoint_dir: the "
                             "checkpoints live in a folder, not in the database")
        if sqlite:
            init = super().__init__
            self.recovery = open_checked(self, lambda: init(location, upto))
        else:
            super().__init__(location, upto)
        self.checkpoint_dir = Path(checkpoint_dir or self.path.parent / "checkpoints").resolve()

    def checkpoint_path(self, run_id: str) -> Path:
        return self.checkpoint_dir / f"{validate_run_id(run_id)}.pth"

    def remove_partial_checkpoints(self, run_id: str | None = None) -> list[Path]:
        """Delete what a dead worker was still writing: one run's, or all but running runs'."""
        if run_id is not None:
            files = self.checkpoint_dir.glob(f".{validate_run_id(run_id)}.pth.*.tmp")
        else:
            running = {r.id for r in self.list_runs(statuses=["running"])}
            files = (p for p in self.checkpoint_dir.glob(".*.pth.*.tmp")
                     if p.name[1:33] not in running or not RUN_ID_RE.fullmatch(p.name[1:33]))
        removed = []
        for path in files:
            with contextlib.suppress(FileNotFoundError):  # its writer just finished (renamed it)
                path.unlink()
                removed.append(path)
        return removed

    def _update(self, run_id: str, **values: Any) -> None:
        with self._write() as c:
            c.execute(update(RUNS).where(R.id == validate_run_id(run_id)).values(**values))

    def rename(self, run_id: str, name: str | None) -> None:
        self._update(run_id, name=clean_name(name))

    def create_run(self, session: str, kind: str, config: dict, device: str,
                   name: str | None = None, exclusive: Iterable[str] = (),
                   owner: str | None = None, image_epochs: int | None = None) -> str:
        """Queue a new run; returns its id (``owner``, ``exclusive``: ``JobQueue.submit_job``)."""
        validate_session(session)
        owner = validate_owner(session if owner is None else owner)
        holds = sorted({str(d) for d in exclusive} | {str(device)}) if exclusive else None
        run_id = uuid.uuid4().hex
        with self._write() as c:
            c.execute(insert(RUNS).values(
                id=run_id, session=session, owner=owner, kind=kind, name=clean_name(name),
                status="queued", device=str(device), holds=_dumps(holds),
                config=_dumps(config), created_at=time.time(),
                image_epochs=None if image_epochs is None else int(image_epochs)))
        return run_id

    def get(self, run_id: str) -> Run | None:
        validate_run_id(run_id)
        with self._read() as c:
            row = c.execute(_SELECT.where(R.id == run_id)).first()
        return _run(row) if row else None

    def list_runs(self, session: str | None = None, statuses: Iterable[str] | None = None,
                  kind: str | None = None, limit: int | None = None) -> list[Run]:
        """Runs, newest first; ``session=None`` lists everyone's."""
        q = _SELECT
        if session is not None:
            q = q.where(R.session == validate_session(session))
        if statuses is not None:
            q = q.where(R.status.in_(list(statuses)))
        if kind is not None:
            q = q.where(R.kind == kind)
        q = q.order_by(*_NEWEST)
        if limit is not None:
            q = q.limit(int(limit))
        with self._read() as c:
            return [_run(row) for row in c.execute(q)]

    def set_status(self, run_id: str, status: str, *, only_from: Sequence[str] | None = None,
                   **fields: Any) -> bool:
        """Move a run to ``status`` if in ``only_from`` (no late writer overwrites an outcome)."""
        validate_run_id(run_id)
        unknown = sorted(set(fields) - set(_STATUS_FIELDS))
        if unknown:
            raise JobError("serve.store.bad_fields", fields=", ".join(unknown))
        now = time.time()
        values: dict[str, Any] = {"status": status}
        for key, value in fields.items():
            values[key] = _dumps(value) if key in JSON_COLUMNS else value
        if status == "running":
            values.update(started_at=now, heartbeat=now, replica=self.replica)
            if "waited_s" not in fields:
                values["waited_s"] = case((R.created_at < now, now - R.created_at), else_=0.0)
        elif status in FINISHED:
            path = self.checkpoint_path(run_id)
            values.update(finished_at=now, checkpoint=str(path) if path.is_file() else None)
        q = update(RUNS).where(R.id == run_id).values(**values)
        if only_from is not None:
            q = q.where(R.status.in_(list(only_from)))
        with self._write() as c:
            return c.execute(q).rowcount == 1

    def set_worker_pid(self, run_id: str, pid: int) -> None:
        self._update(run_id, worker_pid=int(pid))

    def heartbeat(self, run_id: str) -> None:
        self._update(run_id, heartbeat=time.time())

    def record(self, run_id: str, *, steps: Sequence[int] = (), losses: Sequence[float] = (),
               events: Sequence[tuple[str, dict]] = (), progress: dict | None = None) -> None:
        """Write a batch in one transaction."""
        validate_run_id(run_id)
        now = time.time()
        with self._write() as c:
            if steps:
                upsert = (postgresql if self.dialect == "postgresql" else sqlite).insert(LOSSES)
                upsert = upsert.on_conflict_do_update(
                    index_elements=["run_id", "step"], set_={"loss": upsert.excluded.loss})
                c.execute(upsert, [{"run_id": run_id, "step": int(s),
                                    "loss": None if math.isnan(v) else float(v)}
                                   for s, v in zip(steps, losses)])
            if events:
                seq = c.execute(select(func.coalesce(func.max(EVENTS.c.seq), 0))
                                .where(EVENTS.c.run_id == run_id)).scalar_one()
                c.execute(insert(EVENTS), [
                    {"run_id": run_id, "seq": seq + i, "kind": str(kind), "data": _dumps(data),
                     "t": now} for i, (kind, data) in enumerate(events, 1)])
            if progress is not None:
                c.execute(update(RUNS).where(R.id == run_id)
                          .values(progress=_dumps(progress), heartbeat=now))

    def losses(self, run_id: str, since_step: int = 0) -> tuple[list[int], list[float]]:
        """(steps, losses) after ``since_step``, in step order; an exploded loss is ``nan``."""
        validate_run_id(run_id)
        with self._read() as c:
            rows = c.execute(select(LOSSES.c.step, LOSSES.c.loss)
                             .where(LOSSES.c.run_id == run_id, LOSSES.c.step > int(since_step))
                             .order_by(LOSSES.c.step)).all()
        return [r[0] for r in rows], [math.nan if r[1] is None else r[1] for r in rows]

    def loss_count(self, run_id: str) -> int:
        validate_run_id(run_id)
        with self._read() as c:
            return c.execute(select(func.count()).select_from(LOSSES)
                             .where(LOSSES.c.run_id == run_id)).scalar_one()

    def events(self, run_id: str, kinds: Iterable[str] | None = None,
               since_seq: int = 0) -> list[RunEvent]:
        """Events after ``since_seq`` (pass the last seq you saw to get only new ones)."""
        validate_run_id(run_id)
        E = EVENTS.c
        q = select(E.seq, E.kind, E.data, E.t).where(E.run_id == run_id, E.seq > int(since_seq))
        if kinds is not None:
            q = q.where(E.kind.in_(list(kinds)))
        with self._read() as c:
            rows = c.execute(q.order_by(E.seq)).all()
        return [RunEvent(seq, kind, json.loads(data), t) for seq, kind, data, t in rows]

    def request_cancel(self, run_id: str) -> bool:
        """Ask a run's worker to stop (it polls this); True if the run is active."""
        with self._write() as c:
            return c.execute(update(RUNS).where(R.id == validate_run_id(run_id),
                                                R.status.in_(ACTIVE))
                             .values(cancel_requested=1)).rowcount == 1

    def cancel_requested(self, run_id: str) -> bool:
        validate_run_id(run_id)
        with self._read() as c:
            return bool(c.execute(select(R.cancel_requested).where(R.id == run_id)).scalar())

    def delete_run(self, run_id: str) -> bool:
        """Delete a finished run, its losses, events and checkpoint file; False if none."""
        validate_run_id(run_id)
        path = self.checkpoint_path(run_id)
        with self._write() as c:
            status = c.execute(select(R.status).where(R.id == run_id)).scalar()
            if status is None:
                return False
            if status in ACTIVE:
                raise JobError("serve.store.still_active", field="run_id")
            c.execute(delete(LOSSES).where(LOSSES.c.run_id == run_id))
            c.execute(delete(EVENTS).where(EVENTS.c.run_id == run_id))
            c.execute(delete(RUNS).where(R.id == run_id))
        path.unlink(missing_ok=True)
        return True

    def queue_position(self, run_id: str) -> int | None:
        """1 for the next queued run on its device, 2 for the one after, ...; None if not queued."""
        validate_run_id(run_id)
        with self._read() as c:
            return c.execute(text(f"SELECT {QUEUE_POSITION} FROM runs r WHERE r.id = :run AND "
                                  "r.status = 'queued'"), {"run": run_id}).scalar()

    def counts(self, owner: str | None = None) -> dict[str, int]:
        q = select(R.status, func.count()).group_by(R.status)
        if owner is not None:
            q = q.where(R.owner == validate_owner(owner))
        out = dict.fromkeys(STATUSES, 0)
        with self._read() as c:
            out.update({status: n for status, n in c.execute(q)})
        return out

    def image_epochs_since(self, owner: str, since: float) -> list[tuple[float, int]]:
        """(created_at, image_epochs) of the owner's runs since ``since`` that use compute."""
        with self._read() as c:
            rows = c.execute(text(
                "SELECT created_at, image_epochs FROM runs r WHERE owner = :owner AND created_at "
                f">= :since AND image_epochs > 0 AND {USED_COMPUTE} ORDER BY created_at"),
                {"owner": validate_owner(owner), "since": float(since)}).all()
        return [(t, int(n)) for t, n in rows]

    def running_by_device(self) -> dict[str, tuple[int, bool]]:
        """device -> (runs running on it, whether a running exclusive job holds it)."""
        out: dict[str, tuple[int, bool]] = {}
        with self._read() as c:
            rows = c.execute(select(R.device, R.holds).where(R.status == "running")).all()
        for device, holds in rows:
            n, held = out.get(device, (0, False))
            out[device] = (n + 1, held)
            for d in json.loads(holds) if holds else ():
                out[d] = (out.get(d, (0, False))[0], True)
        return out

    def orphans(self, stale_after: float | None = None, mine: Iterable[str] = (),
                alive: Iterable[str] = ()) -> list[Run]:
        """Runs left ``running`` by a worker that is gone (its process, on this machine, or its
        heartbeat older than ``stale_after``), but ``mine`` and those of replicas ``alive``."""
        now, mine, alive = time.time(), set(mine), set(alive)
        with self._read() as c:
            hosts = dict(c.execute(select(REPLICAS.c.id, REPLICAS.c.host)).all())
        out = []
        for run in self.list_runs(statuses=["running"]):
            if run.id in mine or (run.replica is not None and run.replica in alive):
                continue
            stale = (stale_after is not None
                     and (run.heartbeat is None or now - run.heartbeat > stale_after))
            here = run.replica is None or hosts.get(run.replica, HOST) == HOST
            if stale or (here and not pid_alive(run.worker_pid)):
                out.append(run)
        return out

    def interrupt_orphans(self, stale_after: float | None = None, mine: Iterable[str] = (),
                          alive: Iterable[str] = (), adopt=None) -> list[str]:
        """``orphans`` become ``interrupted``, but those ``adopt`` finds still going; their ids."""
        marked, orphans = [], self.orphans(stale_after, mine=mine, alive=alive)
        going = adopt(orphans) if adopt is not None and orphans else set()
        for run in orphans:
            if run.id in going:
                continue
            step = (run.progress or {}).get("step")
            total = (run.progress or {}).get("total_steps")
            why = (reason("serve.store.restarted_at", step=step, total=total)
                   if step is not None and total else reason("serve.store.restarted"))
            self.remove_partial_checkpoints(run.id)
            if self.set_status(run.id, "interrupted", only_from=["running"], **why):
                marked.append(run.id)
        return marked


class StoreCounters:
    """Failures by key, ``(count, time of the latest)``, forgotten after ``forget_s``, in the run
    store: every replica counts the same and a restart forgets nothing (times: ``time.time``)."""

    def __init__(self, db: Database, name: str, forget_s: float = 3600.0):
        self.db, self.name, self.forget_s = db, name, float(forget_s)

    def _key(self, key: str) -> str:
        return f"{self.name}:{hashlib.sha256(key.encode()).hexdigest()}"

    def get(self, key: str, now: float) -> tuple[int, float]:
        with self.db._read() as c:
            row = c.execute(select(COUNTERS.c.count, COUNTERS.c.last)
                            .where(COUNTERS.c.key == self._key(key))).first()
        if row is None or now - row[1] >= self.forget_s:
            return 0, 0.0
        return int(row[0]), float(row[1])

    def add(self, key: str, now: float) -> tuple[int, float]:
        """One more failure, in one statement (two replicas adding at once both count)."""
        C = COUNTERS.c
        ins = (postgresql if self.db.dialect == "postgresql" else sqlite).insert(COUNTERS)
        ins = ins.values(key=self._key(key), count=1, last=now).on_conflict_do_update(
            index_elements=["key"], set_={"count": C.count + 1, "last": now},
        ).returning(C.count, C.last)
        with self.db._write() as c:
            c.execute(delete(COUNTERS).where(C.last <= now - self.forget_s,
                                             C.key.like(self.name + ":%")))
            count, last = c.execute(ins).one()
        return int(count), float(last)

    def clear(self, key: str) -> None:
        with self.db._write() as c:
            c.execute(delete(COUNTERS).where(COUNTERS.c.key == self._key(key)))
