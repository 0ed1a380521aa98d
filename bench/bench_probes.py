"""What watching inside training costs: the tutorial's training steps per second with the
layer probes on (core/probes.py: a sample every ``probe_every`` steps) and off, at batch 4.

    python bench/bench_probes.py                      # 6 rounds of 1,500 steps each way
    python bench/bench_probes.py --rounds 10 --steps 3000 --every 20

``--every``: steps between two samples; by default the tutorial's own (an epoch of 12,500
steps at batch 4 gives a sample every 250 steps), whatever the length of the timed run.

Both in this one process, the same seed and data, rounds alternating which goes first, so the
machine's load touches both alike; reported: each round's ratio (off / on steps per second) and
their median, with the samples taken. Target: the probes cost at most 3 % of steps per second.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cifarlab.core import data as data_mod
from cifarlab.core import probes
from cifarlab.core.config import TrainConfig
from cifarlab.core import train as train_mod
from cifarlab.core.train import train


def one(config: TrainConfig, data, probed: bool) -> tuple[float, int]:
    """(steps per second, samples taken) of one run."""
    due = probes.Probe.due
    if not probed:
        probes.Probe.due = lambda self, step: False
    samples = []
    try:
        result = train(config, data, evaluate_after=False,
                       on_event=lambda e: samples.append(1) if e.kind == "inside" else None)
    finally:
        probes.Probe.due = due
    return result.steps_per_second, len(samples)


def direct(batch_size: int, every: int, n: int = 3000) -> dict:
    """The same cost from its two parts, each timed alone (far less noisy than whole runs on a
    shared machine): one training step, and one probe sample, of the tutorial's Net."""
    import time

    import torch

    from cifarlab.core.model import Net
    from cifarlab.core.train import train_step

    torch.manual_seed(0)
    model, criterion = Net(), torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    x, y = torch.randn(batch_size, 3, 32, 32), torch.randint(0, 10, (batch_size,))
    probe = probes.Probe(model, every)
    for _ in range(200):
        train_step(model, criterion, opt, x, y)
        probe.sample(0, x)
    t0 = time.perf_counter()
    for _ in range(n):
        train_step(model, criterion, opt, x, y)
    step = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n // 10):
        probe.sample(0, x)
    sample = (time.perf_counter() - t0) / (n // 10)
    return {"step_ms": 1e3 * step, "sample_ms": 1e3 * sample,
            "cost_pct": 100 * sample / (every * step + sample)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--every", type=int, default=probes.probe_every(50_000 // 4))
    p.add_argument("--data", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    data = data_mod.load(args.data)
    train_mod.probe_every = lambda steps_per_epoch: args.every
    # the tutorial's loop and pipeline (num_workers 0: no loader processes to disturb the clock)
    config = TrainConfig(epochs=1, batch_size=args.batch_size, num_workers=0,
                         train_subset=args.steps * args.batch_size)
    one(config, data, True)                     # warm-up: first-touch costs, both paths
    rows = []
    for r in range(args.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        got = {probed: one(config, data, probed) for probed in order}
        (on, n), (off, _) = got[True], got[False]
        rows.append({"round": r + 1, "on_steps_per_s": on, "off_steps_per_s": off,
                     "cost_pct": 100 * (off - on) / off, "samples": n})
        print(f"round {r + 1}: off {off:.1f} steps/s, on {on:.1f} steps/s "
              f"({rows[-1]['cost_pct']:+.2f} %), {n} samples", flush=True)
    median = statistics.median(row["cost_pct"] for row in rows)
    parts = direct(args.batch_size, args.every)
    print(f"timed apart: a step {parts['step_ms']:.2f} ms, a sample {parts['sample_ms']:.2f} ms: "
          f"{parts['cost_pct']:.2f} % of the steps' time at a sample every {args.every} steps")
    print(f"median cost: {median:+.2f} % of steps/s ({args.steps} steps, batch "
          f"{args.batch_size}, a sample every {args.every} steps)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "median_cost_pct": median,
                                               "timed_apart": parts,
                                               "machine": platform.platform()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
