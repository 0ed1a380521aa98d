"""What the learning-rate finder costs: its sweep against a training run of the same number of
steps on the same settings, in this process, one torch thread (a worker's ``worker_threads``).

    python bench/bench_lr_finder.py                 # 100 and 200 steps, two settings, 3 repeats
    python bench/bench_lr_finder.py --steps 200 --repeats 5

The sweep (``core.lr_finder.find_lr``, lr 1e-5 .. 10, never stopped early here: ``DIVERGE`` is
raised for the measurement) and ``core.train.train`` (one epoch over ``steps × batch`` images,
no evaluation, no checkpoint) each build their network, optimizer and loader, then step. The
ratio is the sweep's wall time over the training's, medians of the repeats, taken in turns.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_ARCHIVE = ROOT.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"

import torch

from cifarlab.core import data as data_mod
from cifarlab.core import lr_finder
from cifarlab.core.config import TrainConfig
from cifarlab.core.train import train

SETTINGS = {
    "tutorial (batch 4, 2 workers)": TrainConfig(device="cpu"),
    "batch 32, fast pipeline": TrainConfig(device="cpu", batch_size=32, pipeline="fast"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CIFARLAB_DATA", str(DEFAULT_ARCHIVE)))
    ap.add_argument("--steps", type=int, nargs="+", default=[100, 200])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = data_mod.load(args.data)
    lr_finder.DIVERGE = float("inf")   # every sweep takes all its steps: like for like
    print(f"# {platform.node()} · {os.cpu_count()} CPUs · torch {torch.__version__} · "
          f"load {os.getloadavg()[0]:.1f}")
    print("| settings | steps | finder (s) | training (s) | finder ÷ training |")
    print("|---|---:|---:|---:|---:|")
    for name, config in SETTINGS.items():
        for steps in args.steps:
            sweep, trained = [], []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                got = lr_finder.find_lr(config, data, steps=steps)
                sweep.append(time.perf_counter() - t0)
                assert got["steps"] == steps, got["stop"]
                t0 = time.perf_counter()
                train(config.replace(epochs=1, train_subset=steps * config.batch_size), data,
                      evaluate_after=False)
                trained.append(time.perf_counter() - t0)
            f, t = statistics.median(sweep), statistics.median(trained)
            print(f"| {name} | {steps} | {f:.2f} | {t:.2f} | {f / t:.2f} |")
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
