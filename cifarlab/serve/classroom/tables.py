"""The classroom's SQL, a transaction a function; a write that depends on what is there holds the
classroom's lock, so two app servers never interleave."""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any, Iterable

from sqlalchemy import text
from sqlalchemy.engine import Connection

from cifarlab.serve.classroom.model import (Challenge, ClassError, ClassInfo, ClassLimits,
                                            Experiment, Goal, Membership)
from cifarlab.serve.classroom.names import confusable_with, new_code
from cifarlab.serve.database import Database
from cifarlab.serve.schema import CLASSES, USED_COMPUTE

_LOCK = "classroom"

_CLASS_COLS = tuple(k for k in CLASSES.c.keys() if k not in ("created_by", "created_at"))
_SELECT_CLASS = (f"SELECT {', '.join('c.' + k for k in _CLASS_COLS)}, "
                 "(SELECT COUNT(*) FROM class_members m WHERE m.code = c.code AND m.active = 1) "
                 "FROM classes c")
_JSON = ("preset", "locked", "limits", "experiment")   # the versioned columns, JSON-encoded
_PLAIN = ("is_open", "pinned")


def insert_class(db: Database, created_by: str, title: str) -> str:
    """A new open class under a fresh random code (another drawn on a clash); its code."""
    with db._write() as c:
        for _ in range(20):
            code = new_code()
            if c.execute(text("INSERT INTO classes (code, title, created_by, created_at) "
                              "VALUES (:code, :title, :by, :t) ON CONFLICT (code) DO NOTHING"),
                         {"code": code, "title": title, "by": created_by,
                          "t": time.time()}).rowcount == 1:
                return code
    raise ClassError("class.no_code")


def get_class(db: Database, code: str) -> ClassInfo | None:
    with db._read() as c:
        row = c.execute(text(f"{_SELECT_CLASS} WHERE c.code = :code"), {"code": code}).first()
        return None if row is None else _class(row, latest_challenge(c, code))


def require_class(db: Database, code: Any) -> ClassInfo:
    info = get_class(db, code) if isinstance(code, str) else None
    if info is None:
        raise ClassError("class.unknown_code", field="code")
    return info


def classes_by(db: Database, created_by: str) -> list[ClassInfo]:
    """Classes one instructor created, newest first."""
    with db._read() as c:
        rows = c.execute(text(f"{_SELECT_CLASS} WHERE c.created_by = :by ORDER BY c.created_at "
                              "DESC"), {"by": created_by}).all()
        return [_class(r, latest_challenge(c, r[0])) for r in rows]


def update(db: Database, code: str, **columns: Any) -> ClassInfo:
    """Write ``is_open`` or ``pinned`` (unversioned); the class now."""
    names = [k for k in columns if k in _PLAIN]   # column names never come from outside
    with db._write() as c:
        c.execute(text(f"UPDATE classes SET {', '.join(f'{k} = :{k}' for k in names)} "
                       "WHERE code = :code"), {**columns, "code": code})
    return require_class(db, code)


def update_versioned(db: Database, code: str, expected_version: Any,
                     **columns: Any) -> ClassInfo:
    """Write ``columns`` (JSON) and bump the version if the class is still at
    ``expected_version`` (else ClassError("class.stale")); the class now."""
    names = [k for k in columns if k in _JSON]   # column names never come from outside
    sets = ", ".join(f"{k} = :{k}" for k in names)
    with db._write() as c:
        # the version in the WHERE: an edit since, on any app server, is refused, not lost
        if type(expected_version) is not int or c.execute(text(
                f"UPDATE classes SET {sets}, version = version + 1 WHERE code = :code AND "
                "version = :version"), {**{k: json.dumps(columns[k]) for k in names},
                                        "code": code, "version": expected_version}).rowcount != 1:
            raise ClassError("class.stale", field="version", version=c.execute(text(
                "SELECT version FROM classes WHERE code = :code"), {"code": code}).scalar_one())
    return require_class(db, code)


# -- members -------------------------------------------------------------------------------
def membership(db: Database, person: str) -> Membership | None:
    with db._read() as c:
        row = c.execute(text(
            "SELECT m.code, c.title, m.nickname, m.slot FROM class_members m JOIN classes c "
            "ON c.code = m.code WHERE m.person = :person AND m.active = 1 "
            "ORDER BY m.joined_at DESC LIMIT 1"), {"person": person}).first()
    return Membership(*row) if row else None


