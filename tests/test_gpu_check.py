"""bench/gpu_check.sh: the plan it prints without CUDA, and how each step judges what its
commands printed and wrote (canned outcomes here: nothing trains). A crash, a timeout, a step
left without time, a CUDA test skipped on a GPU or a figure on the wrong device fails the check;
a missed goal is reported and does not."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from argparse import Namespace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_ray_share
import gpu_check
import gpu_check_report as report
import gpu_check_steps as steps


def make_args(tmp_path: Path, **changes) -> Namespace:
    args = dict(plan=False, dry_cpu=False, out=str(tmp_path / "out"), work=str(tmp_path / "work"),
                shared=str(tmp_path / "shared"), data=None, device="cuda:0", budget=480.0,
                tutorial_steps=2000, gpu_fast_runs=3, profile=False,
                steps=",".join(steps.STEPS))
    return Namespace(**{**args, **changes})


class Canned(gpu_check.Check):
    """A Check whose commands are not run: each returns the next canned outcome (a callable
    gets the command first, to write what the real command would have written)."""

    def __init__(self, args, outcomes):
        super().__init__(args)
        self.outcomes, self.ran = list(outcomes), []
        self.out.mkdir(parents=True, exist_ok=True)
        self.work.mkdir(parents=True, exist_ok=True)

    def run(self, cmd, cap_s, env=None, tee=None):
        self.ran.append(([str(c) for c in cmd], dict(env or {})))
        outcome = self.outcomes.pop(0)
        return outcome([str(c) for c in cmd]) if callable(outcome) else outcome


def ran(output: str = "", rc: int | None = 0, **flags) -> dict:
    return {"rc": rc, "output": output, "seconds": 1.0, "limit": 90.0,
            "timed_out": flags.get("timed_out", False), "no_time": flags.get("no_time", False)}


def cli_json(accuracy: float, seconds: float, device: str = "cuda:0") -> str:
    doc = {"train_seconds": seconds, "test_accuracy": accuracy, "images_per_second": 5e5 / seconds,
           "steps": 980, "eval_seconds": 0.8, "device_name": "NVIDIA H100", "device": device}
    return "some log line\n" + json.dumps(doc) + "\n"


def judged(res: dict) -> dict:
    return {**res, "status": gpu_check.status(res)}


def test_a_missed_gpu_fast_goal_is_reported_and_does_not_fail_the_check(tmp_path):
    c = Canned(make_args(tmp_path), [ran(cli_json(0.935, 12.0)), ran(cli_json(0.925, 14.0)),
                                     ran(cli_json(0.94, 16.5))])
    res = judged(steps.step_gpu_fast(c))
    assert res["problems"] == [] and res["status"] == "ok"
    assert res["goal_met"] is False       # 92.5 % and 16.5 s each miss it
    assert "92.50 % in 14.0 s" in res["measured"]
    assert [cmd[cmd.index("--preset") + 1] for cmd, _ in c.ran] == ["gpu_fast"] * 3
    assert all(cmd[cmd.index("--device") + 1] == "cuda:0" for cmd, _ in c.ran)
    table = report.summary({}, {"gpu_fast": res}, False, 60.0)
    assert "| gpu_fast | ok |" in table and "**no** |" in table
    assert "Goals missed (measured, not failures): gpu_fast" in table
    assert gpu_check.exit_code({"gpu_fast": res}) == 0

    met = judged(steps.step_gpu_fast(Canned(make_args(tmp_path), [
        ran(cli_json(0.931, 14.9))] * 3)))
    assert met["goal_met"] is True and met["status"] == "ok"


def test_a_crash_a_timeout_and_a_run_on_the_wrong_device_fail_the_check(tmp_path):
    c = Canned(make_args(tmp_path), [ran("Traceback ...", rc=1), ran("", rc=None, timed_out=True),
                                     ran(cli_json(0.95, 10.0, device="cpu"))])
    res = judged(steps.step_gpu_fast(c))
    assert res["problems"] == ["run 1: exit 1", "run 2: stopped after 90 s",
                               "run 3 trained on cpu, not cuda:0"]
    assert res["status"] == "FAILED" and gpu_check.exit_code({"gpu_fast": res}) == 1
    assert "FAILED: gpu_fast (exit 1)" in report.summary({}, {"gpu_fast": res}, False, 1.0)
    left_out = steps.broke(ran("", rc=None, no_time=True), "bench_ray_share")
    assert left_out == "bench_ray_share: not run, the time budget ran out"


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_cuda" name="test_auto_picks_cuda0"/>
<testcase classname="tests.test_cuda" name="test_cancel_on_cuda">{cuda_skip}</testcase>
<testcase classname="tests.test_graphs" name="test_the_train_page_offers_cuda_graphs">
<skipped message="could not import 'streamlit': No module named 'streamlit'"/></testcase>
<testcase classname="tests.test_graphs" name="test_timing"><failure message="boom"/></testcase>
</testsuite></testsuites>"""


