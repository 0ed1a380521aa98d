"""What watching a training run on the Train page costs the server, and the run.

    python bench/bench_live.py                              # 0, 1, 5, 10 watchers, 2 rounds
    python bench/bench_live.py --watchers 0,1,5 --rounds 1 --window 10
    python bench/bench_live.py --clients protocol    # watchers that render nothing (see below)

A real server (``streamlit run app.py`` on a loopback port, its own run store) and headless
Chromium (Playwright). For each number of watchers N, a run is queued for a fresh session
(``--epochs`` epochs of ``--images`` images, batch 4, ``fast``, CPU: long enough to outlast the
window; it is stopped after it) and N
browser pages open the Train page of that session (``?sid=``) and watch it. Once every page
shows the loss chart, the benchmark measures over ``--window`` seconds:

- the server process's CPU time (user + system, all its threads, from ``/proc/<pid>/stat``):
  CPU-seconds per second, and that minus the unwatched figure, per watcher. CPU time does not
  depend on how busy the machine is; wall times here do;
- the run's images/s over the same window, from its progress in the run store (steps done x
  batch / training seconds), against the unwatched run's.

Then it stops the run and times how long each page takes to show the final state (no reload),
and measures the server's CPU while the N pages stay open on the finished run.

With ``--clients protocol`` the watchers are not browsers but clients of Streamlit's websocket
protocol (bench/protocol_watcher.py): they ask the server for exactly what a page asks for (its
first run, then the live fragment's reruns at the interval the page sets) and render nothing,
as when the browsers sit on the students' machines.

The browsers run at nice 19: in a classroom they sit on the students' machines, not on the
server. Rounds go 0, 1, 5, 10 then 10, 5, 1, 0 (and so on), so a drift in the machine's load
touches every N alike. Bounded in time: every wait has a limit, and the whole run stops after
``--budget`` seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
DEFAULT_ARCHIVE = ROOT.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"

from browser_support import (LOSS_CHART_LAST_STEP, StreamlitServer, cpu_seconds,
                             launch_args, niced_chromium, wait_idle)
from protocol_watcher import ProtocolWatchers
from cifarlab import i18n
from cifarlab.core.config import TrainConfig
from cifarlab.serve.store import RunStore

T = i18n.translator("en")
STOPPED = i18n.catalog("en")["train.cancelled_partial"].split(" {")[0]   # "Stopped after"
MAIN_HAS = """([text]) => {
    const main = document.querySelector('[data-testid="stMain"]');
    return !!main && main.innerText.includes(text);
}"""


class Budget:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise TimeoutError("the benchmark ran past its --budget")
        return left


def wait(predicate, timeout: float, poll: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError(f"timed out after {timeout:.0f} s")


def progress_point(store: RunStore, run_id: str) -> tuple[int, float]:
    p = (store.get(run_id).progress or {})
    return int(p.get("step") or 0), float(p.get("elapsed_s") or 0.0)


def queue_run(store: RunStore, sid: str, args) -> str:
    """A ``fast`` CPU run of ``args.epochs`` x ``args.images`` for session ``sid``: its id."""
    cfg = TrainConfig(epochs=args.epochs, train_subset=args.images, batch_size=args.batch_size,
                      pipeline="fast", num_workers=0, device="cpu")
    return store.create_run(sid, "train", cfg.to_dict(), "cpu")


def add_run_args(ap: argparse.ArgumentParser, epochs: int = 3) -> None:
    """The data, the watched run and the server's settings (``queue_run``, ``server_env``)."""
    ap.add_argument("--data", default=os.environ.get("CIFARLAB_DATA") or str(DEFAULT_ARCHIVE))
    ap.add_argument("--images", type=int, default=50000)
    ap.add_argument("--epochs", type=int, default=epochs,
                    help="long enough to outlast the window")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--worker-threads", type=int, default=1,
                    help="torch threads of the training worker (1: steadier on a shared machine)")
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an extra environment variable for the server, e.g. "
                         "STREAMLIT_RUNNER_POST_SCRIPT_GC=false")


