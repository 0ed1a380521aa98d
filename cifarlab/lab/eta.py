"""How long a training run takes, the one answer every page shows: a running run's steps left at
its speed since start-up ended; before it starts, the median of finished runs here like it."""
from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping, Sequence

from cifarlab import i18n

# Knobs that change what a run learns but not how long a step takes; the device knob as chosen
# ("auto") is left to the device the run actually trained on.
TIME_FREE = frozenset({"lr", "momentum", "seed", "log_every", "label_smoothing", "nesterov",
                       "weight_decay", "schedule", "device"})
MIN_STEADY_STEPS = 20       # steps past start-up before the speed is trusted ...
MIN_STEADY_S = 1.5          # ... and seconds, so a few fast steps do not decide it
MIN_STEADY_FRACTION = 0.02  # ... and this share of the run


def same_settings(a: Any, b: Any) -> bool:
    """Equal in every knob but ``TIME_FREE``: a history figure is never scaled."""
    a, b = (c.to_dict() if hasattr(c, "to_dict") else dict(c or {}) for c in (a, b))
    return all(a.get(k) == b.get(k) for k in (set(a) | set(b)) - TIME_FREE)


def steady(progress: Mapping[str, Any] | None) -> dict | None:
    """{"left_s", "total_s", "steps_per_s"} since start-up ended; None while too little is known."""
    p = progress or {}
    step, total = int(p.get("step") or 0), int(p.get("total_steps") or 0)
    s0, t0, now = p.get("steady_step"), p.get("steady_s"), p.get("elapsed_s")
    if None in (s0, t0, now) or not total:
        return None
    steps, seconds = step - int(s0), float(now) - float(t0)
    if steps < max(MIN_STEADY_STEPS, MIN_STEADY_FRACTION * total) or seconds < MIN_STEADY_S:
        return None
    rate = steps / seconds
    left = max(0, total - step) / rate
    return {"left_s": left, "total_s": float(now) + left, "steps_per_s": rate}


def estimate(config: Any, device: str | None, measured: Iterable[Mapping[str, Any]] = (),
             progress: Mapping[str, Any] | None = None) -> dict:
    """{"kind": "run" | "estimating" | "history" | "unknown", ...}: a running run's own speed, else
    the median wall time of the ``measured`` runs with these settings on ``device``."""
    if progress is not None:
        own = steady(progress)
        return {"kind": "estimating"} if own is None else {"kind": "run", **own}
    walls = [float(m["wall_seconds"]) for m in measured
             if device is not None and m.get("device") == device
             and same_settings(m["config"], config) and m.get("wall_seconds")]
    if not walls:
        return {"kind": "unknown"}
    return {"kind": "history", "seconds": statistics.median(walls), "runs": len(walls)}


def for_form(config: Any, device: str | None, measured: Iterable[Mapping[str, Any]],
             runs: Sequence[Any]) -> dict:
    """The form's estimate; "below" while such a run trains (its live view has a fresher one)."""
    if any(r.status == "running" and r.device == device and same_settings(r.config or {}, config)
           for r in runs):
        return {"kind": "below"}
    return estimate(config, device, measured)


def text(est: Mapping[str, Any], lang: str) -> str:
    t = i18n.translator(lang)
    kind = est["kind"]
    if kind == "run":
        return t("eta.left", time=i18n.duration(max(1.0, est["left_s"]), lang))
    if kind == "history":
        return t("eta.history", time=i18n.duration(est["seconds"], lang),
                 runs=t("counts.runs", n=est["runs"]))
    return t(f"eta.{kind}")   # estimating, below, unknown
