"""A damaged run store (runs.db overwritten at its start, then the server restarted) no longer
shows ``DatabaseError: file is not a database``: the damaged file is moved aside (kept, renamed
with the time), the store is recovered from the newest good rolling backup (SQLite's online
backup API, every few minutes and at shutdown) or started empty, and what happened is said to
the host (a log line with the paths) and to every student (a notice in their language)."""
from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import pytest

from cifarlab import i18n
from cifarlab.serve import backup
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.settings import SettingsError, load_settings
from cifarlab.serve.store import RunStore
from synthetic_run import running_row

SESSION = "recovery-session"


def damage(path: Path, how: str = "start") -> None:
    """Overwrite the store as the hostile test did (its first 4 KB), or in its middle."""
    data = bytearray(path.read_bytes())
    at = 0 if how == "start" else len(data) // 2
    data[at:at + 4096] = b"\xde\xad\xbe\xef" * 1024
    path.write_bytes(bytes(data))


def checkpointed(store: RunStore) -> None:
    """Everything the store wrote moved from its write-ahead log into runs.db itself, so
    damage to the file hits every run (as after a clean shutdown)."""
    raw = store.engine.raw_connection()   # outside any transaction
    try:
        raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        raw.close()
    store.close()


def aside(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".damaged-*"))


def test_backups_are_consistent_copies_skipped_when_unchanged_and_rolled(tmp_path):
    store = RunStore(tmp_path / "runs.db")
    ids = [store.create_run(SESSION, "train", {"epochs": 1}, "cpu") for _ in range(3)]
    backups = backup.Backups(store.path, every_s=300, keep=2)
    first = backups.backup_now()
    assert first is not None and first.parent == tmp_path / "backups"
    copy = sqlite3.connect(first)
    assert sorted(r[0] for r in copy.execute("SELECT id FROM runs")) == sorted(ids)
    assert copy.execute("PRAGMA journal_mode").fetchone()[0] == "delete"   # one plain file
    copy.close()
    assert backups.backup_now() is None          # nothing changed: no new copy
    made = [first]
    for _ in range(3):
        time.sleep(1.01)                         # copies are named by the second
        store.create_run(SESSION, "train", {"epochs": 2}, "cpu")
        made.append(backups.backup_now())
    assert backup.generations(tmp_path / "backups") == made[:-3:-1]   # the 2 newest kept
    assert not list((tmp_path / "backups").glob(".*.tmp"))


@pytest.mark.parametrize("how", ["start", "middle"])
def test_a_damaged_store_is_moved_aside_and_recovered_from_its_backup(tmp_path, caplog, how):
    path = tmp_path / "runs.db"
    store = RunStore(path)
    kept = store.create_run(SESSION, "train", {"epochs": 1}, "cpu")
    store.record(kept, steps=[1, 2], losses=[2.3, 2.2])
    for _ in range(30):  # enough pages that damage in the middle hits the runs' data
        store.record(kept, events=[("epoch", {"pad": "x" * 2000})])
    made = backup.Backups(path).backup_now()
    lost = store.create_run(SESSION, "train", {"epochs": 2}, "cpu")   # after the backup
    checkpointed(store)
    damage(path, how)
    before = path.read_bytes()

    with caplog.at_level(logging.ERROR, logger="cifarlab.serve.backup"):
        again = RunStore(path)
    notice = again.recovery
    assert notice is not None and notice.code == "serve.store.recovered"
    # the damaged file is kept, renamed with the time; the host's log says where, and why
    (moved,) = aside(path)
    assert moved.read_bytes() == before
    assert str(path) in caplog.text and str(moved) in caplog.text and str(made) in caplog.text
    # the runs of the backup are back; the newer one is lost, and the notice says from when
    assert again.get(kept).status == "queued" and again.loss_count(kept) == 2
    assert again.get(lost) is None
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(made.stat().st_mtime))
    for lang in i18n.LANGUAGES:
        text = notice.text(lang)
        assert when in text and str(tmp_path) not in text   # no server path for students
    assert "damaged" in notice.text("en") and "dañado" in notice.text("es")
    # the recovered store works and opens cleanly next time
    again.create_run(SESSION, "train", {"epochs": 3}, "cpu")
    assert RunStore(path).recovery is None


