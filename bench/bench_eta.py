"""How far off the Train page's "time left" is at a quarter of a run, quiet and loaded.

    python bench/bench_eta.py            # 2 epochs of 4,000 images, the tutorial's knobs
    python bench/bench_eta.py --subset 8000 --repeats 3 --burners 2

A small real run (the tutorial's settings: batch 4, two loader workers, the tutorial's
pipeline, on the CPU) is trained by ``core.train.train`` in this process; every progress event
it sends is kept. At the first event past 25 % (and 50 %) of the steps, the time left is
estimated twice: by ``cifarlab.lab.eta.estimate`` (the run's own speed since its start-up mark:
what the pages show) and by the whole-run average the pages used before (steps left × elapsed ÷
steps done). Each is compared with the training time that was really left (the last event's
``elapsed_s`` minus that event's): error = estimate ÷ truth − 1.

Three conditions, in turn, ``--repeats`` times:
  quiet:   nothing of this script's besides the run (the machine may be shared: load printed);
  loaded:  ``--burners`` processes spinning on the CPU for the whole run;
  arrives: the same burners started only when the run reaches 40 %, after the quarter's estimate
           (no estimate made at a quarter can know that: it shows how wrong one then is).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_ARCHIVE = ROOT.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"

from cifarlab.core import data as data_mod
from cifarlab.core.config import TrainConfig
from cifarlab.core.train import train
from cifarlab.lab import eta


def burn() -> None:
    while True:
        pass


class Burners:
    def __init__(self, n: int):
        self.n, self.procs = n, []

    def start(self) -> None:
        for _ in range(self.n):
            p = mp.get_context("fork").Process(target=burn, daemon=True)
            p.start()
            self.procs.append(p)

    def stop(self) -> None:
        for p in self.procs:     # only the processes this script started
            p.terminate()
            p.join()
        self.procs = []


def one_run(config: TrainConfig, data, condition: str, burners: Burners) -> dict:
    events = []

    def on_event(ev):
        if ev.kind != "progress":
            return
        events.append(dict(ev.data))
        p = ev.data
        if condition == "arrives" and not burners.procs and p["step"] >= 0.4 * p["total_steps"]:
            burners.start()

    if condition == "loaded":
        burners.start()
    try:
        train(config, data, on_event=on_event, evaluate_after=False)
    finally:
        burners.stop()
    end = events[-1]["elapsed_s"]
    out = {"condition": condition, "train_s": end}
    for share in (0.25, 0.5):
        p = next(e for e in events if e["step"] >= share * e["total_steps"])
        truth = end - p["elapsed_s"]
        est = eta.estimate(None, None, progress=p)
        steady = est["left_s"] if est["kind"] == "run" else None
        naive = (p["total_steps"] - p["step"]) * p["elapsed_s"] / p["step"]
        out[share] = {"truth": truth, "steady": steady, "naive": naive,
                      "err_steady": None if steady is None else steady / truth - 1,
                      "err_naive": naive / truth - 1}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(DEFAULT_ARCHIVE))
    ap.add_argument("--subset", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--burners", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    config = TrainConfig(epochs=args.epochs, train_subset=args.subset, device="cpu")
    data = data_mod.load(args.data)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"load average before: {os.getloadavg()[0]:.2f}; {args.epochs} epochs × "
          f"{args.subset} images, batch {config.batch_size}, {config.num_workers} loader "
          f"workers; {args.burners} burners")
    burners, rows = Burners(args.burners), []
    for r in range(args.repeats):
        for condition in ("quiet", "loaded", "arrives"):
            row = one_run(config, data, condition, burners)
            rows.append(row)
            q = row[0.25]
            print(f"  {r + 1} {condition:8s} train {row['train_s']:6.1f} s · at 25 %: truth "
                  f"{q['truth']:6.1f} s, steady {q['steady'] or float('nan'):6.1f} s "
                  f"({100 * (q['err_steady'] or float('nan')):+5.1f} %), whole-run average "
                  f"{q['naive']:6.1f} s ({100 * q['err_naive']:+5.1f} %) · at 50 %: steady "
                  f"{100 * (row[0.5]['err_steady'] or float('nan')):+5.1f} %, average "
                  f"{100 * row[0.5]['err_naive']:+5.1f} %", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("median |error| at 25 % (50 %): steady speed vs whole-run average")
    for condition in ("quiet", "loaded", "arrives"):
        mine = [x for x in rows if x["condition"] == condition]

        def med(share, key, mine=mine):
            vals = [abs(x[share][key]) for x in mine if x[share][key] is not None]
            return 100 * statistics.median(vals) if vals else float("nan")
        print(f"  {condition:8s} {med(0.25, 'err_steady'):5.1f} % ({med(0.5, 'err_steady'):4.1f} %)"
              f"  vs  {med(0.25, 'err_naive'):5.1f} % ({med(0.5, 'err_naive'):4.1f} %)")


if __name__ == "__main__":
    main()
