"""Training through the app's job runner (on each executor) vs the CLI; how soon Train shows a
first loss, and how soon Cancel stops a run.

    python bench/bench_jobs.py                       # 1 epoch, 10,000 images, batch 4, fast, cpu
    python bench/bench_jobs.py --executors local     # worker processes only (no Ray needed)
    python bench/bench_jobs.py --device cuda:0 --batch-size 32 --subset 50000 --repeats 3
    python bench/bench_jobs.py --pipeline tutorial --num-workers 2

1. Throughput: the same TrainConfig is trained by a JobQueue on each executor (``local``: a
   spawned worker process writing its events into the SQLite run store; ``ray``: a Ray task on
   a Ray instance this script starts, streaming its events back to the queue, which writes them)
   and by ``python -m cifarlab train --json``, one after the other (alternating, ``--repeats``
   times). All report ``images_per_second`` as measured by ``train()`` itself; the ratio app ÷
   CLI should be ≥ 0.9 (the app within 10 % of the CLI). Wall times (submit → done, process
   start → exit) are printed too.
2. Latency: with a warm decoded-data cache and an idle server (a warm worker), the time from
   ``submit()`` to the first step loss in the run store (target < 3 s), a few times per
   executor; and, for comparison, the local executor with no spare worker (a cold process).
3. Cancel: a run is cancelled once it has written 200 step losses; the time from ``cancel()``
   until training saw it (its "stop" event), until training stopped (its "epoch" event), and
   until the run was ``cancelled`` in the store (after evaluating what it had learned).

Absolute numbers drift on shared machines: compare the ratio, measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_ARCHIVE = ROOT.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"

from cifarlab.core.config import TrainConfig
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.settings import load_settings

SESSION = "bench-session-0001"


def cli_run(config: TrainConfig, data: str, out: Path) -> dict:
    args = [sys.executable, "-m", "cifarlab", "train", "--json", "--data", data,
            "--epochs", str(config.epochs), "--batch-size", str(config.batch_size),
            "--num-workers", str(config.num_workers), "--pipeline", config.pipeline,
            "--device", config.device, "--seed", str(config.seed), "--lr", str(config.lr),
            "--out", str(out)]
    if config.train_subset:
        args += ["--train-subset", str(config.train_subset)]
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the CLI failed:\n{proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"images_per_second": doc["images_per_second"], "train_s": doc["train_seconds"],
            "wall_s": wall, "accuracy": doc["test_accuracy"],
            "threads": doc["env"].get("torch_threads")}


def app_run(queue: JobQueue, config: TrainConfig) -> dict:
    queue.wait_warm()
    t0 = time.perf_counter()
    run_id = queue.submit(SESSION, config)
    first = None
    while True:
        if first is None and queue.store.loss_count(run_id):
            first = time.perf_counter() - t0
        run = queue.store.get(run_id)
        if run.finished:
            break
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    if run.status != "done":
        raise SystemExit(f"the job ended {run.status}: {run.error}")
    res = run.result
    return {"images_per_second": res["images_per_second"], "train_s": res["train_seconds"],
            "wall_s": wall, "first_loss_s": first, "accuracy": res["test_accuracy"],
            "waited_s": run.waited_s, "threads": (run.env or {}).get("torch_threads")}


def cancel_latency(queue: JobQueue, config: TrainConfig) -> dict:
    queue.wait_warm()
    run_id = queue.submit(SESSION, config)
    while queue.store.loss_count(run_id) < 200:
        time.sleep(0.005)
    t0, t0_wall = time.perf_counter(), time.time()
    queue.cancel(SESSION, run_id)
    run = queue.wait(run_id, timeout=600, poll=0.005)
    done = time.perf_counter() - t0
    if run.status != "cancelled":
        raise SystemExit(f"the cancelled job ended {run.status}: {run.error}")
    (stop,) = [e.data for e in queue.store.events(run_id, kinds=["stop"])]
    (epoch,) = queue.store.events(run_id, kinds=["epoch"])
    return {"seen_s": stop["seen_t"] - t0_wall, "stopped_s": epoch.t - t0_wall,
            "cancelled_s": done}


def first_loss(queue: JobQueue, config: TrainConfig, warm: bool) -> float:
    if warm:
        queue.wait_warm()
    else:
        time.sleep(0.5)
    t0 = time.perf_counter()
    run_id = queue.submit(SESSION, config)
    while not queue.store.loss_count(run_id):
        time.sleep(0.002)
    seconds = time.perf_counter() - t0
    queue.wait(run_id, timeout=300)
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("CIFARLAB_DATA") or str(DEFAULT_ARCHIVE))
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--subset", type=int, default=10000)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--pipeline", default="fast")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--latency-runs", type=int, default=3)
    ap.add_argument("--cancel-runs", type=int, default=2)
    ap.add_argument("--executors", default="local,ray",
                    help="comma-separated: local (worker processes), ray (a local Ray instance)")
    ap.add_argument("--worker-threads", type=int, default=None,
                    help="torch threads per job worker (default: the server default, "
                         "cores // cpu_slots)")
    args = ap.parse_args()

    config = TrainConfig(epochs=args.epochs, train_subset=args.subset or None,
                         batch_size=args.batch_size, num_workers=args.num_workers,
                         pipeline=args.pipeline, device=args.device)
    quick = TrainConfig(epochs=1, train_subset=2048, batch_size=32, pipeline="fast",
                        num_workers=0, device=args.device)
    # warm the decode-once cache first: not part of any measurement
    subprocess.run([sys.executable, "-m", "cifarlab", "data", "--data", args.data, "--json"],
                   cwd=ROOT, check=True, capture_output=True)
    import torch

    work = Path(tempfile.mkdtemp(prefix="cifarlab-bench-jobs-"))
    extra = {"worker_threads": args.worker_threads} if args.worker_threads else {}
    # a benchmark is one person running many big runs: lift the per-person and compute limits
    settings = load_settings(home=str(work / "home"), data=args.data, max_per_owner=50,
                             max_train_images=60000, max_epochs=500,
                             max_image_epochs_per_run=10**9, max_image_epochs_per_owner=10**9,
                             max_num_workers=64, **extra)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores "
          f"(cpu_slots {settings.cpu_slots}, worker threads {settings.worker_threads}); python "
          f"{platform.python_version()}, torch {torch.__version__}"
          + (f"; {torch.cuda.get_device_name(0)}" if args.device.startswith("cuda") else ""))
    print(f"config: {config.describe()}", flush=True)

    names = [n for n in args.executors.split(",") if n]
    if "ray" in names:
        import ray

        print(f"ray {ray.__version__} (a local Ray instance started by the queue)", flush=True)
    queues = {n: JobQueue(settings=settings.replace(home=work / n, executor=n)) for n in names}
    rows: dict[str, list[dict]] = {n: [] for n in [*names, "cli"]}
    warm: dict[str, list[float]] = {}
    cancels: dict[str, list[dict]] = {}
    long = config.replace(train_subset=max(config.train_subset or 0, 20000))
    try:
        for q in queues.values():
            q.wait_warm(timeout=300)
        for r in range(args.repeats):
            for name in rows:
                row = (cli_run(config, args.data, work / "cli.pth") if name == "cli"
                       else app_run(queues[name], config))
                rows[name].append(row)
                extra = (f"  first loss {row['first_loss_s']:.2f} s" if name != "cli" else "")
                print(f"  [{r + 1}] {name:5s}: {row['images_per_second']:9.0f} images/s  train "
                      f"{row['train_s']:6.2f} s  wall {row['wall_s']:6.2f} s  accuracy "
                      f"{100 * row['accuracy']:.2f} %  torch threads {row['threads']}{extra}",
                      flush=True)
        for name, q in queues.items():
            warm[name] = [first_loss(q, quick, warm=True) for _ in range(args.latency_runs)]
            cancels[name] = [cancel_latency(q, long) for _ in range(args.cancel_runs)]
            print(f"  {name}: first loss {warm[name]}, cancel {cancels[name]}", flush=True)
    finally:
        for q in queues.values():
            q.shutdown()
    cold: list[float] = []
    if "local" in names:
        cold_queue = JobQueue(settings=settings.replace(home=work / "cold", spare_workers=0))
        try:
            cold = [first_loss(cold_queue, quick, warm=False) for _ in range(2)]
        finally:
            cold_queue.shutdown()

    med = statistics.median
    cli = med(x["images_per_second"] for x in rows["cli"])
    cli_wall = med(x["wall_s"] for x in rows["cli"])
    print(f"\nsummary (medians; CLI {cli:.0f} images/s, wall {cli_wall:.2f} s process start → "
          "exit)")
    for name in names:
        app = med(x["images_per_second"] for x in rows[name])
        c = cancels[name]
        print(f"  {name}: {app:.0f} images/s, app/CLI = {app / cli:.3f} (target ≥ 0.90); wall "
              f"{med(x['wall_s'] for x in rows[name]):.2f} s (submit → done)")
        print(f"    submit → first loss, warm: {', '.join(f'{s:.2f}' for s in warm[name])} s "
              f"(median {med(warm[name]):.2f} s; target < 3 s); first run of the queue "
              f"{rows[name][0]['first_loss_s']:.2f} s")
        print(f"    cancel → seen {med(x['seen_s'] for x in c):.2f} s, training stopped "
              f"{med(x['stopped_s'] for x in c):.2f} s, run cancelled "
              f"{med(x['cancelled_s'] for x in c):.2f} s (evaluation included)")
    if cold:
        print(f"  local, no spare (cold process): submit → first loss "
              f"{', '.join(f'{s:.2f}' for s in cold)} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
