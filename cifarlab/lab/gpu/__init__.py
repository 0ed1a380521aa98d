"""The CPU vs GPU lab: the training step, timed honestly on every device, swept over batch size
and network width; speed-ups, crossovers and what a GPU would add, in the student's language.

    cfg = SweepConfig(devices=("cpu", "cuda:0"), batch_sizes=(4, 64, 1024), widths=(1, 8))
    result = run_sweep(cfg, on_result=print)          # one row per point
    result.save("h100.json"); SweepResult.load("h100.json").recorded_elsewhere   # -> True
    speedups(result); crossover(result); explain_tutorial_point(result)
    queue.submit_job(session, **job_request(cfg))     # a timing run, holding devices_held(cfg)

Modules:
    config    SweepConfig, devices_held, job_request          (no torch)
    step      the timed step: core.train's optimizer, loaders and train_step
    measure   measure_point, breakdown, run_sweep, run_timing_job (the queue's "timing" kind)
    results   SweepResult: rows typed through pandas, JSON/CSV, uploads, docs/gpu-results
    analysis  speed-ups and crossovers within one recording, load, hardware, what a GPU adds
    report    the page's sentences and tables; charts: the page's figures and their data
    cli       ``python -m cifarlab bench`` (``--sweep`` records docs/gpu-results)

Names load on first use, so that registering ``bench`` (``python -m cifarlab shapes``) imports
neither torch nor pandas.
"""
from __future__ import annotations

import importlib

from cifarlab.lab.gpu.cli import register_cli
from cifarlab.lab.gpu.config import (EPOCH_IMAGES, TUTORIAL_EPOCHS, TUTORIAL_POINT, SweepConfig,
                                     devices_held, estimate_seconds, job_request,
                                     time_left)

_LAZY = {
    "measure": ("measure_point", "breakdown", "run_sweep", "run_timing_job", "sweep_environment",
                "hostname", "EventTimer", "SyncTimer"),
    "step": ("Workload", "timing_settings", "cleanup", "is_out_of_memory", "sync_for"),
    "results": ("SweepResult", "COLUMNS", "BREAKDOWN_COLUMNS", "PHASES", "OOM", "RESULTS_DIR",
                "THIS_MACHINE", "UPLOADER_MB", "load_upload", "recorded_results", "recordings_stamp"),
    "analysis": ("point_key", "speedups", "crossover", "explain_tutorial_point",
                 "what_a_gpu_would_add", "machine_load", "hardware", "pipeline_gains",
                 "graph_gains", "eager"),
    "report": ("md", "error_text", "rows_table", "hardware_table", "provenance", "source_label",
               "tutorial_lines", "crossover_lines", "pipeline_gain_lines", "would_add_lines",
               "pipeline_name", "download_stem", "graph_gain_lines", "plan_text", "live_lines"),
    "charts": ("throughput_frame", "tutorial_points", "speedup_frame", "crossover_frame",
               "breakdown_choices", "breakdown_frame", "pipelines_frame", "PHASE_COLORS",
               "throughput_figure", "speedup_figure", "breakdown_figure", "pipelines_figure",
               "BATCH_TICKS"),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}

__all__ = ["register_cli", "EPOCH_IMAGES", "TUTORIAL_EPOCHS", "TUTORIAL_POINT", "SweepConfig",
           "devices_held", "estimate_seconds", "job_request", "time_left", *_WHERE]


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
