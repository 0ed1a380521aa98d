"""Job kinds: what a queued job runs, by name (``"package.module:function"``, imported by the
worker), so ``cifarlab.serve`` runs the GPU page's timing sweep without importing
``cifarlab.lab`` (the layers forbid it).
"""
from __future__ import annotations

import importlib
import re
from typing import Any, Callable

from cifarlab.errors import JobError
from cifarlab.serve.runs import KIND_RE

_KINDS: dict[str, str] = {}
_TARGET_RE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")

TRAIN = "train"
TIMING = "timing"   # the CPU-vs-GPU timing sweep: bounded by max_timing_seconds
LR_FIND = "lr_find"  # the learning-rate finder: a probe of a config, at most 200 steps


def register_kind(name: str, target: str) -> None:
    """Register a job kind: ``target`` names ``fn(payload: dict, ctx: JobContext) -> dict``
    (the result, stored as JSON), imported by the worker. A result with ``"cancelled": True``
    (or a cancel ``ctx.should_stop`` saw) ends the run ``cancelled``; an exception, ``failed``.
    """
    if not isinstance(name, str) or not KIND_RE.fullmatch(name):
        raise JobError("serve.kinds.bad_name", field="kind", name=repr(name)[:40])
    if not isinstance(target, str) or not _TARGET_RE.fullmatch(target):
        raise JobError("serve.kinds.bad_target", field="kind", target=repr(target)[:80])
    _KINDS[name] = target


def registered_kinds() -> dict[str, str]:
    return dict(_KINDS)


def target_of(kind: str) -> str | None:
    return _KINDS.get(kind)


def import_target(target: str) -> Callable[[dict, Any], dict]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


register_kind(TRAIN, "cifarlab.serve.worker:run_train_job")
register_kind(TIMING, "cifarlab.lab.gpu.measure:run_timing_job")
register_kind(LR_FIND, "cifarlab.core.lr_finder:run_job")
