"""Eager vs graphed training steps on a CUDA GPU (issue 13, "the overhead lesson").

    python bench/bench_graphs.py                       # batch 4, 64, 1024; the tutorial's 2 epochs
    python bench/bench_graphs.py --data PATH           # the epochs on real CIFAR-10, else synthetic
    python bench/bench_graphs.py --no-epochs --batch-sizes 4,16

1. Steps/s of the ``fast`` pipeline's training step, launched kernel by kernel (eager) and
   replayed as one CUDA graph (``cifarlab.core.graphs``), at each batch size, width 1, on the CPU
   and each CUDA device: a timing sweep (``cifarlab.lab.gpu.run_sweep`` with ``graphed=True``:
   warm-up apart, the device synchronised before every clock read, median of the repeats), saved
   as a recording the CPU vs GPU page shows, "GPU, graphed" series included:
   docs/gpu-results/graphs-<gpu>-<date>.json and .csv.
2. The tutorial's two epochs (batch 4, lr 0.001, momentum 0.9, the ``fast`` pipeline) trained
   eagerly, then graphed, with the same seed: train seconds, steps/s, test accuracy, and how far
   apart the two runs' step losses and final weights are (the same numbers within floating-point
   tolerance). Written with the machine and versions to docs/gpu-results/graphs-<gpu>-<date>.log.

On a machine without CUDA it says it needs one and exits 0: there is nothing to measure.
``--dry-cpu`` runs the same code on the CPU with whatever small settings are given (no graphed
series: the CPU trains eagerly, with the reason in the run's events), to try the script itself.
"""
from __future__ import annotations

import argparse
import datetime as dt
import io
import platform
import sys
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np
import torch

from cifarlab.core.config import CIFAR10_CLASSES, TrainConfig
from cifarlab.core.data import CifarData
from cifarlab.core.train import train
from cifarlab.lab.gpu.config import SweepConfig
from cifarlab.lab.gpu.measure import run_sweep
from cifarlab.lab.gpu.cli import summary_lines, table_printer, sweep_files


def synthetic_cifar(n_train: int = 50_000, n_test: int = 10_000) -> CifarData:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (n_train + n_test, 3, 32, 32), dtype=np.uint8)
    y = rng.integers(0, 10, n_train + n_test).astype(np.int64)
    return CifarData(x[:n_train], y[:n_train], x[n_train:], y[n_train:], CIFAR10_CLASSES,
                     "synthetic", "synthetic")


def two_epochs(data: CifarData, device: str, epochs: int) -> list[str]:
    """The tutorial's run eagerly, then graphed: figures and the largest differences."""
    runs = {}
    for graphed in (False, True):
        notes: list[dict] = []
        config = TrainConfig(epochs=epochs, batch_size=4, pipeline="fast", device=device,
                             cuda_graphs=graphed)
        result = train(config, data, on_event=lambda e, notes=notes: notes.append(e.data)
                       if e.kind == "graphs" else None)
        runs[graphed] = (result, notes)
    lines = []
    for graphed, (r, notes) in runs.items():
        lines.append(f"{'graphed' if graphed else 'eager  '}: {r.steps} steps in "
                     f"{r.train_seconds:.2f} s, {r.steps_per_second:,.0f} steps/s, "
                     f"test accuracy {100 * r.eval.accuracy:.2f} %"
                     + (f"; graph notes: {notes}" if graphed else ""))
    (eager, _), (graph, _) = runs[False], runs[True]
    diff = np.abs(np.array(eager.losses) - np.array(graph.losses))
    weights = max(float((a - b).abs().max()) for a, b in zip(
        eager.model.state_dict().values(), graph.model.state_dict().values()))
    lines.append(f"graphed / eager steps/s: {graph.steps_per_second / eager.steps_per_second:.2f}x;"
                 f" step losses: max |diff| {diff.max():.3g} (mean {diff.mean():.3g}); final "
                 f"weights: max |diff| {weights:.3g}")
    return lines


def has_cuda() -> bool:
    return torch.cuda.is_available()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--batch-sizes", default="4,64,1024")
    p.add_argument("--steps", type=int, default=200, help="timed steps per repeat")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-seconds", type=float, default=5.0, help="time budget per point")
    p.add_argument("--epochs", type=int, default=2, help="the tutorial's run: its 2 epochs")
    p.add_argument("--no-epochs", action="store_true", help="skip the tutorial's run")
    p.add_argument("--data", default=None, help="CIFAR-10 for the epochs (else synthetic images)")
    p.add_argument("--out-dir", default=str(ROOT / "docs" / "gpu-results"))
    p.add_argument("--dry-cpu", action="store_true",
                   help="no CUDA: run the script on the CPU alone "
                        "(tries it; measures nothing owed)")
    args = p.parse_args(argv)
    if args.dry_cpu:
        args.device = "cpu"
    elif not has_cuda():
        print("bench_graphs needs a CUDA GPU: CUDA graphs replay GPU work, and this machine has "
              "none. Nothing measured.")
        return 0

    cfg = SweepConfig(devices=tuple(dict.fromkeys(("cpu", args.device))),
                          batch_sizes=tuple(int(b) for b in args.batch_sizes.split(",")),
                          widths=(1,), pipelines=("fast",), steps=args.steps, warmup=10,
                          repeats=args.repeats, max_seconds=args.max_seconds, num_workers=0,
                          graphed=True)
    log = io.StringIO()
    # <gpu>-<date>.json/.csv as `bench --sweep` names them, with "graphs-" in front
    json_path, csv_path = (p.with_name("graphs-" + p.name)
                           for p in sweep_files(list(cfg.devices), args.out_dir))

    def say(line: str = "") -> None:
        print(line, flush=True)
        log.write(line + "\n")

    say(f"bench_graphs {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')}")
    say(f"python {platform.python_version()}, torch {torch.__version__}, CUDA "
        f"{torch.version.cuda}, " + (torch.cuda.get_device_name(args.device) if not args.dry_cpu
                                     else "--dry-cpu: the CPU alone, nothing owed measured"))
    buf = io.StringIO()
    with redirect_stdout(buf):
        result = run_sweep(cfg, on_result=table_printer(), save_to=[json_path, csv_path])
    say(buf.getvalue().rstrip())
    for line in summary_lines(result):
        say(line)
    say(f"recording: {json_path} (and .csv)")

    if not args.no_epochs:
        data, what = None, "synthetic images (accuracy means nothing)"
        if args.data:
            from cifarlab.core import data as data_mod

            data, what = data_mod.load(args.data), f"CIFAR-10 from {args.data}"
        say(f"the tutorial's {args.epochs} epochs, batch 4, fast pipeline, {what}:")
        for line in two_epochs(data or synthetic_cifar(), args.device, args.epochs):
            say("  " + line)
    json_path.with_suffix(".log").write_text(log.getvalue(), encoding="utf-8")
    print(f"log: {json_path.with_suffix('.log')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
