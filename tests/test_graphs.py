"""CUDA graphs (cifarlab/core/graphs.py): the ``cuda_graphs`` option end to end.

On the CPU (every machine): the fallback trains exactly as eager and says why in the run's
events, the option travels through config, command line, checkpoint and exported script, and the
CPU vs GPU lab's "GPU, graphed" series is planned, refused and reported correctly. With CUDA
(skipped elsewhere, as tests/test_cuda.py): graphed and eager training agree within
floating-point tolerance at batch 4, with a short last batch, after a failed capture, and the
timing series is really graphed.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from cifarlab import i18n
from cifarlab.core import graphs
from cifarlab.core.checkpoint import load, save
from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig, validate
from cifarlab.core.data import CifarData
from cifarlab.core.export.render import split_cells
from cifarlab.core.export.render import export_script
from cifarlab.core.model import Net
from cifarlab.core.train import train
from cifarlab.lab.gpu import analysis, charts, measure, report
from cifarlab.lab.gpu.config import SweepConfig
from cifarlab.lab.gpu import results as gpu_results

ROOT = Path(__file__).resolve().parents[1]
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
LANGS = ("en", "es", "pt")


@pytest.fixture(autouse=True)
def one_thread():
    """One CPU thread: two OpenMP threads on a loaded 2-core machine spin (20x slower here)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def synthetic(n: int, seed: int = 0) -> CifarData:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    y = rng.integers(0, 10, n).astype(np.int64)
    return CifarData(x, y, x[:32], y[:32], CIFAR10_CLASSES, "synthetic", "synthetic")


def run(config: TrainConfig, data: CifarData):
    events = []
    result = train(config, data, on_event=events.append, evaluate_after=False)
    return result, [e.data for e in events if e.kind == "graphs"]


def weights(result) -> dict:
    return {k: v.detach().clone() for k, v in result.model.state_dict().items()}


# ----------------------------------------------------------------------------------- the CPU

def test_on_the_cpu_the_option_trains_exactly_as_eager_and_says_why():
    data = synthetic(70)   # batch 8: eight full batches and a short one of 6, each epoch
    config = TrainConfig(epochs=2, batch_size=8, pipeline="fast", device="cpu", cuda_graphs=True)
    graphed, notes = run(config, data)
    plain, none = run(config.replace(cuda_graphs=False), data)
    assert graphed.losses == plain.losses and len(plain.losses) == 18
    for k, v in weights(plain).items():
        assert torch.equal(weights(graphed)[k], v), k
    assert none == []                      # off: no note at all
    assert notes == [{"status": "eager", "reason": "graphs.needs_cuda",
                      "params": {"device": "cpu"}, "step": 0}]
    assert graphed.summary()["config"]["cuda_graphs"] is True


def test_why_a_run_cannot_capture():
    fast = TrainConfig(pipeline="fast", cuda_graphs=True)
    assert graphs.not_possible(fast, torch.device("cpu")) == ("graphs.needs_cuda",
                                                              {"device": "cpu"})
    assert graphs.not_possible(fast, torch.device("mps"))[0] == "graphs.needs_cuda"
    assert graphs.not_possible(fast.replace(pipeline="tutorial"), torch.device("cuda:0")) == (
        "graphs.fast_only", {"pipeline": "tutorial"})
    assert graphs.not_possible(fast, torch.device("cuda:0")) is None
    # a replay keeps the captured learning rate: a per-step schedule trains eagerly, in the
    # app and in the exported script alike
    cycle = fast.replace(schedule="onecycle")
    assert graphs.not_possible(cycle, torch.device("cuda:0")) == (
        "graphs.schedule", {"schedule": "onecycle"})
    assert "graphed = None\n" in export_script(cycle)
    assert "graphed = GraphedStep(" in export_script(fast)
    # every reason a run can record reads in each language, with its parameters
    params = {"device": "cpu", "pipeline": "tutorial", "batch": 6, "full": 8, "warmup": 3,
              "error": "RuntimeError: x", "schedule": "onecycle"}
    for code in ("needs_cuda", "fast_only", "schedule", "short_batch", "settings_changed",
                 "capture_failed", "not_captured", "captured"):
        for lang in LANGS:
            text = i18n.t(f"graphs.{code}", lang, **params)
            assert text and not text.startswith("graphs."), (code, lang)


def test_the_step_is_train_step_itself_when_the_option_is_off():
    model = Net()
    calls = []
    step = graphs.make_step(TrainConfig(), torch.device("cpu"), model, None, None,
                            lambda *args: calls.append(args) or "loss")
    assert step("x", "y") == "loss" and calls == [(model, None, None, "x", "y")]


