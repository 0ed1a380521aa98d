"""Measuring as airbench times: training's own step, no ``loss.item()`` in the timed loop,
warm-up apart, the device synchronised before every clock read, medians of repeats."""
from __future__ import annotations

import os
import socket
import statistics
import time
from collections import defaultdict
from datetime import datetime, UTC
from pathlib import Path
from typing import Callable, Iterable

import torch

from cifarlab.core.devices import environment, list_devices, resolve_device
from cifarlab.core.probes import finite  # JSON has no NaN: a diverged loss is None
from cifarlab.core.train import to_device
from cifarlab.lab.gpu.config import EPOCH_IMAGES, TUTORIAL_POINT, SweepConfig
from cifarlab.lab.gpu.results import (BREAKDOWN_COLUMNS, COLUMNS, OOM, PHASES, SweepResult,
                                      blank, check_suffix)
from cifarlab.lab.gpu.step import (Stopped, Workload, cleanup, is_out_of_memory,
                                   run_steps, sync_for, timing_settings)

WARMUP_SHARE = 0.25   # at most this share of a point's budget goes to warm-up


def hostname() -> str:
    return socket.gethostname() or "unknown host"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):  # not on Windows
        return None


def _point(device, columns: dict[str, type], work: dict) -> tuple[torch.device, dict]:
    """(the device, a row of ``columns`` with what is known before measuring ``work``)."""
    dev = resolve_device(device)   # "cuda" -> "cuda:0": the id list_devices gives
    info = next((d for d in list_devices() if d.id == str(dev)), None)
    known = dict(device=str(dev), device_kind=dev.type,
                 device_name=info.name if info else str(dev),
                 device_memory_bytes=info.memory_bytes if info else None,
                 pipeline=work["pipeline"], batch_size=work["batch_size"], width=work["width"],
                 host=hostname(), recorded_at=now_iso(), torch=torch.__version__,
                 cuda=torch.version.cuda or "")
    return dev, {**blank(columns), **{k: v for k, v in known.items() if k in columns}}


def step_stats(per_step_s: list[float], batch_size: int) -> dict:
    lo, med, hi = min(per_step_s), statistics.median(per_step_s), max(per_step_s)
    return {"step_ms": med * 1000, "step_ms_min": lo * 1000, "step_ms_max": hi * 1000,
            "images_per_s": batch_size / med, "images_per_s_min": batch_size / hi,
            "images_per_s_max": batch_size / lo, "epoch_s": EPOCH_IMAGES * med / batch_size}


def _timed(dev: torch.device, measure: Callable[[], dict]) -> dict | None:
    """measure()'s figures under the timing settings; None when stopped, or an OOM error row."""
    figures, oom = None, False
    try:
        with timing_settings(dev):
            figures = measure()
    except Stopped:
        figures = None
    except Exception as err:
        if not is_out_of_memory(err):
            raise
        oom = True  # handled after the except block, once the traceback (and its tensors) is gone
    cleanup(dev)
    return {"error": OOM} if oom else figures


# -- one point

def measure_point(device, batch_size: int, width: int = 1, pipeline: str = "fast",
                  steps: int = 50, warmup: int = 5, repeats: int = 3,
                  max_seconds: float | None = None, num_workers: int = 2,
                  should_stop: Callable[[], bool] | None = None,
                  graphed: bool = False) -> dict | None:
    """The training step timed at one point: a row (COLUMNS), None if should_stop() said so."""
    work = dict(batch_size=batch_size, width=width, pipeline=pipeline, num_workers=num_workers,
                graphed=graphed)
    dev, row = _point(device, COLUMNS, work)
    row.update(steps=steps, repeats=repeats, graphed=graphed,
               tutorial_point=(pipeline, batch_size, width) == TUTORIAL_POINT)
    measured = _timed(dev, lambda: _measure(dev, work, steps, warmup, repeats, max_seconds,
                                            should_stop or (lambda: False)))
    row["load_1m"] = (load_average() or [None])[0]
    return None if measured is None else {**row, **measured}


