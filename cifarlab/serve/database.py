"""The run store's database: SQLite (WAL; writes ``BEGIN IMMEDIATE``: writers queue, never fail
half-way) or PostgreSQL (while it is down, ``StoreUnreachable``); a pickled one reconnects."""
from __future__ import annotations

import logging
import os
import time
import zlib
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Iterator

from sqlalchemy import create_engine, event, exc
from sqlalchemy.engine import URL, Connection, Engine, make_url

from cifarlab.errors import STORE_UNREACHABLE, JobError
from cifarlab.serve import disk
from cifarlab.serve.schema import SCHEMA_VERSION, migrate

log = logging.getLogger("cifarlab.serve.database")

POOL_SIZE, MAX_OVERFLOW = 10, 30   # per serving process (a worker keeps 2)
STORE_URL_SETTING = "CIFARLAB_STORE_URL"


class StoreUnreachable(JobError):
    """The database is out of reach just now (``serve.store.unreachable``): callers may retry."""


def store_url(location: str | os.PathLike) -> URL:
    """The SQLAlchemy URL of a SQLite path, ``sqlite:///path`` or ``postgresql://`` (psycopg 3)."""
    text = os.fspath(location)
    if "://" not in text:
        return URL.create("sqlite", database=str(Path(text).resolve()))
    with suppress(exc.ArgumentError, ValueError):   # SQLAlchemy's words for a malformed URL
        url = make_url(text)
        if url.get_backend_name() == "postgresql":
            return url.set(drivername="postgresql+psycopg")
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            return url.set(drivername="sqlite", database=str(Path(url.database).resolve()))
    raise JobError("serve.store.bad_url", setting=STORE_URL_SETTING)


