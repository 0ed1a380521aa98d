"""The app servers (replicas) of one run store and their heartbeats; a lock says who dispatches."""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid

from sqlalchemy import insert, select, update

from cifarlab.serve.database import Database, SessionLock
from cifarlab.serve.schema import REPLICAS, RUNS
from cifarlab.serve.store import HOST, RunStore

C = REPLICAS.c
log = logging.getLogger("cifarlab.serve.queue")


def alive(db: Database, timeout: float) -> set[str]:
    """The ids of the replicas that beat within ``timeout`` seconds and did not stop."""
    with db._read() as c:
        return set(c.execute(select(C.id).where(C.heartbeat >= time.time() - timeout,
                                                C.stopped_at.is_(None))).scalars())


def take_over(store: RunStore, run_id: str, was: str | None) -> bool:
    """Make replica ``was``'s running run this replica's; False when another took it first."""
    R = RUNS.c
    owner = R.replica.is_(None) if was is None else R.replica == was
    with store._write() as c:
        return c.execute(update(RUNS).where(R.id == run_id, R.status == "running", owner)
                         .values(replica=store.replica, heartbeat=time.time())).rowcount == 1


BEAT_S = 1.0        # a replica's heartbeat, and how often a waiting one tries to dispatch


class Replica:
    """This serving process on the store: its id, its heartbeat, and whether it dispatches
    (``tick``: it holds ``SessionLock(db, "dispatcher")``, which a dead holder loses at once)."""

    def __init__(self, db: Database, timeout: float):
        self.db, self.timeout = db, float(timeout)
        self.id, now = uuid.uuid4().hex, time.time()
        with db._write() as c:   # replicas silent for a day are dropped
            c.execute(REPLICAS.delete().where(C.heartbeat < now - 86400))
            c.execute(insert(REPLICAS).values(id=self.id, host=HOST, pid=os.getpid(),
                                              started_at=now, heartbeat=now))
        self.lock = SessionLock(db, "dispatcher")
        self.leading = False
        self._last_try = 0.0
        self._stopped = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._beat, name="cifarlab-replica-beat", daemon=True).start()

    def _beat(self) -> None:
        """Beat from a thread of its own: the dispatcher's can be busy longer than the timeout
        (a worker's start imports torch), and a peer would take its runs for orphans."""
        while not self._stopped.wait(BEAT_S):
            try:
                with self.db._write() as c:
                    c.execute(update(REPLICAS).where(C.id == self.id)
                              .values(heartbeat=time.time()))
            except Exception:   # the store is down: the beat goes stale, as it should
                log.debug("cifarlab: replica %s could not beat", self.id[:8], exc_info=True)

    def tick(self) -> bool:
        """Keep or try to take the dispatcher's lock; True while it is this replica's."""
        now = time.monotonic()
        if self.leading:
            self.leading = self.lock.held()
        elif now - self._last_try >= BEAT_S:
            self._last_try = now
            self.leading = self.lock.acquire()
            if self.leading:
                log.info("cifarlab: this app server (replica %s) now dispatches the queue",
                         self.id[:8])
        return self.leading

    def alive(self) -> set[str]:
        return alive(self.db, self.timeout) | {self.id}

    def stop(self) -> None:
        self._stopped.set()
        self.leading = False
        self.lock.release()
        now = time.time()
        with contextlib.suppress(Exception):  # the store is gone: the heartbeat goes stale instead
            with self.db._write() as c:
                c.execute(update(REPLICAS).where(C.id == self.id)
                          .values(heartbeat=now, stopped_at=now))
