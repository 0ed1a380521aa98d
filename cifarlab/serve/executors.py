"""Which executor runs the queue's jobs: ``make_executor(store, settings)``, by the hosting
setting ``executor`` ("local" or "ray"). The interface both implement is in
``cifarlab.serve.executor``; this module sits above them, so the interface never imports its
implementations.
"""
from __future__ import annotations

import importlib.util

from cifarlab.errors import JobError
from cifarlab.serve.executor import Executor
from cifarlab.serve.local_executor import LocalExecutor
from cifarlab.serve.ray_executor import RayExecutor  # imports ray only once it starts
from cifarlab.serve.settings import Settings
from cifarlab.serve.store import RunStore


def make_executor(store: RunStore, settings: Settings) -> Executor:
    """The executor the settings name. ``"ray"`` needs the optional extra installed."""
    if settings.executor == "ray":
        if importlib.util.find_spec("ray") is None:
            raise JobError("serve.executor.ray_missing")
        return RayExecutor(store, settings)
    return LocalExecutor(store, settings)
