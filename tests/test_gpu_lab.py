"""cifarlab.lab.gpu on the CPU: the timed step is the trained step, the sweep's rows, warm-up
apart, time budgets, exact CSV/JSON round trips through pandas, speed-ups and crossovers
within one recording (hand-made accelerator rows), never across machines, the devices a timing
run holds, the breakdown pass, the job entry point, the `bench` command (--sweep included),
errors as codes, and the CUDA paths as far as they go without a GPU."""
import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from cifarlab import cli, i18n
from cifarlab.core import train as core_train
from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.core.data import CifarData
from cifarlab.core.devices import DeviceInfo
from cifarlab.errors import CifarLabError, ConfigError, DataError, DeviceError, UploadError
from cifarlab.lab.gpu import analysis, charts, measure, report, results, step
from cifarlab.lab.gpu import cli as gpu_cli
from cifarlab.lab.gpu.analysis import crossover, speedups
from cifarlab.lab.gpu.config import SweepConfig, estimate_seconds, job_request, time_left
from cifarlab.lab.gpu.measure import breakdown, measure_point, run_sweep, run_timing_job
from cifarlab.lab.gpu.results import COLUMNS, SweepResult

ROOT = Path(__file__).resolve().parents[1]
RECORDING = ROOT / "docs" / "gpu-results" / "nvidia-h100-80gb-hbm3-2026-11-23.json"
TINY = dict(devices=("cpu",), batch_sizes=(4, 16), widths=(1, 2), pipelines=("fast",), steps=2,
            warmup=2, repeats=2, num_workers=0, max_seconds=None)
QUICK = {**TINY, "steps": 1, "warmup": 1, "repeats": 1}  # for tests that count rows or events


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: on a busy 2-core machine two threads spin-wait on each other and a
    step's time swings 100-fold; with one it is steadier. (Tests check sense, not speed.)"""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def swept():
    return run_sweep(SweepConfig(**TINY))


def tiny_data(n=64) -> CifarData:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    y = (np.arange(n) % 10).astype(np.int64)
    return CifarData(x, y, x[:16], y[:16], CIFAR10_CLASSES, "tiny", "tiny")


# -----------------------------------------------------------------------------
# the timed step is the training step

def test_the_timed_step_is_the_trained_step(monkeypatch):
    """Training and timing call one function for the step, and build the optimizer and the
    loader the same way: a step counted in one is a step counted in the other."""
    calls, built = [], []
    real_step, real_opt = core_train.train_step, core_train.make_optimizer

    def counting_step(*args):
        calls.append(args[3].shape[0])
        return real_step(*args)

    def recording_opt(config, model, device=None):
        built.append(config.pipeline)
        return real_opt(config, model, device)

    monkeypatch.setattr(core_train, "train_step", counting_step)
    monkeypatch.setattr(core_train, "make_optimizer", recording_opt)
    row = measure_point("cpu", 4, 1, "fast", steps=3, warmup=2, repeats=2, num_workers=0)
    assert len(calls) == 2 + 3 * 2 and set(calls) == {4} and built == ["fast"]
    assert row["timed_steps"] == 6 and row["warmup_steps"] == 2
    calls.clear()
    result = core_train.train(TrainConfig(epochs=1, batch_size=8, pipeline="fast", device="cpu",
                                          num_workers=0), tiny_data(), evaluate_after=False)
    assert len(calls) == result.steps == 8 and built == ["fast", "fast"]


def test_fast_pipeline_times_the_fused_optimizer_training_uses():
    for pipeline, fused in (("fast", True), ("tutorial", None)):
        w = step.Workload("cpu", 8, 1, pipeline, num_workers=0)
        try:
            assert w.optimizer.defaults.get("fused") == fused
            trained = core_train.make_optimizer(TrainConfig(pipeline=pipeline), w.model,
                                                torch.device("cpu"))
            assert trained.defaults == w.optimizer.defaults
            assert type(w.loader) is type(core_train.make_loader(
                TrainConfig(pipeline=pipeline, num_workers=0, batch_size=8), tiny_data(),
                torch.device("cpu")))
        finally:
            w.close()


def test_every_timed_batch_is_full_and_epochs_roll_over():
    w = step.Workload("cpu", 24, 1, "fast", num_workers=0)
    try:
        assert len(w.loader) == 86  # 2,064 images: a whole number of batches, at least 2,048
        sizes = [w.fetch()[0].shape[0] for _ in range(len(w.loader) + 2)]  # into a second epoch
        assert sizes == [24] * 88
    finally:
        w.close()
    syn = step.timing_images(1000)
    assert len(syn.train_y) == 8000 and syn.train_x.dtype == np.uint8


# -----------------------------------------------------------------------------
# the sweep itself