def server_env(args) -> dict:
    """The app server's settings: one CPU slot, a warm spare worker, room for the runs."""
    return {"CIFARLAB_DATA": args.data, "CIFARLAB_CPU_SLOTS": "1",
            "CIFARLAB_SPARE_WORKERS": "1", "CIFARLAB_MAX_PER_OWNER": "50",
            "CIFARLAB_MAX_TRAIN_IMAGES": "50000",
            "CIFARLAB_WORKER_THREADS": str(args.worker_threads),
            **dict(kv.split("=", 1) for kv in args.server_env)}


def versions() -> str:
    import plotly
    import streamlit
    import torch
    return (f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
            f"python {platform.python_version()}, streamlit {streamlit.__version__}, "
            f"plotly {plotly.__version__}, torch {torch.__version__}")


def measure_protocol(server: StreamlitServer, store: RunStore, n: int, args, tag: str,
                     budget: Budget) -> dict:
    """As ``measure``, with watchers that speak the protocol and render nothing (the browsers of
    a real classroom run on the students' machines, not on the server's cores)."""
    sid = f"bench-live-{tag}"
    run_id = queue_run(store, sid, args)
    watchers = ProtocolWatchers(server.url, "train", f"lang=en&sid={sid}", n).start()
    try:
        wait(lambda: store.get(run_id).status != "queued", timeout=min(300, budget.left()))
        wait(lambda: progress_point(store, run_id)[0] > 0, timeout=min(90, budget.left()))
        # every watcher has had its first run and at least one rerun of the live fragment
        wait(lambda: watchers.finished_runs >= 2 * n, timeout=min(120, budget.left()))
        time.sleep(args.settle)
        s0, e0 = progress_point(store, run_id)
        c0, w0 = cpu_seconds(server.proc.pid), time.monotonic()
        watchers.counting = True
        time.sleep(args.window)
        watchers.counting = False
        c1, w1 = cpu_seconds(server.proc.pid), time.monotonic()
        s1, e1 = progress_point(store, run_id)
        if store.get(run_id).status != "running":
            raise RuntimeError("the run ended inside the window: use more --images")
        ips = (s1 - s0) * args.batch_size / (e1 - e0) if e1 > e0 else float("nan")
        store.request_cancel(run_id)
        ended = wait(lambda: (r := store.get(run_id)).finished and r,
                     timeout=min(60, budget.left()))
        final_text = STOPPED if ended.status == "cancelled" else T("train.finished")
        try:
            wait(lambda: watchers.seen(final_text) >= n, timeout=min(60, budget.left()))
            lag = time.time() - ended.finished_at
        except TimeoutError:
            lag = None
        time.sleep(2.0)
        c2, w2 = cpu_seconds(server.proc.pid), time.monotonic()
        time.sleep(args.idle_window)
        c3, w3 = cpu_seconds(server.proc.pid), time.monotonic()
        return {"watchers": n, "cpu_per_s": (c1 - c0) / (w1 - w0), "images_per_s": ips,
                "steps_in_window": s1 - s0, "polls_per_s": watchers.sent / (w1 - w0),
                "kb_per_s": watchers.bytes / 1024 / (w1 - w0),
                "final_lag_max_s": lag if n else None,
                "stuck": n - watchers.seen(final_text) if n else 0,
                "idle_cpu_per_s": (c3 - c2) / (w3 - w2)}
    finally:
        watchers.stop()
        if not store.get(run_id).finished:
            store.request_cancel(run_id)


