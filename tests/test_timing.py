"""cifarlab.lab.gpu on the CPU: the sweep's rows, warm-up apart, time budgets, exact CSV/JSON round
trips, speedups and crossovers (hand-made accelerator rows), the breakdown pass, the job entry
point, the `bench` command, and the CUDA-only paths as far as they go without a GPU."""
import json
import math
import time

import pandas as pd
import pytest
import torch

from cifarlab import cli
from cifarlab.lab import gpu as timing
from cifarlab.errors import CifarLabError, ConfigError, DeviceError
from cifarlab.lab.gpu import (COLUMNS, SweepConfig, SweepResult, breakdown, crossover,
                             explain_tutorial_point, measure_point, run_sweep, run_timing_job,
                             speedups, what_a_gpu_would_add)

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


# -----------------------------------------------------------------------------
# the sweep itself

def test_small_grid_rows(swept):
    cfg = SweepConfig(**TINY)
    assert len(swept.rows) == len(cfg.points()) == 5  # 2 x 2 grid + the tutorial's own point
    for row in swept.rows:
        assert list(row) == list(COLUMNS)
        assert row["error"] == ""
        assert row["device"] == "cpu" and row["device_name"]
        assert row["images_per_s"] > 0 and row["step_ms"] > 0
        # ms/step and images/s are the same measurement
        assert row["images_per_s"] * row["step_ms"] / 1000 == pytest.approx(row["batch_size"])
        assert row["epoch_s"] == pytest.approx(50_000 / row["images_per_s"])
        assert row["step_ms_min"] <= row["step_ms_q1"] <= row["step_ms"] <= row["step_ms_q3"] \
            <= row["step_ms_max"]
        assert row["images_per_s_min"] <= row["images_per_s"] <= row["images_per_s_max"]
        # warm-up counted apart from the timed steps
        assert row["warmup_steps"] == 2 and row["warmup_s"] > 0 and row["first_step_ms"] > 0
        assert row["timed_steps"] == 2 * 2 and not row["budget_hit"]
        assert math.isfinite(row["loss"])
        assert row["load_1m"] is None or row["load_1m"] >= 0  # how busy the machine was
        assert row["host"] == swept.host and row["recorded_at"] == swept.recorded_at
    grid = {(r["pipeline"], r["batch_size"], r["width"]) for r in swept.rows}
    assert grid == {("tutorial", 4, 1), ("fast", 4, 1), ("fast", 16, 1), ("fast", 4, 2),
                    ("fast", 16, 2)}
    tut = [r for r in swept.rows if r["tutorial_point"]]
    assert [(r["pipeline"], r["batch_size"], r["width"]) for r in tut] == [("tutorial", 4, 1)]
    assert {r["width"]: r["params"] for r in swept.rows}[1] == 62006  # the tutorial's Net


def test_hardware_and_versions_recorded(swept):
    env = swept.environment
    for key in ("torch", "cuda", "cudnn", "python", "platform", "cpu", "cpu_count", "hostname",
                "settings", "devices", "load_average_start", "load_average_end"):
        assert key in env
    assert env["torch"] == torch.__version__
    assert env["devices"][0]["id"] == "cpu" and env["devices"][0]["name"]
    assert env["settings"]["cudnn_benchmark_when_timing"] is True
    assert swept.config["batch_sizes"] == [4, 16]
    assert swept.recorded_on == "this machine" and not swept.recorded_elsewhere


def test_warmup_is_excluded(monkeypatch):
    real, calls = timing._train_step, []

    def slow_first(*args):  # a first call that pays 1.2 s of "autotuning"
        calls.append(1)
        if len(calls) == 1:
            time.sleep(1.2)
        return real(*args)

    monkeypatch.setattr(timing, "_train_step", slow_first)
    row = measure_point("cpu", 4, 1, "fast", steps=1, warmup=2, repeats=3, num_workers=0)
    assert len(calls) == 2 + 1 * 3
    assert row["first_step_ms"] >= 1200 and row["warmup_s"] >= 1.2 and row["warmup_steps"] == 2
    assert row["step_ms_max"] < 1000  # the 1.2 s stayed out of every timed step


