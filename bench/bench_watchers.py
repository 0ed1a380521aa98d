"""How many watching students one app server holds, and two replicas on one PostgreSQL.

    python bench/bench_watchers.py                       # 10, 50, 100, 200; one server, 2 replicas
    python bench/bench_watchers.py --watchers 10,50 --setups one --window 10

Setups: ``one``, one app server (``streamlit run server.py``) on its own SQLite run store;
``replicas``, two app servers with the same home and ``CIFARLAB_STORE_URL`` on one PostgreSQL
15 started for the benchmark (tests/pg_support.py), the watchers split half and half, the run
trained by whichever replica dispatches. One ``fast`` CPU run per setup trains while N
protocol watchers (bench/protocol_watcher.py: they ask for the Train page and rerun its live
fragment at the interval the page sets, 2 s while a run trains, and render nothing) watch it;
a new run is queued if it ends. Each N adds watchers to those of the N before, waits (at most
``--connect-timeout``) until each new one has been shown the run, then measures a ``--window``:

- **answer time** (what the gate is on): for each fragment rerun a watcher asked for in the
  window, the time until the server finished it (``script_finished``). This is the server
  keeping up, whatever the page's interval: p50/p95/max, and the share of reruns asked for in
  the window that were answered within ``--grace`` seconds after it. Gate: p95 <= 1 s and
  every rerun answered.
- **update delay** (data freshness, reported): for each progress step the worker wrote in the
  window (the run's ``progress``, whose write time is the run's ``heartbeat``, written in the
  same transaction; polled from the store every 0.1 s) and each watcher, the time until that
  watcher was sent a progress bar showing that step or a later one. It includes the wait for
  the watcher's next poll (up to the 2 s interval), so it is about 1 s at best on average and
  near 2 s at p95 even on an idle server; it cannot be <= 1 s by design.
- the app servers' CPU-seconds per second (all threads; for ``replicas`` both servers, and
  PostgreSQL's processes apart), and this benchmark's own (the watcher clients) CPU-s/s.

The watcher clients share the machine's cores with the servers and the training worker; they
run at nice ``--client-nice`` (a thread's own priority), but what they use is not the
server's, so on a small machine the figures are a lower bound on what the server holds.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bench_live import Budget, add_run_args, queue_run, server_env, versions, wait
from browser_support import StreamlitServer, cpu_seconds
from protocol_watcher import ProtocolWatchers

NUMBER = re.compile(r"\d[\d,]*")


# -- the bookkeeping (pure: tests/test_bench_watchers.py) ------------------------------------
def step_of(text: str) -> int | None:
    """The step in an English progress-bar text ("Step 1,234 of 37,500 · ..."), or None."""
    found = NUMBER.search(text)
    return int(found.group().replace(",", "")) if found else None


def percentile(values, q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of ``values``; nan when empty."""
    xs = sorted(values)
    if not xs:
        return math.nan
    return xs[max(0, math.ceil(q / 100 * len(xs)) - 1)]


def update_delays(written, seen) -> tuple[list[float], int]:
    """For each ``(time, step)`` written, the delay until the first ``(time, step)`` seen at or
    after it with that step or a later one; ([delays], how many were never seen)."""
    seen = sorted(seen)
    # best[i]: the highest step among seen[i:], so the first sight of >= step is a scan
    best, top = [0] * len(seen), -1
    for i in range(len(seen) - 1, -1, -1):
        top = max(top, seen[i][1])
        best[i] = top
    delays, missed = [], 0
    times = [t for t, _ in seen]
    for t_write, step in written:
        i = bisect_left(times, t_write)
        while i < len(seen) and seen[i][1] < step:
            if best[i] < step:
                i = len(seen)
                break
            i += 1
        if i < len(seen):
            delays.append(seen[i][0] - t_write)
        else:
            missed += 1
    return delays, missed


def judge(answers, unanswered: int, delays, missed: int, limit_s: float = 1.0) -> dict:
    """The figures of one N: answer time and update delay (p50/p95/max, seconds), the share of
    reruns answered, and whether the gate holds (every rerun answered, answer p95 <= limit)."""
    asked = len(answers) + unanswered
    row = {"reruns_asked": asked, "answered": len(answers) / asked if asked else math.nan,
           "updates_missed": missed}
    for name, xs in (("answer", answers), ("update", delays)):
        row.update({f"{name}_p50_s": percentile(xs, 50), f"{name}_p95_s": percentile(xs, 95),
                    f"{name}_max_s": max(xs) if xs else math.nan})
    row["holds"] = bool(asked and not unanswered and row["answer_p95_s"] <= limit_s)
    return row