def add_member(db: Database, code: str, person: str, nickname: str, nick_key: str) -> Membership:
    """Join ``person`` to the class (leaving any other), unless already in it (a second tab); a
    nickname taken or like a classmate's is refused. ``slot``: how many joined before (kept)."""
    args = {"code": code, "person": person}
    with db._write(lock=_LOCK) as c:
        row = c.execute(text("SELECT is_open, title FROM classes WHERE code = :code"),
                        args).one()
        mine = c.execute(text("SELECT nickname, active, slot FROM class_members "
                              "WHERE code = :code AND person = :person"), args).first()
        if mine is not None and mine[1]:
            return Membership(code, row[1], mine[0], mine[2])
        if not row[0]:
            raise ClassError("class.closed", field="code")
        others = c.execute(text("SELECT nickname, nick_key FROM class_members WHERE code = "
                                ":code AND person != :person"), args).all()
        if any(key == nick_key for _, key in others):
            raise ClassError("class.nickname_taken", field="nickname", nickname=nickname)
        alike = confusable_with(nickname, [nick for nick, _ in others])
        if alike is not None:
            raise ClassError("class.nickname_confusable", field="nickname", nickname=nickname,
                             other=alike)
        slot = mine[2] if mine is not None else c.execute(text(
            "SELECT COUNT(*) FROM class_members WHERE code = :code"), args).scalar_one()
        c.execute(text("UPDATE class_members SET active = 0 WHERE person = :person"), args)
        c.execute(text("INSERT INTO class_members (code, person, nickname, nick_key, joined_at, "
                       "active, slot) VALUES (:code, :person, :nick, :key, :t, 1, :slot) ON "
                       "CONFLICT (code, person) DO UPDATE SET nickname = excluded.nickname, "
                       "nick_key = excluded.nick_key, joined_at = excluded.joined_at, active = 1"),
                  {**args, "nick": nickname, "key": nick_key, "t": time.time(), "slot": slot})
        return Membership(code, row[1], nickname, slot)


def leave(db: Database, person: str) -> bool:
    with db._write() as c:
        return c.execute(text("UPDATE class_members SET active = 0 WHERE person = :person AND "
                              "active = 1"), {"person": person}).rowcount > 0


def nicknames(db: Database, code: str) -> dict[str, str]:
    """person -> nickname for everyone who ever joined the class (left ones too)."""
    with db._read() as c:
        return dict(c.execute(text("SELECT person, nickname FROM class_members WHERE "
                                   "code = :code"), {"code": code}).all())


# -- runs ----------------------------------------------------------------------------------
def record_run(db: Database, code: str, person: str, run_id: str) -> None:
    with db._write() as c:
        c.execute(text("INSERT INTO class_runs (run_id, code, person, created_at) VALUES "
                       "(:run, :code, :person, :t) ON CONFLICT (run_id) DO NOTHING"),
                  {"run": run_id, "code": code, "person": person, "t": time.time()})


def class_of_run(db: Database, run_id: str) -> str | None:
    with db._read() as c:
        return c.execute(text("SELECT code FROM class_runs WHERE run_id = :run"),
                         {"run": run_id}).scalar()


def runs_used(db: Database, code: str, person: str) -> int:
    """The student's runs in this class that used or will use compute."""
    with db._read() as c:
        return c.execute(text(
            "SELECT COUNT(*) FROM class_runs c JOIN runs r ON r.id = c.run_id WHERE c.code = "
            f":code AND c.person = :person AND {USED_COMPUTE}"),
            {"code": code, "person": person}).scalar_one()


# -- challenges ----------------------------------------------------------------------------
def latest_challenge(conn: Connection, code: str) -> Challenge | None:
    row = conn.execute(text("SELECT goal, opened_at, closed_at FROM challenges WHERE code = "
                            ":code ORDER BY id DESC LIMIT 1"), {"code": code}).first()
    return Challenge(Goal(**json.loads(row[0])), row[1], row[2]) if row else None


def open_challenge(db: Database, code: str, goal: Goal, by: str) -> ClassInfo:
    with db._write(lock=_LOCK) as c:
        if c.execute(text("SELECT 1 FROM challenges WHERE code = :code AND closed_at IS NULL"),
                     {"code": code}).first():
            raise ClassError("class.challenge_open", field="challenge")
        c.execute(text("INSERT INTO challenges (code, goal, opened_by, opened_at) VALUES "
                       "(:code, :goal, :by, :t)"),
                  {"code": code, "goal": json.dumps(asdict(goal)), "by": by, "t": time.time()})
    return require_class(db, code)


def close_challenge(db: Database, code: str) -> ClassInfo:
    with db._write() as c:
        if c.execute(text("UPDATE challenges SET closed_at = :t WHERE code = :code AND "
                          "closed_at IS NULL"), {"t": time.time(), "code": code}).rowcount == 0:
            raise ClassError("class.no_challenge", field="challenge")
    return require_class(db, code)


def _class(row: Iterable[Any], challenge: Challenge | None) -> ClassInfo:
    d = dict(zip(_CLASS_COLS + ("members",), row))
    d |= {k: json.loads(d[k] or "null") for k in _JSON}
    lim, ex = d["limits"], d["experiment"]
    if lim.get("devices") is not None:
        lim["devices"] = tuple(lim["devices"])
    return ClassInfo(**d | dict(is_open=bool(d["is_open"]), locked=tuple(d["locked"]),
                                limits=ClassLimits(**lim), challenge=challenge,
                                experiment=ex and Experiment(ex["knob"], tuple(ex["values"]),
                                                             ex["since"])))