def test_time_budget_caps_steps():
    t0 = time.perf_counter()
    row = measure_point("cpu", 4, 1, "fast", steps=100_000, warmup=1, repeats=2,
                        max_seconds=0.5, num_workers=0)
    assert time.perf_counter() - t0 < 10
    assert row["budget_hit"] and 2 <= row["timed_steps"] < 200_000
    assert row["images_per_s"] > 0


def test_tutorial_pipeline_with_a_worker_process():
    row = measure_point("cpu", 8, 1, "tutorial", steps=3, warmup=1, repeats=1, num_workers=1)
    assert row["num_workers"] == 1 and row["images_per_s"] > 0 and row["tutorial_point"] is False


def test_real_data_slice_is_used():
    import numpy as np

    class Data:  # the CifarData fields timing reads
        train_x = np.random.default_rng(1).integers(0, 256, (300, 3, 32, 32), dtype=np.uint8)
        train_y = np.arange(300) % 10

    row = measure_point("cpu", 16, 1, "tutorial", steps=2, warmup=1, repeats=1, data=Data(),
                        num_workers=0)
    assert row["images"] == "real" and row["images_per_s"] > 0
    with pytest.raises(ConfigError):
        measure_point("cpu", 512, 1, "fast", steps=1, warmup=0, repeats=1, data=Data())


def test_config_validation():
    with pytest.raises(ConfigError) as e:
        SweepConfig(batch_sizes=(0,), widths=(3, 99), steps=0, repeats=0, max_seconds=-1,
                    pipelines=("slow",), devices=("gpu",))
    assert set(e.value.errors) == {"batch_sizes", "widths", "steps", "repeats", "max_seconds",
                                   "pipelines", "devices"}
    cfg = SweepConfig(devices="cpu, cuda", batch_sizes=[16, 4, 16], max_seconds=5)
    assert cfg.devices == ("cpu", "cuda:0") and cfg.batch_sizes == (16, 4)
    assert cfg.max_seconds == 5.0
    assert SweepConfig(devices="all").devices == ()
    assert SweepConfig.from_dict(cfg.to_dict()) == cfg
    json.dumps(cfg.to_dict())
    with pytest.raises(ConfigError):
        SweepConfig.from_dict({"bogus": 1})
    with pytest.raises(DeviceError, match="cuda:7"):
        SweepConfig(devices=("cpu", "cuda:7")).resolved_devices()


def test_points_order_and_tutorial_point_always_there():
    cfg = SweepConfig(batch_sizes=(64, 8), widths=(2,), pipelines=("fast",))
    pts = cfg.points(["cpu", "cuda:0"])
    assert [(p["device"], p["pipeline"], p["batch_size"], p["width"]) for p in pts] == [
        ("cpu", "tutorial", 4, 1), ("cuda:0", "tutorial", 4, 1),
        ("cpu", "fast", 8, 2), ("cuda:0", "fast", 8, 2),
        ("cpu", "fast", 64, 2), ("cuda:0", "fast", 64, 2)]
    assert [p["tutorial_point"] for p in pts] == [True, True, False, False, False, False]
    # in the grid already: measured once, first
    full = SweepConfig(batch_sizes=(4, 8), widths=(1,), pipelines=("tutorial",)).points(["cpu"])
    assert [(p["batch_size"], p["tutorial_point"]) for p in full] == [(4, True), (8, False)]


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
            assert back.rows == swept.rows
            assert back.breakdowns == swept.breakdowns
            pd.testing.assert_frame_equal(back.to_dataframe(), swept.to_dataframe())
            pd.testing.assert_frame_equal(back.to_dataframe(breakdowns=True),
                                          swept.to_dataframe(breakdowns=True))
            assert back.environment == swept.environment and back.config == swept.config
            assert (back.host, back.recorded_at) == (swept.host, swept.recorded_at)
            # loaded from a file: recorded elsewhere, labelled with host and date
            assert back.recorded_elsewhere and back.source == str(path)
            assert back.recorded_on == f"{swept.host}, {swept.recorded_at[:10]}"
        text = swept.to_csv()
        assert SweepResult.from_csv_text(text.encode()).rows == swept.rows
        # a CSV without its first (metadata) line still loads its rows
        bare = SweepResult.from_csv_text(text.split("\n", 1)[1])
        assert bare.rows == swept.rows and bare.host == swept.host
    finally:
        swept.rows.pop()
        swept.breakdowns.pop()


