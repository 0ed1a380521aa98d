"""Job kinds: what a queued job runs, by name (``"package.module:function"``, imported by the
worker), so ``cifarlab.serve`` runs the GPU page's timing sweep without importing
``cifarlab.lab`` (the layers forbid it).
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

_KINDS: dict[str, str] = {}

TRAIN = "train"
TIMING = "timing"   # the CPU-vs-GPU timing sweep: bounded by max_timing_seconds
LR_FIND = "lr_find"  # the learning-rate finder: a probe of a config, at most 200 steps


def register_kind(name: str, target: str) -> None:
    """Register a job kind: ``target`` names ``fn(payload: dict, ctx: JobContext) -> dict``
    (the result, stored as JSON), imported by the worker. A result with ``"cancelled": True``
    (or a cancel ``ctx.should_stop`` saw) ends the run ``cancelled``; an exception, ``failed``.
    A bad name is refused when a job is queued, a bad target when the worker imports it."""
    _KINDS[name] = target


def registered_kinds() -> dict[str, str]:
    return dict(_KINDS)


def target_of(kind: str) -> str | None:
    return _KINDS.get(kind)


def import_target(target: str) -> Callable[[dict, Any], dict]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


register_kind(TRAIN, "cifarlab.serve.worker:run_train_job")
register_kind(TIMING, "cifarlab.lab.gpu:run_timing_job")
register_kind(LR_FIND, "cifarlab.core.lr_finder:run_job")
