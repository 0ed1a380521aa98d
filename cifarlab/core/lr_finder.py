"""The learning-rate finder (Smith 2017): a short probe whose lr grows exponentially, stopped
when the smoothed loss explodes; the suggestion (``suggest``)."""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

from cifarlab.core.config import TrainConfig
from cifarlab.core.modelspec import is_int
from cifarlab.errors import ConfigError, Problem

MIN_STEPS, MAX_STEPS, STEPS = 10, 200, 100   # a probe: at most 200 steps (fastai: 100)
LR_MIN, LR_MAX = 1e-5, 10.0                  # fastai's 1e-7..10 less two flat decades
LR_HI = 10.0                                 # the highest lr a config takes (TrainConfig.lr)
BETA = 0.95                                  # the loss's smoothing (torch-lr-finder)
DIVERGE = 4.0                                # stop past 4 × the best smoothed loss (fastai)
SKIP_START = 0.1                             # the first 10 % lean on the smoothing's start
FALL = 0.03                                  # a curve "falls" when its minimum is 3 % lower


def lr_at(i: int, n: int, lr_min: float, lr_max: float) -> float:
    """The lr of step ``i`` of ``n``: from ``lr_min`` to ``lr_max``, exponentially."""
    return lr_min * (lr_max / lr_min) ** (i / (n - 1))


def problems(steps: Any, lr_min: Any, lr_max: Any) -> list[Problem]:
    """What is wrong with a sweep's settings ([] when nothing)."""
    out = []
    if not (is_int(steps) and MIN_STEPS <= steps <= MAX_STEPS):
        out.append(Problem("lr_find_steps", "lr_find.steps", {"lo": MIN_STEPS, "hi": MAX_STEPS}))
    nums = [v for v in (lr_min, lr_max) if isinstance(v, (int, float))
            and not isinstance(v, bool) and math.isfinite(v)]
    if len(nums) < 2 or not 0 < lr_min < lr_max <= LR_HI:
        out.append(Problem("lr_find_range", "lr_find.range", {"hi": LR_HI}))
    return out


def check(steps: Any, lr_min: Any, lr_max: Any) -> dict:
    """The sweep's settings as a job's payload keeps them; ConfigError naming each bad one."""
    found = problems(steps, lr_min, lr_max)
    if found:
        raise ConfigError(found)
    return {"steps": steps, "lr_min": float(lr_min), "lr_max": float(lr_max)}


def find_lr(config: TrainConfig, data, steps: int = STEPS, lr_min: float = LR_MIN,
            lr_max: float = LR_MAX, should_stop: Callable[[], bool] | None = None,
            on_step: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Sweep the lr over ``steps`` steps of ``config`` on ``config.device``; the result as JSON."""
    # imported here: the queue checks a sweep's settings without importing torch
    from cifarlab.core.devices import resolve_device
    from cifarlab.core.train import build, to_device, train_step

    check(steps, lr_min, lr_max)
    device = resolve_device(config.device)
    model, criterion, optimizer, loader = build(config, data, device)
    lrs: list[float] = []
    losses: list[float | None] = []
    smoothed: list[float] = []
    avg, best, stop = 0.0, math.inf, None
    batches, images, t0 = iter(loader), 0, time.perf_counter()
    model.train()
    for i in range(steps):
        if should_stop is not None and should_stop():
            stop = "cancelled"
            break
        try:
            inputs, labels = next(batches)
        except StopIteration:   # fewer batches than steps: round the data again
            batches = iter(loader)
            inputs, labels = next(batches)
        lr = lr_at(i, steps, lr_min, lr_max)
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = train_step(model, criterion, optimizer,
                          *to_device(inputs, labels, device)).detach().item()
        lrs.append(lr)
        images += int(labels.shape[0])
        if not math.isfinite(loss):
            losses.append(None)   # JSON has no NaN
            stop = "nan"
            break
        losses.append(loss)
        avg = BETA * avg + (1 - BETA) * loss
        smoothed.append(avg / (1 - BETA ** (i + 1)))
        best = min(best, smoothed[-1])
        if on_step is not None:
            on_step(i + 1, steps)
        if smoothed[-1] > DIVERGE * best:
            stop = "exploded"
            break
    del batches
    low = int(np.argmin(smoothed)) if smoothed else None
    suggestion, rule = suggest(lrs, smoothed)
    return {"lrs": lrs, "losses": losses, "smoothed": smoothed, "stop": stop,
            "suggestion": suggestion, "rule": rule, "cancelled": stop == "cancelled",
            "lr_at_min": lrs[low] if low is not None else None, "steps": len(lrs),
            "images": images, "seconds": time.perf_counter() - t0, "lr_min": lr_min,
            "lr_max": lr_max, "device": str(device), "config": config.to_dict()}


def suggest(lrs: list[float], smoothed: list[float]) -> tuple[float | None, str | None]:
    """(the suggested lr, its rule): "steepest", where the smoothed loss falls fastest before
    its minimum, when it falls by ``FALL`` at least; else "edge_tenth", a tenth of the last lr
    before the loss climbs (a flat curve's minimum is only noise). (None, None) under 3 points."""
    if len(smoothed) < 3:
        return None, None
    s = np.asarray(smoothed)
    low, start = int(np.argmin(s)), int(SKIP_START * len(s))
    if low - start >= 2 and s[low] < (1 - FALL) * s[start]:
        slope = np.gradient(s, np.log10(np.asarray(lrs[:len(s)])))
        return float(lrs[start + int(np.argmin(slope[start:low]))]), "steepest"
    rising = np.flatnonzero(s > (1 + FALL) * np.minimum.accumulate(s))
    edge = int(rising[0]) - 1 if rising.size else len(s) - 1
    return float(lrs[max(edge, 0)]) / 10, "edge_tenth"


def run_job(payload: dict, ctx) -> dict:
    """The queue's "lr_find" kind: the config ``JobQueue.submit`` admitted (``payload["config"]``)
    on the run's device, with the sweep's checked settings; progress as the run's."""
    config = TrainConfig.admitted(payload["config"]).on_device(ctx.device)
    return find_lr(config, ctx.data(), payload["steps"], payload["lr_min"], payload["lr_max"],
                   should_stop=ctx.should_stop, on_step=lambda i, n: ctx.emit(
                       "progress", {"step": i, "total_steps": n}))