def test_loading_rejects_other_files(tmp_path):
    (tmp_path / "x.json").write_text('{"a": 1}')
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    for name in ("x.json", "x.csv"):
        with pytest.raises(CifarLabError, match="not a CIFAR Lab timing result"):
            SweepResult.load(tmp_path / name)
    with pytest.raises(CifarLabError):
        SweepResult.load(tmp_path / "x.txt")


# -----------------------------------------------------------------------------
# analysis on a hand-made result with accelerator rows: pure arithmetic

def row(device, batch, width, ips, pipeline="fast", error=""):
    r = {c: ("" if t is str else False if t is bool else None) for c, t in COLUMNS.items()}
    r.update(device=device, device_kind=device.split(":")[0],
             device_name="NVIDIA H100" if device != "cpu" else "Some CPU (2 cores)",
             pipeline=pipeline, batch_size=batch, width=width, error=error, host="gpu-box",
             recorded_at="2025-01-02T03:04:05+00:00",
             tutorial_point=(pipeline, batch, width) == ("tutorial", 4, 1))
    if not error:
        r.update(images_per_s=float(ips), step_ms=1000 * batch / ips, epoch_s=50_000 / ips)
    return r


CPU_IPS = {4: 1000, 16: 3000, 64: 5000, 256: 6000}
GPU_W1 = {4: 300, 16: 2000, 64: 10000, 256: 60000}
GPU_W2 = {4: 100, 16: 500, 64: 900, 256: 1000}


def handmade() -> SweepResult:
    rows = [row("cpu", 4, 1, 800, "tutorial"), row("cuda:0", 4, 1, 400, "tutorial")]
    for b in CPU_IPS:
        rows += [row("cpu", b, 1, CPU_IPS[b]), row("cuda:0", b, 1, GPU_W1[b]),
                 row("cpu", b, 2, CPU_IPS[b] / 2), row("cuda:0", b, 2, GPU_W2[b] / 2)]
    rows += [row("cuda:0", 1024, 1, None, error="out of memory"), row("cpu", 1024, 1, 6500)]
    return SweepResult(rows=rows, environment={"hostname": "gpu-box"}, config={},
                       host="gpu-box", recorded_at="2025-01-02T03:04:05+00:00")


def test_speedups():
    s = {(x["pipeline"], x["batch_size"], x["width"]): x["speedup"] for x in speedups(handmade())}
    assert s[("fast", 4, 1)] == pytest.approx(0.3)
    assert s[("fast", 64, 1)] == pytest.approx(2.0)
    assert s[("fast", 256, 1)] == pytest.approx(10.0)
    assert s[("fast", 16, 2)] == pytest.approx(500 / 3000)
    assert s[("tutorial", 4, 1)] == pytest.approx(0.5)
    assert ("fast", 1024, 1) not in s  # the out-of-memory row has no speedup
    assert len(s) == 9


def test_crossover():
    c = {(x["pipeline"], x["width"]): x for x in crossover(handmade())}
    assert c[("fast", 1)]["batch_size"] == 64 and c[("fast", 1)]["speedup"] == pytest.approx(2)
    # speedup 2/3 at 16 and 2 at 64: on log scales the curves cross at 16 * 4^(ln 1.5 / ln 3)
    assert c[("fast", 1)]["estimate"] == pytest.approx(16 * 4 ** (math.log(1.5) / math.log(3)))
    assert c[("fast", 1)]["max_speedup"] == pytest.approx(10)
    assert c[("fast", 1)]["max_batch_size"] == 256
    assert c[("fast", 2)]["batch_size"] is None and c[("fast", 2)]["estimate"] is None
    assert c[("tutorial", 1)]["batch_size"] is None
    assert crossover([r for r in handmade().rows if r["device"] == "cpu"]) == []
    # winning from the smallest batch on: crossover there, no estimate
    always = [row("cpu", 4, 1, 10), row("mps", 4, 1, 20), row("cpu", 8, 1, 10), row("mps", 8, 1, 40)]
    (only,) = crossover(always)
    assert (only["device"], only["batch_size"], only["estimate"]) == ("mps", 4, None)


