"""What a student sees of the server's faults, in their language, through the real app
(AppTest): the run store found damaged at start and recovered (said once per session), a run
whose weights a full disk lost (its reason, and its results still shown), and a run refused
because the disk has no room (never Streamlit's English error)."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.serve import disk
from cifarlab.serve import queue as jobs
from cifarlab.serve.runs import reason
from cifarlab.serve.store import RunStore
from synthetic_run import running_row

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


def _stop_queue() -> None:
    if jobs._QUEUE is not None:
        jobs._QUEUE.shutdown(timeout=5)
        jobs._QUEUE = None


@pytest.fixture
def home(tmp_path, monkeypatch, cifar_archive, cifar_cache_dir):
    from ui import nav

    home = tmp_path / "home"
    monkeypatch.setenv("CIFARLAB_HOME", str(home))
    monkeypatch.setenv("CIFARLAB_DATA", str(cifar_archive))
    monkeypatch.setenv("CIFARLAB_CACHE", str(cifar_cache_dir))
    monkeypatch.setenv("CIFARLAB_SPARE_WORKERS", "0")
    monkeypatch.delenv("CIFARLAB_CONFIG", raising=False)
    monkeypatch.setattr(nav, "PAGES", [p for p in nav.PAGES if (ROOT / p[1]).is_file()])
    _stop_queue()
    yield home
    _stop_queue()


def open_page(sid: str, lang: str, page: str = "pages/train.py") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)   # hang guards, not speed bounds
    at.query_params["lang"] = lang
    at.query_params["sid"] = sid
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    return at


def texts(at: AppTest, kind: str) -> list[str]:
    return [e.value for e in getattr(at, kind)]


def test_a_damaged_store_is_said_once_in_the_students_language(home):
    store = RunStore(home / "runs.db")
    store.create_run("ana-session-1", "train", TrainConfig().to_dict(), "cpu")
    raw = store.engine.raw_connection()   # outside any transaction
    try:
        raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        raw.close()
    store.close()
    with open(home / "runs.db", "r+b") as f:   # overwritten at its start
        f.write(b"\0garbage" * 512)
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["lang"] = "es"
    at.query_params["sid"] = "ana-session-1"
    notice = i18n.t("errors.serve.store.started_fresh", "es")
    seen = []
    for page in (None, "pages/train.py", "pages/runs.py"):   # the first page opened says it
        if page is not None:
            at.switch_page(page)
        at.run()
        assert not at.exception and not at.error, (page, at.exception, texts(at, "error"))
        seen.append(texts(at, "warning").count(notice))
    assert seen[0] + seen[1] == 1 and seen[2] == 0   # said once in the session
    assert len(list(home.glob("runs.db.damaged-*"))) == 1


def test_a_run_whose_weights_a_full_disk_lost_shows_why_and_its_results(home):
    sid = "bea-session-2"
    store = RunStore(home / "runs.db")
    run_id = running_row(store, sid, TrainConfig().to_dict(), owner=f"browser:{sid}")
    per_class = {c: 0.5 for c in CIFAR10_CLASSES}
    store.set_status(run_id, "failed", result={"test_accuracy": 0.5, "steps": 10,
                                               "per_class_accuracy": per_class,
                                               "train_seconds": 3.0,
                                               "images_per_second": 100.0},
                     **reason("serve.worker.disk_full"))
    at = open_page(sid, "es")
    t = i18n.translator("es")
    why = t("train.failed_reason", reason=t("errors.serve.worker.disk_full"))
    assert why in texts(at, "error")
    assert [m for m in at.metric if m.label == t("train.accuracy_partial")]   # results kept


def test_no_room_on_the_disk_refuses_the_run_in_words(home, monkeypatch):
    sid = "cai-session-3"
    at = open_page(sid, "pt")
    monkeypatch.setattr(disk, "free_bytes", lambda folder: 350_000)
    at.button(key="train_start").click().run()
    assert not at.exception
    refused = [e for e in texts(at, "error") if "disco do servidor" in e]
    assert refused and "0,4 MB" in refused[0]   # 350,000 bytes, in Portuguese notation
    assert RunStore(home / "runs.db").list_runs() == []