def test_small_grid_rows(swept):
    cfg = SweepConfig(**TINY)
    assert len(swept.rows) == len(cfg.points()) == 5  # 2 x 2 grid + the tutorial's own point
    for row in swept.rows:
        assert list(row) == list(COLUMNS)
        assert row["error"] == "" and row["device"] == "cpu" and row["device_name"]
        assert row["images_per_s"] > 0 and row["step_ms"] > 0
        assert row["images_per_s"] * row["step_ms"] / 1000 == pytest.approx(row["batch_size"])
        assert row["epoch_s"] == pytest.approx(50_000 / row["images_per_s"])
        assert row["step_ms_min"] <= row["step_ms"] <= row["step_ms_max"]
        assert row["images_per_s_min"] <= row["images_per_s"] <= row["images_per_s_max"]
        assert row["warmup_steps"] == 2 and row["warmup_s"] > 0 and row["first_step_ms"] > 0
        assert row["timed_steps"] == 2 * 2 and not row["budget_hit"]
        assert math.isfinite(row["loss"])
        assert row["load_1m"] is None or row["load_1m"] >= 0
        assert row["host"] == swept.host and row["recorded_at"] == swept.recorded_at
    grid = {(r["pipeline"], r["batch_size"], r["width"]) for r in swept.rows}
    assert grid == {("tutorial", 4, 1), ("fast", 4, 1), ("fast", 16, 1), ("fast", 4, 2),
                    ("fast", 16, 2)}
    assert [r["pipeline"] for r in swept.rows if r["tutorial_point"]] == ["tutorial"]
    assert {r["width"]: r["params"] for r in swept.rows}[1] == 62006  # the tutorial's Net


def test_hardware_and_versions_recorded(swept):
    env = swept.environment
    for key in ("torch", "cuda", "cudnn", "python", "platform", "cpu", "cpu_count", "hostname",
                "settings", "devices", "load_average_start", "load_average_end"):
        assert key in env
    assert env["torch"] == torch.__version__ and env["devices"][0]["id"] == "cpu"
    assert env["settings"]["cudnn_benchmark_when_timing"] is True
    assert not swept.recorded_elsewhere
    hw = dict(report.hardware_table(swept, "en").to_numpy())
    assert hw["CPU"].startswith(report.md(env["cpu"])) and not any(k.startswith("GPU") for k in hw)
    assert "random pixels" in hw["Settings"]


def test_warmup_is_excluded(monkeypatch):
    real, calls = core_train.train_step, []

    def slow_first(*args):  # a first call that pays 1.2 s of "autotuning"
        calls.append(1)
        if len(calls) == 1:
            time.sleep(1.2)
        return real(*args)

    monkeypatch.setattr(core_train, "train_step", slow_first)
    row = measure_point("cpu", 4, 1, "fast", steps=1, warmup=2, repeats=3, num_workers=0)
    assert len(calls) == 2 + 1 * 3
    assert row["first_step_ms"] >= 1200 and row["warmup_s"] >= 1.2 and row["warmup_steps"] == 2
    assert row["step_ms_max"] < 1000  # the 1.2 s stayed out of every timed step


def test_time_budget_caps_steps():
    row = measure_point("cpu", 4, 1, "fast", steps=100_000, warmup=1, repeats=2,
                        max_seconds=0.5, num_workers=0)
    assert row["budget_hit"] and 2 <= row["timed_steps"] < 200_000 and row["images_per_s"] > 0


def test_tutorial_pipeline_with_a_worker_process():
    row = measure_point("cpu", 8, 1, "tutorial", steps=3, warmup=1, repeats=1, num_workers=1)
    assert row["num_workers"] == 1 and row["images_per_s"] > 0
    assert row["tutorial_point"] is False


def test_config_validation_gives_codes_in_every_language():
    with pytest.raises(ConfigError) as e:
        SweepConfig(batch_sizes=(0,), widths=(3, 99), steps=0, repeats=0, max_seconds=-1,
                    pipelines=("slow",), devices=("gpu",))
    assert set(e.value.texts()) == {"batch_sizes", "widths", "steps", "repeats", "max_seconds",
                                   "pipelines", "devices"}
    assert all(p.code == f"gpu.{p.field}" for p in e.value.problems)
    assert "65,536" in e.value.texts("en")["batch_sizes"]
    assert "65.536" in e.value.texts("es")["batch_sizes"] and e.value.texts("pt")["widths"]
    cfg = SweepConfig(devices="cpu, cuda", batch_sizes=[16, 4, 16], max_seconds=5)
    assert cfg.devices == ("cpu", "cuda:0") and cfg.batch_sizes == (16, 4)
    assert cfg.max_seconds == 5.0
    assert SweepConfig(devices="all").devices == ()
    assert SweepConfig.from_dict(cfg.to_dict()) == cfg
    # a timing queued by an earlier version still runs: its retired settings are dropped
    assert SweepConfig.from_dict({**cfg.to_dict(), "images": "real", "seed": 3}) == cfg
    with pytest.raises(ConfigError) as e:
        SweepConfig.from_dict({"bogus": 1})
    assert e.value.code == "gpu.unknown_settings" and "bogus" in str(e.value)
    with pytest.raises(DeviceError, match="cuda:7"):
        SweepConfig(devices=("cpu", "cuda:7")).resolved_devices()