def test_explain_tutorial_point_gives_figures():
    facts = explain_tutorial_point(handmade())
    assert (facts["pipeline"], facts["batch_size"], facts["width"]) == ("tutorial", 4, 1)
    assert facts["steps_per_epoch"] == 12_500 and facts["epochs"] == 2
    cpu, gpu = facts["devices"]
    assert cpu["device"] == "cpu" and cpu["epoch_s"] == pytest.approx(50_000 / 800)
    assert cpu["tutorial_run_s"] == pytest.approx(2 * 50_000 / 800)
    assert cpu["fast_gain"] == pytest.approx(1000 / 800)
    assert cpu["best"]["batch_size"] == 1024 and cpu["best_gain"] == pytest.approx(6500 / 800)
    assert gpu["speedup_vs_cpu"] == pytest.approx(0.5) and cpu["speedup_vs_cpu"] is None
    assert gpu["best"]["images_per_s"] == 60000
    assert facts["fastest_device"] == "cpu"
    json.dumps(facts)  # figures and identifiers only


def test_what_a_gpu_would_add(tmp_path):
    here = SweepResult(rows=[row("cpu", 4, 1, 400, "tutorial"), row("cpu", 64, 1, 2500)],
                       environment={}, config={}, host="laptop", recorded_at="2025-02-02T00:00:00")
    # no accelerator and nothing recorded: says so
    empty = what_a_gpu_would_add(here, directory=tmp_path)
    assert empty["has_accelerator"] is False and empty["reference"] is None and empty["points"] == []
    # a recording found in the results folder
    handmade().save(tmp_path / "h100-2025-01-02.json")
    add = what_a_gpu_would_add(here, directory=tmp_path)
    ref = add["reference"]
    assert ref["device_name"] == "NVIDIA H100" and ref["recorded_on"] == "gpu-box, 2025-01-02"
    p = {(x["pipeline"], x["batch_size"]): x for x in add["points"]}
    assert p[("fast", 64)]["speedup"] == pytest.approx(10000 / 2500)  # vs this machine's cpu
    assert p[("fast", 64)]["speedup_same_machine"] == pytest.approx(2.0)  # vs its own cpu
    assert add["tutorial_point"]["speedup"] == pytest.approx(1.0)
    assert add["best"]["batch_size"] == 64
    # with an accelerator of its own, its own rows are used
    own = what_a_gpu_would_add(handmade())
    assert own["has_accelerator"] and own["reference"] is None and len(own["points"]) == 9


# -----------------------------------------------------------------------------
# the breakdown pass

def test_breakdown_phases_add_up_to_a_step():
    ratios = []
    for _ in range(5):  # a busy machine is noisy: one of five tries must agree
        b = breakdown("cpu", 16, 1, "fast", steps=8, warmup=2, num_workers=0, max_seconds=3)
        assert b["pass"] == "breakdown" and b["method"] == "sync" and b["error"] == ""
        for phase in ("data", "forward", "backward", "optimizer"):
            assert b[f"{phase}_s"] > 0
        assert b["h2d_s"] >= 0  # the batch is already on the device
        assert b["total_s"] == pytest.approx(sum(b[f"{p}_s"] for p in timing.PHASES))
        ratios.append(b["total_s"] / b["step_s"])
        if 0.5 <= ratios[-1] <= 1.5:
            break
    assert any(0.5 <= r <= 1.5 for r in ratios), ratios


