"""The guessing limits' counters in the run store: every replica counts the same failures and
a restart forgets nothing. Keys are SHA-256 digests; times ``time.time`` (the limiter's clock).
"""
from __future__ import annotations

import hashlib

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite

from cifarlab.serve.database import Database
from cifarlab.serve.schema import COUNTERS

C = COUNTERS.c


class StoreCounters:
    """``identity.MemoryCounters`` kept in the run store under the name ``name``."""

    def __init__(self, db: Database, name: str, forget_s: float = 3600.0):
        self.db, self.name, self.forget_s = db, name, float(forget_s)

    def _key(self, key: str) -> str:
        return f"{self.name}:{hashlib.sha256(key.encode()).hexdigest()}"

    def get(self, key: str, now: float) -> tuple[int, float]:
        with self.db._read() as c:
            row = c.execute(select(C.count, C.last).where(C.key == self._key(key))).first()
        if row is None or now - row[1] >= self.forget_s:
            return 0, 0.0
        return int(row[0]), float(row[1])

    def add(self, key: str, now: float) -> tuple[int, float]:
        """One more failure, in one statement (two replicas adding at once both count), once
        the stale ones are forgotten."""
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
            c.execute(delete(COUNTERS).where(C.key == self._key(key)))
