"""Fractional GPU sharing on Ray: N runs on one GPU at once (``gpu_share`` = N) against one alone.

    python bench/bench_ray_share.py                        # cuda:0, gpu_share 4, 4 runs at once
    python bench/bench_ray_share.py --subset 20000 --batch-size 32 --json share.json
    python bench/bench_ray_share.py --device cpu --runs 2 --subset 256 --data tiny.tar.gz

The app's own path: a ``JobQueue`` with ``executor = "ray"`` and ``gpu_share`` = N starts a
local Ray instance (``cifarlab.serve.ray_executor``), which gives each GPU run ``1/N`` of the GPU.
Every run is the tutorial's (batch 4, lr 0.001, momentum 0.9) on the ``fast`` pipeline, over
``--subset`` training images for ``--epochs``, then evaluated as in the app.

1. A warm-up round (not timed): N small runs at once, so that Ray has N worker processes with
   torch imported and the GPU initialised before anything is timed.
2. One run alone, then N runs submitted together.
3. Aggregate images/s = the images all the runs of a round trained ÷ the span from the first
   run's "start" event to the last run's "done" event (the same clock, the run store's, for
   both rounds). Each run's own images/s (``train()``'s figure) is listed too.

It fails (exit 1) when a run does not finish ``done``, when the N runs did not all train at the
same time (the last start came after the first end), or when a GPU run was not given 1/N of
the GPU. On the CPU the same machinery runs with CPU slots instead of GPU shares (``--runs``
at most the cores), which proves the script, not the sharing.
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
DEFAULT_ARCHIVE = ROOT.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"

from cifarlab.core.config import TrainConfig
from cifarlab.serve.queue import JobQueue
from cifarlab.serve.settings import load_settings

SESSION = "bench-share-0001"


def round_of(queue: JobQueue, config: TrainConfig, n: int, timeout: float, ray) -> dict:
    """Submit ``n`` runs together; wait for all; their figures, the round's span, and the least
    GPU Ray had free while they ran."""
    t0 = time.time()
    ids = [queue.submit(SESSION, config, name=f"share-{i + 1}") for i in range(n)]
    deadline = time.monotonic() + timeout
    least_free_gpu = None
    while True:
        runs = [queue.store.get(run_id) for run_id in ids]
        if all(r.finished for r in runs):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"the round of {n} did not finish in {timeout:.0f} s: "
                             f"{[r.status for r in runs]}")
        if sum(r.status == "running" for r in runs) == n:
            free = ray.available_resources().get("GPU", 0.0)
            least_free_gpu = free if least_free_gpu is None else min(least_free_gpu, free)
        time.sleep(0.2)
    wall = time.time() - t0
    rows = []
    for run in runs:
        if run.status != "done":
            raise SystemExit(f"run {run.id} ended {run.status}: {run.error}\n{run.traceback or ''}")
        (start,) = queue.store.events(run.id, kinds=["start"])
        (done,) = queue.store.events(run.id, kinds=["done"])
        worker = [e.data for e in queue.store.events(run.id, kinds=["worker"])]
        res = run.result
        rows.append({"id": run.id, "images": res["images"], "train_s": res["train_seconds"],
                     "images_per_s": res["images_per_second"], "accuracy": res["test_accuracy"],
                     "device_name": res.get("device_name"), "start_t": start.t, "done_t": done.t,
                     "worker": worker[0] if worker else None,
                     "asks": queue.executor.resources_for(run)})
    first, last = min(r["start_t"] for r in rows), max(r["done_t"] for r in rows)
    span = last - first
    return {"runs": rows, "span_s": span, "wall_s": wall, "least_free_gpu": least_free_gpu,
            "images": sum(r["images"] for r in rows),
            "aggregate_images_per_s": sum(r["images"] for r in rows) / span if span > 0 else None,
            # every run was training at one moment: the last one started before the first ended
            "all_at_once": max(r["start_t"] for r in rows) < min(r["done_t"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("CIFARLAB_DATA") or str(DEFAULT_ARCHIVE))
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--runs", type=int, default=4, help="runs at once; on a GPU, gpu_share too")
    ap.add_argument("--subset", type=int, default=10000, help="training images per run")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--pipeline", default="fast")
    ap.add_argument("--warm-subset", type=int, default=512,
                    help="training images of each warm-up run (0: no warm-up round)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a round may take")
    ap.add_argument("--start-timeout", type=float, default=120.0,
                    help="seconds Ray may take to start (more on a loaded machine)")
    ap.add_argument("--address", default=None,
                    help="a running Ray cluster to join (the ray_address setting; default: a Ray "
                         "instance of this machine's own, started by the queue)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    try:
        import ray
    except ImportError as err:
        print(f"Ray is not installed here ({err}): pip install -r requirements-ray.txt, or on "
              "the GPU machine the bundle bench/gpu_pack.sh makes", file=sys.stderr)
        return 2
    import torch

    gpu = args.device.startswith("cuda")
    config = TrainConfig(epochs=args.epochs, train_subset=args.subset,
                         batch_size=args.batch_size, pipeline=args.pipeline, num_workers=0,
                         device=args.device)
    work = Path(tempfile.mkdtemp(prefix="cifarlab-bench-share-"))
    # one person's many big runs: lift the per-person limits; N runs at once on the device
    settings = load_settings(env={}, home=str(work / "home"), data=args.data, executor="ray",
                             gpu_share=args.runs if gpu else 1, max_per_owner=50,
                             max_train_images=60000, max_epochs=500,
                             max_image_epochs_per_run=10**9, max_image_epochs_per_owner=10**9,
                             **({} if gpu else {"worker_threads": 1}),
                             **({"ray_address": args.address} if args.address else {}))
    head = (f"machine: {platform.machine()}, {os.cpu_count()} cores; python "
            f"{platform.python_version()}, torch {torch.__version__}, ray {ray.__version__}"
            + (f"; {torch.cuda.get_device_name(0)}" if gpu else ""))
    print(head, flush=True)
    print(f"each run: {config.describe()}; {args.runs} at once, gpu_share {settings.gpu_share}",
          flush=True)
    queue = JobQueue(settings=settings)
    try:
        deadline = time.monotonic() + args.start_timeout
        while queue.executor.devices() is None:   # the dispatcher thread starts Ray
            if time.monotonic() > deadline:
                raise SystemExit(f"Ray did not start in {args.start_timeout:.0f} s")
            time.sleep(0.1)
        cluster = dict(ray.cluster_resources())
        slots = queue.executor.slots_for(args.device)
        print(f"ray cluster: {cluster}; runs at once on {args.device}: {slots}", flush=True)
        if args.device not in queue.executor.devices():
            raise SystemExit(f"the Ray cluster has no {args.device}: {queue.executor.devices()}")
        if slots < args.runs:
            raise SystemExit(f"only {slots} runs fit on {args.device} at once, not {args.runs}")
        if args.warm_subset:
            t0 = time.perf_counter()
            round_of(queue, config.replace(train_subset=args.warm_subset), args.runs,
                     args.timeout, ray)
            print(f"warm-up round ({args.runs} runs of {args.warm_subset} images): "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
        alone = round_of(queue, config, 1, args.timeout, ray)
        _print_round("alone", alone)
        together = round_of(queue, config, args.runs, args.timeout, ray)
        _print_round(f"{args.runs} at once", together)
    finally:
        queue.shutdown()

    speedup = (together["aggregate_images_per_s"] / alone["aggregate_images_per_s"]
               if together["aggregate_images_per_s"] and alone["aggregate_images_per_s"] else None)
    per_run = statistics.median(r["images_per_s"] for r in together["runs"])
    print(f"\nsummary: one alone {alone['aggregate_images_per_s']:,.0f} images/s; {args.runs} at "
          f"once {together['aggregate_images_per_s']:,.0f} images/s together "
          f"(x{speedup or 0:.2f} of one alone), each {per_run:,.0f} images/s (median); all "
          f"{args.runs} trained at the same time: {together['all_at_once']}", flush=True)
    asks = together["runs"][0]["asks"]
    doc = {"environment": head, "config": config.to_dict(), "runs_at_once": args.runs,
           "gpu_share": settings.gpu_share, "cluster": cluster, "asks": asks,
           "alone": alone, "together": together, "speedup": speedup,
           "per_run_images_per_s_median": per_run}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(f"each run asked Ray for {asks}; least GPU free while all {args.runs} ran: "
          f"{together['least_free_gpu']}", flush=True)
    problems = []
    if args.runs > 1 and not together["all_at_once"]:
        problems.append(f"the {args.runs} runs did not train at the same time")
    if gpu and any(r["asks"].get("num_gpus") != round(1.0 / args.runs, 4)
                   for r in together["runs"]):
        problems.append(f"a run did not ask Ray for 1/{args.runs} of the GPU: "
                        f"{[r['asks'] for r in together['runs']]}")
    if gpu and together["least_free_gpu"] is not None and together["least_free_gpu"] > 1e-6:
        problems.append(f"{together['least_free_gpu']} of the GPU stayed free while all "
                        f"{args.runs} shares ran")
    for p in problems:
        print(f"FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


def _print_round(label: str, r: dict) -> None:
    each = ", ".join(f"{x['images_per_s']:,.0f}" for x in r["runs"])
    accuracy = ", ".join(f"{100 * x['accuracy']:.1f} %" for x in r["runs"])
    print(f"  {label:>10}: {r['images']:,} images in {r['span_s']:.2f} s (first start -> last "
          f"done) = {r['aggregate_images_per_s']:,.0f} images/s; each run {each} images/s; "
          f"submit -> all done {r['wall_s']:.2f} s; accuracy {accuracy}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
