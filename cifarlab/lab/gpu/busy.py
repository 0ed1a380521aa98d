"""Was the machine busy while it timed? Three kinds of evidence, any one enough:

1. **load**: the 1-minute load average, the timing's own threads taken off, at or over half the
   cores. It lags a burst by a minute and, in a VM, does not see a neighbour taking the host.
2. **spread**: the median point's slowest repeat at ``SPREAD_BUSY`` times its fastest or more
   (quiet repeats agree within a few per cent; uploads carry this evidence too).
3. **runs**: a timing at under ``RUNS_BUSY`` of a full training run's speed here with the same
   settings (a run includes data waits and start-up, so it is never faster than the bare step).

A busy result says so first, and its extrapolations are not headlined: busy-ness made them.
"""
from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping

from cifarlab.core.config import TrainConfig
from cifarlab.lab.gpu import analysis
from cifarlab.lab.gpu.config import TUTORIAL_POINT
from cifarlab.lab.gpu.results import SweepResult

SPREAD_BUSY = 1.5   # slowest repeat ÷ fastest, at the median point
RUNS_BUSY = 0.67    # timed images/s ÷ the server's finished runs' images/s
_TUTORIAL_MODEL = TrainConfig().to_dict()["model"]


def spread(res: SweepResult) -> float | None:
    """The median point's slowest repeat ÷ its fastest (CPU and accelerators alike); None
    without repeats."""
    ratios = [r["step_ms_max"] / r["step_ms_min"] for r in analysis.eager(res.ok_rows())
              if (r.get("repeats") or 0) > 1 and r.get("step_ms_min") and r.get("step_ms_max")]
    return statistics.median(ratios) if ratios else None


def runs_check(res: SweepResult, measured: Iterable[Mapping[str, Any]]) -> dict | None:
    """The tutorial's point as timed here against this server's finished runs with the
    tutorial's network, pipeline and batch size on the same device: {"device", "timed_ips",
    "run_ips" (their median), "runs", "ratio", "run_s" (their median training time)}; None
    when the result was recorded elsewhere or there is nothing to compare."""
    if res.recorded_elsewhere:
        return None
    pipe, batch, width = TUTORIAL_POINT
    for row in analysis.eager(res.ok_rows()):
        if analysis.point_key(row) != TUTORIAL_POINT:
            continue
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
    """{"busy": bool, "reasons": ["load", "spread", "runs"] (those that say busy), "load"
    (``machine_load``), "spread", "runs" (``runs_check``)}."""
    load, sp, runs = analysis.machine_load(res), spread(res), runs_check(res, list(measured))
    reasons = [name for name, said in (("load", load["state"] == "busy"),
                                       ("spread", sp is not None and sp >= SPREAD_BUSY),
                                       ("runs", runs is not None and runs["ratio"] < RUNS_BUSY))
               if said]
    return {"busy": bool(reasons), "reasons": reasons, "load": load, "spread": sp, "runs": runs}