def measure(server: StreamlitServer, browser, store: RunStore, n: int, args, tag: str,
            budget: Budget) -> dict:
    sid = f"bench-live-{tag}"
    run_id = queue_run(store, sid, args)
    url = f"{server.url}/train?lang=en&sid={sid}"
    contexts, pages = [], []
    traffic = {"sent": 0, "received": 0, "bytes": 0, "on": False}

    def on_socket(ws):
        def sent(_payload):
            traffic["sent"] += traffic["on"]

        def received(payload):
            if traffic["on"]:
                traffic["received"] += 1
                traffic["bytes"] += len(payload)
        ws.on("framesent", sent)
        ws.on("framereceived", received)

    try:
        for _ in range(n):
            ctx = browser.new_context(viewport={"width": 1400, "height": 1600})
            page = ctx.new_page()
            page.on("websocket", on_socket)
            page.goto(url, timeout=budget.left() * 1000)
            contexts.append(ctx)
            pages.append(page)
        wait(lambda: store.get(run_id).status != "queued", timeout=min(300, budget.left()))
        for page in pages:
            page.wait_for_function(f"(t) => ({LOSS_CHART_LAST_STEP})(t) > 0",
                                   arg=T("common.loss"), timeout=min(300, budget.left()) * 1000)
        if not pages:
            wait(lambda: progress_point(store, run_id)[0] > 0, timeout=min(90, budget.left()))
        time.sleep(args.settle)
        s0, e0 = progress_point(store, run_id)
        c0, w0 = cpu_seconds(server.proc.pid), time.monotonic()
        traffic["on"] = True
        if pages:  # Playwright delivers the pages' websocket events only while it waits
            pages[0].wait_for_timeout(args.window * 1000)
        else:
            time.sleep(args.window)
        traffic["on"] = False
        c1, w1 = cpu_seconds(server.proc.pid), time.monotonic()
        s1, e1 = progress_point(store, run_id)
        run = store.get(run_id)
        if run.status != "running":
            raise RuntimeError(f"the run ended ({run.status}) inside the window: use more --images")
        ips = (s1 - s0) * args.batch_size / (e1 - e0) if e1 > e0 else float("nan")
        shown = pages_progress(pages)

        # the end: stop the run; every page must show it without a reload
        store.request_cancel(run_id)
        ended = wait(lambda: (r := store.get(run_id)).finished and r,
                     timeout=min(60, budget.left()))
        end_at = ended.finished_at
        # stopped, or (when the stop came as it was testing) finished
        final_text = STOPPED if ended.status == "cancelled" else T("train.finished")
        lags = []
        for page in pages:
            try:
                page.wait_for_function(MAIN_HAS, arg=[final_text], polling=250,
                                       timeout=min(60, budget.left()) * 1000)
                lags.append(time.time() - end_at)
            except Exception:  # noqa: BLE001 - counted as stuck
                lags.append(float("inf"))
        # the pages stay open on the finished run
        time.sleep(2.0)
        c2, w2 = cpu_seconds(server.proc.pid), time.monotonic()
        if pages:
            pages[0].wait_for_timeout(args.idle_window * 1000)
        else:
            time.sleep(args.idle_window)
        c3, w3 = cpu_seconds(server.proc.pid), time.monotonic()
        return {"watchers": n, "cpu_per_s": (c1 - c0) / (w1 - w0), "images_per_s": ips,
                "steps_in_window": s1 - s0, "chart_last_steps": shown,
                # each poll of the live view is one message from the browser (a rerun request)
                "polls_per_s": traffic["sent"] / (w1 - w0),
                "kb_per_s": traffic["bytes"] / 1024 / (w1 - w0),
                "final_lag_max_s": max(lags) if lags else None,
                "stuck": sum(1 for x in lags if x == float("inf")),
                "idle_cpu_per_s": (c3 - c2) / (w3 - w2)}
    finally:
        for ctx in contexts:
            ctx.close()
        if not store.get(run_id).finished:
            store.request_cancel(run_id)


