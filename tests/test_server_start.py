"""The server starts the job queue itself (server.py, Streamlit's ``st.App`` lifespan): a run
queued before a restart trains without anyone opening a page, and a bad hosting setting is
said in the host's log without stopping the server."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from browser_support import ROOT, free_port
from cifarlab.core.config import TrainConfig
from cifarlab.serve.store import RunStore

QUICK = TrainConfig(epochs=1, train_subset=256, batch_size=32, pipeline="fast", num_workers=0,
                    device="cpu")
GUARD = 600.0   # a hang guard, not a speed check


def test_a_run_queued_before_the_restart_trains_without_a_page_being_opened(
        tmp_path, cifar_archive, cifar_cache_dir):
    home = tmp_path / "home"
    store = RunStore(home / "runs.db")
    # what the previous server process left: a queued run (its process is gone)
    waiting = store.create_run("left-behind-session", "train", QUICK.to_dict(), "cpu")
    log = tmp_path / "server.log"
    env = {**os.environ, "CIFARLAB_HOME": str(home), "CIFARLAB_DATA": str(cifar_archive),
           "CIFARLAB_CACHE": str(cifar_cache_dir), "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "server.py", "--server.headless", "true",
             "--server.port", str(free_port()), "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + GUARD
        # nothing connects to the server: only the run store is read
        while store.get(waiting).status in ("queued", "running"):
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        run = store.get(waiting)
        assert run.status == "done", (run.error, log.read_text()[-3000:])
        assert run.result["test_accuracy"] > 0
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def test_a_bad_hosting_setting_is_logged_and_the_server_goes_on(monkeypatch, caplog, tmp_path):
    monkeypatch.syspath_prepend(str(ROOT))
    server = pytest.importorskip("server")
    monkeypatch.setenv("CIFARLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CIFARLAB_MAX_QUEUE", "lots")
    import cifarlab.serve.queue as jobs

    monkeypatch.setattr(jobs, "_QUEUE", None)
    with caplog.at_level(logging.ERROR, logger="cifarlab.server"):
        queue = server.start_queue()
    if queue is not None:
        queue.shutdown()
    assert queue is None and jobs._QUEUE is None
    assert "CIFARLAB_MAX_QUEUE" in caplog.text


def test_the_server_entry_is_the_app_in_streamlits_asgi_app():
    from streamlit.web.server.app_discovery import discover_asgi_app

    found = discover_asgi_app(ROOT / "server.py")
    assert found.is_asgi_app and found.app_name == "app"
    assert "server.py" in (ROOT / "Dockerfile").read_text().split("CMD", 1)[1]