def _measure(dev, work_args: dict, steps, warmup, repeats, max_seconds, stop) -> dict:
    sync = sync_for(dev)
    t_setup = time.perf_counter()
    work = Workload(dev, **work_args)
    try:
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        sync()
        setup_s = time.perf_counter() - t_setup
        # warm-up, measured apart: the first step alone (first-call costs), then the rest
        warm = [run_steps(1, None, work.step, sync, stop)] if warmup else []
        if warmup > 1:
            budget = (None if max_seconds is None
                      else max(0.0, max_seconds * WARMUP_SHARE - warm[0][1]))
            warm.append(run_steps(warmup - 1, budget, work.step, sync, stop))
        if capture := work.steps_to_capture():  # a graphed step is captured here, never timed
            warm.append(run_steps(capture, None, work.step, sync, stop))
        warm_done, warm_s = sum(n for n, _, _ in warm), sum((s for _, s, _ in warm), 0.0)
        left = None if max_seconds is None else max(0.0, max_seconds - warm_s) / repeats
        per_step, timed, loss = [], 0, None
        for _ in range(repeats):
            n, s, loss = run_steps(steps, left, work.step, sync, stop)
            per_step.append(s / n)
            timed += n
        if work_args["graphed"] and (why := work.not_graphed()):  # the warm-up captures it
            return {"error": f"not graphed: {why}"}
        row = {"params": work.params, "num_workers": work.config.num_workers,
               "setup_s": setup_s, "warmup_steps": warm_done, "warmup_s": warm_s,
               "first_step_ms": warm[0][1] * 1000 if warmup else None, "timed_steps": timed,
               "budget_hit": timed < steps * repeats, "loss": finite(loss.item()),
               **step_stats(per_step, work.config.batch_size)}
        if dev.type == "cuda":
            row["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated(dev))
        return row
    finally:
        work.close()


# -- the breakdown pass: where the time of a step goes

def breakdown(device, batch_size: int, width: int = 1, pipeline: str = "tutorial",
              steps: int = 20, warmup: int = 3, num_workers: int = 2,
              max_seconds: float | None = None) -> dict:
    """Seconds per step in each phase (PHASES), total_s their sum, and step_s a step timed
    without phase boundaries: a separate pass, never mixed with the sweep's figures."""
    work = dict(batch_size=batch_size, width=width, pipeline=pipeline, num_workers=num_workers)
    dev, out = _point(device, BREAKDOWN_COLUMNS, work)
    out.update({"pass": "breakdown", "method": "sync"})
    out.update(_timed(dev, lambda: _breakdown(dev, work, steps, warmup, max_seconds)))
    return out


def _breakdown(dev, work_args: dict, steps, warmup, max_seconds) -> dict:
    sync = sync_for(dev)
    work = Workload(dev, **work_args)
    try:
        budget = None if max_seconds is None else max_seconds / 3
        if warmup:
            run_steps(warmup, budget, work.step, sync)
        n, seconds, _ = run_steps(steps, budget, work.step, sync)  # unperturbed

        def mark() -> float:   # synchronised: each phase's own time, the total a little more
            sync()
            return time.perf_counter()

        model, criterion, optimizer = work.model, work.criterion, work.optimizer
        optimizer.zero_grad()
        marks = [(None, mark())]
        for _ in range(n):  # train_step's parts, in its order, with a clock between them
            inputs, labels = work.fetch()
            marks.append(("data", mark()))
            inputs, labels = to_device(inputs, labels, work.device)
            marks.append(("h2d", mark()))
            loss = criterion(model(inputs), labels)
            marks.append(("forward", mark()))
            loss.backward()
            marks.append(("backward", mark()))
            optimizer.step()
            optimizer.zero_grad()
            marks.append(("optimizer", mark()))
        totals: dict[str, float] = defaultdict(float)
        for (_, a), (phase, b) in zip(marks, marks[1:]):
            totals[phase] += b - a
        phases = {f"{p}_s": totals[p] / n for p in PHASES}
        return {**phases, "total_s": sum(phases.values()), "step_s": seconds / n, "steps": n,
                "num_workers": work.config.num_workers}
    finally:
        work.close()


# -- the sweep, and the job-queue entry point

def sweep_environment(devices: Iterable[str]) -> dict:
    """devices.environment() plus the host, the measured devices (name, memory) and settings."""
    env = environment()
    env["hostname"] = hostname()
    infos = {d.id: d.to_dict() for d in list_devices()}
    env["devices"] = [infos.get(d, {"id": d}) for d in devices]
    env["settings"] = {"cudnn_benchmark_when_timing": True,
                       "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
                       "float32_matmul_precision": torch.get_float32_matmul_precision(),
                       "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                       "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}   # threads: in env
    env["load_average_start"] = load_average()
    return env


def run_sweep(cfg: SweepConfig, on_result: Callable[[dict], None] | None = None,
              should_stop: Callable[[], bool] | None = None,
              save_to: Iterable[str | Path] = ()) -> SweepResult:
    """Every point of ``cfg``, then its breakdown passes; a stop keeps the rows measured, and
    ``save_to`` files are rewritten after every point so an interrupted sweep keeps them too."""
    devices = cfg.resolved_devices()  # DeviceError before anything runs
    paths = [check_suffix(p) for p in save_to]
    result = SweepResult(rows=[], environment=sweep_environment(devices), config=cfg.to_dict(),
                         host=hostname(), recorded_at=now_iso())
    stop = should_stop or (lambda: False)
    common = dict(max_seconds=cfg.max_seconds, num_workers=cfg.num_workers)

    def keep(row: dict | None, into: list) -> bool:
        if row is None:
            result.cancelled = True
            return False
        row.update(host=result.host, recorded_at=result.recorded_at)
        into.append(row)
        for p in paths:
            result.save(p)
        return True

    for point in cfg.points(devices):
        row = None if stop() else measure_point(**point, steps=cfg.steps, warmup=cfg.warmup,
                                                repeats=cfg.repeats, should_stop=stop, **common)
        if not keep(row, result.rows):
            break
        if on_result:
            on_result(row)
    for b in [] if result.cancelled else cfg.breakdown_passes(devices):
        passed = None if stop() else breakdown(**b, steps=min(cfg.steps, 20),
                                               warmup=max(1, cfg.warmup), **common)
        if not keep(passed, result.breakdowns):
            break
    result.environment["load_average_end"] = load_average()
    for p in paths:
        result.save(p)
    return result


def run_timing_job(payload: dict, ctx) -> dict:
    """The "timing" job: a SweepConfig dict in, ("timing_row", row) per point, the result out."""
    result = run_sweep(SweepConfig.from_dict(payload),
                       on_result=lambda row: ctx.emit("timing_row", row),
                       should_stop=ctx.should_stop)
    return {**result.to_dict(), "points": len(result.rows)}
