"""What bench/gpu_check.py writes: the header, ``summary.md`` and ``results.json``.

The summary is a table, one row a step: its status (ok, FAILED, skipped), what it measured,
its goal and whether the goal was met. A missed goal is a row that says "no", never a failure.
"""
from __future__ import annotations

import json
from pathlib import Path

TITLES = {
    "pytest": "pytest tests/test_cuda.py tests/test_graphs.py",
    "graphs": "CUDA graphs: bench/bench_graphs.py",
    "gpu_fast": "the gpu_fast preset, three runs",
    "tutorial": "the tutorial as written, cuda:0 then the CPU",
    "ray": "Ray, gpu_share = 4: four runs at once against one alone",
    "profile": "profiles of what missed a goal",
}
GOAL_TEXT = {
    "pytest": "all pass on CUDA; no CUDA test skipped",
    "graphs": "graphed >= 5x eager steps/s at batch 4",
    "gpu_fast": ">= 93 % test accuracy in <= 15 s of training, each run",
    "tutorial": "none: the baseline (steps/s, same call)",
    "ray": "four at once above one alone (aggregate images/s)",
    "profile": "none: where the time went",
}


def header(env: dict, dry: bool, budget: float) -> str:
    gpu = (f"{env['gpu']}; driver {env.get('driver')}; {env.get('nvidia_smi') or ''}"
           if env.get("gpu") else "no CUDA GPU")
    mode = " (--dry-cpu: every step on the CPU, tiny; nothing owed is measured)" if dry else ""
    return (f"gpu_check {env.get('started_utc')} on {env.get('host')}{mode}\n"
            f"  {gpu}\n"
            f"  python {env.get('python')}, torch {env.get('torch')}, CUDA {env.get('cuda')}, "
            f"cuDNN {env.get('cudnn')}, torchvision {env.get('torchvision')}, ray "
            f"{env.get('ray')}, babel {env.get('babel')}; {env.get('cpu_count')} cores\n"
            f"  data {env.get('archive')}; reference {env.get('reference')}; "
            f"budget {budget:.0f} s")


def _met(value) -> str:
    return "—" if value is None else "yes" if value else "**no**"


def summary(env: dict, results: dict, dry: bool, elapsed: float) -> str:
    failed = [k for k, r in results.items() if r["status"] == "FAILED"]
    missed = [k for k, r in results.items() if r.get("goal_met") is False]
    lines = [f"# GPU check, {env.get('started_utc')}" + (" (dry run on the CPU)" if dry else ""),
             "",
             (f"{env['gpu']}; driver {env.get('driver')}; " if env.get("gpu")
              else "no CUDA GPU; ") + f"python "
             f"{env.get('python')}, torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN "
             f"{env.get('cudnn')}, ray {env.get('ray')}; {env.get('cpu_count')} cores; "
             f"{elapsed:.0f} s in all.",
             "",
             "| step | status | s | measured | goal | met |",
             "|---|---|---:|---|---|---|"]
    for key, r in results.items():
        measured = r.get("measured") or r.get("skipped") or ""
        if r.get("problems"):
            measured = (measured + " — " if measured else "") + "; ".join(r["problems"])
        lines.append(f"| {key} | {r['status']} | {r.get('seconds', 0):.0f} | "
                     f"{measured.replace('|', chr(92) + '|')} | {GOAL_TEXT[key]} | "
                     f"{_met(r.get('goal_met'))} |")
    lines += ["", ("FAILED: " + ", ".join(failed) + " (exit 1)") if failed
              else "Every step ran and checked out (exit 0).",
              ("Goals missed (measured, not failures): " + ", ".join(missed)) if missed
              else ("" if dry else "No goal missed.")]
    return "\n".join(lines).rstrip() + "\n"


def write(out: Path, env: dict, results: dict, dry: bool, elapsed: float) -> str:
    """summary.md and results.json in ``out`` (rewritten after every step); the summary."""
    text = summary(env, results, dry, elapsed)
    (out / "summary.md").write_text(text, encoding="utf-8")
    doc = {"environment": env, "dry_cpu": dry, "elapsed_s": round(elapsed, 1), "steps": results}
    (out / "results.json").write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    return text


def plan_footer(env: dict) -> str:
    have = {k: env.get(k) for k in ("ray", "babel")}
    lacking = [k for k, v in have.items() if not v]
    return ("Exit 0: nothing run. On the GPU machine the image lacks ray and babel: "
            "bench/gpu_pack.sh packs them (with the data and the reference) into .devtree/, "
            "the one path the device call carries; docs/gpu-results/README.md has the call."
            + (f"\nNot importable here either: {', '.join(lacking)}." if lacking else ""))
