"""The classroom's rows in the run store (tables from schema version 3, ``serve.schema``).

Functions over a ``Database`` (the ``RunStore``), each one transaction: a write that depends on
what is there (a version check, a nickname's uniqueness) reads and writes inside one ``BEGIN
IMMEDIATE``, so two instructors, or two server processes, never interleave there.
"""
from __future__ import annotations

import json
import sqlite3
import time
from typing import Any, Iterable

from cifarlab.serve.classroom.model import (Challenge, ClassError, ClassInfo, ClassLimits, Goal,
                                            Membership)
from cifarlab.serve.classroom.names import confusable_with, new_code
from cifarlab.serve.schema import Database

_CLASS_COLS = ("code", "title", "created_by", "is_open", "version", "preset", "locked", "limits",
               "pinned", "created_at")
_SELECT_CLASS = (f"SELECT {', '.join('c.' + k for k in _CLASS_COLS)}, "
                 "(SELECT COUNT(*) FROM class_members m WHERE m.code = c.code AND m.active = 1) "
                 "FROM classes c")


def insert_class(db: Database, created_by: str, title: str, tries: int = 20) -> str:
    """A new open class under a fresh random code; returns the code."""
    with db._write() as c:
        for _ in range(tries):
            code = new_code()
            try:
                c.execute("INSERT INTO classes (code, title, created_by, created_at) "
                          "VALUES (?, ?, ?, ?)", (code, title, created_by, time.time()))
                return code
            except sqlite3.IntegrityError:  # that code exists: draw another
                continue
    raise ClassError("class.no_code")


def get_class(db: Database, code: str, conn: sqlite3.Connection | None = None) -> ClassInfo | None:
    conn = conn or db._conn()
    row = conn.execute(f"{_SELECT_CLASS} WHERE c.code = ?", (code,)).fetchone()
    if row is None:
        return None
    return _class(row, latest_challenge(db, code, conn))


def require_class(db: Database, code: Any, conn: sqlite3.Connection | None = None) -> ClassInfo:
    info = get_class(db, code, conn) if isinstance(code, str) else None
    if info is None:
        raise ClassError("class.unknown_code", field="code")
    return info


def classes_by(db: Database, created_by: str | None) -> list[ClassInfo]:
    """Classes one instructor created (None: every class), newest first."""
    sql, args = _SELECT_CLASS, []
    if created_by is not None:
        sql += " WHERE c.created_by = ?"
        args.append(created_by)
    rows = db._conn().execute(sql + " ORDER BY c.created_at DESC", args).fetchall()
    return [_class(r, latest_challenge(db, r[0])) for r in rows]


def set_open(db: Database, code: str, is_open: bool) -> None:
    with db._write() as c:
        if c.execute("UPDATE classes SET is_open = ? WHERE code = ?",
                     (int(bool(is_open)), code)).rowcount != 1:
            raise ClassError("class.unknown_code", field="code")


def update_versioned(db: Database, code: str, expected_version: Any, **columns: Any) -> None:
    """Write ``columns`` (JSON-encoded) and bump the version, only if the class is still at
    ``expected_version``; else ClassError("class.stale") and nothing is written."""
    sets = ", ".join(f"{k} = ?" for k in columns)
    with db._write() as c:
        row = c.execute("SELECT version FROM classes WHERE code = ?", (code,)).fetchone()
        if row is None:
            raise ClassError("class.unknown_code", field="code")
        if isinstance(expected_version, bool) or expected_version != row[0]:
            raise ClassError("class.stale", field="version", version=row[0])
        c.execute(f"UPDATE classes SET {sets}, version = version + 1 WHERE code = ?",
                  [json.dumps(v) for v in columns.values()] + [code])


def set_pinned(db: Database, code: str, run_id: str | None) -> None:
    with db._write() as c:
        c.execute("UPDATE classes SET pinned = ? WHERE code = ?", (run_id, code))


# -- members -------------------------------------------------------------------------------
def membership(db: Database, person: str) -> Membership | None:
    row = db._conn().execute(
        "SELECT m.code, c.title, m.person, m.nickname, m.joined_at FROM class_members m "
        "JOIN classes c ON c.code = m.code WHERE m.person = ? AND m.active = 1 "
        "ORDER BY m.joined_at DESC LIMIT 1", (person,)).fetchone()
    return Membership(*row) if row else None