@pytest.mark.parametrize("dry", [False, True])
def test_pytest_step_fails_when_a_cuda_test_is_skipped_on_the_gpu(tmp_path, dry):
    c = Canned(make_args(tmp_path, dry_cpu=dry), [ran("1 failed", rc=1)])
    (c.work / "pytest.xml").write_text(JUNIT.format(
        cuda_skip='<skipped message="needs a CUDA GPU"/>'))
    res = steps.step_pytest(c)
    assert res["figures"] == {"passed": 1, "failed": 1, "errors": 0, "skipped": 2}
    assert "pytest: exit 1" in res["problems"]
    odd = [p for p in res["problems"] if p.startswith("skipped unexpectedly")]
    # the Train page test may skip without Streamlit; on the GPU a CUDA test may not
    assert odd == ([] if dry else
                   ["skipped unexpectedly: test_cuda::test_cancel_on_cuda: needs a CUDA GPU"])
    cmd, _ = c.ran[0]
    assert cmd[1:5] == ["-m", "pytest", "tests/test_cuda.py", "tests/test_graphs.py"]


def test_tutorial_step_runs_the_reference_on_the_gpu_then_the_cpu_and_takes_the_ratio(tmp_path):
    archive = tmp_path / "tiny.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:   # extract() only needs the layout
        for split in ("train", "test"):
            info = tarfile.TarInfo(f"{split}/cat/0.jpg")
            tar.addfile(info)
    line = "Accuracy of the network on the 10000 test images: {:.2f} %\n" \
           "steps=2000 train_s={} steps_per_s={} eval_s=3.10\n"
    c = Canned(make_args(tmp_path, data=str(archive)),
               [ran(line.format(30.5, 10.0, 200.0)), ran(line.format(31.0, 25.0, 80.0))])
    res = steps.step_tutorial(c)
    assert res["problems"] == [] and res["figures"]["ratio"] == pytest.approx(2.5)
    assert res["figures"]["runs"]["cpu"] == {"steps": 2000, "train_s": 25.0, "steps_per_s": 80.0,
                                             "eval_s": 3.1, "accuracy": 0.31}
    (gpu_cmd, gpu_env), (cpu_cmd, cpu_env) = c.ran
    assert gpu_cmd[1].endswith("reference/tutorial_offline.py") and gpu_cmd == cpu_cmd
    assert gpu_env == {"EPOCHS": "1", "MAX_STEPS": "2000"}
    assert cpu_env == {**gpu_env, "CUDA_VISIBLE_DEVICES": ""}   # the reference picks cuda:0 itself
    assert (Path(gpu_cmd[2]) / "train" / "cat").is_dir()

    nothing = Canned(make_args(tmp_path, data=str(archive)), [ran("Traceback"), ran("", rc=2)])
    assert steps.step_tutorial(nothing)["problems"] == [
        "the tutorial on cuda:0: no figures line", "the tutorial on cpu: exit 2"]


def recording(path: Path, graphed_ms: float, error: str = "") -> None:
    """A bench_graphs recording: the CPU, cuda:0 eager and cuda:0 graphed at batch 4 and 64."""
    from cifarlab.lab.gpu.results import SweepResult

    rows = []
    for batch, eager_ms in ((4, 2.4), (64, 2.5)):
        for device, graphed, ms in (("cpu", False, 3.0), ("cuda:0", False, eager_ms),
                                    ("cuda:0", True, graphed_ms)):
            rows.append({"device": device, "device_kind": device[:4], "device_name": device,
                         "pipeline": "fast", "batch_size": batch, "width": 1, "graphed": graphed,
                         "step_ms": ms, "images_per_s": 1000 * batch / ms,
                         "error": error if graphed and batch == 64 else ""})
    SweepResult(rows=rows, environment={}, config={}, host="h", recorded_at="2026-11-26") \
        .save(path)


@pytest.mark.parametrize("graphed_ms,met", [(0.4, True), (0.6, False)])
def test_graphs_step_takes_the_batch_4_gain_from_the_recording(tmp_path, graphed_ms, met):
    def bench(cmd):
        recording(Path(cmd[cmd.index("--out-dir") + 1]) / "graphs-nvidia-h100-2026-11-26.json",
                  graphed_ms)
        return ran("  graphed / eager steps/s: 5.80x; step losses: max |diff| 0\n")

    res = steps.step_graphs(Canned(make_args(tmp_path), [bench]))
    assert res["problems"] == [] and res["goal_met"] is met
    assert res["figures"]["gains"][4]["gain"] == pytest.approx(2.4 / graphed_ms)
    assert res["measured"].startswith(f"batch 4: {2.4 / graphed_ms:.2f}x (2.400 -> ")
    assert "Epoch: graphed / eager steps/s: 5.80x" in res["measured"]


