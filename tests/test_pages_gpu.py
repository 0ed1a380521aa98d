"""The CPU vs GPU page (pages/gpu.py) through the real entry point, in en, es and pt.

No GPU is needed: the "no GPU" branch is forced by hiding any accelerator, a result "recorded
elsewhere" is a tiny CPU sweep relabelled as another machine with a fake cuda:0, and the end to
end test runs a tiny timing job through the real job queue (its own CIFARLAB_HOME). Whatever
comes from an uploaded file reaches Markdown as text, never as markup.
"""
from __future__ import annotations

import copy
import json
import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cifarlab import i18n
from cifarlab.errors import CifarLabError
from cifarlab.core import devices
from cifarlab.serve import queue as jobs
from cifarlab.lab.gpu import measure, report, results
from cifarlab.lab.gpu.config import SweepConfig
from inline_executor import use_inline_executor

ROOT = Path(__file__).resolve().parents[1]
PAGE = "pages/gpu.py"
OTHER_HOST = "gpu-box-7"
OTHER_DATE = "2025-06-01T12:00:00+00:00"
H100 = "NVIDIA H100 80GB HBM3"


def _cpu_only():
    return [d for d in _real_list_devices() if d.kind == "cpu"]


_real_list_devices = devices.list_devices


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A CPU-only view of this machine, an empty docs/gpu-results and a fresh job queue home."""
    monkeypatch.setattr(devices, "list_devices", _cpu_only)
    recorded = tmp_path / "gpu-results"
    recorded.mkdir()
    monkeypatch.setattr(results, "RESULTS_DIR", recorded)
    monkeypatch.setenv("CIFARLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CIFARLAB_SPARE_WORKERS", "0")
    monkeypatch.setenv("CIFARLAB_DATA", str(tmp_path / "no-data-needed"))  # synthetic images
    use_inline_executor(monkeypatch)   # the timing job in a thread of this process
    _close_queue()
    yield recorded
    _close_queue()


def _close_queue():
    queue = getattr(jobs, "_QUEUE", None)
    if queue is not None and not queue.closed:
        queue.shutdown(timeout=5)


def open_page(lang: str = "en") -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    return at


def texts(at: AppTest, kind: str) -> list[str]:
    return [e.value for e in getattr(at, kind)]


def all_text(at: AppTest) -> str:
    return "\n".join(texts(at, "markdown") + texts(at, "info") + texts(at, "warning")
                     + texts(at, "success") + texts(at, "error") + texts(at, "caption"))


def charts(at: AppTest) -> set[str]:
    return {e.key for e in at.get("plotly_chart")}


def frame_with(at: AppTest, column: str):
    """The first table on the page with this column (st.dataframe keys are not in AppTest)."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no table with a column {column!r}")


def tiny_result() -> results.SweepResult:
    cfg = SweepConfig(devices=("cpu",), batch_sizes=(4, 16), widths=(1,),
                             pipelines=("fast",), steps=2, warmup=1, repeats=1,
                             max_seconds=0.5, num_workers=0, breakdown=True)
    return measure.run_sweep(cfg)


def as_other_machine(res: results.SweepResult) -> results.SweepResult:
    """The result relabelled as recorded on another machine, with a fake cuda:0 that loses to
    the cpu at batch 4 and wins from batch 16 (so the curves cross)."""
    d = copy.deepcopy(res.to_dict())
    d["host"], d["recorded_at"] = OTHER_HOST, OTHER_DATE
    d["environment"]["devices"].append({"id": "cuda:0", "kind": "cuda", "name": H100,
                                        "memory_bytes": 80 * 2**30})
    gpu_rows = []
    for row in d["rows"]:
        g = dict(row, device="cuda:0", device_kind="cuda", device_name=H100,
                 device_memory_bytes=80 * 2**30)
        factor = 0.5 if row["batch_size"] == 4 else 3.0
        for k in ("images_per_s", "images_per_s_min", "images_per_s_max"):
            g[k] = row[k] * factor
        for k in ("step_ms", "step_ms_min", "step_ms_max", "epoch_s"):
            g[k] = row[k] / factor
        gpu_rows.append(g)
    d["rows"] += gpu_rows
    d["environment"]["load_average_start"] = [0.1] * 3   # a quiet machine (this one may not be)
    for row in d["rows"]:
        row["host"], row["recorded_at"], row["load_1m"] = OTHER_HOST, OTHER_DATE, 0.1
    return results.SweepResult.from_dict(d, source="recorded")