def advisory_key(name: str) -> int:
    """A 31-bit key for ``pg_advisory_lock`` from a name (stable across processes)."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


class Database:
    """The store at ``location`` (a SQLite path or a URL), its tables brought up to ``upto``."""

    path: Path | None = None           # the SQLite file; None on PostgreSQL
    _engine: Engine | None = None      # never pickled: a copy in another process makes its own

    def __init__(self, location: str | os.PathLike, upto: int = SCHEMA_VERSION):
        self.url = store_url(location)
        self.dialect = self.url.get_backend_name()
        self.where = (self.url.database if self.dialect == "sqlite"   # never the password:
                      else self.url.render_as_string(hide_password=True))
        self._pool_size = POOL_SIZE
        self._pid = os.getpid()
        self._lock_name = "cifarlab"
        self._last_logged = 0.0
        if self.dialect == "sqlite":
            self.path = Path(self.url.database)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._translated(), self.engine.connect() as c:  # set as each one connects
                mode = c.exec_driver_sql("PRAGMA journal_mode").scalar_one()
            if str(mode).lower() != "wal":  # e.g. a network file system without shared memory
                raise JobError("serve.store.no_wal", path=str(self.path), mode=str(mode))
        else:   # once at start, for the host: PostgreSQL's own words on what is wrong
            try:
                with self.engine.connect() as c:
                    c.exec_driver_sql("SELECT 1")
            except exc.DBAPIError as err:
                raise JobError("serve.store.down", setting=STORE_URL_SETTING, url=self.where,
                               detail=_first_line(err)[:200]) from None
        with self._write(lock="schema") as c:
            migrate(c, self.where, upto)
            if self.dialect != "sqlite":  # one store per database and schema
                self._lock_name = "cifarlab:" + c.exec_driver_sql(
                    "SELECT current_database() || '.' || current_schema()").scalar_one()

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k != "_engine"}
        state["_pool_size"] = 2       # a worker process: a few writes a second
        return state

    @property
    def engine(self) -> Engine:
        if self._engine is None or self._pid != os.getpid():
            if self._engine is not None:
                self._engine.dispose(close=False)   # the parent's connections stay the parent's
            self._engine, self._pid = self._make_engine(), os.getpid()
        return self._engine

    def _make_engine(self) -> Engine:
        if self.dialect == "sqlite":
            engine = create_engine(self.url, pool_size=self._pool_size, max_overflow=MAX_OVERFLOW,
                                   connect_args={"timeout": 15.0,
                                                 "check_same_thread": False})

            @event.listens_for(engine, "connect")
            def _on_connect(dbapi_conn, _record):
                dbapi_conn.isolation_level = None   # transactions are ours (BEGIN below)
                dbapi_conn.execute("PRAGMA journal_mode = WAL")
                dbapi_conn.execute("PRAGMA synchronous = NORMAL")

            @event.listens_for(engine, "begin")
            def _on_begin(conn):
                write = conn.get_execution_options().get("cifarlab_write")
                conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

            return engine
        return create_engine(self.url, pool_size=self._pool_size, max_overflow=MAX_OVERFLOW,
                             pool_pre_ping=True, pool_timeout=30,
                             connect_args={"connect_timeout": 5,   # seconds: else it is down
                                           "application_name": "cifarlab"})

    @contextmanager
    def _write(self, lock: str | None = None) -> Iterator[Connection]:
        """One write transaction; ``lock``: PostgreSQL serializes those holding it (SQLite all)."""
        with self._translated(), self.engine.connect() as conn:
            conn = conn.execution_options(cifarlab_write=True)
            with conn.begin():
                if lock is not None and self.dialect != "sqlite":
                    key = advisory_key(self._lock_name + lock)
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({key})")
                yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """Several SELECTs that see one consistent snapshot (PostgreSQL: REPEATABLE READ)."""
        with self._translated(), self.engine.connect() as conn:
            if self.dialect != "sqlite":
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """A full disk as ``serve.store.disk_full``, a database out of reach as ``unreachable``."""
        try:
            yield
        except exc.DBAPIError as err:
            if getattr(err.orig, "sqlstate", None) == "53100":   # PostgreSQL: disk full
                raise disk.store_full(err.orig, self.where) from None
            if self.dialect == "sqlite":
                if disk.is_full(err.orig):
                    raise disk.store_full(err.orig, self.path) from None
                raise err.orig from None      # SQLite's own error, as before (damage, locks)
            # PostgreSQL out of reach (not a wrong query): connection exceptions, admin shutdown
            if (err.connection_invalidated
                    or isinstance(err, (exc.OperationalError, exc.InterfaceError))
                    or (getattr(err.orig, "sqlstate", None) or "").startswith(("08", "57P"))):
                self._log_unreachable(err)
                raise StoreUnreachable(STORE_UNREACHABLE) from None
            raise
        except exc.TimeoutError as err:       # the pool had no connection for 30 s
            self._log_unreachable(err)
            raise StoreUnreachable(STORE_UNREACHABLE) from None

    def _log_unreachable(self, err: BaseException) -> None:
        now = time.monotonic()
        if now - self._last_logged >= 30.0 or not self._last_logged:   # at most this often
            self._last_logged = now
            log.error("cifarlab: the run store %s cannot be reached: %s", self.where,
                      _first_line(err))

    def close(self) -> None:
        if self._engine is not None and self._pid == os.getpid():
            self._engine.dispose()
        self._engine = None

    @contextmanager
    def mutex(self, name: str) -> Iterator[None]:
        """Hold ``name`` across every process on this store (SQLite has one serving process)."""
        if self.dialect == "sqlite":
            yield
            return
        key = advisory_key(self._lock_name + ":" + name)
        with self._translated(), self.engine.connect() as conn:
            conn.exec_driver_sql(f"SELECT pg_advisory_lock({key})")
            conn.commit()
            try:
                yield
            finally:
                try:
                    conn.exec_driver_sql(f"SELECT pg_advisory_unlock({key})")
                    conn.commit()
                except exc.DBAPIError:       # the connection broke: the lock went with it
                    conn.invalidate()


class SessionLock:
    """A lock one process holds until it lets go or dies (PostgreSQL: an advisory lock on a
    connection of its own; SQLite: an ``flock`` beside the store). ``acquire()`` does not wait."""

    def __init__(self, db: Database, name: str):
        self.db, self.name = db, name
        self._conn = None
        self._file = None

    def acquire(self) -> bool:
        if self._conn is not None or self._file is not None:
            return self.held()
        if self.db.dialect == "sqlite":
            import fcntl

            f = open(self.db.path.with_name(self.db.path.name + ".dispatcher"), "a+")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                return False
            self._file = f
            return True
        key = advisory_key(self.db._lock_name + ":" + self.name)
        try:
            conn = self.db.engine.connect()
        except (exc.DBAPIError, exc.TimeoutError):
            return False
        try:
            # the server drops a silent client's session (and its lock) within ~15 s
            for setting in ("tcp_keepalives_idle = 5", "tcp_keepalives_interval = 2",
                            "tcp_keepalives_count = 5"):
                conn.exec_driver_sql("SET " + setting)
            got = conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({key})").scalar_one()
            conn.commit()
        except exc.DBAPIError:
            conn.invalidate()
            got = False
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    def held(self) -> bool:
        if self._conn is None:
            return self._file is not None
        try:
            self._conn.exec_driver_sql("SELECT 1")
            self._conn.commit()
            return True
        except exc.DBAPIError:
            log.warning("cifarlab: lost the %s lock (the connection to the run store broke)",
                        self.name)
            self.release()
            return False

    def release(self) -> None:
        if self._file is not None:
            self._file.close()            # closing the file drops the flock
        if self._conn is not None:
            with suppress(Exception):  # a broken connection: it is gone either way
                # closed, not pooled: a session-level lock outlives a connection's return
                self._conn.invalidate()
                self._conn.close()
        self._conn = self._file = None


def _first_line(err: BaseException) -> str:
    orig = getattr(err, "orig", None) or err
    return next((line.strip() for line in str(orig).splitlines() if line.strip()),
                type(orig).__name__)