def test_points_order_and_tutorial_point_always_there():
    cfg = SweepConfig(batch_sizes=(64, 8), widths=(2,), pipelines=("fast",))
    pts = cfg.points(["cpu", "cuda:0"])
    assert [(p["device"], p["pipeline"], p["batch_size"], p["width"]) for p in pts] == [
        ("cpu", "tutorial", 4, 1), ("cuda:0", "tutorial", 4, 1),
        ("cpu", "fast", 8, 2), ("cuda:0", "fast", 8, 2),
        ("cpu", "fast", 64, 2), ("cuda:0", "fast", 64, 2)]
    full = SweepConfig(batch_sizes=(4, 8), widths=(1,), pipelines=("tutorial",)).points(["cpu"])
    assert [p["batch_size"] for p in full] == [4, 8]  # the tutorial's point once


# -----------------------------------------------------------------------------
# which devices a timing run holds

def fake_gpu(monkeypatch):
    from cifarlab.core import devices

    real = devices.list_devices
    monkeypatch.setattr(devices, "list_devices", lambda: real() + [
        DeviceInfo("cuda:0", "cuda", "NVIDIA H100", 80 * 2**30)])


def test_a_timing_run_holds_the_cpu_and_the_accelerators_it_compares(monkeypatch):
    cpu_only = SweepConfig(devices=("cpu",))
    assert job_request(cpu_only) == {"kind": "timing", "payload": cpu_only.to_dict(),
                                         "device": "cpu", "exclusive": ["cpu"],
                                         "name": "CPU vs GPU timing",
                                         "estimate_s": estimate_seconds(cpu_only)}
    # every point stops at its budget: 5 batch sizes x 4 widths x 2 pipelines, 10 s + 1 s each
    assert estimate_seconds(cpu_only) == 40 * 11.0
    assert estimate_seconds(SweepConfig(devices=("cpu",), max_seconds=None)) is None
    with pytest.raises(DeviceError):
        job_request(SweepConfig(devices=("cuda:0",)))
    fake_gpu(monkeypatch)
    for devices in (("cpu", "cuda:0"), ("cuda:0",), ()):  # () = every device here
        cfg = SweepConfig(devices=devices)
        req = job_request(cfg)
        assert req["device"] == "cuda:0" and req["exclusive"] == ["cpu", "cuda:0"]
        assert SweepConfig.from_dict(req["payload"]) == cfg


# -----------------------------------------------------------------------------
# saving and loading

def test_json_and_csv_round_trips_are_exact(swept, tmp_path):
    swept.breakdowns.append(breakdown("cpu", 4, 1, "fast", steps=2, warmup=1, num_workers=0))
    swept.rows.append({**swept.rows[-1], "batch_size": 4096, "error": "out of memory",
                       "images_per_s": None, "step_ms": None, "loss": None, "timed_steps": None})
    try:
        for name in ("r.json", "r.csv"):
            path = swept.save(tmp_path / name)
            back = SweepResult.load(path)
            assert back.rows == swept.rows and back.breakdowns == swept.breakdowns
            pd.testing.assert_frame_equal(results.frame(back.rows, COLUMNS),
                                          results.frame(swept.rows, COLUMNS))
            assert back.environment == swept.environment and back.config == swept.config
            assert (back.host, back.recorded_at) == (swept.host, swept.recorded_at)
            assert back.recorded_elsewhere and back.source == str(path)
        assert not list(tmp_path.glob(".*.tmp"))  # written atomically, nothing left behind
        text = swept.to_csv()
        assert SweepResult.from_csv_text(text.encode()).rows == swept.rows
        bare = SweepResult.from_csv_text(text.split("\n", 1)[1])  # without the first line
        assert bare.rows == swept.rows and bare.host == swept.host
        df = results.frame(swept.rows, COLUMNS)
        assert str(df["batch_size"].dtype) == "Int64" and df["images_per_s"].isna().sum() == 1
    finally:
        swept.rows.pop()
        swept.breakdowns.pop()


def test_the_recording_loads_the_same_from_csv_and_json():
    if not RECORDING.is_file():
        pytest.skip("no recording in docs/gpu-results")
    assert results.RESULTS_DIR == RECORDING.parent  # the page finds docs/gpu-results
    a, b = SweepResult.load(RECORDING), SweepResult.load(RECORDING.with_suffix(".csv"))
    assert a.rows == b.rows and len(a.rows) == 80 and a.check() is a
    assert [r.rows for r in results.recorded_results() if r.rows == a.rows] == [a.rows]