def test_graphs_step_fails_on_an_error_row_or_no_recording(tmp_path):
    def bench(cmd):
        recording(Path(cmd[cmd.index("--out-dir") + 1]) / "graphs-x.json", 0.4,
                  error="capture failed: RuntimeError")
        return ran()

    res = steps.step_graphs(Canned(make_args(tmp_path), [bench]))
    assert res["problems"] == ["error row: cuda:0 batch 64 graphed: capture failed: RuntimeError"]
    none = steps.step_graphs(Canned(make_args(tmp_path / "b"), [ran("", rc=1)]))
    assert none["problems"] == ["bench_graphs: exit 1", "bench_graphs wrote no recording"]


def test_profiles_run_only_for_a_missed_goal_and_may_be_left_out_for_time(tmp_path):
    c = Canned(make_args(tmp_path), [])
    c.results = {"graphs": {"goal_met": True}, "gpu_fast": {"goal_met": True}}
    assert steps.step_profile(c) == {"skipped": "every goal of steps 2 and 5 was met"}
    assert c.ran == []
    c = Canned(make_args(tmp_path), [ran("a table"), ran("", rc=None, no_time=True)])
    c.results = {"graphs": {"goal_met": False}, "gpu_fast": {"goal_met": True}}
    res = judged(steps.step_profile(c))
    assert [cmd[cmd.index("--batch-size"):] for cmd, _ in c.ran] == [
        ["--batch-size", "4", "--pipeline", "fast", "--subset", "2000"],
        ["--batch-size", "4", "--pipeline", "fast", "--subset", "2000", "--cuda-graphs"]]
    assert res["status"] == "ok" and res["measured"].startswith("1 profile(s)")
    c = Canned(make_args(tmp_path), [ran("Traceback", rc=1)])
    c.results = {"graphs": {"goal_met": True}, "gpu_fast": {"goal_met": False}}
    res = judged(steps.step_profile(c))
    assert "--preset" in c.ran[0][0] and res["status"] == "FAILED"


class Event:
    def __init__(self, t, data=None):
        self.t, self.data = t, data or {}


class FakeRun:
    def __init__(self, run_id, start, done):
        self.id, self.status, self.finished, self.error, self.traceback = \
            run_id, "done", True, None, None
        self.times = (start, done)
        self.result = {"images": 1000, "train_seconds": done - start,
                       "images_per_second": 1000 / (done - start), "test_accuracy": 0.3,
                       "device_name": "GPU"}


class FakeQueue:
    """submit/store/executor as bench_ray_share uses them; each run's start and done times set."""

    def __init__(self, times):
        self.times, self.runs = list(times), {}
        self.store, self.executor = self, self

    def submit(self, session, config, name=None):
        run = FakeRun(f"r{len(self.runs)}", *self.times[len(self.runs)])
        self.runs[run.id] = run
        return run.id

    def get(self, run_id):
        return self.runs[run_id]

    def events(self, run_id, kinds):
        start, done = self.runs[run_id].times
        return [Event(start if kinds == ["start"] else done)] if kinds != ["worker"] else []

    def resources_for(self, run):
        return {"num_gpus": 0.25, "num_cpus": 0.25}


def test_ray_share_round_measures_the_span_and_whether_all_trained_at_once():
    together = bench_ray_share.round_of(FakeQueue([(0, 10), (1, 11), (2, 12), (3, 12)]), None, 4,
                                        60, ray=None)
    assert together["all_at_once"] is True and together["span_s"] == 12
    assert together["aggregate_images_per_s"] == pytest.approx(4000 / 12)
    assert together["runs"][0]["asks"] == {"num_gpus": 0.25, "num_cpus": 0.25}
    one_by_one = bench_ray_share.round_of(FakeQueue([(0, 5), (5.5, 10), (11, 15), (16, 20)]),
                                          None, 4, 60, ray=None)
    assert one_by_one["all_at_once"] is False


@pytest.mark.integration
def test_without_cuda_the_script_prints_its_plan_and_exits_0(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": "",
           "CIFARLAB_BUNDLE": str(tmp_path / "no-bundle")}
    env.pop("OUT", None)
    proc = subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), "--out",
                           str(tmp_path / "out")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "No CUDA GPU here: this is the plan" in out and "Exit 0: nothing run." in out
    for key in steps.STEPS:
        assert report.TITLES[key] in out and report.GOAL_TEXT[key] in out
    for shown in ("--preset gpu_fast --device cuda:0", "--json", "bench/bench_graphs.py",
                  "bench/bench_ray_share.py", "--runs 4", "MAX_STEPS=2000",
                  "CUDA_VISIBLE_DEVICES=''", "tests/test_cuda.py tests/test_graphs.py"):
        assert shown in out, shown
    assert out.count("--preset gpu_fast --device cuda:0") == 3
    # nothing measured, nothing written but the log
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu-check.log"]
