"""The steps of bench/gpu_check.py: each runs its commands through the ``Check`` and judges
what they printed and wrote: ``{"problems": [...], "measured": str, "goal_met": bool | None,
"figures": {...}}``. A problem (a crash, a timeout, no time left, a wrong or missing figure)
fails the step; a goal missed is ``goal_met: False``, reported, never a failure. In plan mode
(``c.plan``) ``c.run`` prints each command and returns None, and a step returns ``{}``.
"""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

GOALS = {"graphs": 5.0, "gpu_fast_accuracy": 0.93, "gpu_fast_seconds": 15.0}
# in this order: the surest first, gpu_fast (the least sure of its time) last but the profiles
STEPS = ("pytest", "graphs", "tutorial", "ray", "gpu_fast", "profile")
REF_LINE = re.compile(r"steps=(\d+) train_s=([\d.]+) steps_per_s=([\d.]+) eval_s=([\d.]+)")
REF_ACC = re.compile(r"test images: ([\d.]+) %")


def broke(r: dict | None, what: str) -> str | None:
    """Why a command's outcome is a failure, or None."""
    if r is None:
        return None
    if r["no_time"]:
        return f"{what}: not run, the time budget ran out"
    if r["timed_out"]:
        return f"{what}: stopped after {r['limit']:.0f} s"
    if r["rc"] != 0:
        return f"{what}: exit {r['rc']}"
    return None


def step_pytest(c) -> dict:
    xml = c.work / "pytest.xml"
    r = c.run([c.py, "-m", "pytest", "tests/test_cuda.py", "tests/test_graphs.py", "-q", "-rs",
               "-p", "no:cacheprovider", f"--junitxml={xml}"], 240, tee=c.out / "pytest.log")
    if r is None:
        return {}
    problems = [p for p in [broke(r, "pytest")] if p]
    counts, skips = junit(xml)
    # on CUDA every CUDA test runs; only the Train page test may skip (no Streamlit there)
    allowed = ("streamlit",) + (("needs a CUDA GPU",) if c.dry else ())
    odd = [f"{name}: {why}" for name, why in skips if not any(a in why for a in allowed)]
    if odd:
        problems.append("skipped unexpectedly: " + "; ".join(odd))
    return {"problems": problems, "figures": counts,
            "measured": ", ".join(f"{v} {k}" for k, v in counts.items() if v) or "no tests ran"}


def junit(path: Path) -> tuple[dict, list[tuple[str, str]]]:
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    skips = []
    if not path.is_file():
        return counts, skips
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        if case.find("failure") is not None:
            counts["failed"] += 1
        elif case.find("error") is not None:
            counts["errors"] += 1
        elif (s := case.find("skipped")) is not None:
            counts["skipped"] += 1
            skips.append((name, s.get("message", "")))
        else:
            counts["passed"] += 1
    return counts, skips