@pytest.mark.parametrize("name, data, code", [
    ("x.json", b'{"a": 1}', "gpu.not_a_result"),
    ("x.json", b"{not json", "gpu.not_json"),
    ("x.json", json.dumps({"format": "cifarlab-timing", "version": 99}).encode(),
     "gpu.newer_format"),
    ("x.json", json.dumps({"format": "cifarlab-timing", "rows": []}).encode(), "gpu.no_rows"),
    ("x.json", json.dumps({"format": "cifarlab-timing", "rows": [{"device": "cpu",
                                                                  "batch_size": "four"}]}).encode(),
     "gpu.bad_value"),
    ("x.json", json.dumps({"format": "cifarlab-timing", "rows": "nope"}).encode(), "gpu.bad_value"),
    ("x.csv", b"a,b\n1,2\n", "gpu.csv_no_columns"),
    ("x.csv", b"device,batch_size,width\ncpu,x,1\n", "gpu.bad_value"),
    ("x.csv", b"device,batch_size,width,pipeline\ntpu,4,1,fast\n", "gpu.bad_row"),
    ("x.csv", b"# cifarlab-timing {broken\ndevice,batch_size,width\n", "gpu.csv_header_damaged"),
    ("x.csv", b"\xff\xfe\x00binary", "gpu.csv_no_columns"),
])
def test_uploads_that_cannot_be_shown_say_why(name, data, code):
    with pytest.raises(DataError) as e:
        results.load_upload(name, data)
    assert e.value.code == code and e.value.params.get("source") == name
    for lang in i18n.LANGUAGES:
        assert name in e.value.text(lang)


def test_upload_of_the_wrong_kind_and_a_result_that_loads(swept):
    with pytest.raises(UploadError) as e:
        results.load_upload("notes.txt", b"hello")
    assert e.value.code == "gpu.upload_type"
    with pytest.raises(UploadError):
        results.load_upload("big.json", b" " * (results.MAX_UPLOAD_BYTES + 1))
    back = results.load_upload("mine.csv", swept.to_csv().encode())
    assert back.rows == swept.rows and back.source == "mine.csv" and back.recorded_elsewhere
    with pytest.raises(CifarLabError) as e:
        SweepResult.load("/nonexistent/r.json")
    assert e.value.code == "gpu.cannot_read"
    with pytest.raises(CifarLabError) as e:
        swept.save("r.txt")
    assert e.value.code == "gpu.file_type"


def test_markdown_from_a_file_is_escaped():
    markdown_it = pytest.importorskip("markdown_it")
    evil = "![x](http://127.0.0.1:9/x.png) **b** <img src=x> :red[y] $z$"
    html = markdown_it.MarkdownIt().render(f"On {report.md(evil)}.")
    assert "<img" not in html and "<strong>" not in html and "<a " not in html
    # shown as the characters it is (a zero-width space keeps its bare URL from linking)
    assert "![x](http://127.0.0.1:9/x.png)" in html.replace("\u200b", "")
    err = DataError("gpu.not_a_result", source=evil)
    assert "<img" not in markdown_it.MarkdownIt().render(report.error_text(err, "es"))
    assert report.md("a\nb") == "a b"
    odd = SweepResult(rows=[], environment={"cpu": evil}, config={}, host="../" + evil,
                      recorded_at="2025-01-02T03:04:05")
    assert report.download_stem(odd) == "cifarlab-timing-2025-01-02"  # no "/" or ".."
    assert report.download_stem(SweepResult(rows=[], environment={}, config={}, host="",
                                            recorded_at="../../etc/x")) == "cifarlab-timing-result"
    table = report.hardware_table(odd, "en")
    assert not [c for c in table.to_numpy().ravel()
                if "<img" in markdown_it.MarkdownIt().render(c)]  # st.table cells are Markdown


# -----------------------------------------------------------------------------
# analysis on a hand-made result with accelerator rows: pure arithmetic

def row(device, batch, width, ips, pipeline="fast", error="", load=None, workers=0):
    r = {c: ("" if t is str else False if t is bool else None) for c, t in COLUMNS.items()}
    r.update(device=device, device_kind=device.split(":")[0],
             device_name="NVIDIA H100" if device != "cpu" else "Some CPU (2 cores)",
             pipeline=pipeline, batch_size=batch, width=width, error=error, host="gpu-box",
             recorded_at="2025-01-02T03:04:05+00:00", load_1m=load, num_workers=workers,
             tutorial_point=(pipeline, batch, width) == ("tutorial", 4, 1))
    if not error:
        r.update(images_per_s=float(ips), step_ms=1000 * batch / ips, epoch_s=50_000 / ips)
    return r


CPU_IPS = {4: 1000, 16: 3000, 64: 5000, 256: 6000}
GPU_W1 = {4: 300, 16: 2000, 64: 10000, 256: 60000}
GPU_W2 = {4: 100, 16: 500, 64: 900, 256: 1000}
QUIET = {"cpu_count": 16, "settings": {"torch_threads": 16}, "load_average_start": [0.3, 0, 0]}


