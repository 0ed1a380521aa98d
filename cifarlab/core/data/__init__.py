"""CIFAR-10 for CIFAR Lab: where it comes from, decoded once into a checked cache and into memory
no file backs, and the two input pipelines. ``on_progress`` callbacks get one string (progress
lines and warnings); errors are ``DataError``s with a code (``errors.data.*``).
"""
from __future__ import annotations

from cifarlab.core.data.cache import CifarData
from cifarlab.core.data.loading import clear_memory_cache, is_cached, load, source_facts
from cifarlab.core.data.sources import CIFAR10_CLASSES, resolve_source

# The pipelines need torch and torchvision (tens of seconds to import on a loaded machine): they
# load on first use, so reading the data set (Home's first visit) does not wait for them.
_PIPELINES = ("FastLoader", "SeededShuffle", "normalize", "subset_indices",
              "tutorial_dataset", "tutorial_loader", "tutorial_transform")


def __getattr__(name: str):
    if name in _PIPELINES:
        from cifarlab.core.data import pipelines

        return getattr(pipelines, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CifarData", "load", "is_cached", "source_facts", "clear_memory_cache",
           "resolve_source", "CIFAR10_CLASSES"]
__all__ += list(_PIPELINES)
