"""A classroom on one server: 12 browser sessions press Train and watch their runs to the end.

    python bench/bench_load.py                        # 12 sessions, 1,000-image runs
    python bench/bench_load.py --sessions 16 --images 2000

A real server (``streamlit run app.py`` on a loopback port, its own run store, the server's
default slots) and headless Chromium (Playwright). Each session opens the Train page with its
own ``?sid=`` (it says "No run yet"), sets a short run (1 epoch, ``--images`` images, batch 4,
``fast``) and presses Train, all within a few seconds of each other. Then nobody reloads
anything, and the benchmark checks, page by page:

- the new run appears on the page after the click (the "No run yet" case);
- every page reaches "Training finished." by itself, and how long after its run ended;
- the server log has no "fragment ... does not exist anymore" line;
- while every slot is training, a 13th session loads the Home page (visited once before the
  test, as a class arrives through it): how long it takes.

It also reads the server process's CPU time over the whole test (``/proc/<pid>/stat``). It
exits with status 1 if a page got stuck or the log has such a line. Bounded in time: every
wait has a limit, and it gives up after ``--budget`` seconds. The browsers run at lower
priority (``--browser-nice``): in a classroom they sit on the students' machines.
"""
from __future__ import annotations

import argparse
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

from browser_support import (IDLE_JS, StreamlitServer, cpu_seconds, launch_args,
                             niced_chromium, wait_idle)
from cifarlab import i18n
from cifarlab.serve.store import RunStore

T = i18n.translator("en")
MAIN_HAS = """(text) => {
    const main = document.querySelector('[data-testid="stMain"]');
    return !!main && main.innerText.includes(text);
}"""
CHOSEN_RUN = """(label) => !!document.querySelector(`input[aria-label="${label}"]`)"""
GONE = ("does not exist anymore", "Couldn't find fragment")


def set_number(page, label: str, value) -> None:
    """Type a value (the click on Train sends every widget's value, so no need to wait)."""
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")