def handmade() -> SweepResult:
    rows = [row("cpu", 4, 1, 800, "tutorial"), row("cuda:0", 4, 1, 400, "tutorial")]
    for b in CPU_IPS:
        rows += [row("cpu", b, 1, CPU_IPS[b]), row("cuda:0", b, 1, GPU_W1[b]),
                 row("cpu", b, 2, CPU_IPS[b] / 2), row("cuda:0", b, 2, GPU_W2[b] / 2)]
    rows += [row("cuda:0", 1024, 1, None, error="out of memory"), row("cpu", 1024, 1, 6500)]
    return SweepResult(rows=rows, environment={"hostname": "gpu-box", **QUIET}, config={},
                       host="gpu-box", recorded_at="2025-01-02T03:04:05+00:00", source="h100.json")


def test_speedups():
    s = {(x["pipeline"], x["batch_size"], x["width"]): x["speedup"] for x in speedups(handmade())}
    assert s[("fast", 4, 1)] == pytest.approx(0.3) and s[("fast", 64, 1)] == pytest.approx(2.0)
    assert s[("fast", 256, 1)] == pytest.approx(10.0)
    assert s[("fast", 16, 2)] == pytest.approx(500 / 3000)
    assert s[("tutorial", 4, 1)] == pytest.approx(0.5)
    assert ("fast", 1024, 1) not in s and len(s) == 9  # the out-of-memory row has none


def test_crossover():
    c = {(x["pipeline"], x["width"]): x for x in crossover(handmade())}
    assert c[("fast", 1)]["batch_size"] == 64 and c[("fast", 1)]["speedup"] == pytest.approx(2)
    # speedup 2/3 at 16 and 2 at 64: on log scales the curves cross at 16 * 4^(ln 1.5 / ln 3)
    assert c[("fast", 1)]["estimate"] == pytest.approx(16 * 4 ** (math.log(1.5) / math.log(3)))
    assert c[("fast", 1)]["max_speedup"] == pytest.approx(10)
    assert c[("fast", 1)]["max_batch_size"] == 256
    assert c[("fast", 2)]["batch_size"] is None and c[("fast", 2)]["estimate"] is None
    assert crossover([r for r in handmade().rows if r["device"] == "cpu"]) == []
    always = [row("cpu", 4, 1, 10), row("mps", 4, 1, 20),
              row("cpu", 8, 1, 10), row("mps", 8, 1, 40)]
    (only,) = crossover(always)
    assert (only["device"], only["batch_size"], only["estimate"]) == ("mps", 4, None)


def test_tutorial_lines_give_figures():
    cpu, gpu, why = report.tutorial_lines(handmade(), "en")
    assert "800 images per second" in cpu and i18n.duration(50_000 / 800, "en") in cpu
    assert i18n.duration(2 * 50_000 / 800, "en") in cpu
    assert "**0.50×** the CPU" in gpu and "62,006" in why


def here(load: float | None, cores=2) -> SweepResult:
    env = {"cpu_count": cores, "settings": {"torch_threads": 2}}
    if load is not None:
        env["load_average_start"] = [load, load, load]
    return SweepResult(rows=[row("cpu", 4, 1, 400, "tutorial", load=load, workers=2),
                             row("cpu", 64, 1, 2500, load=load)],
                       environment=env, config={}, host="laptop", recorded_at="2025-02-02T00:00:00")


def test_machine_load_takes_the_timings_own_threads_off():
    assert analysis.machine_load(here(0.5))["state"] == "quiet"
    assert analysis.machine_load(here(None))["state"] == "unknown"
    busy = analysis.machine_load(here(9.0))
    assert busy["state"] == "busy" and busy["load"] == 9.0 and busy["cores"] == 2
    own = here(0.2)  # 2 threads + 2 DataLoader workers of its own: load 4 is the timing itself
    own.rows[0]["load_1m"] = 4.0
    assert analysis.machine_load(own)["state"] == "quiet"


def test_what_a_gpu_would_add_compares_within_one_recording(tmp_path):
    none = report.would_add_lines(results.recorded_results(tmp_path), "en")
    assert none == [i18n.t("gpu.would_add_none", "en")]
    handmade().save(tmp_path / "h100-2025-01-02.json")
    same, best = report.would_add_lines([here(0.1), *results.recorded_results(tmp_path)], "en")
    assert "NVIDIA H100" in same and "(2025-01-02)" in same
    assert "**0.50×**" in same  # the recording's own CPU
    assert "10.0× its CPU" in best and "batch 256" in best


def test_a_gpu_is_never_compared_with_another_machines_cpu():
    """The issue's case: a CPU timed under heavy load on a 2-core machine made the H100 look
    hundreds of times faster; the recording itself says 4.46x."""
    if not RECORDING.is_file():
        pytest.skip("no recording in docs/gpu-results")
    text = " ".join(report.would_add_lines([SweepResult.load(RECORDING)], "en"))
    assert "**4.46×**" in text and "272" not in text