def step_graphs(c) -> dict:
    size = (["--batch-sizes", "4", "--steps", "20", "--repeats", "1", "--max-seconds", "1",
             "--dry-cpu"] if c.dry else ["--batch-sizes", "4,64,1024", "--max-seconds", "3"])
    before = set(c.out.glob("graphs-*.json"))
    r = c.run([c.py, "bench/bench_graphs.py", "--data", c.archive, "--out-dir", c.out,
               "--epochs", "1", "--device", c.device, *size], 210)
    if r is None:
        return {}
    problems = [p for p in [broke(r, "bench_graphs")] if p]
    made = sorted(set(c.out.glob("graphs-*.json")) - before)
    if not made:
        return {"problems": problems + ["bench_graphs wrote no recording"], "measured": ""}
    from cifarlab.lab.gpu.analysis import graph_gains
    from cifarlab.lab.gpu.results import SweepResult

    result = SweepResult.load(made[-1])
    errors = [f"{x['device']} batch {x['batch_size']}{' graphed' if x.get('graphed') else ''}: "
              f"{x['error']}" for x in result.rows if x["error"]]
    problems += [f"error row: {e}" for e in errors]
    gains = {g["batch_size"]: g for g in graph_gains(result) if g["device"] == c.device}
    epochs = [ln.strip() for ln in r["output"].splitlines() if "graphed / eager" in ln]
    figures = {"recording": made[-1].name, "epoch_line": epochs[-1] if epochs else None,
               "gains": {b: {k: g[k] for k in ("gain", "eager_step_ms", "step_ms")}
                         for b, g in gains.items()}}
    if c.dry:
        return {"problems": problems, "figures": figures,
                "measured": "no GPU: the CPU trains eagerly (nothing graphed); "
                            + (epochs[-1] if epochs else "")}
    if 4 not in gains:
        return {"problems": problems + ["no graphed point at batch 4"], "figures": figures,
                "measured": ""}
    parts = [f"batch {b}: {g['gain']:.2f}x ({g['eager_step_ms']:.3f} -> {g['step_ms']:.3f} ms "
             "a step)" for b, g in sorted(gains.items())]
    return {"problems": problems, "figures": figures,
            "goal_met": gains[4]["gain"] >= GOALS["graphs"],
            "measured": "; ".join(parts) + (f". Epoch: {epochs[-1]}" if epochs else "")}


def step_gpu_fast(c) -> dict:
    tiny = ["--epochs", "1", "--train-subset", "128", "--batch-size", "32"] if c.dry else []
    runs, problems = [], []
    for i in range(1, c.args.gpu_fast_runs + 1):
        r = c.run([c.py, "-m", "cifarlab", "train", "--preset", "gpu_fast", "--device", c.device,
                   "--data", c.archive, "--out", c.work / f"gpu_fast-{i}.pth", "--json", *tiny],
                  90)
        if r is None:
            continue
        why = broke(r, f"run {i}")
        if why:
            problems.append(why)
            continue
        doc = json.loads(r["output"].strip().splitlines()[-1])
        if doc["device"] != c.device:
            problems.append(f"run {i} trained on {doc['device']}, not {c.device}")
        runs.append({k: doc[k] for k in ("train_seconds", "test_accuracy", "images_per_second",
                                         "steps", "eval_seconds", "device_name")})
    if c.plan:
        return {}
    measured = "; ".join(f"{100 * x['test_accuracy']:.2f} % in {x['train_seconds']:.1f} s "
                         f"({x['images_per_second']:,.0f} images/s)" for x in runs)
    met = (bool(runs) and len(runs) == c.args.gpu_fast_runs and all(
        x["test_accuracy"] >= GOALS["gpu_fast_accuracy"]
        and x["train_seconds"] <= GOALS["gpu_fast_seconds"] for x in runs))
    return {"problems": problems, "figures": {"runs": runs}, "measured": measured,
            "goal_met": None if c.dry else met}


def step_tutorial(c) -> dict:
    steps = "40" if c.dry else str(c.args.tutorial_steps)
    if c.plan:
        print(f"  (extract {c.archive} into {c.work / 'data'})")
        root = c.work / "data"
    else:
        from bench_tutorial import extract

        root = extract(c.archive, c.work / ("tiny-data" if c.dry else "data"))
    rows, problems = {}, []
    for label, extra in (("cuda:0", {}), ("cpu", {"CUDA_VISIBLE_DEVICES": ""})):
        r = c.run([c.py, c.reference, root], 180, env={"EPOCHS": "1", "MAX_STEPS": steps, **extra})
        if r is None:
            continue
        m, acc = REF_LINE.search(r["output"]), REF_ACC.search(r["output"])
        why = broke(r, f"the tutorial on {label}") or (None if m and acc else
                                                       f"the tutorial on {label}: no figures line")
        if why:
            problems.append(why)
            continue
        rows[label] = {"steps": int(m[1]), "train_s": float(m[2]), "steps_per_s": float(m[3]),
                       "eval_s": float(m[4]), "accuracy": float(acc[1]) / 100}
    if c.plan:
        return {}
    ratio = (rows["cuda:0"]["steps_per_s"] / rows["cpu"]["steps_per_s"]
             if len(rows) == 2 else None)
    measured = "; ".join(f"{k}: {v['steps_per_s']:,.1f} steps/s ({v['steps']} steps in "
                         f"{v['train_s']:.1f} s, eval {v['eval_s']:.1f} s)"
                         for k, v in rows.items())
    if ratio:
        measured += f"; cuda:0 / cpu = {ratio:.2f}x"
    return {"problems": problems, "figures": {"runs": rows, "ratio": ratio},
            "measured": measured + (" (no CUDA here: both on the CPU)" if c.dry else "")}


