"""Page switch after the first load, in Chromium: click a sidebar link, wait until the new page
has rendered (its title shown, no element of the old page left, the script idle).

    python bench/bench_page_switch.py                 # every page, 2 timed rounds
    python bench/bench_page_switch.py --rounds 3 --lang pt --json switch.json

A real server (``streamlit run server.py`` on a loopback port, its own run store) and headless
Chromium. The first round visits every page once, untimed: a page's first visit in a server
imports its modules. Each later round is timed; the figure per page is the median over rounds.
Wall time, so measure on a quiet machine (docs/benchmarks.md section 6).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from browser_support import ARRIVED_JS, StreamlitServer, chromium_path, launch_args, wait_idle
from ui.nav import PAGES


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds (after one untimed)")
    ap.add_argument("--lang", default="en", choices=["en", "es", "pt"])
    ap.add_argument("--data", default=str(ROOT.parent / "shared/data/cifar10-jpeg.tar.gz"))
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    ids = [pid for pid, _, _ in PAGES][1:]
    times: dict[str, list[float]] = {pid: [] for pid in ids}
    with tempfile.TemporaryDirectory() as home, sync_playwright() as pw:
        server = StreamlitServer(Path(home), env={"CIFARLAB_DATA": args.data},
                                 script="server.py").start()
        browser = pw.chromium.launch(executable_path=chromium_path(), args=launch_args())
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{server.url}/?lang={args.lang}")
            wait_idle(page)
            for r in range(args.rounds + 1):
                for pid in ids:
                    link = page.locator(f'[data-testid="stSidebarNav"] a[href*="/{pid}"]').first
                    before = page.locator("h1").first.inner_text()
                    t0 = time.perf_counter()
                    link.click()
                    page.wait_for_function(ARRIVED_JS, arg=before, timeout=60_000)
                    if r:
                        times[pid].append(time.perf_counter() - t0)
                    wait_idle(page)   # settled (not timed) before the next click
        finally:
            browser.close()
            server.stop()
    per_page = {pid: round(statistics.median(v), 3) for pid, v in times.items()}
    out = {"lang": args.lang, "rounds": args.rounds, "seconds_per_page": per_page,
           "median_s": statistics.median(per_page.values()), "max_s": max(per_page.values())}
    print(f"page switch after the first load ({args.lang}, median of {args.rounds} rounds): "
          f"median {out['median_s']:.2f} s, max {out['max_s']:.2f} s")
    for pid, s in per_page.items():
        print(f"  {pid:10s} {s:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