def check(page, js: str, arg) -> bool:
    try:
        return bool(page.evaluate(js, arg))
    except Exception:  # noqa: BLE001 - a page in the middle of a rerun: look again later
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("CIFARLAB_DATA") or str(DEFAULT_ARCHIVE))
    ap.add_argument("--sessions", type=int, default=12)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--browser-nice", type=int, default=10)
    ap.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an extra environment variable for the server")
    ap.add_argument("--budget", type=float, default=1200.0, help="give up after this many seconds")
    args = ap.parse_args()
    deadline = time.monotonic() + args.budget

    def left_ms() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the load test ran past its --budget")
        return left * 1000

    import streamlit
    import torch
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="cifarlab-bench-load-"))
    (work / "home").mkdir()
    env = {"CIFARLAB_DATA": args.data, "CIFARLAB_MAX_TRAIN_IMAGES": "50000",
           **dict(kv.split("=", 1) for kv in args.server_env)}
    server = StreamlitServer(work / "home", env=env).start()
    store = RunStore(work / "home" / "runs.db")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}; python {platform.python_version()}, streamlit "
          f"{streamlit.__version__}, torch {torch.__version__}; {args.sessions} sessions, "
          f"{args.images}-image runs; browsers at nice {args.browser_nice}; server env "
          f"{args.server_env or 'default'}", flush=True)
    sids = [f"bench-load-{i:02d}" for i in range(args.sessions)]
    report: dict = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=niced_chromium(work, args.browser_nice),
                                        args=launch_args())
            # the class arrived through Home: its first visit (imports, caches) is behind us
            warm = browser.new_page()
            warm.goto(f"{server.url}/?lang=en&sid=bench-load-first", timeout=left_ms())
            wait_idle(warm, timeout_ms=min(300_000, left_ms()))
            warm.close()
            say(f"Home visited; opening {len(sids)} Train pages")
            pages = []
            for sid in sids:
                page = browser.new_context(viewport={"width": 1400, "height": 1600}).new_page()
                page.goto(f"{server.url}/train?lang=en&sid={sid}", timeout=left_ms())
                page.wait_for_function(MAIN_HAS, arg=T("train.no_run"), polling=250,
                                       timeout=min(180_000, left_ms()))
                pages.append(page)
            say("every page says 'No run yet'; setting the knobs")
            for page in pages:
                set_number(page, T("common.epochs"), 1)
                set_number(page, T("common.train_subset"), args.images)
                page.get_by_text(T("common.pipeline_fast")).click()
            for page in pages:
                wait_idle(page, timeout_ms=min(180_000, left_ms()))
                assert page.get_by_label(T("common.train_subset"), exact=True).input_value() \
                    == str(args.images)
            say("everyone presses Train")
            cpu0, wall0 = cpu_seconds(server.proc.pid), time.monotonic()
            clicked = {}
            for sid, page in zip(sids, pages):
                page.get_by_role("button", name=T("train.start"), exact=True).click()
                clicked[sid] = time.monotonic()

            appeared, finished_seen, home_s, progress_said = {}, {}, None, 0
            while len(appeared) < len(pages):               # the "No run yet" case
                left_ms()
                for sid, page in zip(sids, pages):
                    if sid not in appeared and check(page, CHOSEN_RUN, T("train.choose_run")):
                        appeared[sid] = time.monotonic() - clicked[sid]
                pages[0].wait_for_timeout(100)
            say(f"every page shows its new run (at most {max(appeared.values()):.1f} s after "
                "its click)")
            while len(finished_seen) < len(pages):
                left_ms()
                runs = {r.session: r for r in store.list_runs(kind="train")}
                for sid, page in zip(sids, pages):
                    run = runs.get(sid)
                    if sid not in finished_seen and run is not None and run.finished \
                            and check(page, MAIN_HAS, T("train.finished")):
                        finished_seen[sid] = max(0.0, time.time() - run.finished_at)
                if home_s is None and all_slots_busy(store, server):
                    say("every slot trains, runs are waiting: a late session opens Home")
                    home_s = load_home(browser, server, left_ms)
                    say(f"Home shown after {home_s:.1f} s")
                if len(finished_seen) > progress_said:
                    progress_said = len(finished_seen)
                    say(f"{progress_said} of {len(pages)} pages show 'finished'")
                pages[0].wait_for_timeout(250)
            cpu1, wall1 = cpu_seconds(server.proc.pid), time.monotonic()
            runs = store.list_runs(kind="train")
            report = {"appeared": appeared, "finished": finished_seen, "home_s": home_s,
                      "cpu": (cpu1 - cpu0) / (wall1 - wall0), "wall": wall1 - wall0,
                      "statuses": sorted(r.status for r in runs),
                      "waits": [r.waited_s or 0.0 for r in runs]}
            browser.close()
    finally:
        server.stop()
    log = server.log.read_text(errors="replace")
    gone = sum(log.count(g) for g in GONE)
    lags = sorted(report["finished"].values())
    seen = sorted(report["appeared"].values())
    print(f"\nruns: {len(report['statuses'])}, statuses {set(report['statuses'])}; all done "
          f"{report['wall']:.0f} s after the first click (wall, busy machine)")
    print("| what | figure |\n|---|---|")
    print(f"| pages that showed their run after the click, no reload | {len(seen)} of "
          f"{len(sids)} (median {statistics.median(seen):.1f} s, max {max(seen):.1f} s) |")
    print(f"| pages that reached 'finished' by themselves | {len(lags)} of {len(sids)} |")
    print(f"| 'finished' shown after the run ended | median {statistics.median(lags):.1f} s, "
          f"max {max(lags):.1f} s |")
    print(f"| wait in the queue | median {statistics.median(report['waits']):.0f} s, max "
          f"{max(report['waits']):.0f} s |")
    home = report["home_s"]
    print(f"| a {len(sids) + 1}th session loads Home while every slot trains | "
          + (f"{home:.1f} s |" if home is not None else "never measured (no moment with all "
             "slots busy) |"))
    print(f"| server CPU, whole test | {report['cpu']:.3f} CPU-s/s |")
    print(f"| 'fragment does not exist' lines in the server log | {gone} |")
    ok = len(lags) == len(sids) and gone == 0 and len(seen) == len(sids)
    return 0 if ok else 1


T0 = time.monotonic()


def say(what: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f} s] {what}", flush=True)


def all_slots_busy(store: RunStore, server: StreamlitServer) -> bool:
    slots = int(server.env.get("CIFARLAB_CPU_SLOTS") or max(1, (os.cpu_count() or 2) // 2))
    return store.counts()["running"] >= slots and store.counts()["queued"] > 0


def load_home(browser, server: StreamlitServer, left_ms) -> float:
    """Seconds until a new session's Home page has rendered (the title and the facts)."""
    page = browser.new_context().new_page()
    t0 = time.monotonic()
    page.goto(f"{server.url}/?lang=en&sid=bench-load-late", timeout=left_ms())
    page.wait_for_function(IDLE_JS, timeout=min(180_000, left_ms()))
    seconds = time.monotonic() - t0
    page.context.close()
    return seconds


if __name__ == "__main__":
    raise SystemExit(main())
