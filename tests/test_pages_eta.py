"""The Train page's time estimates (AppTest, en/es/pt): the live view's time left comes from the
run's own steady speed, the form beside a running run of the same settings points to it instead
of a second figure, and a fresh student sees what finished runs with the same settings took."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from cifarlab.core.config import TrainConfig
from cifarlab.lab import eta
from data_support import pages_queue
from page_text import page_texts
from synthetic_run import running_row, write_finished_run, write_running_run

APP = str(Path(__file__).resolve().parents[1] / "app.py")
FRESH, BUSY = "eta-fresh-0001", "eta-busy-0002"


@pytest.fixture(scope="module")
def lab(tmp_path_factory, cifar_archive, cifar_cache_dir):
    mp = pytest.MonkeyPatch()
    # The running run is written here, not trained: nothing beats for it. On a busy machine
    # the first page (decoding the data set) can outlast the 60 s heartbeat watch, which would
    # then settle it; that watch is tested in test_executors and test_replicas.
    mp.setenv("CIFARLAB_HEARTBEAT_TIMEOUT", "3600")
    queue = pages_queue(mp, tmp_path_factory.mktemp("eta-home"), cifar_archive, cifar_cache_dir)
    write_finished_run(queue.store, "eta-someone-0003")
    other = running_row(queue.store, "eta-someone-0003", TrainConfig(batch_size=64).to_dict())
    queue.store.set_status(other, "done", result={"images_per_second": 5.0, "train_seconds": 1})
    running = write_running_run(queue.store, BUSY)
    yield queue, running
    queue.shutdown()
    mp.undo()


def train_page(lang: str, sid: str) -> list[str]:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["lang"], at.query_params["sid"] = lang, sid
    at.switch_page("pages/train.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return [s for _, s in page_texts(at)]


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_one_estimate_beside_a_running_run(lab, lang):
    queue, run_id = lab
    run = queue.store.get(run_id)
    live = eta.text(eta.estimate(run.config, run.device, progress=run.progress), lang)
    assert live == i18n.t("eta.left", lang, time=i18n.duration(
        (25_000 - 7_312) / ((7_312 - 250) / (107.25 - 5.0)), lang))
    texts = train_page(lang, BUSY)
    assert any(live in s for s in texts)                         # the progress bar's line
    assert i18n.t("eta.below", lang) in texts                     # the form: no second figure
    history_head = i18n.t("eta.history", lang, time="\x00", runs="\x00").split("\x00")[0]
    assert not any(s.startswith(history_head) for s in texts)


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_a_fresh_student_sees_runs_with_the_same_settings_only(lab, lang):
    queue, _ = lab
    est = eta.estimate(TrainConfig(), queue.device_for("auto"), queue.measured_speeds())
    assert est["kind"] == "history" and est["runs"] == 1   # batch 64's run left out
    assert eta.text(est, lang) in train_page(lang, FRESH)