def add_member(db: Database, code: str, person: str, nickname: str, nick_key: str) -> Membership:
    """Join ``person`` to the class (leaving any other class); the same person joining the same
    class again (a second tab) keeps the membership they have. A nickname taken, or one that
    looks like a classmate's (``names.confusable_with``), is refused."""
    now = time.time()
    with db._write() as c:
        row = c.execute("SELECT is_open, title FROM classes WHERE code = ?", (code,)).fetchone()
        if row is None:
            raise ClassError("class.unknown_code", field="code")
        mine = c.execute("SELECT nickname, joined_at, active FROM class_members "
                         "WHERE code = ? AND person = ?", (code, person)).fetchone()
        if mine is not None and mine[2]:
            return Membership(code, row[1], person, mine[0], mine[1])
        if not row[0]:
            raise ClassError("class.closed", field="code")
        taken = c.execute("SELECT person FROM class_members WHERE code = ? AND nick_key = ?",
                          (code, nick_key)).fetchone()
        if taken is not None and taken[0] != person:
            raise ClassError("class.nickname_taken", field="nickname", nickname=nickname)
        others = [n for (n,) in c.execute("SELECT nickname FROM class_members WHERE code = ? "
                                          "AND person != ?", (code, person))]
        alike = confusable_with(nickname, others)
        if alike is not None:
            raise ClassError("class.nickname_confusable", field="nickname", nickname=nickname,
                             other=alike)
        c.execute("UPDATE class_members SET active = 0 WHERE person = ?", (person,))
        c.execute("INSERT INTO class_members (code, person, nickname, nick_key, joined_at, active) "
                  "VALUES (?, ?, ?, ?, ?, 1) ON CONFLICT (code, person) DO UPDATE SET "
                  "nickname = excluded.nickname, nick_key = excluded.nick_key, "
                  "joined_at = excluded.joined_at, active = 1",
                  (code, person, nickname, nick_key, now))
        return Membership(code, row[1], person, nickname, now)


def leave(db: Database, person: str) -> bool:
    with db._write() as c:
        return c.execute("UPDATE class_members SET active = 0 WHERE person = ? AND active = 1",
                         (person,)).rowcount > 0


def nicknames(db: Database, code: str) -> dict[str, str]:
    """person -> nickname for everyone who ever joined the class (left ones too)."""
    return dict(db._conn().execute("SELECT person, nickname FROM class_members WHERE code = ?",
                                   (code,)).fetchall())


# -- runs ----------------------------------------------------------------------------------
def record_run(db: Database, code: str, person: str, run_id: str) -> None:
    with db._write() as c:
        c.execute("INSERT OR IGNORE INTO class_runs (run_id, code, person, created_at) "
                  "VALUES (?, ?, ?, ?)", (run_id, code, person, time.time()))


def class_of_run(db: Database, run_id: str) -> str | None:
    row = db._conn().execute("SELECT code FROM class_runs WHERE run_id = ?",
                             (run_id,)).fetchone()
    return row[0] if row else None


def runs_used(db: Database, code: str, person: str) -> int:
    """The student's runs in this class that used or will use compute (a run cancelled before
    it started does not count)."""
    return db._conn().execute(
        "SELECT COUNT(*) FROM class_runs c JOIN runs r ON r.id = c.run_id WHERE c.code = ? "
        "AND c.person = ? AND NOT (r.started_at IS NULL AND r.status NOT IN ('queued', "
        "'running'))", (code, person)).fetchone()[0]


# -- challenges ----------------------------------------------------------------------------
def latest_challenge(db: Database, code: str,
                     conn: sqlite3.Connection | None = None) -> Challenge | None:
    row = (conn or db._conn()).execute(
        "SELECT goal, opened_at, closed_at FROM challenges WHERE code = ? ORDER BY id DESC "
        "LIMIT 1", (code,)).fetchone()
    return Challenge(Goal.from_dict(json.loads(row[0])), row[1], row[2]) if row else None


def open_challenge(db: Database, code: str, goal: Goal, by: str) -> None:
    with db._write() as c:
        if c.execute("SELECT 1 FROM challenges WHERE code = ? AND closed_at IS NULL",
                      (code,)).fetchone():
            raise ClassError("class.challenge_open", field="challenge")
        c.execute("INSERT INTO challenges (code, goal, opened_by, opened_at) VALUES (?, ?, ?, ?)",
                  (code, json.dumps(goal.to_dict()), by, time.time()))


def close_challenge(db: Database, code: str) -> None:
    with db._write() as c:
        if c.execute("UPDATE challenges SET closed_at = ? WHERE code = ? AND closed_at IS NULL",
                     (time.time(), code)).rowcount == 0:
            raise ClassError("class.no_challenge", field="challenge")


def _class(row: Iterable[Any], challenge: Challenge | None) -> ClassInfo:
    d = dict(zip(_CLASS_COLS + ("members",), row))
    return ClassInfo(code=d["code"], title=d["title"], created_by=d["created_by"],
                     is_open=bool(d["is_open"]), version=d["version"],
                     preset=json.loads(d["preset"]), locked=tuple(json.loads(d["locked"])),
                     limits=ClassLimits.from_dict(json.loads(d["limits"])), pinned=d["pinned"],
                     challenge=challenge, members=d["members"], created_at=d["created_at"])
