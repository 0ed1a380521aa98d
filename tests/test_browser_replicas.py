"""Two replicas on one store, in Chromium: a student trains on replica A, A dies (``kill -9``
of the server and every process under it, as a crashed machine would), and the student's same
link on replica B shows the run that was training interrupted, its reason in words, and the run
that waited behind it taken by B's dispatcher and finished. Both are ``streamlit run
server.py`` (app.py as hosts serve it: the job queue starts with the server) on one PostgreSQL
(tests/pg_support.py) and one ``CIFARLAB_HOME``, one CPU slot each; B starts once A
dispatches, so A is the one that trains.

No wall-clock bound: every wait is on a condition, with a hang guard."""
from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect
from sqlalchemy import select

from browser_support import (StreamlitServer, page_problems, screenshot, wait_idle,
                             wait_on_progress)
from cifarlab import i18n
from cifarlab.serve.schema import REPLICAS
from cifarlab.serve.store import RunStore

pytestmark = [pytest.mark.browser, pytest.mark.postgres]
SID = "replica-student-01"
TINY = "epochs=1&train_subset=256&batch_size=32&num_workers=0"   # the run that waits
GUARD_MS = 600_000


def crash(pid: int) -> None:
    """``kill -9`` a server as its machine's crash would: the server, its process group and
    every process under it (a worker leads a group of its own, its DataLoader workers in it),
    all frozen first so that none of them records how it ended."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    tree = [pid]
    for p in tree:
        tree += children.get(p, [])
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for p in tree:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
    os.killpg(pid, signal.SIGKILL)


@pytest.mark.timeout(1800)
def test_replica_a_killed_mid_run_the_same_link_on_b_says_why_and_runs_the_queue(
        browser, postgres, pg_url, cifar_archive, cifar_cache_dir, tmp_path):
    t = i18n.translator("en")
    home = tmp_path / "home"
    home.mkdir()
    env = {"CIFARLAB_STORE_URL": pg_url, "CIFARLAB_DATA": str(cifar_archive),
           "CIFARLAB_CACHE": str(cifar_cache_dir), "CIFARLAB_CPU_SLOTS": "1",
           "CIFARLAB_SPARE_WORKERS": "1", "CIFARLAB_HEARTBEAT_TIMEOUT": "10",
           "CIFARLAB_WORKER_NICE": "0"}   # a niced worker's first beat can come late
    a, b = (StreamlitServer(home, env, script="server.py") for _ in range(2))
    a.log, b.log = home / "a.log", home / "b.log"
    store = RunStore(pg_url, home / "checkpoints")
    pages = []
    try:
        a.start()     # A dispatches; B, started once A does, waits
        b.start()     # before the tutorial's run, which then trains alone until A's crash
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        pages.append(page)
        # on A: the tutorial (in one process), then a tiny run that waits for the one CPU slot
        for n, link in ((1, "&num_workers=0"), (2, "&" + TINY)):
            page.goto(f"{a.url}/train?lang=en&sid={SID}{link}")
            wait_idle(page, GUARD_MS)
            page.get_by_role("button", name=t("train.start"), exact=True).click()
            wait_on_progress(lambda n=n: len(store.list_runs(session=SID)) == n,
                             lambda: None, stall_s=GUARD_MS / 1000, page=page)
        second, first = store.list_runs(session=SID)
        assert second.status == "queued" and second.config["train_subset"] == 256
        wait_on_progress(lambda: store.get(first.id).status != "queued",
                         lambda: None, stall_s=GUARD_MS / 1000, page=page)
        assert (store.get(first.id).status, store.get(second.id).status) == ("running", "queued")
        crash(a.proc.pid)
        a.proc.wait()

        # the student's link, now answered by B
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        pages.append(page)
        page.goto(f"{b.url}/train?lang=en&sid={SID}")
        wait_idle(page, GUARD_MS)
        # the live view follows the run B starts to its end
        page.get_by_text(t("train.finished")).wait_for(timeout=GUARD_MS)
        wait_idle(page)
        main = page.get_by_test_id("stMain")
        expect(main).to_contain_text(f"{t('status.status')}: {t('status.done')}")
        # the run A was training: interrupted, and why, in words
        lost, done = store.get(first.id), store.get(second.id)
        box = page.get_by_role("combobox", name=t("train.choose_run"), exact=True)
        option = re.compile(re.escape(t("status.interrupted")))
        for _ in range(5):   # the live view's poll may redraw the list between the clicks
            box.click()
            try:
                page.get_by_role("option", name=option).click(timeout=10_000)
                break
            except PlaywrightTimeout:
                page.keyboard.press("Escape")
        wait_idle(page)
        expect(main).to_contain_text(t("train.failed_reason", reason=lost.error_text("en")))
        expect(main).to_contain_text(f"{t('status.status')}: {t('status.interrupted')}")
        assert not page_problems(page)
        screenshot(page, "en-replica-b-after-a-was-killed")
        # the store agrees: A trained the first, B's dispatcher took the queued one, once
        with store._read() as c:
            replica_of = dict(c.execute(select(REPLICAS.c.pid, REPLICAS.c.id)).all())
        assert lost.status == "interrupted" and lost.replica == replica_of[a.proc.pid]
        # found by B's dispatcher, in a restart's words (with the step reached, once there was one)
        assert lost.error_code in ("serve.store.restarted_at", "serve.store.restarted")
        assert done.status == "done" and done.replica == replica_of[b.proc.pid]
        assert 0 <= done.result["test_accuracy"] <= 1
        assert [e.kind for e in store.events(second.id)].count("start") == 1
    finally:
        for page in pages:
            page.close()
        if a.proc is not None and a.proc.poll() is None:
            crash(a.proc.pid)
        b.stop()
        store.close()
