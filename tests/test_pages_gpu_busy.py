"""The CPU vs GPU page showing a timing made on a busy machine (AppTest, en/es/pt): the busy
warning comes first, with the server's own finished run as the cross-check; no two-epoch
extrapolation or best batch is headlined; the machine is named by its CPU, not "vm"."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from cifarlab.lab.gpu import report
from cifarlab.lab.gpu.config import SweepConfig
from data_support import pages_queue
from page_text import page_texts
from synthetic_run import running_row, write_finished_run
from test_gpu_busy import EPYC, timing

APP = str(Path(__file__).resolve().parents[1] / "app.py")
SID = "gpu-busy-student-0001"


@pytest.fixture(scope="module")
def lab_home(tmp_path_factory, cifar_archive, cifar_cache_dir):
    mp = pytest.MonkeyPatch()
    queue = pages_queue(mp, tmp_path_factory.mktemp("gpu-busy"), cifar_archive, cifar_cache_dir)
    write_finished_run(queue.store, "gpu-busy-other-0002")     # the tutorial at 271 images/s
    busy = timing(tut_ips=16.0, spread=2.0, load=9.0)
    run_id = running_row(queue.store, SID, SweepConfig(devices=("cpu",)).to_dict(), kind="timing")
    queue.store.set_status(run_id, "done", result=busy.to_dict())
    yield queue
    queue.shutdown()
    mp.undo()


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_a_busy_timing_says_so_first(lab_home, lang):
    t = i18n.translator(lang)
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["lang"], at.query_params["sid"] = lang, SID
    at.switch_page("pages/gpu.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="gpu_source").value == "run"
    # the first thing said of the result: busy, why, and what the server's own run did
    order = [s for _, s in page_texts(at)]        # in the page's order
    first = next(v for v in order if v.startswith(t("gpu_busy.headline")))
    success = at.success[0].value
    assert first in [w.value for w in at.warning]
    assert order.index(first) < order.index(success)
    assert i18n.number(271, lang) in first                 # the run store's measured run
    assert t("gpu_busy.spread", x=report.times(2.0, lang)) in first
    cpu = report.md(report.in_words(EPYC, lang))      # "AMD EPYC (2 núcleos)" in Spanish
    assert cpu in success and "vm" not in success
    captions = [c.value for c in at.caption]
    assert any(c.startswith(t("gpu_busy.check", device="cpu", ips=i18n.number(271, lang),
                                runs=t("counts.runs", n=1))) for c in captions)
    # what was measured, without the extrapolations busy-ness made
    text = "\n".join(m.value for m in at.markdown)
    assert t("gpu_busy.tut_measured", device="cpu", name=cpu, ips=16) in text
    assert i18n.duration(2 * 50_000 / 16.0, lang) not in text     # no "1 h 44 min"