def step_ray(c) -> dict:
    size = (["--device", "cpu", "--runs", "2", "--subset", "128", "--warm-subset", "32",
             "--start-timeout", "600"]
            if c.dry else ["--device", c.device, "--runs", "4", "--subset", "10000"])
    # a loaded shared CPU can take minutes to start Ray's processes: Ray's own waits, longer
    slow = {"RAY_agent_register_timeout_ms": "600000", "RAY_raylet_start_wait_time_s": "600",
            "RAY_worker_register_timeout_seconds": "600"} if c.dry else None
    out = c.work / "ray_share.json"
    r = c.run([c.py, "bench/bench_ray_share.py", "--data", c.archive, "--json", out, *size], 240,
              env=slow)
    if r is None:
        return {}
    problems = [p for p in [broke(r, "bench_ray_share")] if p]
    if not out.is_file():
        return {"problems": problems + ["bench_ray_share wrote no figures"], "measured": ""}
    doc = json.loads(out.read_text(encoding="utf-8"))
    n = doc["runs_at_once"]
    measured = (f"one alone {doc['alone']['aggregate_images_per_s']:,.0f} images/s; {n} at once "
                f"{doc['together']['aggregate_images_per_s']:,.0f} images/s together "
                f"(x{doc['speedup']:.2f}), each {doc['per_run_images_per_s_median']:,.0f}; "
                f"each asked Ray for {doc['asks']}")
    return {"problems": problems, "figures": doc, "measured": measured,
            "goal_met": None if c.dry else doc["speedup"] > 1.0}


def step_profile(c) -> dict:
    graphs, fast = c.results.get("graphs", {}), c.results.get("gpu_fast", {})
    small = c.dry   # tiny sizes on the CPU: proves the script, measures nothing owed
    jobs = []
    if c.dry or c.plan or graphs.get("goal_met") is False or c.args.profile:
        batch4 = ["--batch-size", "4", "--pipeline", "fast", "--subset", "64" if small else "2000"]
        jobs += [batch4, batch4 + ["--cuda-graphs"]]
    if c.dry or c.plan or fast.get("goal_met") is False or c.args.profile:
        jobs.append(["--preset", "gpu_fast"] + (["--subset", "32", "--batch-size", "16",
                                                 "--warm-subset", "16"]
                                                if small else ["--subset", "10240"]))
    if not jobs:
        return {"skipped": "every goal of steps 2 and 5 was met"}
    if c.plan:
        print("  (only for a goal missed in step 2 or 5)")
    problems, ran = [], 0
    for job in jobs:
        r = c.run([c.py, "bench/profile_train.py", "--device", c.device, "--data", c.archive,
                   *job], 120)
        if r is not None and r["no_time"]:   # the owed steps came first; a profile may not fit
            print("  (no time left for this profile)", flush=True)
        elif r is not None:
            ran += 1
            problems += [p for p in [broke(r, "profile " + " ".join(job))] if p]
    return {} if c.plan else {"problems": problems,
                              "measured": f"{ran} profile(s) in the log (gpu-check.log)"}


RUNNERS = {"pytest": step_pytest, "graphs": step_graphs, "gpu_fast": step_gpu_fast,
           "tutorial": step_tutorial, "ray": step_ray, "profile": step_profile}
