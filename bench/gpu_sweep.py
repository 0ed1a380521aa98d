"""The full CPU vs GPU timing sweep on every device this machine has, saved for the timing lab.

    python bench/gpu_sweep.py                      # every device, the full grid, + breakdowns
    python bench/gpu_sweep.py --devices cpu,cuda:0 --max-seconds 4
    python bench/gpu_sweep.py --quick              # a small grid, to check the machine first

Writes docs/gpu-results/<gpu-or-hostname>-<date>.json and .csv (rewritten after every point, so
a run cut short keeps what it measured) and prints the table, the speedups, where the curves
cross and the phase breakdowns. Load the files in the app, or with
`python -m cifarlab bench --show FILE`; they are labelled as recorded on this host and date.

The whole run is bounded: each point gets --max-seconds (warm-up included; steps are cut short,
and the number actually timed is recorded), so its length is printed before it starts.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cifarlab.lab import gpu as timing  # noqa: E402
from cifarlab.errors import CifarLabError  # noqa: E402


def file_stem(devices: list[str]) -> str:
    """The first GPU's name (else the host name) and today's date: nvidia-h100-80gb-hbm3-2025-06-01."""
    from cifarlab.core.devices import list_devices

    names = [d.name for d in list_devices() if d.id in devices and d.kind != "cpu"]
    label = names[0] if names else timing._hostname()
    slug = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "machine"
    return f"{slug}-{datetime.now(timezone.utc):%Y-%m-%d}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", default="all", help="cpu,cuda:0,... or all (default)")
    p.add_argument("--batch-sizes", default="4,16,64,256,1024")
    p.add_argument("--widths", default="1,2,4,8")
    p.add_argument("--pipelines", default="fast,tutorial")
    p.add_argument("--steps", type=int, default=50, help="timed steps per repeat (50)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up steps, timed apart (10)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-seconds", type=float, default=5.0, help="budget per point (5 s)")
    p.add_argument("--num-workers", type=int, default=2, help="tutorial DataLoader workers (2)")
    p.add_argument("--no-breakdown", action="store_true", help="skip the phase breakdown pass")
    p.add_argument("--data", default=None, help="a slice of the real training set instead of "
                                                "synthetic images (image folder, .tar.gz)")
    p.add_argument("--out-dir", default=str(ROOT / "docs" / "gpu-results"))
    p.add_argument("--quick", action="store_true", help="batch 4,64,1024, widths 1,8, 10 steps")
    args = p.parse_args(argv)
    if args.quick:
        args.batch_sizes, args.widths, args.steps, args.warmup = "4,64,1024", "1,8", 10, 3

    try:
        cfg = timing.SweepConfig(
            devices=args.devices, batch_sizes=timing._cli_ints(args.batch_sizes, "batch_sizes"),
            widths=timing._cli_ints(args.widths, "widths"), pipelines=args.pipelines,
            steps=args.steps, warmup=args.warmup, repeats=args.repeats,
            max_seconds=args.max_seconds, num_workers=args.num_workers,
            images="real" if args.data else "synthetic", breakdown=not args.no_breakdown)
        devices = cfg.resolved_devices()
        data = None
        if args.data:
            from cifarlab.core import data as data_mod

            data = data_mod.load(args.data)
    except CifarLabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    stem = Path(args.out_dir) / file_stem(devices)
    if stem.with_suffix(".json").exists():
        stem = stem.with_name(f"{stem.name}-{datetime.now(timezone.utc):%H%M%S}")
    outs = [stem.with_suffix(".json"), stem.with_suffix(".csv")]
    points = cfg.points(devices)
    passes = len(cfg.breakdown_passes(devices))
    env = timing.sweep_environment(devices)
    print(f"host {env['hostname']}; torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}; "
          f"cpu: {env['cpu']}")
    for d in env["devices"]:
        mem = f", {d['memory_bytes'] / 2**30:.0f} GiB" if d.get("memory_bytes") else ""
        print(f"  {d['id']}: {d['name']}{mem}")
    print(f"{len(points)} points and {passes} breakdown passes, at most ~{args.max_seconds:g} s "
          f"each (plus setup): at most about "
          f"{timing.format_seconds((len(points) + passes) * (args.max_seconds + 1))}."
          f"\nwriting {outs[0]} and {outs[1]} as it goes\n", flush=True)

    t0 = time.perf_counter()
    result = timing.run_sweep(cfg, on_result=timing.TablePrinter(), data=data, save_to=outs)
    print()
    for line in timing.summary_lines(result):
        print(line)
    print(f"\n{len(result.rows)} points in {time.perf_counter() - t0:.0f} s; saved {outs[0]} "
          f"and {outs[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
