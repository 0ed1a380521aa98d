"""The challenge's leaderboards and the class board: run ids only where ``Classroom`` allows."""
from __future__ import annotations

import json
import math
from typing import Any

from sqlalchemy import bindparam, text

from cifarlab.i18n import finite
from cifarlab.serve.classroom.model import BoardRow, Challenge, LeaderRow
from cifarlab.serve.database import Database
from cifarlab.serve.identity import Person
from cifarlab.serve.schema import QUEUE_POSITION

BOARD_POINTS = 40   # a board row's loss curve: at most this many points
# the run's place among its student's runs in the class: 1, 2, 3, ...
RUN_NUMBER = ("(SELECT COUNT(*) FROM class_runs n WHERE n.code = c.code AND n.person = c.person "
              "AND (n.created_at < c.created_at OR (n.created_at = c.created_at AND "
              "n.run_id <= c.run_id)))")
NICKNAME = ("COALESCE((SELECT m.nickname FROM class_members m WHERE m.code = c.code AND "
            "m.person = c.person), '?')")


def leaderboard(db: Database, code: str, challenge: Challenge, which: str,
                viewer: Person) -> list[LeaderRow]:
    """Each student's best run that kept the goal's rules, submitted while the challenge was
    open; equal scores share a place (1, 1, 3). No run or person ids."""
    goal = challenge.goal
    with db._read() as c:
        found = c.execute(text(
            "SELECT c.run_id, c.person, r.finished_at, r.device, r.config, r.result, "
            "(SELECT e.data FROM events e WHERE e.run_id = c.run_id AND e.kind = 'eval' "
            f" ORDER BY e.seq DESC LIMIT 1), {RUN_NUMBER}, {NICKNAME} "
            "FROM class_runs c JOIN runs r ON r.id = c.run_id WHERE c.code = :code AND "
            "r.status = 'done' AND c.created_at BETWEEN :opened AND "
            "COALESCE(:closed, c.created_at)"),
            {"code": code, "opened": challenge.opened_at, "closed": challenge.closed_at}).all()
    fastest = goal.kind == "fastest_to"
    best: dict[str, tuple] = {}
    for run_id, person, finished, device, config, result, data, number, nick in found:
        epochs = _field(config, "epochs")
        too_long = goal.max_epochs is not None and (epochs is None or epochs > goal.max_epochs)
        # a run evaluated before the halves existed has no score
        acc = finite(((json.loads(data) if data else {}).get("half_accuracies") or {}).get(which))
        seconds = finite(_field(result, "train_seconds"))
        if too_long or not goal.allows_device(device) or acc is None or fastest and (
                seconds is None or acc < goal.target):
            continue
        key = (seconds if fastest else -acc, finished, run_id)
        if person not in best or key < best[person][0]:
            best[person] = (key, acc, seconds, number, nick)
    rows: list[LeaderRow] = []
    for i, (person, (key, acc, seconds, number, nick)) in enumerate(
            sorted(best.items(), key=lambda kv: kv[1][0])):
        score = seconds if fastest else acc
        rank = rows[-1].rank if rows and rows[-1].score == score else i + 1
        rows.append(LeaderRow(rank, nick, score, acc, seconds, key[1], person == viewer.id,
                              number))
    return rows


def fraction(progress: dict | None) -> float | None:
    """How far a run is (0..1 of its steps); None before it starts."""
    step, total = (progress or {}).get("step"), (progress or {}).get("total_steps")
    return min(1.0, step / total) if step is not None and total else None


def _field(doc: str | None, key: str) -> Any:
    """One top-level value of a JSON column (read here, the same on every database)."""
    value = json.loads(doc).get(key) if doc else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


_CURVE = text("SELECT step, loss FROM losses WHERE run_id = :run AND step IN :steps "
              "ORDER BY step").bindparams(bindparam("steps", expanding=True))


def curve(conn, run_id: str) -> tuple[tuple, tuple]:
    """A run's loss curve in at most ``BOARD_POINTS`` evenly spaced steps up to its last one:
    index lookups only, so a 20,000-step run costs what a 40-step one does."""
    last = conn.execute(text("SELECT MAX(step) FROM losses WHERE run_id = :run"),
                        {"run": run_id}).scalar()
    if last is None:
        return (), ()
    want = sorted({1 + (last - 1) * i // (BOARD_POINTS - 1) for i in range(BOARD_POINTS)})
    rows = conn.execute(_CURVE, {"run": run_id, "steps": want}).all()
    return tuple(r[0] for r in rows), tuple(math.nan if r[1] is None else r[1] for r in rows)


def board(store, code: str, viewer: Person, limit: int = 200, since: float | None = None,
          knob: str | None = None) -> list[BoardRow]:
    """The class's runs submitted ``since``, newest first, each with a small loss curve and its
    value of ``knob``; run ids for instructors and on the viewer's own rows."""
    out = []
    with store._read() as conn:
        rows = conn.execute(text(
            "SELECT c.run_id, c.person, r.status, r.device, r.created_at, r.result, r.progress, "
            f"CASE WHEN r.status = 'queued' THEN {QUEUE_POSITION} END, {RUN_NUMBER}, r.config, "
            f"{NICKNAME} "
            "FROM class_runs c JOIN runs r ON r.id = c.run_id WHERE c.code = :code "
            "AND c.created_at >= :since ORDER BY r.created_at DESC, r.id DESC LIMIT :limit"),
            {"code": code, "limit": int(limit), "since": since or 0.0}).all()
        curves = {r[0]: curve(conn, r[0]) for r in rows if r[2] != "queued"}
    for run_id, person, status, device, created, result, progress, pos, number, config, \
            nick in rows:
        steps, losses = curves.get(run_id, ((), ()))
        progress = None if status == "queued" else fraction(json.loads(progress or "null"))
        value = json.loads(config or "{}").get(knob) if knob else None
        you = person == viewer.id
        out.append(BoardRow(nick, number, run_id if you or viewer.instructor else "", status,
                            device, pos, progress, steps, losses,
                            finite(_field(result, "test_accuracy")), created, value, you))
    return out