def test_the_option_round_trips_through_config_cli_and_checkpoint(tmp_path):
    assert TrainConfig().cuda_graphs is False
    on = TrainConfig(cuda_graphs=True, pipeline="fast")
    assert TrainConfig.from_dict(on.to_dict()) == on
    old = TrainConfig().to_dict()
    old.pop("cuda_graphs")                 # a checkpoint saved before the option existed
    assert TrainConfig.from_dict(old).cuda_graphs is False
    (problem,) = validate({"cuda_graphs": "yes"})
    assert (problem.field, problem.code) == ("cuda_graphs", "config.cuda_graphs")
    assert all(not problem.text(lang).startswith("errors.") for lang in LANGS)
    from cifarlab.cli import build_parser, config_from_args

    args = build_parser().parse_args(["train", "--cuda-graphs", "true", "--pipeline", "fast"])
    assert config_from_args(args).cuda_graphs is True
    assert config_from_args(build_parser().parse_args(["train"])).cuda_graphs is False
    path = save(tmp_path / "run.pth", Net(), on, CIFAR10_CLASSES)
    assert load(path).config.cuda_graphs is True


def test_the_exported_script_carries_the_option_and_falls_back_like_the_app(capsys):
    text = export_script(TrainConfig(cuda_graphs=True, pipeline="fast", device="cpu"))
    compile(text, "cifar_run.py", "exec")
    assert "CUDA_GRAPHS = True" in text
    assert ("graphed = GraphedStep(net, criterion, optimizer, BATCH_SIZE, fast) if CUDA_GRAPHS"
            in text)
    # the fallback
    assert "if loss is None:\n                # zero the parameter gradients" in text
    assert "CUDA_GRAPHS = False" in export_script(TrainConfig())
    # the script's GraphedStep on a machine without CUDA: every step runs as written
    scope = {"torch": torch, "device": torch.device("cpu")}
    exec(dict(split_cells(text))["graphs"], scope)   # the script's own class GraphedStep
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    step = scope["GraphedStep"](net, torch.nn.CrossEntropyLoss(), opt, 4, True)
    assert step(torch.zeros(4, 3, 32, 32), torch.zeros(4, dtype=torch.long)) is None
    assert "not used (no CUDA GPU)" in capsys.readouterr().out
    # the tutorial pipeline says so too, on any device
    scope["GraphedStep"](net, torch.nn.CrossEntropyLoss(), opt, 4, False)
    assert "every step runs as written" in capsys.readouterr().out


# ------------------------------------------------------------------- the Train page's option

@pytest.fixture
def train_page(tmp_path, monkeypatch):
    """The Train page on a fresh run store, with or without a (listed, fake) CUDA device.
    Skipped where Streamlit is not installed: the GPU machine's image, where this file runs for
    its CUDA tests (bench/gpu_check.sh); everywhere else requirements.txt installs it, and CI
    must run it."""
    st = __import__("streamlit") if os.environ.get("CI") else pytest.importorskip("streamlit")
    from cifarlab.core import devices
    from cifarlab.serve import queue as jobs
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("CIFARLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CIFARLAB_DATA", str(tmp_path / "no-data-needed"))
    monkeypatch.setenv("CIFARLAB_SPARE_WORKERS", "0")
    cpu_only = [d for d in devices.list_devices() if d.kind == "cpu"]

    def fresh():
        if jobs._QUEUE is not None:
            jobs._QUEUE.shutdown(timeout=5)
            jobs._QUEUE = None
        st.cache_resource.clear()   # the page keeps its device list (and queue) cached

    def open_page(lang: str, cuda: bool) -> AppTest:
        fresh()
        listed = cpu_only + ([devices.DeviceInfo("cuda:0", "cuda", "NVIDIA H100")] if cuda else [])
        monkeypatch.setattr(devices, "list_devices", lambda: listed)
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.query_params["lang"] = lang
        at.run()
        at.switch_page("pages/train.py")
        at.run()
        assert not at.exception, at.exception
        return at

    yield open_page
    fresh()


def test_the_train_page_offers_cuda_graphs_only_on_a_cuda_device(train_page):
    at = train_page("en", cuda=False)
    assert "train_cuda_graphs" not in [w.key for w in at.toggle]
    at = train_page("es", cuda=True)   # device "auto" picks the GPU here
    (toggle,) = [w for w in at.toggle if w.key == "train_cuda_graphs"]
    assert toggle.label == i18n.t("common.cuda_graphs", "es") and toggle.value is False
    assert toggle.help == i18n.t("common.cuda_graphs_help", "es")
    toggle.set_value(True).run()
    assert at.session_state["train_cuda_graphs"] is True
    at.selectbox(key="train_device").set_value("cpu").run()   # the CPU: hidden, and off
    assert not at.exception
    assert "train_cuda_graphs" not in [w.key for w in at.toggle]
    assert at.session_state["train_cuda_graphs"] is False
    at.selectbox(key="train_device").set_value("cuda:0").run()
    assert [w.value for w in at.toggle if w.key == "train_cuda_graphs"] == [False]


