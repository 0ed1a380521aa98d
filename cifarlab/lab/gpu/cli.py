"""``python -m cifarlab bench``: the CPU vs GPU sweep from the terminal (parsing needs no torch)."""
from __future__ import annotations

import argparse
import re
from datetime import datetime, UTC
from pathlib import Path
from typing import Callable

from cifarlab import i18n
from cifarlab.lab.gpu.config import SweepConfig, estimate_seconds

SWEEP_DEFAULTS = {"warmup": 10, "max_seconds": 5.0}
WIDTHS = (16, 17, 10, 5, 10, 9, 17, 10, 6, 0)   # the table's columns, as wide as their values


def ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v.strip())


def seconds(text: str) -> float | None:
    return None if text.strip().lower() in ("none", "", "off") else float(text)


def register_cli(subparsers) -> None:
    d, on = SweepConfig(), argparse.BooleanOptionalAction
    p = subparsers.add_parser("bench", help="time training on cpu and accelerators: batch size x "
                                            "width sweep, speedups, crossover")
    p.add_argument("--sweep", action="store_true",
                   help="record the full sweep for the timing lab: breakdown on, warm-up 10, "
                        "5 s per point, saved to --out-dir as <gpu>-<date>.json and .csv")
    p.add_argument("--devices", default="all", help="cpu,cuda:0,mps or all (default: all)")
    unset = argparse.SUPPRESS   # an option not typed: --sweep's, else SweepConfig's
    p.add_argument("--batch-sizes", type=ints, default=unset,
                   help=f"default {','.join(map(str, d.batch_sizes))}")
    p.add_argument("--widths", type=ints, default=unset,
                   help=f"width multipliers (default {','.join(map(str, d.widths))})")
    p.add_argument("--pipelines", default=",".join(d.pipelines), help="fast,tutorial")
    p.add_argument("--steps", type=int, default=unset,
                   help=f"timed steps per repeat (default {d.steps})")
    p.add_argument("--warmup", type=int, default=unset,
                   help=f"warm-up steps, timed apart (default {d.warmup}; "
                        f"{SWEEP_DEFAULTS['warmup']} with --sweep)")
    p.add_argument("--repeats", type=int, default=unset, help=f"default {d.repeats}")
    p.add_argument("--max-seconds", type=seconds, default=unset,
                   help=f"time budget per point in seconds, or 'none' (default {d.max_seconds:g}; "
                        f"{SWEEP_DEFAULTS['max_seconds']:g} with --sweep)")
    p.add_argument("--num-workers", type=int, default=unset,
                   help=f"DataLoader workers of the tutorial pipeline (default {d.num_workers})")
    p.add_argument("--breakdown", action=on,
                   help="also time the phases of a step (a separate pass; on with --sweep)")
    p.add_argument("--graphed", action=on,
                   help="also time the fast pipeline's step replayed as one CUDA graph on each "
                        "CUDA device (the 'GPU, graphed' series; on with --sweep)")
    p.add_argument("--out", action="append", default=[], help="save to .json or .csv (repeatable)")
    p.add_argument("--out-dir", help="with --sweep: where the files go (default docs/gpu-results)")
    p.set_defaults(handler=cmd_bench)


def config_from_args(args) -> SweepConfig:
    """The SweepConfig the command line asks for (ConfigError naming each bad value)."""
    typed = {n: getattr(args, n) for n in ("batch_sizes", "widths", "steps", "warmup", "repeats",
                                           "max_seconds", "num_workers") if hasattr(args, n)}
    return SweepConfig(
        devices=args.devices, pipelines=args.pipelines,
        breakdown=args.sweep if args.breakdown is None else args.breakdown,
        graphed=args.sweep if args.graphed is None else args.graphed,
        **{**(SWEEP_DEFAULTS if args.sweep else {}), **typed})


def cmd_bench(args) -> int:
    from cifarlab.lab.gpu.results import check_suffix

    cfg = config_from_args(args)
    outs = [check_suffix(o) for o in args.out]
    devices = cfg.resolved_devices()  # an absent device fails here, before anything runs
    if args.sweep:
        outs += sweep_files(devices, args.out_dir)
        print_plan(cfg, devices, outs)
    from cifarlab.lab.gpu.measure import run_sweep

    result = run_sweep(cfg, on_result=table_printer(), save_to=outs)
    for line in summary_lines(result):
        print(line)
    for out in outs:
        print(f"saved: {out}")
    return 0