@pytest.fixture(scope="module")
def other_machine() -> results.SweepResult:
    return as_other_machine(tiny_result())


# ------------------------------------------------------------------------------------ tests

@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_renders_without_a_gpu_in_every_language(env, lang):
    at = open_page(lang)
    t = i18n.translator(lang)
    assert t("gpu.title") in [e.value for e in at.title]
    assert at.button(key="gpu_run").label == t("gpu.run")
    text = all_text(at)
    assert t("gpu.no_gpu") in text                    # the note, in this language
    assert t("gpu.no_gpu_body") in text
    assert t("gpu.no_gpu_none_recorded") in text      # docs/gpu-results is empty
    assert t("gpu.no_result") in text
    assert t("gpu.graphs_needs_gpu") in text          # the "GPU, graphed" series needs CUDA
    assert "gpu_graphed" not in [c.key for c in at.checkbox]
    assert at.pills(key="gpu_devices").value == ["cpu"]
    assert 4 in at.pills(key="gpu_batches").value
    # an empty choice is refused next to the widgets, and the button is disabled
    at.pills(key="gpu_widths").set_value([]).run()
    assert not at.exception
    assert t("gpu.pick_something") in texts(at, "warning")
    assert at.button(key="gpu_run").disabled


def test_recorded_elsewhere_shows_the_label_and_the_speedup(env, other_machine):
    other_machine.save(env / "nvidia-h100-2025-06-01.json")
    (env / "broken.json").write_text("{not json")     # skipped, never an exception
    at = open_page("en")
    t = i18n.translator("en")
    text = all_text(at)
    assert t("gpu.no_gpu_recorded") in text
    # named by its CPU and GPU (host names repeat: both machines were "vm")
    assert H100 in report.machine_label(other_machine) and OTHER_HOST not in \
        report.machine_label(other_machine)
    label = t("gpu.recorded_elsewhere", machine=report.machine_label(other_machine),
              date="2025-06-01")
    assert any(label in w for w in texts(at, "warning")), texts(at, "warning")
    assert {"gpu_throughput_chart", "gpu_speedup_chart", "gpu_breakdown_chart"} <= charts(at)
    # each device's line: its own colour from a colour-blind-safe palette, and its own dash
    import json
    from cifarlab.lab.charts import PALETTE
    (chart,) = [c for c in at.get("plotly_chart") if c.key == "gpu_throughput_chart"]
    lines = [tr for tr in json.loads(chart.proto.spec)["data"] if tr.get("mode") != "markers+text"]
    assert len(lines) >= 2
    assert all(tr["line"]["color"] in PALETTE for tr in lines)
    assert len({tr["line"]["color"] for tr in lines}) == len(lines)
    assert len({tr["line"]["dash"] for tr in lines}) == len(lines)
    # the crossover, in words: loses at 4, wins from 16 (3x), curves cross in between
    assert "faster than the CPU from batch 16 (3.00×)" in text
    assert "the curves cross near batch" in text
    # the tutorial point's explanation, with the figures of this result
    assert t("gpu.tutorial_title") in text
    assert t("gpu.tut_why", params=62006) in text and "62,006 weights" in text
    assert "**0.50×** the CPU" in text
    hardware = at.table[0].value.to_string()
    assert H100 in hardware and "80 GiB" in hardware and report.md(OTHER_HOST) in hardware
    # the phase breakdown: one device at a time, in ms or as shares of the step
    assert at.radio(key="gpu_breakdown_device").value == "cpu"
    at.radio(key="gpu_breakdown_scale").set_value("share").run()
    assert not at.exception and "gpu_breakdown_chart" in charts(at)
    # the same page in Spanish: labelled too
    at2 = open_page("es")
    es = i18n.translator("es")
    label = es("gpu.recorded_elsewhere", machine=report.machine_label(other_machine, lang="es"),
               date="2025-06-01")
    assert any(label in w for w in texts(at2, "warning"))
    assert "2 núcleos" in label     # the CPU's cores counted in Spanish
    assert "gpu_speedup_chart" in charts(at2)