def pages_progress(pages) -> list[int]:
    return [int(p.evaluate(f"(t) => ({LOSS_CHART_LAST_STEP})(t)", T("common.loss")) or 0)
            for p in pages]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_run_args(ap)
    ap.add_argument("--watchers", default="0,1,5,10")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clients", choices=("browser", "protocol"), default="browser",
                    help="browser: headless Chromium pages on this machine; protocol: clients "
                         "that speak Streamlit's websocket protocol and render nothing "
                         "(bench/protocol_watcher.py), as when the browsers are elsewhere")
    ap.add_argument("--window", type=float, default=15.0, help="seconds measured while watching")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds after the pages show it")
    ap.add_argument("--idle-window", type=float, default=5.0,
                    help="seconds measured with the pages open on the finished run")
    ap.add_argument("--budget", type=float, default=900.0, help="stop after this many seconds")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    budget = Budget(args.budget)
    counts = [int(x) for x in args.watchers.split(",")]
    order = []
    for r in range(args.rounds):
        order += counts if r % 2 == 0 else counts[::-1]

    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="cifarlab-bench-live-"))
    env = server_env(args)
    print(f"machine: {versions()}; worker threads {args.worker_threads}; server env "
          f"{args.server_env or 'default'}; watchers: {args.clients}", flush=True)
    server = StreamlitServer(work / "home", env=env)
    (work / "home").mkdir(parents=True, exist_ok=True)
    server.start()
    rows = []
    try:
        store = RunStore(work / "home" / "runs.db")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=niced_chromium(work),
                                        args=launch_args())
            # one visit starts the server's job queue (and its warm spare worker)
            page = browser.new_page()
            page.goto(f"{server.url}/train?lang=en&sid=bench-live-prime", timeout=120_000)
            wait_idle(page, timeout_ms=120_000)
            page.close()
            time.sleep(5)
            for i, n in enumerate(order):
                tag = f"{i:02d}-{n:02d}"
                row = (measure_protocol(server, store, n, args, tag, budget)
                       if args.clients == "protocol"
                       else measure(server, browser, store, n, args, tag, budget))
                row["clients"] = args.clients
                rows.append(row)
                print(json.dumps(row), flush=True)
            browser.close()
    finally:
        server.stop()
        log = server.log.read_text(errors="replace")
    gone = log.count("does not exist anymore") + log.count("Couldn't find fragment")
    print(f"\nserver log: {gone} 'fragment does not exist' lines")
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def print_table(rows: list[dict]) -> None:
    by_n: dict[int, list[dict]] = {}
    for r in rows:
        by_n.setdefault(r["watchers"], []).append(r)

    def med(rs, key):
        return statistics.median(r[key] for r in rs)

    base = by_n.get(0, rows[:1])
    base_cpu, base_ips = med(base, "cpu_per_s"), med(base, "images_per_s")
    print("| watchers | server CPU-s/s | per watcher, over unwatched | polls/s per watcher "
          "| KB/s per watcher | images/s | x unwatched | final state shown (max) | stuck "
          "| CPU-s/s, pages left on the finished run |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sorted(by_n):
        rs = by_n[n]
        cpu, ips = med(rs, "cpu_per_s"), med(rs, "images_per_s")
        per = f"{(cpu - base_cpu) / n:.3f}" if n else ""
        polls = f"{med(rs, 'polls_per_s') / n:.2f}" if n else ""
        kb = f"{med(rs, 'kb_per_s') / n:.1f}" if n else ""
        lags = [r["final_lag_max_s"] for r in rs if r["final_lag_max_s"] is not None]
        lag = f"{max(lags):.1f} s" if lags else ""
        print(f"| {n} | {cpu:.3f} | {per} | {polls} | {kb} | {ips:,.0f} | {ips / base_ips:.2f} "
              f"| {lag} | {sum(r['stuck'] for r in rs)} | {med(rs, 'idle_cpu_per_s'):.3f} |")


if __name__ == "__main__":
    raise SystemExit(main())
