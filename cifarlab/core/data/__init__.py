"""CIFAR-10 for CIFAR Lab: where it comes from, a decode-once cache, and two input pipelines.

Sources (``resolve_source``: the ``--data`` argument > ``$CIFARLAB_DATA`` > ``"download"``;
``sources.py``):

- ``"download"`` (also ``"cifar10"``, ``"torchvision"``): the canonical CIFAR-10 through
  ``torchvision.datasets.CIFAR10(root=<cache>/torchvision, download=True)``;
- a folder, or a ``.tar.gz``/``.tgz``/``.tar`` archive, holding ``train/<class>/<image>`` and
  ``test/<class>/<image>`` (the image-folder layout; classes sorted alphabetically give the
  label numbers, which for CIFAR-10's class names is CIFAR-10's own order).

``load()`` (``loading.py``) decodes every image once (``decode.py``) into uint8 arrays
(N×3×32×32) plus int64 labels and caches them under ``$CIFARLAB_CACHE`` (else
``~/.cache/cifarlab``) in ``datasets/<key>/`` (``cache.py``: written atomically under a lock;
checked against its headers on every read, a damaged cache rebuilt). Later loads copy the checked files into memory that no
file backs, shared between processes where the system allows (``memory.py``), so a cache file
cut short while in use kills nobody; within one process ``load()`` returns the same
``CifarData`` object again.

Pipelines (``pipelines.py``): ``tutorial_loader`` (the tutorial's ``DataLoader`` and transform)
and ``FastLoader`` (the uint8 tensor kept on the device); the same seed gives both the same
order.

``on_progress`` callbacks are called with one string (progress lines and warnings); warnings
are also logged on the ``cifarlab.core.data`` logger. Errors are ``DataError``s with a code
(``errors.data.*`` in ``cifarlab/locales/<lang>/errors_data.toml``).
"""
from __future__ import annotations

from cifarlab.core.data.cache import CifarData
from cifarlab.core.data.loading import (clear_memory_cache, describe_source, is_cached, load,
                                        source_facts)
from cifarlab.core.data.pipelines import (CifarImages, FastLoader, SeededShuffle, normalize,
                                          subset_indices, tutorial_dataset, tutorial_loader,
                                          tutorial_transform)
from cifarlab.core.data.sources import (CACHE_VERSION, CANONICAL, CIFAR10_CLASSES, IMAGE_SIZE,
                                        SPLITS, ProgressFn, cache_root, resolve_source)

__all__ = [
    "CifarData", "CifarImages", "FastLoader", "SeededShuffle", "load", "is_cached",
    "describe_source", "source_facts", "clear_memory_cache", "resolve_source", "cache_root",
    "normalize",
    "subset_indices", "tutorial_dataset", "tutorial_loader", "tutorial_transform",
    "CIFAR10_CLASSES", "IMAGE_SIZE", "SPLITS", "CACHE_VERSION", "CANONICAL", "ProgressFn",
]