def test_breakdown_tutorial_pipeline_and_bad_method():
    b = breakdown("cpu", 8, 1, "tutorial", steps=3, warmup=1, num_workers=0)
    assert b["data_s"] > 0 and b["forward_s"] > 0 and b["steps"] == 3
    with pytest.raises(CifarLabError, match="CUDA"):
        breakdown("cpu", 8, 1, method="cuda_events")


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
        raise AssertionError("synthetic images: the data set is not needed")


def test_timing_job_emits_a_row_per_point():
    payload = SweepConfig(**{**QUICK, "widths": (1,)}).to_dict()
    ctx = Ctx()
    out = run_timing_job(json.loads(json.dumps(payload)), ctx)
    assert [k for k, _ in ctx.events] == ["timing_row"] * 3 and out["points"] == 3
    assert out["cancelled"] is False
    back = SweepResult.from_dict(json.loads(json.dumps(out)))
    assert back.rows == [d for _, d in ctx.events]


def test_timing_job_stops():
    payload = SweepConfig(**QUICK).to_dict()
    ctx = Ctx(stop_after=1)
    out = run_timing_job(payload, ctx)
    assert len(ctx.events) == 1 and out["cancelled"] is True and len(out["rows"]) == 1
    ctx = Ctx(stop_after=0)
    assert run_timing_job(payload, ctx)["rows"] == [] and ctx.events == []


def test_stop_during_a_point():
    t0 = time.perf_counter()
    calls = []
    stop = lambda: bool(calls.append(1)) or len(calls) > 3  # noqa: E731
    assert measure_point("cpu", 4, 1, "fast", steps=100_000, warmup=1, repeats=1,
                         num_workers=0, should_stop=stop) is None
    assert time.perf_counter() - t0 < 5


# -----------------------------------------------------------------------------
# the `bench` command

def test_cli_bench_runs_and_saves(tmp_path, capsys):
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    code = cli.main(["bench", "--devices", "cpu", "--batch-sizes", "4,8", "--widths", "1",
                     "--pipelines", "fast", "--steps", "2", "--warmup", "1", "--repeats", "1",
                     "--num-workers", "0", "--out", str(out_json), "--out", str(out_csv)])
    text = capsys.readouterr().out
    assert code == 0
    assert "images/s" in text and "ms/step" in text and "the tutorial as written" in text
    assert "no accelerator measured" in text
    a, b = SweepResult.load(out_json), SweepResult.load(out_csv)
    assert len(a.rows) == 3 and a.rows == b.rows
    assert cli.main(["bench", "--show", str(out_json)]) == 0
    assert "recorded on: " + a.recorded_on in capsys.readouterr().out