def with_graphed_series(res: results.SweepResult, gain: float = 5.0) -> results.SweepResult:
    """``res`` (as_other_machine) plus a "GPU, graphed" series: each fast cuda:0 point again,
    graphed, ``gain`` times as fast."""
    d = copy.deepcopy(res.to_dict())
    extra = []
    for row in d["rows"]:
        if row["device"] == "cuda:0" and row["pipeline"] == "fast":
            g = dict(row, graphed=True)
            for k in ("images_per_s", "images_per_s_min", "images_per_s_max"):
                g[k] = row[k] * gain
            for k in ("step_ms", "step_ms_min", "step_ms_max", "epoch_s"):
                g[k] = row[k] / gain
            extra.append(g)
    d["rows"] += extra
    return results.SweepResult.from_dict(d, source="recorded")


@pytest.mark.parametrize("lang", ["en", "es", "pt"])
def test_a_graphed_series_recorded_elsewhere_is_explained_in_every_language(env, other_machine,
                                                                            lang):
    res = with_graphed_series(other_machine)
    res.save(env / "nvidia-h100-2025-06-01.json")
    at = open_page(lang)
    t = i18n.translator(lang)
    text = all_text(at)
    assert t("gpu.graphs_title") in text and t("gpu.graphs_body") in text
    lines = [m.value.removeprefix("- ") for m in at.markdown]
    assert t("gpu.graphs_gain", device="cuda\\:0", batch=4, width=1, x="5" + (
        "." if lang == "en" else ",") + "00", graphed_ms=res.rows[-2]["step_ms"],
        eager_ms=res.rows[-2]["step_ms"] * 5) in lines
    assert t("gpu.graphs_none") not in texts(at, "info")   # the series is there
    (chart,) = [c for c in at.get("plotly_chart") if c.key == "gpu_throughput_chart"]
    names = {tr.get("name") for tr in json.loads(chart.proto.spec)["data"]}
    assert t("gpu.trace_graphed", device="cuda:0", width=1) in names    # the third series
    table = frame_with(at, t("gpu.device_col"))
    assert f"cuda:0 · {t('gpu.graphed_tag')}" in set(table[t("gpu.device_col")])


def test_uploads_good_and_bad(env, other_machine):
    at = open_page("en")
    t = i18n.translator("en")
    up = at.file_uploader(key="gpu_upload")

    up.set_value(("notes.txt", b"hello", "text/plain")).run()
    assert not at.exception
    assert any("notes\\.txt is not a .json or .csv file" in e for e in texts(at, "error"))

    at.file_uploader(key="gpu_upload").set_value(
        ("wrong.csv", b"a,b,c\n1,2,3\n", "text/csv")).run()
    errors = texts(at, "error")
    assert any("wrong\\.csv" in e and "no device, batch_size and width columns" in e
               for e in errors), errors

    at.file_uploader(key="gpu_upload").set_value(
        ("bad.json", json.dumps({"format": "something-else"}).encode(), "application/json")).run()
    assert any("bad\\.json" in e and "not a CIFAR Lab timing result" in e
               for e in texts(at, "error"))

    broken = copy.deepcopy(other_machine.to_dict())
    broken["rows"][0]["images_per_s"] = None           # a point with no figure and no error
    at.file_uploader(key="gpu_upload").set_value(
        ("holes.json", json.dumps(broken).encode(), "application/json")).run()
    assert any("holes\\.json" in e and "row 1" in e for e in texts(at, "error"))
    assert not at.exception

    at.file_uploader(key="gpu_upload").set_value(
        ("h100.csv", other_machine.to_csv().encode(), "text/csv")).run()
    assert not at.exception
    assert not texts(at, "error")
    assert at.selectbox(key="gpu_source").value == "upload"
    # named by its CPU and GPU (host names repeat: both machines were "vm")
    assert H100 in report.machine_label(other_machine) and OTHER_HOST not in \
        report.machine_label(other_machine)
    label = t("gpu.recorded_elsewhere", machine=report.machine_label(other_machine),
              date="2025-06-01")
    assert any(label in w for w in texts(at, "warning"))
    assert "gpu_speedup_chart" in charts(at)
    # the charts follow the pipeline chosen
    assert at.radio(key="gpu_chart_pipeline").value == "fast"
    assert set(at.radio(key="gpu_chart_pipeline").options) == {t("gpu.pipeline_fast"),
                                                                t("gpu.pipeline_tutorial")}
    at.radio(key="gpu_chart_pipeline").set_value("tutorial").run()
    assert not at.exception and "gpu_throughput_chart" in charts(at)


EVIL = "![x](http://127.0.0.1:9/x.png)"


