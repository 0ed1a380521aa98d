"""A class of 30: students join one class and submit runs while the instructor's board stays live.

    python bench/bench_class.py                         # 30 students, 500-image runs
    python bench/bench_class.py --students 5 --images 256 --budget 120

The serving side as a server runs it, in this process: a ``JobQueue`` on the local executor
(real worker processes, the server's default slots) over a fresh run store, and a
``Classroom`` on that store. An instructor creates a class, pushes a locked preset (1 epoch,
``--images`` training images, batch 32, ``fast``) and opens a challenge; ``--students``
students join it and each submits one run, all within a few seconds (one thread each, as the
web server's script threads would). Until every run has finished, the instructor's board is
refreshed every ``--every`` seconds (``Classroom.board``, what the console's live fragment
calls), and the public leaderboard with it; each call is timed. The server process's memory
(``VmRSS`` / ``VmHWM`` from ``/proc/self/status``) is sampled at each refresh, and each
worker's peak RSS comes from its run's result.

Then, without training, the same class's board over a store holding ``--students`` × 2 long
runs (5,000 loss steps each), to show what the board costs late in a lesson.

It prints one table (and ``--out FILE.json`` saves the figures). Pages are not driven here: the
console needs a signed-in instructor, which ``bench/protocol_watcher.py`` cannot do.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_ARCHIVE = ROOT.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"

from cifarlab.core.config import TrainConfig
from cifarlab.serve.classroom import tables
from cifarlab.serve.classroom.facade import Classroom
from cifarlab.serve.classroom.model import Goal
from cifarlab.serve.identity import Person
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.settings import load_settings

TEACH = Person("user:teacher@school.edu", "teacher@school.edu", instructor=True)


def rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0]) / 1024
    return out.get("VmRSS", 0.0), out.get("VmHWM", 0.0)


def stats(values: list[float]) -> dict:
    if not values:
        return {}
    v = sorted(values)
    return {"n": len(v), "median_ms": 1000 * statistics.median(v),
            "p95_ms": 1000 * v[min(len(v) - 1, int(0.95 * len(v)))], "max_ms": 1000 * v[-1]}


def timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--images", type=int, default=500)
    ap.add_argument("--every", type=float, default=1.0, help="board refresh period, seconds")
    ap.add_argument("--budget", type=float, default=900.0, help="give up after this long")
    ap.add_argument("--data", default=os.environ.get("CIFARLAB_DATA", str(DEFAULT_ARCHIVE)))
    ap.add_argument("--out", help="save the figures as JSON")
    args = ap.parse_args(argv)

    home = Path(tempfile.mkdtemp(prefix="bench-class-"))
    settings = load_settings(env={}, home=str(home), data=args.data,
                             max_queue=max(50, args.students + 5))
    rss0 = rss_mb()[0]
    queue = JobQueue(settings=settings)
    queue.wait_warm(120)
    queue.train_images()           # the data set, loaded as a server has it
    rss_queue = rss_mb()[0]
    cr = Classroom(queue.store)
    info = cr.create_class(TEACH, "Benchmark class")
    preset = {"epochs": 1, "train_subset": args.images, "batch_size": 32, "pipeline": "fast",
              "num_workers": 0}
    info = cr.push_preset(TEACH, info.code, preset, locked=["pipeline", "train_subset"],
                          expected_version=info.version)
    cr.open_challenge(TEACH, info.code, Goal("best_accuracy", max_epochs=1))
    students = [Person(f"browser:student-{i:02d}-cookie", f"S{i}") for i in range(args.students)]
    joins = [timed(cr.join, p, info.code, f"Student {i:02d}", f"ip-{i}")[1]
             for i, p in enumerate(students)]
    config = TrainConfig(device="cpu", **preset)
    run_ids: list[str] = []
    submits: list[float] = []
    lock = threading.Lock()

    def submit(i: int, p: Person) -> None:
        time.sleep(random.uniform(0, 3))   # a class presses Train within a few seconds
        run_id, dt = timed(queue.submit, f"student-session-{i:02d}", config, owner=p.id)
        with lock:
            run_ids.append(run_id)
            submits.append(dt)

    t_start = time.monotonic()
    threads = [threading.Thread(target=submit, args=(i, p)) for i, p in enumerate(students)]
    for th in threads:
        th.start()
    boards, leaders, rss, rows_seen = [], [], [], []
    done = False
    while time.monotonic() - t_start < args.budget:
        rows, dt = timed(cr.board, TEACH, info.code)
        boards.append(dt)
        rows_seen.append(len(rows))
        _, dt = timed(cr.leaderboard, TEACH, info.code, "public")
        leaders.append(dt)
        rss.append(rss_mb()[0])
        finished = sum(r.status in ("done", "failed", "cancelled", "interrupted") for r in rows)
        if len(rows) == args.students and finished == args.students:
            done = True
            break
        time.sleep(max(0.0, args.every - dt))
    wall = time.monotonic() - t_start
    for th in threads:
        th.join()
    runs = [queue.store.get(r) for r in run_ids]
    queue.shutdown()
    statuses = {s: sum(r.status == s for r in runs) for s in {r.status for r in runs}}
    peaks = [r.result.get("worker_peak_rss_mb") for r in runs if r.result
             and r.result.get("worker_peak_rss_mb")]
    board_pub = cr.leaderboard(TEACH, info.code, "public")

    # late in a lesson: two long runs per student (5,000 loss steps each), no training
    store = queue.store
    for p in students:
        for _ in range(2):
            rid = store.create_run("late-session-01", "train", config.to_dict(), "cpu",
                                   owner=p.id)
            tables.record_run(store, info.code, p.id, rid)
            store.set_status(rid, "running")
            store.record(rid, steps=list(range(1, 5001)),
                         losses=[2.3 * 0.9995 ** s for s in range(5000)])
    late = [timed(cr.board, TEACH, info.code)[1] for _ in range(20)]

    figures = {
        "students": args.students, "images": args.images, "all_finished": done,
        "wall_s": wall, "statuses": statuses,
        "join": stats(joins), "submit": stats(submits),
        "board_live": stats(boards), "leaderboard_live": stats(leaders),
        "board_rows_max": max(rows_seen or [0]), "board_late": stats(late),
        "board_late_rows": len(cr.board(TEACH, info.code)),
        "server_rss_mb": {"before_queue": rss0, "queue_and_data": rss_queue,
                          "during_max": max(rss or [0]), "peak_hwm": rss_mb()[1]},
        "worker_peak_rss_mb": {"median": statistics.median(peaks) if peaks else None,
                               "max": max(peaks) if peaks else None},
        "ranked": len(board_pub),
        "machine": {"cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg(),
                    "python": platform.python_version()},
    }
    print(json.dumps(figures, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
