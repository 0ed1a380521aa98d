"""CIFAR-10 decoded once into a checked cache (``pipelines``, which loads torch, on its own)."""
from cifarlab.core.data.cache import CifarData
from cifarlab.core.data.loading import is_cached, load, source_facts

__all__ = ["CifarData", "load", "is_cached", "source_facts"]