# ------------------------------------------------------------- the CPU vs GPU lab's third series

def test_a_sweep_plans_a_graphed_point_beside_each_eager_fast_point_on_cuda_only():
    cfg = SweepConfig(devices=("cpu",), batch_sizes=(4, 64), widths=(1,),
                          pipelines=("fast", "tutorial"), graphed=True)
    points = cfg.points(["cpu", "cuda:0"])
    graphed = [p for p in points if p.get("graphed")]
    assert [(p["device"], p["pipeline"], p["batch_size"]) for p in graphed] == [
        ("cuda:0", "fast", 4), ("cuda:0", "fast", 64)]
    off = SweepConfig(devices=("cpu",), batch_sizes=(4,), widths=(1,))   # the default
    assert off.graphed is False and not [p for p in off.points(["cpu", "cuda:0"])
                                         if p.get("graphed")]
    assert SweepConfig.from_dict({"devices": ["cpu"]}).graphed is False  # older payloads
    from cifarlab.lab.gpu.cli import config_from_args
    from cifarlab.cli import build_parser

    def bench(*flags):
        return config_from_args(build_parser().parse_args(["bench", *flags])).graphed

    assert (bench(), bench("--graphed"), bench("--sweep"), bench("--sweep", "--no-graphed")) == (
        False, True, True, False)
    with pytest.raises(Exception) as err:
        SweepConfig(devices=("cpu",), graphed="yes")
    assert "graphed" in {p.field for p in err.value.problems}


def test_a_graphed_point_that_cannot_capture_is_an_error_row_not_eager_figures():
    row = measure.measure_point("cpu", 4, pipeline="fast", steps=2, warmup=1, repeats=1,
                            num_workers=0, graphed=True)
    assert row["graphed"] is True and row["images_per_s"] is None
    assert row["error"] == "not graphed: graphs.needs_cuda"


def test_a_timing_workload_reads_whether_its_step_replays_from_the_step_itself():
    """The graphed series' rows say "not graphed" unless the step holds a captured graph that has
    not given up; on the CPU the step is eager and says why. Checked here on a GraphedStep's
    state without CUDA (its capture needs a GPU: the CUDA test below does it for real)."""
    from cifarlab.lab.gpu.step import Workload

    work = Workload("cpu", 4, pipeline="fast", num_workers=0, graphed=True)
    try:
        assert work.not_graphed() == "graphs.needs_cuda"
        step = object.__new__(graphs.GraphedStep)   # its __init__ makes a CUDA stream
        step.graph, step.failed = object(), False
        work._step = step
        assert work.not_graphed() is None
        step.failed = True
        work.graph_notes.append({"status": "eager", "reason": "graphs.settings_changed",
                                 "params": {}, "step": 9})
        assert work.not_graphed() == "graphs.settings_changed"
        step.graph, step.failed = None, False
        assert work.not_graphed() == "graphs.settings_changed"   # not captured yet: the last note
    finally:
        work.close()


def graphed_result() -> gpu_results.SweepResult:
    """A recording with cpu, cuda:0 and cuda:0 graphed rows (figures made up, shapes real)."""
    def row(device, batch, ips, graphed=False):
        r = {c: ("" if t is str else False if t is bool else None)
             for c, t in gpu_results.COLUMNS.items()}
        r.update(device=device, device_kind=device.split(":")[0], device_name=device,
                 pipeline="fast", batch_size=batch, width=1, images_per_s=ips,
                 images_per_s_min=ips, images_per_s_max=ips, step_ms=batch / ips * 1000,
                 step_ms_min=batch / ips * 1000, step_ms_max=batch / ips * 1000,
                 epoch_s=50_000 / ips, graphed=graphed, host="gpu-box", recorded_at="2026-01-01")
        return r
    rows = [row("cpu", 4, 2000.0), row("cuda:0", 4, 2000.0), row("cuda:0", 4, 10000.0, True),
            row("cpu", 64, 16000.0), row("cuda:0", 64, 32000.0),
            row("cuda:0", 64, 64000.0, True)]
    return gpu_results.SweepResult(rows=rows, environment={}, config={}, host="gpu-box",
                           recorded_at="2026-01-01T00:00:00+00:00", source="recorded.json")


