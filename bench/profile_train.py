"""Where a training run's time goes: ``train()`` under ``torch.profiler``, the top operators.

    python bench/profile_train.py --preset gpu_fast --subset 10240          # cuda:0
    python bench/profile_train.py --batch-size 4 --pipeline fast --subset 2000
    python bench/profile_train.py --batch-size 4 --pipeline fast --cuda-graphs --subset 2000
    python bench/profile_train.py --preset gpu_fast --device cpu --subset 256 --data tiny.tar.gz

Trains the config once unprofiled on a few batches (cuDNN's choices, the first kernels' loading
and any graph capture stay out), then again under the profiler, without the evaluation. Prints:

- the wall time of the profiled training, the GPU's busy time (the kernels' own time summed) and
  their ratio: far under 100 % means the GPU waited for Python, launches or data, not arithmetic;
- the operators that took the most device time, and the most CPU time (self time, top ``--top``).

For a goal that ``bench/gpu_check.sh`` finds missed (graphed ÷ eager at batch 4, the
``gpu_fast`` preset's 15 s): what the time went to, measured, not guessed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from cifarlab.core import data as data_mod
from cifarlab.core.config import PRESETS, TrainConfig
from cifarlab.core.train import train


def _self_device_us(evt) -> float:
    # torch renamed the CUDA columns to "device" ones; read whichever this version has
    for name in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(evt, name, None)
        if value is not None:
            return float(value)
    return 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=list(PRESETS), default=None)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--subset", type=int, default=10240, help="training images")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--pipeline", default=None, choices=("tutorial", "fast"))
    ap.add_argument("--cuda-graphs", action="store_true")
    ap.add_argument("--warm-subset", type=int, default=None,
                    help="images of the unprofiled warm-up run (default: 4 batches)")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--data", default=os.environ.get("CIFARLAB_DATA"))
    args = ap.parse_args(argv)

    base = PRESETS[args.preset] if args.preset else TrainConfig(pipeline="fast", num_workers=0)
    changes = {"device": args.device, "train_subset": args.subset, "epochs": args.epochs}
    if args.batch_size:
        changes["batch_size"] = args.batch_size
    if args.pipeline:
        changes["pipeline"] = args.pipeline
    if args.cuda_graphs:
        changes["cuda_graphs"] = True
    config = base.replace(**changes)
    data = data_mod.load(args.data)
    gpu = config.device.startswith("cuda")
    notes = []
    warm = args.warm_subset or 4 * config.batch_size
    train(config.replace(train_subset=warm, epochs=1), data, evaluate_after=False)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        result = train(config, data, evaluate_after=False,
                       on_event=lambda e: notes.append(e.data) if e.kind == "graphs" else None)
        if gpu:
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    events = prof.key_averages()
    # the kernels' and copies' own entries (an operator's device time repeats its kernels')
    busy_us = sum(_self_device_us(e) for e in events
                  if getattr(e, "device_type", None) == DeviceType.CUDA)
    print(f"profiled: {config.describe()}")
    print(f"  {result.steps} steps in {result.train_seconds:.2f} s of training "
          f"({result.steps_per_second:,.0f} steps/s, {result.images_per_second:,.0f} images/s; "
          f"data wait {result.data_wait_seconds:.2f} s); profiled wall {wall:.2f} s"
          + (f"; graphs: {notes}" if notes else ""))
    if gpu:
        print(f"  GPU busy (kernels' own time summed): {busy_us / 1e6:.2f} s = "
              f"{100 * busy_us / 1e6 / wall:.0f} % of the wall time; "
              f"{1e3 * wall / max(1, result.steps):.3f} ms a step, of which the GPU worked "
              f"{busy_us / 1e3 / max(1, result.steps):.3f} ms")
        print(events.table(sort_by=("self_device_time_total" if hasattr(
            events[0], "self_device_time_total") else "self_cuda_time_total"),
            row_limit=args.top, max_name_column_width=48))
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.top,
                       max_name_column_width=48))
    return 0


if __name__ == "__main__":
    sys.exit(main())