@pytest.mark.parametrize("args, words", [
    (["--batch-sizes", "0"], "batch"),
    (["--batch-sizes", "4,x"], "batch"),
    (["--devices", "cuda:7"], "cuda:7"),
    (["--devices", "tpu"], "Devices"),
    (["--widths", "99"], "Width"),
    (["--steps", "0"], "steps"),
    (["--out", "r.txt"], ".json or .csv"),
    (["--show", "/nonexistent/r.json"], "No such file"),
])
def test_cli_bench_rejects_bad_input(args, words, capsys):
    assert cli.main(["bench", "--devices", "cpu", "--batch-sizes", "4", "--widths", "1",
                     "--steps", "1", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and words in err


def test_gpu_sweep_script(tmp_path, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "gpu_sweep.py"
    spec = importlib.util.spec_from_file_location("gpu_sweep", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--devices", "cpu", "--batch-sizes", "8", "--widths", "1",
                        "--pipelines", "fast", "--steps", "2", "--warmup", "1", "--repeats", "1",
                        "--num-workers", "0", "--out-dir", str(tmp_path)]) == 0
    files = sorted(p.suffix for p in tmp_path.iterdir())
    assert files == [".csv", ".json"]
    saved = SweepResult.load(next(tmp_path.glob("*.json")))
    assert len(saved.rows) == 2 and len(saved.breakdowns) == 1
    assert "crossover" not in capsys.readouterr().err
    assert script.main(["--devices", "cuda:7", "--out-dir", str(tmp_path)]) == 2


# -----------------------------------------------------------------------------
# the CUDA-only paths, as far as they go without a GPU

def test_synchronisation_chosen_per_device(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: calls.append(("cuda", d)))
    monkeypatch.setattr(torch.mps, "synchronize", lambda: calls.append(("mps", None)))
    timing.sync_for("cpu")()
    assert calls == []
    timing.sync_for("cuda:1")()
    assert calls == [("cuda", torch.device("cuda:1"))]
    timing.sync_for("mps")()
    assert calls[-1] == ("mps", None)


def test_cudnn_benchmark_only_while_timing_cuda(monkeypatch):
    entered = []

    class Guard:  # torch.cuda.device(...) would need a GPU
        def __init__(self, dev):
            entered.append(dev)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.cuda, "device", Guard)
    before = torch.backends.cudnn.benchmark
    with timing.timing_settings("cpu"):
        assert torch.backends.cudnn.benchmark == before
    with timing.timing_settings("cuda:0"):
        assert torch.backends.cudnn.benchmark is True
    assert torch.backends.cudnn.benchmark == before and entered == [torch.device("cuda:0")]


def test_cleanup_empties_the_cuda_cache(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("cuda"))
    timing.cleanup("cpu")
    assert calls == []
    timing.cleanup("cuda:0")
    assert calls == ["cuda"]


def test_pinned_memory_for_cuda_copies():
    assert timing._loader_kwargs(torch.device("cuda:0"), 2) == {
        "num_workers": 2, "pin_memory": True, "persistent_workers": True}
    assert timing._loader_kwargs(torch.device("cpu"), 0)["pin_memory"] is False


def test_out_of_memory_is_a_row_not_a_crash(monkeypatch):
    real = timing._train_step

    def step(model, criterion, optimizer, inputs, labels):
        if inputs.shape[0] >= 16:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real(model, criterion, optimizer, inputs, labels)

    monkeypatch.setattr(timing, "_train_step", step)
    result = run_sweep(SweepConfig(**{**QUICK, "widths": (1,), "batch_sizes": (4, 16, 8)}))
    by_batch = {(r["pipeline"], r["batch_size"]): r for r in result.rows}
    assert by_batch[("fast", 16)]["error"] == "out of memory"
    assert by_batch[("fast", 16)]["images_per_s"] is None
    assert by_batch[("fast", 8)]["error"] == "" and by_batch[("fast", 8)]["images_per_s"] > 0
    assert timing.is_out_of_memory(RuntimeError("MPS backend out of memory (MPS allocated ...)"))
    assert not timing.is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    # other errors are bugs, and surface
    monkeypatch.setattr(timing, "_train_step", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        measure_point("cpu", 4, 1, "fast", steps=1, warmup=1, repeats=1)


def test_cuda_event_timer_arithmetic(monkeypatch):
    class FakeEvent:  # a CUDA event that remembers the host clock
        def __init__(self, enable_timing=False):
            assert enable_timing

        def record(self, stream=None):
            assert stream == "stream-of-cuda:0"
            self.t = time.perf_counter()

        def elapsed_time(self, other):
            return (other.t - self.t) * 1000.0  # milliseconds, as CUDA's

    synced = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda d: f"stream-of-{d}")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: synced.append(d))
    timer = timing.EventTimer("cuda:0")
    timer.start()
    for _ in range(2):
        time.sleep(0.01)
        timer.mark("forward")
        time.sleep(0.02)
        timer.mark("backward")
    totals = timer.finish()
    assert synced == [torch.device("cuda:0")]  # one synchronisation, at the end
    assert 0.02 <= totals["forward"] < 0.2 and 0.04 <= totals["backward"] < 0.4


def test_a_binary_upload_is_refused_with_a_data_error():
    from cifarlab.errors import DataError
    from cifarlab.lab.gpu import SweepResult

    with pytest.raises(DataError, match="not a text CSV"):
        SweepResult.from_csv_text(b"\xff\xfe\x00binary", source="upload.csv")