def test_the_graphed_series_is_its_own_line_and_its_gain_is_against_the_same_gpu():
    res = gpu_results.SweepResult.from_dict(graphed_result().to_dict(), source="x.json")
    assert [r["graphed"] for r in res.rows] == [False, False, True, False, False, True]
    gains = analysis.graph_gains(res)
    assert [(g["batch_size"], g["gain"]) for g in gains] == [(4, 5.0), (64, 2.0)]
    ups = {(s["device"], s["graphed"], s["batch_size"]): s["speedup"]
           for s in analysis.speedups(res)}
    assert ups[("cuda:0", False, 4)] == 1.0 and ups[("cuda:0", True, 4)] == 5.0
    # the tutorial's explanation never mixes the graphed rows in: cuda:0 eager is 1× the cpu
    at_4 = [{**r, "pipeline": "tutorial" if r["batch_size"] == 4 else "fast"} for r in res.rows]
    tut = report.tutorial_lines(gpu_results.SweepResult(at_4, {}, {}, "gpu-box", "2026"), "en")
    assert "**1.00×** the CPU" in tut[1] and "5.00×" not in " ".join(tut[:2])
    for lang in LANGS:
        series = {d.name for d in charts.throughput_figure(res, "fast", i18n.translator(lang)).data
                  if d.mode == "lines+markers"}
        assert i18n.t("gpu.trace_graphed", lang, device="cuda:0", width=1) in series
        assert len(series) == 3
        (line, _) = report.graph_gain_lines(res, lang)
        assert line.startswith("**cuda\\:0**") and i18n.t("gpu.graphed_tag", lang) in line
        table = report.rows_table(res.rows, lang)
        assert f"cuda:0 · {i18n.t('gpu.graphed_tag', lang)}" in set(
            table[i18n.t("gpu.device_col", lang)])
    assert "5.00×" in report.graph_gain_lines(res, "en")[0]
    assert "5,00×" in report.graph_gain_lines(res, "es")[0]
    csv_back = gpu_results.SweepResult.from_csv_text(res.to_csv(), source="x.csv")
    assert [r["graphed"] for r in csv_back.rows] == [r["graphed"] for r in res.rows]


# ------------------------------------------------------------------------------- with CUDA

def _close(a: list[float], b: list[float]) -> None:
    assert len(a) == len(b)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@cuda
@pytest.mark.parametrize("n", [4 * 60, 4 * 60 + 2])   # whole batches; a short last batch of 2
def test_graphed_training_matches_eager_on_cuda(n):
    data = synthetic(n)
    config = TrainConfig(epochs=2, batch_size=4, pipeline="fast", device="cuda:0",
                         cuda_graphs=True)
    graphed, notes = run(config, data)
    plain, _ = run(config.replace(cuda_graphs=False), data)
    _close(graphed.losses, plain.losses)
    for k, v in weights(plain).items():
        torch.testing.assert_close(weights(graphed)[k], v, rtol=1e-4, atol=1e-5)
    statuses = [(x["status"], x["reason"]) for x in notes]
    assert statuses[0] == ("captured", None)
    assert notes[0]["step"] == graphs.WARMUP_STEPS + 1
    assert (("eager_batch", "graphs.short_batch") in statuses) == (n % 4 != 0)


@cuda
def test_a_capture_that_fails_trains_on_eagerly_with_the_same_numbers():
    data = synthetic(4 * 20)
    config = TrainConfig(epochs=1, batch_size=4, pipeline="fast", device="cuda:0",
                         cuda_graphs=True)
    model = Net().cuda()
    loss_fn = torch.nn.CrossEntropyLoss()

    def syncing_loss(outputs, labels):   # .item() synchronises: not allowed in a capture
        loss = loss_fn(outputs, labels)
        float(loss.item())
        return loss

    notes: list[dict] = []
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
    from cifarlab.core.train import train_step

    step = graphs.make_step(config, torch.device("cuda:0"), model, syncing_loss, opt,
                            train_step, notes.append)
    torch.manual_seed(0)
    ref = Net().cuda()
    ref.load_state_dict(model.state_dict())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.01, momentum=0.9, fused=True)
    x = torch.as_tensor(data.train_x[:80]).cuda().float() / 255
    y = torch.as_tensor(data.train_y[:80]).cuda()
    for i in range(0, 80, 4):
        a = step(x[i:i + 4], y[i:i + 4])
        b = train_step(ref, loss_fn, ref_opt, x[i:i + 4], y[i:i + 4])
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert step.failed and torch.cuda.current_stream() == torch.cuda.default_stream()
    assert [n["reason"] for n in notes] == ["graphs.capture_failed"]
    assert notes[0]["params"]["error"]


@cuda
def test_the_timing_series_is_really_graphed_on_cuda():
    row = measure.measure_point("cuda:0", 4, pipeline="fast", steps=20, warmup=1, repeats=2,
                            num_workers=0, graphed=True)
    assert row["graphed"] is True and not row["error"], row["error"]
    assert row["images_per_s"] > 0 and row["warmup_steps"] >= graphs.WARMUP_STEPS + 1