def sweep_files(devices: list[str], out_dir: str | None) -> list[Path]:
    """docs/gpu-results/<first GPU's name, else the host>-<date>[-<time>].json and .csv."""
    from cifarlab.core.devices import list_devices
    from cifarlab.lab.gpu.measure import hostname
    from cifarlab.lab.gpu.results import RESULTS_DIR

    names = [d.name for d in list_devices() if d.id in devices and d.kind != "cpu"]
    slug = re.sub(r"[^a-z0-9]+", "-", (names[0] if names else hostname()).lower()).strip("-")
    now = datetime.now(UTC)
    stem = Path(out_dir or RESULTS_DIR) / f"{slug or 'machine'}-{now:%Y-%m-%d}"
    if stem.with_suffix(".json").exists():
        stem = stem.with_name(f"{stem.name}-{now:%H%M%S}")
    return [stem.with_suffix(".json"), stem.with_suffix(".csv")]


def print_plan(cfg: SweepConfig, devices: list[str], outs: list[Path]) -> None:
    estimate = estimate_seconds(cfg, devices)
    bound = f"at most about {i18n.duration(estimate)}" if estimate else "no time budget"
    print(f"{len(cfg.points(devices))} points and {len(cfg.breakdown_passes(devices))} breakdown "
          f"passes: {bound}.\nwriting {' and '.join(map(str, outs))} as it goes\n", flush=True)


# -- printing

def table_printer() -> Callable[[dict], None]:
    """An on_result callback printing each row as it arrives, as the page's table (in English)."""
    rows: list[dict] = []

    def print_row(row: dict) -> None:
        import pandas as pd

        from cifarlab.lab.gpu.report import rows_table

        rows.append(row)
        table = rows_table(rows, "en")
        last = ["-" if pd.isna(v) else v for v in table.iloc[-1]]
        for cells in ([table.columns] if len(rows) == 1 else []) + [last]:
            print("  ".join(str(c).rjust(w) for c, w in zip(cells, WIDTHS)), flush=True)
    return print_row


def plain(markdown: str) -> str:
    """The page's Markdown sentence as terminal text: no bold, no escapes."""
    return re.sub(r"\\(.)", r"\1", markdown.replace("**", "").replace("\u200b", ""))


def summary_lines(result) -> list[str]:
    """What the page says about ``result`` (in English, as plain text), and its breakdowns."""
    from cifarlab.lab.gpu import report
    from cifarlab.lab.gpu.analysis import assess
    from cifarlab.lab.gpu.results import PHASES

    judged = assess(result)
    lines = [plain(f"{k}: {v}") for k, v in report.hardware_table(result, "en").to_numpy()]
    if judged["busy"]:
        lines.append(plain(report.provenance(result, "en", judged)["busy"]))
    if not any(r["device"] != "cpu" for r in result.rows):
        lines.append("no accelerator measured: nothing to compare with the cpu here "
                     "(see docs/gpu-results for results recorded on a GPU)")
    pipelines = dict.fromkeys(r["pipeline"] for r in result.rows)
    lines += dict.fromkeys(plain(line) for p in pipelines   # a busy machine's "none" once
                           for line in report.crossover_lines(result, p, "en", judged["busy"]))
    for b in result.breakdowns:   # the sum of the phases against a step timed without them
        parts = b["error"] or (", ".join(f"{p} {b[p + '_s'] * 1000:.3f}" for p in PHASES)
                               + f"; sum {b['total_s'] * 1000:.3f}, alone {b['step_s'] * 1000:.3f}")
        lines.append(f"breakdown {b['device']} {b['pipeline']} batch {b['batch_size']}, "
                     f"ms/step: {parts}")
    lines += [plain(line) for line in report.graph_gain_lines(result, "en")]
    if result.cancelled:
        lines.append("stopped early: the rows above are what was measured")
    return lines
