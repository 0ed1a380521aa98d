"""Figures from a timing result (numbers, never sentences), devices compared within one run."""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any, Iterable, Mapping

from cifarlab.core.config import TrainConfig
from cifarlab.lab.gpu.config import TUTORIAL_POINT
from cifarlab.lab.gpu.results import SweepResult

BUSY_SHARE = 0.5    # other work on at least this share of the cores: a busy machine
SPREAD_BUSY = 1.5   # slowest repeat ÷ fastest, at the median point
RUNS_BUSY = 0.67    # timed images/s ÷ the server's finished runs' images/s
_TUTORIAL_MODEL = TrainConfig().to_dict()["model"]


def point_key(row: dict) -> tuple:
    return row["pipeline"], row["batch_size"], row["width"]


def eager(rows: list[dict]) -> list[dict]:
    """The rows of steps launched kernel by kernel: all but the "GPU, graphed" series."""
    return [r for r in rows if not r.get("graphed")]


def speedups(result: SweepResult | list[dict]) -> list[dict]:
    """Accelerator images/s ÷ cpu images/s at each point measured on both (one recording)."""
    rows = [r for r in (result.rows if isinstance(result, SweepResult) else result)
            if not r["error"]]
    cpu = {point_key(r): r["images_per_s"] for r in rows if r["device"] == "cpu"}
    out = [{"device": r["device"], "pipeline": r["pipeline"], "batch_size": r["batch_size"],
            "width": r["width"], "speedup": r["images_per_s"] / cpu[point_key(r)],
            "graphed": bool(r.get("graphed"))}
           for r in rows if r["device"] != "cpu" and point_key(r) in cpu]
    return sorted(out, key=lambda s: (s["device"], s["graphed"], s["pipeline"], s["width"],
                                      s["batch_size"]))


def crossover(result: SweepResult | list[dict]) -> list[dict]:
    """Per accelerator, pipeline and width: the smallest batch_size beating the cpu (or None),
    and where the curves cross on log scales (estimate; None if it wins from the first)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for s in speedups(result):
        groups[(s["device"], s["graphed"], s["pipeline"], s["width"])].append(s)
    out = []
    for (device, graphed, pipeline, width), ss in groups.items():   # sorted, as speedups are
        first = next((i for i, s in enumerate(ss) if s["speedup"] > 1), None)
        estimate = None
        if first:  # not None and not 0: it loses at the batch before
            a, b = ss[first - 1], ss[first]
            f = math.log(a["speedup"]) / math.log(a["speedup"] / b["speedup"])
            estimate = a["batch_size"] * (b["batch_size"] / a["batch_size"]) ** f
        best = max(ss, key=lambda s: s["speedup"])
        out.append({"device": device, "pipeline": pipeline, "graphed": graphed, "width": width,
                    "batch_size": None if first is None else ss[first]["batch_size"],
                    "speedup": None if first is None else ss[first]["speedup"],
                    "estimate": estimate, "max_speedup": best["speedup"],
                    "max_batch_size": best["batch_size"]})
    return out


def graph_gains(result: SweepResult) -> list[dict]:
    """The "GPU, graphed" series against the same device eager: ``gain``, graphed ÷ eager."""
    rows = result.ok_rows()
    plain = {(r["device"], *point_key(r)): r for r in eager(rows) if r["images_per_s"]}
    out = [{"device": g["device"], "pipeline": g["pipeline"], "batch_size": g["batch_size"],
            "width": g["width"], "eager_step_ms": e["step_ms"], "step_ms": g["step_ms"],
            "gain": g["images_per_s"] / e["images_per_s"]}
           for g in rows if g.get("graphed") and (e := plain.get((g["device"], *point_key(g))))]
    return sorted(out, key=lambda x: (x["device"], x["pipeline"], x["width"], x["batch_size"]))


def machine_load(result: SweepResult) -> dict:
    """"quiet", "busy" or "unknown"; "others": the load less the timing's own threads/workers."""
    env = result.environment or {}
    cores = env.get("cpu_count")
    threads = (env.get("settings") or {}).get("torch_threads") or env.get("torch_threads") or cores
    start = (env.get("load_average_start") or [None])[0]
    rows = [r for r in result.rows if r.get("load_1m") is not None]
    if not cores or (start is None and not rows):
        return {"state": "unknown", "load": None, "others": None, "cores": cores}
    before = [start] if start is not None else []
    seen = before + [r["load_1m"] for r in rows]
    worst = max(before + [r["load_1m"] - min(cores, threads) - (r["num_workers"] or 0)
                          for r in rows])
    return {"state": "busy" if worst >= BUSY_SHARE * cores else "quiet", "load": max(seen),
            "others": max(0.0, worst), "cores": cores}


def spread(res: SweepResult) -> float | None:
    """The median point's slowest repeat ÷ its fastest; None without repeats."""
    ratios = [r["step_ms_max"] / r["step_ms_min"] for r in eager(res.ok_rows())
              if (r.get("repeats") or 0) > 1 and r.get("step_ms_min") and r.get("step_ms_max")]
    return statistics.median(ratios) if ratios else None


def runs_check(res: SweepResult, measured: Iterable[Mapping[str, Any]]) -> dict | None:
    """The tutorial's point timed here against this server's finished runs of it (medians)."""
    if res.recorded_elsewhere:
        return None
    pipe, batch, _ = TUTORIAL_POINT
    for row in [r for r in eager(res.ok_rows()) if point_key(r) == TUTORIAL_POINT]:
        same = [m for m in measured if m.get("device") == row["device"]
                and m["config"].get("pipeline") == pipe and m["config"].get("batch_size") == batch
                and m["config"].get("model") == _TUTORIAL_MODEL and m.get("images_per_second")]
        if same:
            ips = statistics.median(float(m["images_per_second"]) for m in same)
            full = [m for m in same if m["config"].get("epochs") == 2
                    and not m["config"].get("train_subset")]
            return {"device": row["device"], "timed_ips": row["images_per_s"], "run_ips": ips,
                    "runs": len(same), "ratio": row["images_per_s"] / ips,
                    "run_s": statistics.median(float(m["train_seconds"]) for m in full)
                    if full else None}
    return None


def assess(res: SweepResult, measured: Iterable[Mapping[str, Any]] = ()) -> dict:
    """Whether the machine was busy, and which of "load", "spread", "runs" say so."""
    load, sp, runs = machine_load(res), spread(res), runs_check(res, list(measured))
    reasons = [name for name, said in (("load", load["state"] == "busy"),
                                       ("spread", sp is not None and sp >= SPREAD_BUSY),
                                       ("runs", runs is not None and runs["ratio"] < RUNS_BUSY))
               if said]
    return {"busy": bool(reasons), "reasons": reasons, "load": load, "spread": sp, "runs": runs}