def test_the_page_sentences_in_every_language(swept):
    h = handmade()
    for lang in i18n.LANGUAGES:
        lines = report.tutorial_lines(h, lang) + report.crossover_lines(h, "fast", lang)
        assert len(lines) >= 5 and all(lines)
        assert report.hardware_table(h, lang).shape[1] == 2
        assert report.rows_table(h.rows, lang).shape == (len(h.rows), 10)
        assert report.provenance(swept, lang)["label"]
    es = report.rows_table(h.rows, "es")
    assert set(es[i18n.t("gpu.pipeline_col", "es")]) == {"canalización rápida",
                                                          "canalización del tutorial"}
    bare = SweepResult(rows=h.rows, environment={}, config={"steps": 5}, host="",
                       recorded_at="")
    hw = report.hardware_table(bare, "pt").to_string()
    assert "aleatórios" in hw and "nenhum" in hw and "None" not in hw


def test_chart_frames():
    h = handmade()
    en = i18n.translator("en")
    lines = [d for d in charts.throughput_figure(h, "fast", en).data if d.mode == "lines+markers"]
    assert [d.name for d in lines] == ["cpu, width 1", "cpu, width 2", "cuda:0, width 1",
                                       "cuda:0, width 2"]
    assert all(min(d.error_y.array) >= 0 and min(d.error_y.arrayminus) >= 0 for d in lines)
    (star,) = [d for d in charts.speedup_figure(h, "tutorial", en).data
               if d.name == "the tutorial as written"]
    assert list(star.x) == [4] and list(star.y) == pytest.approx([0.5])
    fig = charts.speedup_figure(h, "fast", en)
    (crossing,) = [d for d in fig.data if d.name == "curves cross"]   # width 1's, estimated
    assert list(crossing.x) == [pytest.approx(16 * 4 ** (math.log(1.5) / math.log(3)))]


# -----------------------------------------------------------------------------
# the breakdown pass

def test_breakdown_phases_add_up_to_a_step():
    ratios = []
    for _ in range(5):  # a busy machine is noisy: one of five tries must agree
        b = breakdown("cpu", 16, 1, "fast", steps=8, warmup=2, num_workers=0, max_seconds=3)
        assert b["pass"] == "breakdown" and b["method"] == "sync" and b["error"] == ""
        for phase in ("data", "forward", "backward", "optimizer"):
            assert b[f"{phase}_s"] > 0
        assert b["total_s"] == pytest.approx(sum(b[f"{p}_s"] for p in results.PHASES))
        ratios.append(b["total_s"] / b["step_s"])
        if 0.5 <= ratios[-1] <= 1.5:
            break
    assert any(0.5 <= r <= 1.5 for r in ratios), ratios


def test_breakdown_tutorial_pipeline():
    b = breakdown("cpu", 8, 1, "tutorial", steps=3, warmup=1, num_workers=0)
    assert b["data_s"] > 0 and b["forward_s"] > 0 and b["steps"] == 3


# -----------------------------------------------------------------------------
# the job queue's entry point

class Ctx:
    def __init__(self, stop_after=None):
        self.run_id, self.device, self.events, self.stop_after = "r1", "cpu", [], stop_after

    def emit(self, kind, data):
        self.events.append((kind, data))

    def should_stop(self):
        return self.stop_after is not None and len(self.events) >= self.stop_after

    def data(self):
        raise AssertionError("random pixels: the data set is not needed")


def test_timing_job_emits_a_row_per_point_and_is_registered_by_name():
    import importlib

    module, name = "cifarlab.lab.gpu.measure:run_timing_job".split(":")
    assert getattr(importlib.import_module(module), name) is run_timing_job
    ctx = Ctx()
    out = run_timing_job(json.loads(json.dumps(SweepConfig(**{**QUICK, "widths": (1,)}).to_dict())),
                         ctx)
    assert [k for k, _ in ctx.events] == ["timing_row"] * 3 and out["points"] == 3
    assert out["cancelled"] is False
    assert SweepResult.from_dict(json.loads(json.dumps(out))).rows == [d for _, d in ctx.events]


def test_timing_job_stops():
    payload = SweepConfig(**QUICK).to_dict()
    ctx = Ctx(stop_after=1)
    out = run_timing_job(payload, ctx)
    assert len(ctx.events) == 1 and out["cancelled"] is True and len(out["rows"]) == 1
    ctx = Ctx(stop_after=0)
    assert run_timing_job(payload, ctx)["rows"] == [] and ctx.events == []


def test_stop_during_a_point():
    calls = []
    stop = lambda: bool(calls.append(1)) or len(calls) > 3  # noqa: E731 - a counting stub
    assert measure_point("cpu", 4, 1, "fast", steps=100_000, warmup=1, repeats=1,
                         num_workers=0, should_stop=stop) is None
    assert len(calls) == 4


# -----------------------------------------------------------------------------
# the `bench` command

