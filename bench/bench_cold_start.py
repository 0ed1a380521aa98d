"""How soon a run shows its first loss when no warm worker is waiting: workers forked from the
fork server (torch imported there once) vs spawned (each imports torch itself).

    python bench/bench_cold_start.py              # 3 rounds, 3 runs each, both start methods

Each round starts a fresh Python process per start method (so the fork server's own start, which
imports torch once, is in its first run), with a JobQueue without spare workers, and submits
``--runs`` small runs one after the other: submit → first step loss in the run store. The
methods alternate, round by round, on the same machine: compare them within a round.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_ARCHIVE = ROOT.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"


def one(method: str, runs: int, data: str) -> list[float]:
    """In this process: ``runs`` cold starts with workers started by ``method``."""
    import multiprocessing

    from cifarlab.core.config import TrainConfig
    from cifarlab.serve import local_executor
    from cifarlab.serve.queue import JobQueue
    from cifarlab.serve.settings import load_settings

    if method == "spawn":
        local_executor.context = lambda: multiprocessing.get_context("spawn")
    config = TrainConfig(epochs=1, train_subset=500, pipeline="fast")
    with tempfile.TemporaryDirectory() as home:
        settings = dataclasses.replace(load_settings(), home=Path(home), spare_workers=0,
                                       data=data)
        queue = JobQueue(settings=settings)
        try:
            out = []
            for _ in range(runs):
                t0 = time.perf_counter()
                run_id = queue.submit("bench-cold-0001", config)
                while not queue.store.loss_count(run_id):
                    time.sleep(0.002)
                out.append(time.perf_counter() - t0)
                queue.wait(run_id, timeout=300)
            return out
        finally:
            queue.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("CIFARLAB_DATA") or str(DEFAULT_ARCHIVE))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--one", choices=["spawn", "forkserver"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.runs, args.data)))
        return 0
    got: dict[str, list[list[float]]] = {"spawn": [], "forkserver": []}
    for r in range(args.rounds):
        for method in got:
            proc = subprocess.run([sys.executable, __file__, "--one", method, "--runs",
                                   str(args.runs), "--data", args.data],
                                  capture_output=True, text=True, cwd=ROOT, check=True)
            times = json.loads(proc.stdout.strip().splitlines()[-1])
            got[method].append(times)
            print(f"round {r + 1} {method:10s} submit → first loss: "
                  + ", ".join(f"{s:.2f} s" for s in times), flush=True)
    for method, rounds in got.items():
        first = [t[0] for t in rounds]
        later = [s for t in rounds for s in t[1:]]
        print(f"{method:10s} first run median {statistics.median(first):.2f} s; "
              f"later runs median {statistics.median(later):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