def test_with_no_usable_backup_the_store_starts_empty_and_says_so(tmp_path, caplog):
    path = tmp_path / "runs.db"
    store = RunStore(path)
    store.create_run(SESSION, "train", {"epochs": 1}, "cpu")
    checkpointed(store)
    (tmp_path / "backups").mkdir()
    (tmp_path / "backups" / "runs-20990101-000000.db").write_bytes(b"not a database" * 100)
    damage(path)
    with caplog.at_level(logging.ERROR, logger="cifarlab.serve.backup"):
        fresh = RunStore(path)
    assert fresh.recovery.code == "serve.store.started_fresh"
    assert fresh.list_runs() == [] and len(aside(path)) == 1
    assert "runs-20990101-000000.db cannot be used" in caplog.text and "starts empty" in caplog.text
    for lang in i18n.LANGUAGES:
        assert fresh.recovery.text(lang) == i18n.t("errors.serve.store.started_fresh", lang)
    assert fresh.create_run(SESSION, "train", {"epochs": 1}, "cpu")


def test_a_damaged_newest_backup_falls_back_to_an_older_one(tmp_path):
    path = tmp_path / "runs.db"
    store = RunStore(path)
    old = store.create_run(SESSION, "train", {"epochs": 1}, "cpu")
    older = backup.Backups(path).backup_now()
    newest = tmp_path / "backups" / "runs-20990101-000000.db"
    newest.write_bytes(older.read_bytes()[:2048])   # torn
    checkpointed(store)
    damage(path)
    again = RunStore(path)
    assert again.recovery.code == "serve.store.recovered" and again.get(old) is not None


@pytest.mark.integration   # a real queue waiting on its backup timer: seconds, not unit work
def test_the_server_backs_up_on_a_timer_and_at_shutdown_and_tells_every_page(tmp_path):
    settings = load_settings(home=tmp_path / "home", spare_workers=0, backup_interval=10)
    queue = JobQueue(settings=settings)
    try:
        assert queue.backups.every_s == 10.0 and queue.store_notice() is None
        queue.backups.every_s = 0.2   # the timer, sooner than a test should wait for the setting
        # a row the backups carry, never queued: no worker is started to train it
        run_id = running_row(queue.store, SESSION, {"epochs": 1})
        deadline = time.monotonic() + 120   # a hang guard, not a speed bound
        while not backup.generations(settings.home / "backups") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert backup.generations(settings.home / "backups")
        queue.store.set_status(run_id, "cancelled")
    finally:
        queue.shutdown(timeout=2)
    newest = backup.generations(settings.home / "backups")[0]
    copy = sqlite3.connect(newest)   # the last copy, made at shutdown, has the last outcome
    assert copy.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone() == \
        ("cancelled",)
    copy.close()
    # the server restarts on a damaged store: recovered, and the queue holds the notice
    store = RunStore(settings.db_path)
    checkpointed(store)
    damage(settings.db_path)
    queue = JobQueue(settings=settings, start=False)
    try:
        assert queue.store_notice().code == "serve.store.recovered"
        assert queue.store.get(run_id).status == "cancelled"
    finally:
        queue.shutdown(timeout=2)


def test_the_backup_interval_is_a_setting(tmp_path, monkeypatch):
    assert load_settings(home=tmp_path).backup_interval == 300
    monkeypatch.setenv("CIFARLAB_BACKUP_INTERVAL", "60")
    assert load_settings(home=tmp_path).backup_interval == 60
    monkeypatch.setenv("CIFARLAB_BACKUP_INTERVAL", "1")
    with pytest.raises(SettingsError) as info:
        load_settings(home=tmp_path)
    assert "CIFARLAB_BACKUP_INTERVAL" in str(info.value)
