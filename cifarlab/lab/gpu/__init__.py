"""The CPU vs GPU lab: the training step, timed honestly on every device, swept over batch size
and network width; speed-ups, crossovers and what a GPU would add, in the student's language.
"""
from __future__ import annotations

import importlib

from cifarlab.lab.gpu.cli import register_cli
from cifarlab.lab.gpu.config import (SweepConfig, devices_held, estimate_seconds, job_request,
                                     time_left)

# The other modules' names load on first use (``lab.speedups``), so that registering ``bench``
# (``python -m cifarlab shapes``) imports neither torch nor pandas.
_MODULES = ("measure", "step", "results", "analysis", "report", "charts")

__all__ = ["register_cli", "SweepConfig", "devices_held", "estimate_seconds", "job_request",
           "time_left"]


def __getattr__(name: str):
    if not name.startswith("_"):
        for module in _MODULES:
            module = importlib.import_module(f"{__name__}.{module}")
            if name in vars(module):
                return vars(module)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