def test_cli_bench_runs_and_saves(tmp_path, capsys):
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    code = cli.main(["bench", "--devices", "cpu", "--batch-sizes", "4,8", "--widths", "1",
                     "--pipelines", "fast", "--steps", "2", "--warmup", "1", "--repeats", "1",
                     "--num-workers", "0", "--out", str(out_json), "--out", str(out_csv)])
    text = capsys.readouterr().out
    assert code == 0
    assert "Images/s" in text and "ms/step" in text and "the tutorial as written" in text
    assert "no accelerator measured" in text
    a, b = SweepResult.load(out_json), SweepResult.load(out_csv)
    assert len(a.rows) == 3 and a.rows == b.rows and a.breakdowns == []
    assert f"Machine: {a.host}" in text


def test_cli_bench_sweep_records_for_the_lab(tmp_path, capsys):
    """What bench/gpu_sweep.py did: breakdown on, both files named after the GPU (else the
    host) and the date, the plan printed first."""
    assert cli.main(["bench", "--sweep", "--devices", "cpu", "--batch-sizes", "8", "--widths", "1",
                     "--pipelines", "fast", "--steps", "2", "--warmup", "1", "--repeats", "1",
                     "--num-workers", "0", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 points and 1 breakdown passes" in out and "saved: " in out
    files = sorted(tmp_path.iterdir())
    assert [p.suffix for p in files] == [".csv", ".json"]
    assert files[0].stem.endswith(time.strftime("%Y-%m-%d", time.gmtime()))
    saved = SweepResult.load(files[1])
    assert len(saved.rows) == 2 and len(saved.breakdowns) == 1
    assert saved.config["warmup"] == 1 and saved.config["breakdown"] is True
    cfg = gpu_cli.config_from_args(cli.build_parser().parse_args(["bench", "--sweep"]))
    assert (cfg.warmup, cfg.max_seconds, cfg.breakdown, cfg.graphed) == (10, 5.0, True, True)
    plain = gpu_cli.config_from_args(cli.build_parser().parse_args(["bench"]))
    assert plain == SweepConfig(devices="all")


@pytest.mark.parametrize("args, words", [
    (["--batch-sizes", "0"], "batch"),
    (["--devices", "cuda:7"], "cuda:7"),
    (["--devices", "tpu"], "Devices"),
    (["--widths", "99"], "Width"),
    (["--steps", "0"], "steps"),
    (["--out", "r.txt"], ".json or .csv"),
])
def test_cli_bench_rejects_bad_input(args, words, capsys):
    assert cli.main(["bench", "--devices", "cpu", "--batch-sizes", "4", "--widths", "1",
                     "--steps", "1", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and words in err


@pytest.mark.parametrize("option, text", [("--batch-sizes", "4,x"), ("--max-seconds", "soon"),
                                          ("--steps", "many")])
def test_cli_bench_refuses_what_does_not_parse_naming_the_option(option, text, capsys):
    with pytest.raises(SystemExit) as refused:
        cli.main(["bench", "--devices", "cpu", option, text])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and f"argument {option}: invalid" in err and text in err


def test_the_bench_parser_imports_neither_torch_nor_pandas():
    import subprocess
    import sys

    code = ("import sys, cifarlab.cli as c; c.build_parser(); "
            "print(sorted(m for m in ('torch', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stderr


# -----------------------------------------------------------------------------
# the CUDA paths, as far as they go without a GPU

class Guard:  # torch.cuda.device(...) would need a GPU
    entered: list = []

    def __init__(self, dev):
        Guard.entered.append(dev)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_synchronisation_goes_through_core_devices(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: calls.append(("cuda", d)))
    monkeypatch.setattr(torch.mps, "synchronize", lambda: calls.append(("mps", None)))
    step.sync_for("cpu")()
    assert calls == []
    step.sync_for("cuda:1")()
    assert calls == [("cuda", torch.device("cuda:1"))]
    step.sync_for("mps")()
    assert calls[-1] == ("mps", None)


def test_cudnn_benchmark_only_while_timing_cuda(monkeypatch):
    Guard.entered = []
    monkeypatch.setattr(torch.cuda, "device", Guard)
    before = torch.backends.cudnn.benchmark
    with step.timing_settings("cpu"):
        assert torch.backends.cudnn.benchmark == before
    with step.timing_settings("cuda:0"):
        assert torch.backends.cudnn.benchmark is True
    assert torch.backends.cudnn.benchmark == before and Guard.entered == [torch.device("cuda:0")]


def test_the_tutorial_loader_pins_memory_for_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cfg = TrainConfig(pipeline="tutorial", num_workers=0, batch_size=8)
    assert core_train.make_loader(cfg, tiny_data(), torch.device("cuda:0")).pin_memory is True
    assert core_train.make_loader(cfg, tiny_data(), torch.device("cpu")).pin_memory is False


class CpuWorkload(step.Workload):
    """The workload of a cuda:0 point, computed on the CPU: the lab sees a CUDA device."""

    def __init__(self, device, *args, **kwargs):
        super().__init__("cpu", *args, **kwargs)


def fake_cuda(monkeypatch) -> list:
    calls = []
    monkeypatch.setattr(measure, "resolve_device", lambda d: torch.device("cuda:0"))
    monkeypatch.setattr(measure, "Workload", CpuWorkload)
    monkeypatch.setattr(torch.cuda, "device", Guard)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: calls.append(("sync", d)))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats",
                        lambda d=None: calls.append(("reset", d)))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d=None: 12345)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(("empty", None)))
    return calls


def test_a_cuda_point_synchronises_before_every_clock_read(monkeypatch):
    calls, bench = fake_cuda(monkeypatch), []
    real = core_train.train_step
    monkeypatch.setattr(core_train, "train_step",
                        lambda *a: (bench.append(torch.backends.cudnn.benchmark), real(*a))[1])
    before = torch.backends.cudnn.benchmark
    row = measure.measure_point("cuda:0", 4, 1, "fast", steps=2, warmup=1, repeats=2, num_workers=0)
    assert (row["device"], row["device_kind"], row["peak_memory_bytes"]) == \
        ("cuda:0", "cuda", 12345)
    cuda0 = torch.device("cuda:0")
    # after setup, then before and after the warm-up step and each repeat
    assert calls == [("reset", cuda0)] + [("sync", cuda0)] * 7 + [("empty", None)]
    assert bench == [True] * 5 and torch.backends.cudnn.benchmark == before


def test_a_cuda_breakdown_synchronises_at_every_phase_boundary(monkeypatch):
    calls = fake_cuda(monkeypatch)
    b = measure.breakdown("cuda:0", 8, 1, "fast", steps=3, warmup=1, num_workers=0)
    assert b["method"] == "sync" and b["device"] == "cuda:0" and b["steps"] == 3
    assert b["forward_s"] > 0 and b["backward_s"] > 0
    assert b["total_s"] == pytest.approx(sum(b[f"{p}_s"] for p in results.PHASES))
    # around the warm-up and the unperturbed steps, then one mark and five per step
    assert calls.count(("sync", torch.device("cuda:0"))) == 2 + 2 + 1 + 5 * 3
    assert ("empty", None) in calls


def test_out_of_memory_is_a_row_not_a_crash(monkeypatch):
    real = core_train.train_step

    def oom_at_16(model, criterion, optimizer, inputs, labels):
        if inputs.shape[0] >= 16:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real(model, criterion, optimizer, inputs, labels)

    monkeypatch.setattr(core_train, "train_step", oom_at_16)
    result = run_sweep(SweepConfig(**{**QUICK, "widths": (1,), "batch_sizes": (4, 16, 8)}))
    by_batch = {(r["pipeline"], r["batch_size"]): r for r in result.rows}
    assert by_batch[("fast", 16)]["error"] == "out of memory"
    assert by_batch[("fast", 16)]["images_per_s"] is None
    assert by_batch[("fast", 8)]["error"] == "" and by_batch[("fast", 8)]["images_per_s"] > 0
    assert "sin memoria" in report.rows_table(result.rows, "es").to_string()
    assert step.is_out_of_memory(RuntimeError("MPS backend out of memory (MPS allocated ...)"))
    assert not step.is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    monkeypatch.setattr(core_train, "train_step", lambda *a: 1 / 0)  # other errors surface
    with pytest.raises(ZeroDivisionError):
        measure_point("cpu", 4, 1, "fast", steps=1, warmup=1, repeats=1)


def test_time_left_counts_the_points_and_the_phase_passes_still_to_come():
    """'6 points of about 1 s' took 7 minutes: its breakdown pass was never mentioned. The
    time left counts the points left and the passes at the time per point measured so far."""
    cfg = SweepConfig(devices=("cpu",), batch_sizes=(4, 16, 64), widths=(1,),
                          pipelines=("fast",), steps=5, warmup=1, repeats=1, max_seconds=2.0,
                          num_workers=0, breakdown=True)
    points, passes = len(cfg.points(["cpu"])), len(cfg.breakdown_passes(["cpu"]))
    assert points >= 3 and passes >= 1
    assert estimate_seconds(cfg, ["cpu"]) == (points + passes) * 3.0
    assert time_left(cfg, 0, 5.0, ["cpu"]) is None          # nothing measured yet
    assert time_left(cfg, 1, 4.0, ["cpu"]) == pytest.approx(4.0 * (points - 1 + passes))
    assert time_left(cfg, points, 12.0, ["cpu"]) is None    # only the passes are left


def test_the_cudnn_version_is_written_as_its_release_is_named():
    from cifarlab.lab.gpu.report import cudnn_text

    assert [cudnn_text(v) for v in (91900, 90100, 8907, 8600, None, "")] == [
        "9.19.0", "9.1.0", "8.9.7", "8.6.0", None, ""]
