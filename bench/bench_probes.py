"""What watching inside training costs: the tutorial's training steps per second with the
layer probes on (core/probes.py: a sample every ``probe_every`` steps) and off, at batch 4.

    python bench/bench_probes.py                      # 6 rounds of 1,500 steps each way
    python bench/bench_probes.py --rounds 10 --steps 3000 --batch-size 4

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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--data", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    data = data_mod.load(args.data)
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
    print(f"median cost: {median:+.2f} % of steps/s ({args.steps} steps, batch "
          f"{args.batch_size}, a sample every {probes.probe_every(args.steps)} steps)")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "median_cost_pct": median,
                                               "machine": platform.platform()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