# -- the measurement -------------------------------------------------------------------------
class ProgressLog(threading.Thread):
    """Polls the run store: each new progress step of ``run_id`` with its write time."""

    def __init__(self, store, run_id: str):
        super().__init__(daemon=True)
        self.store, self.run_id, self.written, self.halt = store, run_id, [], threading.Event()

    def run(self) -> None:
        last = None
        while not self.halt.wait(0.1):
            run = self.store.get(self.run_id)
            step = int((run.progress or {}).get("step") or 0)
            if step and step != last and run.heartbeat:
                self.written.append((float(run.heartbeat), step))
                last = step


def pg_cpu(pg) -> float:
    """CPU time of PostgreSQL's server, its live backends and those that have ended."""
    pid = int((pg.data / "postmaster.pid").read_text().split()[0])
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total = cpu_seconds(pid, reaped=True)
    for kid in kids:
        try:
            total += cpu_seconds(int(kid))
        except OSError:
            pass
    return total


def add_watchers(servers, groups: list, sid: str, k: int, args, budget: Budget) -> bool:
    """``k`` more watchers, split over the servers; whether each has been shown the run (its
    first run of the page done) within ``--connect-timeout``."""
    share = [k // len(servers) + (i < k % len(servers)) for i in range(len(servers))]
    new = [ProtocolWatchers(s.url, "train", f"lang=en&sid={sid}", m,
                            niceness=args.client_nice).start()
           for s, m in zip(servers, share) if m]
    groups += new
    try:
        wait(lambda: all(all(g.progress) for g in new),
             timeout=min(args.connect_timeout, budget.left()))
        return True
    except TimeoutError:
        return False


def measure(servers, groups: list, store, run_id: str, n: int, ready: bool, args,
            budget: Budget, pg) -> dict:
    """The figures of the watchers in ``groups`` (``n`` in all) over one window."""
    if budget.left() < args.settle + args.window + args.grace:
        raise TimeoutError("no time left for a window")
    load0 = os.getloadavg()[0]
    log = ProgressLog(store, run_id)
    log.start()
    try:
        time.sleep(args.settle)

        def cpus():
            return ([cpu_seconds(s.proc.pid) for s in servers],
                    pg_cpu(pg) if pg else 0.0, time.process_time(), time.time())

        c0 = cpus()
        time.sleep(args.window)
        c1 = cpus()
        time.sleep(args.grace)
        t0, t1 = c0[3], c1[3]
        running = store.get(run_id).status == "running"
        answers = [lat for g in groups for asked, lat in list(g.answers)
                   if t0 <= asked < t1 and lat <= t1 + args.grace - asked]
        unanswered = sum(1 for g in groups for asked, lat in list(g.answers)
                         if t0 <= asked < t1 and lat > t1 + args.grace - asked)
        unanswered += sum(1 for g in groups for p in g.pending for asked in list(p)
                          if t0 <= asked < t1)
        written = [(t, s) for t, s in log.written if t0 <= t < t1]
        delays, missed = [], 0
        for g in groups:
            for shown in g.progress:
                got = [(t, s) for t, text in list(shown) if (s := step_of(text)) is not None]
                d, m = update_delays(written, got)
                delays += d
                missed += m
        span = t1 - t0
        served = sum(any(t0 <= t < t1 for t, _ in list(shown))
                     for g in groups for shown in g.progress)
        row = {"watchers": n, "served": served, "replicas": len(servers), "ready": ready,
               "run_running": running, "trained_by": store.get(run_id).replica,
               "server_cpu_per_s": (sum(c1[0]) - sum(c0[0])) / span,
               "each_server_cpu_per_s": [(b - a) / span for a, b in zip(c0[0], c1[0])],
               "pg_cpu_per_s": (c1[1] - c0[1]) / span if pg else None,
               "clients_cpu_per_s": (c1[2] - c0[2]) / span,
               "progress_writes": len(written), "load_start": load0,
               "load_end": os.getloadavg()[0]}
        row.update(judge(answers, unanswered, delays, missed, args.limit))
        return row
    finally:
        log.halt.set()


def setup(name: str, work: Path, args, pg, servers: list):
    """Starts the app servers of a setup into ``servers``; a store on their run store."""
    from cifarlab.serve.store import RunStore
    home = work / name
    home.mkdir(parents=True)
    env = server_env(args)
    if pg:
        env["CIFARLAB_STORE_URL"] = pg.url(pg.new_schema())
    for i in range(2 if pg else 1):
        server = StreamlitServer(home, env=env, script="server.py")
        server.log = home / f"streamlit-{i}.log"
        servers.append(server)
        server.start(timeout=180)
    return RunStore(env.get("CIFARLAB_STORE_URL") or home / "runs.db",
                             home / "checkpoints")


def running_run(store, sid: str, run_id: str | None, args, budget: Budget) -> str:
    """``run_id`` while it trains, else a new run, once it trains."""
    if run_id is None or store.get(run_id).status != "running":
        if run_id is not None:
            store.request_cancel(run_id)
        run_id = queue_run(store, sid, args)
    wait(lambda: (store.get(run_id).progress or {}).get("step"), timeout=min(300, budget.left()))
    return run_id


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_args(ap, epochs=20)
    ap.add_argument("--watchers", default="10,50,100,200")
    ap.add_argument("--setups", default="one,replicas")
    ap.add_argument("--window", type=float, default=15.0, help="seconds measured per N")
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--grace", type=float, default=5.0,
                    help="seconds after the window for its reruns to be answered")
    ap.add_argument("--connect-timeout", type=float, default=180.0,
                    help="seconds for the watchers an N adds to be shown the run")
    ap.add_argument("--client-nice", type=int, default=19)
    ap.add_argument("--limit", type=float, default=1.0, help="the gate on the answer p95 (s)")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds per setup")
    ap.add_argument("--json")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))   # the servers are stopped
    counts = [int(x) for x in args.watchers.split(",")]
    print(f"machine: {versions()}; watcher clients at nice {args.client_nice}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="cifarlab-bench-watchers-"))
    rows = []
    for name in args.setups.split(","):
        pg, servers, store, run_id, groups = None, [], None, None, []
        sid, budget = f"bench-watchers-{name}", Budget(args.budget)
        try:
            if name == "replicas":
                from pg_support import Postgres, bin_dir
                pg = Postgres(bin_dir())   # its own folder: the postgres user must reach it
                pg.start()
            store = setup(name, work, args, pg, servers)
            run_id = running_run(store, sid, run_id, args, budget)
            for n in counts:   # the watchers of the N before stay: each N adds the rest
                ready = add_watchers(servers, groups, sid, n - sum(g.n for g in groups), args,
                                     budget)
                run_id = running_run(store, sid, run_id, args, budget)
                row = measure(servers, groups, store, run_id, n, ready, args, budget, pg)
                row["setup"] = name
                rows.append(row)
                print(json.dumps(row), flush=True)
        except (TimeoutError, RuntimeError) as err:   # the table keeps what was measured
            print(f"{name}: stopped: {err!r}", flush=True)
        finally:
            for g in groups:
                g.stop()
            if run_id:
                store.request_cancel(run_id)
            for server in servers:
                server.stop()
            if pg:
                pg.cleanup()
    shutil.rmtree(work, ignore_errors=True)
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def print_table(rows: list[dict]) -> None:
    print("\n| setup | watchers | served | answer p50 / p95 / max | reruns answered "
          "| update delay p50 / p95 / max | server CPU-s/s "
          "| PostgreSQL CPU-s/s | clients CPU-s/s | load start→end "
          "| p95 ≤ 1 s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|:-:|")
    for r in rows:
        pg = f"{r['pg_cpu_per_s']:.2f}" if r["pg_cpu_per_s"] is not None else ""
        print(f"| {r['setup']} | {r['watchers']} | {r['served']} | {r['answer_p50_s']:.2f} / "
              f"{r['answer_p95_s']:.2f} / {r['answer_max_s']:.2f} s | {r['answered']:.0%} "
              f"({r['reruns_asked']}) | {r['update_p50_s']:.2f} / {r['update_p95_s']:.2f} / "
              f"{r['update_max_s']:.2f} s | {r['server_cpu_per_s']:.2f} | {pg} "
              f"| {r['clients_cpu_per_s']:.2f} | {r['load_start']:.1f}→{r['load_end']:.1f} "
              f"| {'yes' if r['holds'] else 'no'}{'' if r['ready'] else ' (not all ready)'} |")


if __name__ == "__main__":
    raise SystemExit(main())
