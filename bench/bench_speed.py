"""Speed as a lesson (issue 13): the ablation "what each trick buys" and the one-minute preset.

    python bench/bench_speed.py                          # every row, then the preset 3 times
    python bench/bench_speed.py --rows bn3,augment --repeat 0   # re-measure two rows only
    python bench/bench_speed.py --subset 10000 --repeat 3       # rows on a 10,000-image subset

Each row of ``cifarlab.lab.speed.ROWS`` adds one trick to the row before (the tutorial first,
the ``one_minute_cpu`` preset last) and trains it on the CPU with ``cifarlab.core.train``,
recording test accuracy and training seconds; then the preset itself runs ``--repeat`` times
on the whole training set. Prints a table and writes the record the Speed page reads
(``cifarlab/lab/speed_ablation.json``; rows not re-measured are kept), after every run, so an
interrupted benchmark keeps what it measured. Tee its output into docs/cpu-results/.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cifarlab.core import data as data_mod
from cifarlab.core.config import PRESETS
from cifarlab.core.train import train
from cifarlab.lab import speed


def machine() -> dict:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform()}


def run(config, data) -> dict:
    load_before = os.getloadavg()[0]
    result = train(config, data)
    return {"accuracy": result.eval.accuracy, "seconds": result.train_seconds,
            "images_per_second": result.images_per_second, "steps": result.steps,
            "eval_seconds": result.eval.seconds, "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2), "config": config.to_dict()}


def save(record: dict, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", default=",".join(speed.ROW_NAMES),
                   help="rows to measure, comma-separated (all: " + ",".join(speed.ROW_NAMES)
                        + "); 'none' for none")
    p.add_argument("--repeat", type=int, default=3, help="runs of the one_minute_cpu preset (3)")
    p.add_argument("--subset", type=int, default=None,
                   help="train the rows on this many images (default: all 50,000)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: torch's, the cores); on a busy machine 1 "
                        "is often faster")
    p.add_argument("--data", default=None)
    p.add_argument("--out", default=str(speed.RECORD), help="the record (the Speed page's)")
    p.add_argument("--note", default="", help="a note kept in the record (e.g. 'shared machine')")
    args = p.parse_args(argv)
    names = [] if args.rows == "none" else [n.strip() for n in args.rows.split(",") if n.strip()]
    unknown = set(names) - set(speed.ROW_NAMES)
    if unknown:
        p.error(f"unknown rows: {', '.join(sorted(unknown))}")

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    out = Path(args.out)
    record = speed.load_record(out) or {}
    record.update({"date": dt.date.today().isoformat(), "machine": machine(),
                   "subset": args.subset, "note": args.note,
                   "command": "python bench/bench_speed.py " + " ".join(argv or sys.argv[1:])})
    rows = {r["name"]: r for r in record.get("rows", [])}
    data = data_mod.load(args.data)
    print(f"machine: {record['machine']}\nrows: {names or '-'}; subset: {args.subset or 'all'}; "
          f"preset repeats: {args.repeat}", flush=True)
    base = PRESETS["tutorial"].replace(device=args.device)
    for name, config in speed.row_configs(base):
        if name not in names:
            continue
        config = config.replace(train_subset=args.subset)
        t0 = time.perf_counter()
        rows[name] = {"name": name, **run(config, data)}
        r = rows[name]
        print(f"{name:18s} accuracy {100 * r['accuracy']:5.1f} %  train {r['seconds']:7.1f} s  "
              f"{r['images_per_second']:7.0f} img/s  (wall {time.perf_counter() - t0:.0f} s, "
              f"load {r['load_before']}->{r['load_after']})", flush=True)
        record["rows"] = [rows[n] for n in speed.ROW_NAMES if n in rows]
        save(record, out)
    if args.repeat:
        record["preset_runs"] = []
    for i in range(args.repeat):
        config = PRESETS["one_minute_cpu"].replace(device=args.device)
        r = run(config, data)
        record["preset_runs"].append(r)
        print(f"one_minute_cpu #{i + 1}: accuracy {100 * r['accuracy']:5.1f} %  train "
              f"{r['seconds']:6.1f} s  {r['images_per_second']:6.0f} img/s  "
              f"(load {r['load_before']}->{r['load_after']})", flush=True)
        save(record, out)

    print("\n| row | test accuracy | training s | images/s |\n|---|---:|---:|---:|")
    for r in record.get("rows", []):
        print(f"| {r['name']} | {100 * r['accuracy']:.1f} % | {r['seconds']:.1f} | "
              f"{r['images_per_second']:.0f} |")
    for i, r in enumerate(record.get("preset_runs", []), 1):
        print(f"| one_minute_cpu run {i} | {100 * r['accuracy']:.1f} % | {r['seconds']:.1f} | "
              f"{r['images_per_second']:.0f} |")
    print(f"record: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