def test_an_uploaded_device_name_is_text_not_markdown(env, other_machine):
    """A device name, host or file name from an upload can't make the viewer's browser fetch
    an image: every Markdown element on the page renders it as the characters it is."""
    markdown_it = pytest.importorskip("markdown_it")
    d = copy.deepcopy(other_machine.to_dict())
    d["host"] = EVIL
    for r in d["rows"]:
        r["device_name"], r["host"] = EVIL, EVIL
    for dev in d["environment"]["devices"]:
        dev["name"] = EVIL
    d["environment"]["cpu"] = EVIL
    at = open_page("en")
    at.file_uploader(key="gpu_upload").set_value(
        (f"{EVIL}.json", json.dumps(d).encode(), "application/json")).run()
    assert not at.exception and not texts(at, "error")
    assert at.selectbox(key="gpu_source").value == "upload"
    rendered = [markdown_it.MarkdownIt().render(m) for m in
                texts(at, "markdown") + texts(at, "warning") + texts(at, "success")
                + texts(at, "info") + texts(at, "caption")]
    assert not [h for h in rendered if "<img" in h or "<a " in h]
    # the name is on the page, as text (a zero-width space keeps its bare URL from linking)
    shown = [h for h in rendered if EVIL in h.replace("\u200b", "")]
    assert len(shown) >= 3, rendered
    cells = at.table[0].value.reset_index().to_numpy().ravel().tolist()  # st.table: Markdown
    cells = [markdown_it.MarkdownIt().render(str(c)) for c in cells]
    assert not [h for h in cells if "<img" in h] and any(EVIL in h.replace("\u200b", "")
                                                         for h in cells)
    # a file named like that, refused: its name in the error is text too
    at.file_uploader(key="gpu_upload").set_value((f"{EVIL}.txt", b"x", "text/plain")).run()
    (error,) = texts(at, "error")
    assert "<img" not in markdown_it.MarkdownIt().render(error)
    assert EVIL in markdown_it.MarkdownIt().render(error).replace("\u200b", "")


def test_the_page_speaks_the_students_language(env, other_machine):
    other_machine.save(env / "nvidia-h100-2025-06-01.json")
    at = open_page("es")
    es = i18n.translator("es")
    table = frame_with(at, es("gpu.note_col"))
    assert set(table[es("gpu.pipeline_col")]) == \
        {"canalización rápida", "canalización del tutorial"}
    hardware = at.table[0].value.to_string()
    assert "píxeles al azar" in hardware and "None" not in hardware
    text = all_text(at)
    assert "**cuda\\:0**, canalización rápida, anchura 1" in text and "fast pipeline" not in text
    assert "62.006" in text                           # numbers in Spanish notation


GUARD_S = 150    # a hang guard, never a timing


