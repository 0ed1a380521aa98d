"""How long each "why this class" view of the Inside the network page takes on the CPU.

    python bench/bench_inside.py                    # a tiny trained run, 20 test images
    python bench/bench_inside.py --images 50 --repeats 3 --threads 1
    python bench/bench_inside.py --markdown         # also a table for docs/benchmarks.md

Trains a small run (``--train-subset`` images, one epoch, the ``fast`` pipeline; the views
cost the same for any weights of the same shape), then times ``cifarlab.lab.inside.explain``
for each of Captum's four views on ``--images`` test images, predicted class as the target,
after one warm-up call per view (the first call of each view also pays for Captum's import and
its first autograd graph). Occlusion is timed twice: all 225 occluded images in one batch
(``perturbations_per_eval``, what the page does) and one image per forward pass, Captum's
default. Also times the forward pass with every activation and one neuron's arithmetic.
Wall times on a shared machine drift: the load average is printed beside them.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ARCHIVE = Path(os.environ.get("CIFARLAB_DATA") or ROOT.parent / "shared/data/cifar10-jpeg.tar.gz")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=20)
    p.add_argument("--repeats", type=int, default=1, help="timings per image and view")
    p.add_argument("--train-subset", type=int, default=2000)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)

    import numpy as np
    import torch

    t0 = time.perf_counter()
    import captum
    import captum.attr  # what the page's first "why" view pays once per process
    import_s = time.perf_counter() - t0

    from cifarlab.core.config import TrainConfig
    from cifarlab.core.data import load
    from cifarlab.core.train import train
    from cifarlab.lab import inside as I

    if args.threads:
        torch.set_num_threads(args.threads)
    data = load(str(ARCHIVE))
    config = TrainConfig(epochs=1, batch_size=32, lr=0.01, pipeline="fast", device="cpu",
                         train_subset=args.train_subset, seed=0, log_every=10**6)
    t0 = time.perf_counter()
    result = train(config, data, evaluate_after=True)
    model = result.model.eval()
    print(f"trained {args.train_subset} images in {time.perf_counter() - t0:.1f} s, "
          f"test accuracy {result.eval.accuracy:.1%}")

    rng = np.random.default_rng(0)
    indices = rng.choice(len(data.test_y), size=args.images, replace=False)
    x0 = I.to_input(data.test_x[int(indices[0])])
    for method in I.METHODS:                         # warm-up: imports, first graphs
        I.explain(model, x0, 0, method)
    I.explain(model, x0, 0, "occlusion", per_eval=1)

    times: dict[str, list[float]] = {m: [] for m in I.METHODS}
    times["occlusion, one image per pass"] = []
    times["activations (forward, every stage)"] = []
    times["one neuron by hand (conv2)"] = []
    for i in indices:
        x = I.to_input(data.test_x[int(i)])
        for _ in range(args.repeats):
            t = time.perf_counter()
            stages = I.activations(model, x)
            times["activations (forward, every stage)"].append(time.perf_counter() - t)
            t = time.perf_counter()
            I.neuron(model, x, "conv2", 3, 4, 5, stages)
            times["one neuron by hand (conv2)"].append(time.perf_counter() - t)
            target = int(I.stage(stages, "softmax").values.argmax())
            for method in I.METHODS:
                times[method].append(I.explain(model, x, target, method).seconds)
            times["occlusion, one image per pass"].append(
                I.explain(model, x, target, "occlusion", per_eval=1).seconds)

    load1 = os.getloadavg()[0]
    head = (f"{cpu_model()}, {os.cpu_count()} cores, "
            f"torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"captum {captum.__version__}, Python {platform.python_version()}, "
            f"load average {load1:.1f}")
    print(head)
    print(f"import captum.attr (torch already loaded): {import_s:.2f} s, once per process")
    rows = []
    for name, values in times.items():
        v = sorted(values)
        p90 = v[min(len(v) - 1, int(round(0.9 * (len(v) - 1))))]
        rows.append((name, statistics.median(v), p90, v[-1], len(v)))
        print(f"{name:38s} median {statistics.median(v) * 1000:8.1f} ms   p90 {p90 * 1000:8.1f}"
              f" ms   max {v[-1] * 1000:8.1f} ms   (n={len(v)})")
    if args.markdown:
        print("\n| view | median | 90th percentile | slowest | calls |\n|---|---|---|---|---|")
        for name, med, p90, worst, n in rows:
            print(f"| {name} | {med * 1000:.0f} ms | {p90 * 1000:.0f} ms | "
                  f"{worst * 1000:.0f} ms | {n} |")


if __name__ == "__main__":
    main()
