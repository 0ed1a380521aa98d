"""The live view's run-store reads per second, on SQLite and on PostgreSQL.

    python bench/bench_store.py                      # 1 and 8 readers, 5 s each, both backends
    python bench/bench_store.py --readers 1,4,16 --seconds 10 --json out.json

One poll of the Train page's live fragment reads what ``pages/train.py``'s ``live`` reads for a
watched run: the session's runs (``list_runs``), then the run and its new events, the run and
its new losses (``JobQueue.events`` / ``losses`` look the run up each time). N reader threads
(one per watching page; each a page's poll, back to back, with no pause) poll a run that a
writer thread keeps training as a worker does (a batch of 25 step losses and a progress
every 0.25 s). Reported: polls per second in all (and store queries: 5 per poll), and each
poll's p50 and p95 time.

PostgreSQL: a server of its own started for the benchmark (tests/pg_support.py: PostgreSQL 15
from the machine's packages, ``fsync`` off as in the tests), on loopback; SQLite: a file in a
temporary folder (WAL). Both in this one process, one after the other per round, rounds
alternating the order, so the machine's load touches both alike.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from cifarlab.serve.store import RunStore

SESSION = "bench-watcher-0001"


def writer(store: RunStore, run_id: str, stop: threading.Event) -> None:
    step = 0
    while not stop.wait(0.25):
        steps = list(range(step + 1, step + 26))
        step = steps[-1]
        store.record(run_id, steps=steps, losses=[1.0 / s for s in steps],
                     progress={"step": step, "total_steps": 10 ** 9})


def poll(store: RunStore, cursor: dict) -> None:
    runs = store.list_runs(SESSION, None, kind="train")
    run_id = runs[0].id
    store.get(run_id)
    events = store.events(run_id, since_seq=cursor.get("seq", 0))
    if events:
        cursor["seq"] = events[-1].seq
    store.get(run_id)
    steps, _ = store.losses(run_id, since_step=cursor.get("step", 0))
    if steps:
        cursor["step"] = steps[-1]


def measure(store: RunStore, readers: int, seconds: float) -> dict:
    run_id = store.create_run(SESSION, "train", {}, "cpu")
    store.set_status(run_id, "running", worker_pid=os.getpid())
    stop = threading.Event()
    w = threading.Thread(target=writer, args=(store, run_id, stop), daemon=True)
    w.start()
    times: list[float] = []
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def reader() -> None:
        cursor: dict = {}
        mine = []
        while time.monotonic() < end:
            t0 = time.perf_counter()
            poll(store, cursor)
            mine.append(time.perf_counter() - t0)
        with lock:
            times.extend(mine)

    threads = [threading.Thread(target=reader) for _ in range(readers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    stop.set()
    w.join()
    store.set_status(run_id, "done", only_from=["running"])
    times.sort()
    return {"readers": readers, "polls_per_s": len(times) / elapsed,
            "queries_per_s": 5 * len(times) / elapsed,
            "p50_ms": 1000 * statistics.median(times),
            "p95_ms": 1000 * times[int(0.95 * (len(times) - 1))]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readers", default="1,8")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    from pg_support import Postgres, bin_dir

    bins = bin_dir()
    if bins is None:
        print("PostgreSQL is not installed here", file=sys.stderr)
        return 1
    pg = Postgres(bins)
    pg.start()
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
            stores = {"sqlite": RunStore(Path(tmp) / "runs.db", Path(tmp) / "ck"),
                      "postgresql": RunStore(pg.url(pg.new_schema()), Path(tmp) / "ck")}
            order = list(stores)
            for rnd in range(args.rounds):
                for n in [int(x) for x in args.readers.split(",")]:
                    for backend in (order if rnd % 2 == 0 else order[::-1]):
                        row = measure(stores[backend], n, args.seconds)
                        row.update(backend=backend, round=rnd)
                        rows.append(row)
                        print(f"round {rnd} {backend:10s} readers {n:3d}: "
                              f"{row['polls_per_s']:8.0f} polls/s  {row['queries_per_s']:8.0f} "
                              f"queries/s  p50 {row['p50_ms']:6.2f} ms  p95 "
                              f"{row['p95_ms']:6.2f} ms", flush=True)
    finally:
        pg.cleanup()
    print("\nmedian over rounds")
    for n in [int(x) for x in args.readers.split(",")]:
        for backend in ("sqlite", "postgresql"):
            rs = [r for r in rows if r["backend"] == backend and r["readers"] == n]
            print(f"{backend:10s} readers {n:3d}: "
                  f"{statistics.median(r['polls_per_s'] for r in rs):8.0f} polls/s, p95 "
                  f"{statistics.median(r['p95_ms'] for r in rs):6.2f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": platform.node(), "cpus": os.cpu_count(),
                                               "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