def test_timing_job_end_to_end_shows_rows(env, other_machine, monkeypatch):

    # after its first point the sweep waits until the page has shown it live (a loaded machine
    # could otherwise finish the whole sweep between two script runs of the page)
    shown = threading.Event()
    sweep = measure.run_sweep

    def sweep_seen_live(cfg, on_result, **kwargs):
        def row_then_wait(row):
            on_result(row)
            shown.wait(GUARD_S)
        return sweep(cfg, on_result=row_then_wait, **kwargs)

    monkeypatch.setattr(measure, "run_sweep", sweep_seen_live)
    at = open_page("en")
    t = i18n.translator("en")
    at.pills(key="gpu_batches").set_value([4, 16])
    at.pills(key="gpu_widths").set_value([1])
    at.pills(key="gpu_pipelines").set_value(["fast"])
    at.number_input(key="gpu_repeats").set_value(1)
    at.number_input(key="gpu_steps").set_value(3)
    at.number_input(key="gpu_warmup").set_value(1)
    at.text_input(key="gpu_max_seconds").set_value("0,5")       # either decimal mark
    at.number_input(key="gpu_num_workers").set_value(0)
    at.checkbox(key="gpu_breakdown").uncheck()
    at.run()
    # 3 points of at most 0.5 s (+ about 1 s to set each up): the whole timing, announced
    plan = t("gpu.plan", points=3, devices="cpu", budget=0.5, total=i18n.duration(4.5, "en"))
    assert plan in texts(at, "caption")               # the tutorial's point + batch 4 and 16
    at.button(key="gpu_run").click().run()
    assert not at.exception, at.exception
    run_id = at.session_state["gpu_run_id"]
    queue = jobs.get_queue()
    run = queue.store.get(run_id)
    assert run.kind == "timing" and run.device == "cpu" and run.holds == ("cpu",)

    live = set()
    deadline = time.monotonic() + GUARD_S   # ~20 s on an idle 2-core machine
    while time.monotonic() < deadline:
        run = queue.store.get(run_id)
        if run.finished:
            break
        text = all_text(at)
        for key in ("gpu.starting", "gpu.live_title"):
            if t(key) in text:
                live.add(key)
        if any(t("gpu.running", devices="cpu", done=n, total=3) in text for n in range(4)):
            live.add("running")
        if live:
            shown.set()     # the sweep may go on
        time.sleep(0.3)
        at.run()
        assert not at.exception, at.exception
    shown.set()
    assert run.status == "done", (run.status, run.error, run.waited_s,
                                  [(e.kind, round(e.t - run.created_at, 1))
                                   for e in queue.store.events(run_id)])
    assert live, "the live panel never showed"
    events = queue.store.events(run_id, kinds=["timing_row"])
    assert [(e.data["pipeline"], e.data["batch_size"]) for e in events] == [
        ("tutorial", 4), ("fast", 4), ("fast", 16)]

    other_machine.save(env / "nvidia-h100-2025-06-01.json")  # a GPU recorded elsewhere
    at.run()
    assert not at.exception
    assert at.selectbox(key="gpu_source").value == "run"
    assert any(t("gpu.this_machine", machine=measure.hostname(), date="")[:20] in s
               for s in texts(at, "success"))
    table = frame_with(at, t("gpu.note_col"))
    assert sorted(table[t("gpu.batch_col")].tolist()) == [4, 4, 16]
    assert (table[t("gpu.ips_col")] > 0).all()
    assert "gpu_throughput_chart" in charts(at)
    assert t("gpu.no_speedup") in texts(at, "info")   # cpu only: no speed-up chart
    # what a GPU would add: the recording's own comparison (its GPU was 0.5x its CPU at the
    # tutorial's point), never this machine's CPU against another's GPU
    assert "**0.50×** as fast as that machine's own CPU" in all_text(at)
    assert at.get("download_button")


def test_the_recordings_in_docs_render(env, monkeypatch):
    """The GPU results committed in docs/gpu-results load and show as recorded elsewhere."""
    real = ROOT / "docs" / "gpu-results"
    files = []  # the sweep recordings; gpu_check's results.json files sit beside them
    for path in sorted(real.glob("*.json")) if real.is_dir() else []:
        try:
            files.append(results.SweepResult.load(path).check() and path)
        except CifarLabError:
            assert path.name.startswith("gpu-check-results-"), path
    if not files:
        pytest.skip("no recorded GPU results in docs/gpu-results yet")
    monkeypatch.setattr(results, "RESULTS_DIR", real)
    at = open_page("pt")
    t = i18n.translator("pt")
    assert len(at.selectbox(key="gpu_source").options) == len(files)
    for path in files:
        at.selectbox(key="gpu_source").set_value(f"rec:{path.name}").run()
        assert at.selectbox(key="gpu_source").value == f"rec:{path.name}"
        assert not at.exception, at.exception
        assert any(w.startswith(f"**{t('gpu.recorded_elsewhere', machine='', date='')[:15]}")
                   for w in texts(at, "warning")), texts(at, "warning")
        assert "gpu_throughput_chart" in charts(at)


@pytest.mark.parametrize("typed", ["abc", "0,1", "61"])
def test_a_bad_time_budget_says_so_in_the_language_and_plans_nothing(env, typed):
    at = open_page("pt")
    t = i18n.translator("pt")
    assert at.text_input(key="gpu_max_seconds").value == "1"
    plan_words = i18n.catalog("pt")["gpu.plan"].split("{devices}")[0].replace("{points} ", "")
    assert any(plan_words in c for c in texts(at, "caption"))
    at.text_input(key="gpu_max_seconds").set_value(typed).run()
    assert not at.exception
    assert t("common.out_of_range", lo=0.2, hi=60.0) in texts(at, "error")
    assert not any(plan_words in c for c in texts(at, "caption"))   # no stale plan
    assert at.button(key="gpu_run").disabled                         # nothing to run
    assert at.text_input(key="gpu_max_seconds").value == typed       # kept as typed
