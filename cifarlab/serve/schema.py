"""The run store's tables and their migrations; a newer store is refused, never changed."""
from __future__ import annotations

from typing import Callable

from sqlalchemy import (CheckConstraint, Column, Double, Index, Integer, MetaData,
                        PrimaryKeyConstraint, Table, Text, UniqueConstraint, inspect, text)
from sqlalchemy.engine import Connection

from cifarlab.errors import JobError

SCHEMA_VERSION = 5

METADATA = MetaData()

RUNS = Table(
    "runs", METADATA,
    Column("id", Text, CheckConstraint("length(id) = 32"), primary_key=True),
    Column("session", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("name", Text),
    Column("status", Text, CheckConstraint("status IN ('queued', 'running', 'done', 'failed', "
                                           "'cancelled', 'interrupted')"), nullable=False),
    Column("device", Text, nullable=False),
    Column("holds", Text),                 # JSON list: devices it keeps to itself (exclusive)
    Column("config", Text, nullable=False),  # JSON: the TrainConfig (or job payload)
    Column("created_at", Double, nullable=False),
    Column("started_at", Double),
    Column("finished_at", Double),
    Column("error", Text),                 # one line, in English
    Column("traceback", Text),             # for the host only
    Column("result", Text),                # JSON: TrainResult.summary() or the job's dict
    Column("env", Text),                   # JSON: versions, CPU, GPU
    Column("checkpoint", Text),            # set by the store: <checkpoint dir>/<id>.pth
    Column("cancel_requested", Integer, nullable=False, server_default=text("0")),
    Column("worker_pid", Integer),
    Column("heartbeat", Double),
    Column("progress", Text),              # JSON: the latest progress event
    Column("waited_s", Double),            # seconds from queued to started
    Column("owner", Text),
    Column("image_epochs", Integer),
    Column("error_code", Text),
    Column("error_params", Text),          # JSON
    Column("replica", Text),               # the serving process whose executor runs it
    Index("runs_by_session", "session", "created_at"),
    Index("runs_by_status", "status", "device", "created_at"),
    Index("runs_by_owner", "owner", "created_at"),
)
LOSSES = Table(
    "losses", METADATA,
    Column("run_id", Text, nullable=False),
    Column("step", Integer, nullable=False),
    Column("loss", Double),                # NULL stores a NaN (an exploded loss)
    PrimaryKeyConstraint("run_id", "step"),
    sqlite_with_rowid=False,
)
EVENTS = Table(
    "events", METADATA,
    Column("run_id", Text, nullable=False),
    Column("seq", Integer, nullable=False),  # 1, 2, 3, ... per run
    Column("kind", Text, nullable=False),    # start | running_loss | epoch | eval | done | ...
    Column("data", Text, nullable=False),    # JSON
    Column("t", Double, nullable=False),
    PrimaryKeyConstraint("run_id", "seq"),
    sqlite_with_rowid=False,
)
CLASSES = Table(
    "classes", METADATA,
    Column("code", Text, primary_key=True),          # K7M-4PX (older: blue-fox-42)
    Column("title", Text, nullable=False),
    Column("created_by", Text, nullable=False),      # the instructor (Person.id)
    Column("is_open", Integer, nullable=False, server_default=text("1")),
    Column("version", Integer, nullable=False, server_default=text("1")),
    Column("preset", Text, nullable=False, server_default=text("'{}'")),   # JSON: knob -> value
    Column("locked", Text, nullable=False, server_default=text("'[]'")),   # JSON: knob names
    Column("limits", Text, nullable=False, server_default=text("'{}'")),   # JSON: ClassLimits
    Column("pinned", Text),                          # the run on the projector
    Column("created_at", Double, nullable=False),
    Column("experiment", Text),                      # JSON: Experiment, or none
    Index("classes_by_creator", "created_by", "created_at"),
)
CLASS_MEMBERS = Table(
    "class_members", METADATA,
    Column("code", Text, nullable=False),
    Column("person", Text, nullable=False),          # Person.id, the owner of their runs
    Column("nickname", Text, nullable=False),
    Column("nick_key", Text, nullable=False),        # casefolded: one nickname per class
    Column("joined_at", Double, nullable=False),
    Column("active", Integer, nullable=False, server_default=text("1")),  # 0 once left
    Column("slot", Integer, nullable=False, server_default=text("0")),    # the join order
    PrimaryKeyConstraint("code", "person"),
    UniqueConstraint("code", "nick_key"),
    Index("class_members_by_person", "person", "active"),
)
CLASS_RUNS = Table(
    "class_runs", METADATA,
    Column("run_id", Text, primary_key=True),
    Column("code", Text, nullable=False),
    Column("person", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    Index("class_runs_by_code", "code", "created_at"),
    Index("class_runs_by_person", "person", "code"),
)
CHALLENGES = Table(
    "challenges", METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("code", Text, nullable=False),
    Column("goal", Text, nullable=False),            # JSON: Goal
    Column("opened_by", Text, nullable=False),
    Column("opened_at", Double, nullable=False),
    Column("closed_at", Double),
    Index("challenges_by_code", "code", "id"),
)
REPLICAS = Table(
    "replicas", METADATA,
    Column("id", Text, primary_key=True),            # a fresh random id per serving process
    Column("host", Text, nullable=False),            # hostname, for the host's eyes
    Column("pid", Integer, nullable=False),
    Column("started_at", Double, nullable=False),
    Column("heartbeat", Double, nullable=False),     # written every second or two
    Column("stopped_at", Double),                    # set by a clean shutdown
)
COUNTERS = Table(
    "counters", METADATA,
    Column("key", Text, primary_key=True),           # "<limiter>:<sha256 of the key>"
    Column("count", Integer, nullable=False),
    Column("last", Double, nullable=False),          # time.time() of the latest failure
    Index("counters_by_last", "last"),
)

JSON_COLUMNS = ("config", "result", "env", "progress", "holds", "error_params")
# SQL on ``runs r``: its place in its device's queue (1: next), first come first served
QUEUE_POSITION = ("(SELECT COUNT(*) FROM runs q WHERE q.status = 'queued' AND q.device = "
                  "r.device AND (q.created_at < r.created_at OR (q.created_at = r.created_at "
                  "AND q.id <= r.id)))")
# SQL on ``runs r``: it used or will use compute (not cancelled before it started)
USED_COMPUTE = "NOT (r.started_at IS NULL AND r.status NOT IN ('queued', 'running'))"


def _to_2(conn: Connection) -> None:
    for statement in ("ALTER TABLE runs ADD COLUMN owner TEXT", "UPDATE runs SET owner = session",
                      "ALTER TABLE runs ADD COLUMN image_epochs INTEGER",
                      "ALTER TABLE runs ADD COLUMN error_code TEXT",
                      "ALTER TABLE runs ADD COLUMN error_params TEXT"):
        conn.exec_driver_sql(statement)
    next(i for i in RUNS.indexes if i.name == "runs_by_owner").create(conn)


def _to_3(conn: Connection) -> None:
    METADATA.create_all(conn, tables=[CLASSES, CLASS_MEMBERS, CLASS_RUNS, CHALLENGES])


def _to_4(conn: Connection) -> None:
    conn.exec_driver_sql("ALTER TABLE runs ADD COLUMN replica TEXT")
    METADATA.create_all(conn, tables=[REPLICAS, COUNTERS])


def _to_5(conn: Connection) -> None:
    # a store that reached 3 through ``_to_3`` here got these columns with its tables
    if "slot" in {c["name"] for c in inspect(conn).get_columns("class_members")}:
        return
    for statement in ("ALTER TABLE classes ADD COLUMN experiment TEXT",
                      "ALTER TABLE class_members ADD COLUMN slot INTEGER NOT NULL DEFAULT 0",
                      # the members there already: in the order they joined
                      "UPDATE class_members SET slot = (SELECT COUNT(*) FROM class_members m "
                      "WHERE m.code = class_members.code AND (m.joined_at < "
                      "class_members.joined_at OR (m.joined_at = class_members.joined_at AND "
                      "m.person < class_members.person)))"):
        conn.exec_driver_sql(statement)


MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: _to_2, 3: _to_3, 4: _to_4, 5: _to_5}


def stored_version(conn: Connection) -> int:
    """0 for an empty store."""
    if conn.dialect.name == "sqlite":
        return conn.exec_driver_sql("PRAGMA user_version").scalar_one()
    if not conn.dialect.has_table(conn, "cifarlab_schema"):
        return 0
    return conn.exec_driver_sql("SELECT version FROM cifarlab_schema").scalar_one()


def _stamp(conn: Connection, version: int) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"PRAGMA user_version = {int(version)}")
        return
    conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS cifarlab_schema (version INTEGER NOT NULL)")
    conn.exec_driver_sql("DELETE FROM cifarlab_schema")
    conn.execute(text("INSERT INTO cifarlab_schema (version) VALUES (:v)"), {"v": int(version)})


def migrate(conn: Connection, where: str, upto: int = SCHEMA_VERSION) -> int:
    """Create or upgrade the tables, up to ``upto``; returns the version it had."""
    version = stored_version(conn)
    if version > SCHEMA_VERSION:
        raise JobError("serve.store.newer_schema", path=where, version=version,
                       known=SCHEMA_VERSION)
    if version == 0:
        METADATA.create_all(conn)
        _stamp(conn, SCHEMA_VERSION)
        return version
    for target in range(version + 1, upto + 1):
        MIGRATIONS[target](conn)
    if upto > version:
        _stamp(conn, upto)
    return version
