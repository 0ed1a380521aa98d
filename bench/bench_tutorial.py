"""The tutorial as written vs CIFAR Lab's CLI, at the same settings, one after the other.

    python bench/bench_tutorial.py                 # 2 epochs at batch 4 (the tutorial's settings)
    python bench/bench_tutorial.py --epochs 1 --repeats 2
    python bench/bench_tutorial.py --markdown      # also print a table for docs/benchmarks.md

Runs ../shared/reference/tutorial_offline.py (the baseline every speed claim is measured against)
on an extracted copy of the archive, then ``python -m cifarlab train`` with the ``fast`` and the
``tutorial`` pipelines, and prints the steps/s ratios and the test accuracies. Absolute times on
shared machines drift, so only ratios measured in the same run are compared.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REFERENCE = SHARED / "reference" / "tutorial_offline.py"
ARCHIVE = Path(os.environ.get("CIFARLAB_DATA") or SHARED / "data" / "cifar10-jpeg.tar.gz")


def extract(archive: Path, dest: Path) -> Path:
    marker = dest / ".complete"
    if not marker.exists():
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
        marker.touch()
    roots = [p.parent for p in dest.rglob("train") if p.is_dir()]
    return roots[0]


def run_reference(root: Path, epochs: int, device: str) -> dict:
    env = {**os.environ, "EPOCHS": str(epochs), "PYTHONUNBUFFERED": "1"}
    if device == "cpu":  # the reference picks cuda:0 whenever it sees one
        env["CUDA_VISIBLE_DEVICES"] = ""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(REFERENCE), str(root)], env=env, check=True,
                         capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    m = re.search(r"steps=(\d+) train_s=([\d.]+) steps_per_s=([\d.]+) eval_s=([\d.]+)", out)
    acc = re.search(r"test images: ([\d.]+) %", out)
    return {"name": "reference (tutorial as written)", "steps": int(m[1]),
            "train_s": float(m[2]), "steps_per_s": float(m[3]),
            "accuracy": float(acc[1]) / 100, "wall_s": wall}


def run_cli(pipeline: str, epochs: int, tmp: Path, device: str) -> dict:
    args = [sys.executable, "-m", "cifarlab", "train", "--epochs", str(epochs), "--batch-size",
            "4", "--num-workers", "2", "--pipeline", pipeline, "--device", device,
            "--data", str(ARCHIVE), "--out", str(tmp / f"bench-{pipeline}.pth"), "--json"]
    t0 = time.perf_counter()
    out = subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - t0
    doc = json.loads(out.strip().splitlines()[-1])
    return {"name": f"cifarlab --pipeline {pipeline}", "steps": doc["steps"],
            "train_s": doc["train_seconds"], "steps_per_s": doc["steps_per_second"],
            "accuracy": doc["test_accuracy"], "wall_s": wall,
            "data_wait_s": doc["data_wait_seconds"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="alternate reference/ours this often")
    ap.add_argument("--workdir", default="/tmp/cifarlab-bench")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda:0 (the reference then "
                    "uses cuda:0 too, as the tutorial's GPU lesson does)")
    args = ap.parse_args()
    if not REFERENCE.exists() or not ARCHIVE.exists():
        print(f"error: needs {REFERENCE} and {ARCHIVE}", file=sys.stderr)
        return 2
    work = Path(args.workdir)
    root = extract(ARCHIVE, work / "data")
    # decode-once cache warm before timing (not part of either measurement)
    subprocess.run([sys.executable, "-m", "cifarlab", "data", "--data", str(ARCHIVE), "--json"],
                   cwd=ROOT, check=True, capture_output=True)
    import torch
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"python {platform.python_version()}, torch {torch.__version__}; epochs={args.epochs}, "
          f"batch 4, num_workers 2, device {args.device}"
          + (f" ({torch.cuda.get_device_name(0)})" if args.device.startswith("cuda") else ""),
          flush=True)
    rows = []
    for r in range(args.repeats):
        for fn in (lambda: run_reference(root, args.epochs, args.device),
                   lambda: run_cli("fast", args.epochs, work, args.device),
                   lambda: run_cli("tutorial", args.epochs, work, args.device)):
            row = fn()
            row["repeat"] = r + 1
            rows.append(row)
            print(f"  [{r + 1}] {row['name']:<34} {row['steps_per_s']:8.1f} steps/s  "
                  f"train {row['train_s']:6.1f} s  accuracy {100 * row['accuracy']:.2f} %",
                  flush=True)
    by = {}
    for row in rows:
        by.setdefault(row["name"], []).append(row)
    ref = by["reference (tutorial as written)"]
    ref_sps = statistics.median(x["steps_per_s"] for x in ref)
    print("\nsummary (median over repeats; ratio = steps/s ÷ reference's steps/s in this run)")
    table = []
    for name, rs in by.items():
        sps = statistics.median(x["steps_per_s"] for x in rs)
        acc = sum(x["accuracy"] for x in rs) / len(rs)
        table.append((name, sps, sps / ref_sps, acc))
        print(f"  {name:<34} {sps:8.1f} steps/s  ×{sps / ref_sps:4.2f}  accuracy {100 * acc:.2f} %")
    if args.markdown:
        print("\n| run | steps/s | × reference | test accuracy |\n|---|---:|---:|---:|")
        for name, sps, ratio, acc in table:
            print(f"| {name} | {sps:.1f} | {ratio:.2f} | {100 * acc:.2f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
