"""CIFAR-10 for CIFAR Lab: where it comes from, decoded once into a checked cache, and the two
input pipelines (``pipelines``: imported on their own, they load torch)."""
from cifarlab.core.data.cache import CifarData
from cifarlab.core.data.loading import clear_memory_cache, is_cached, load, source_facts

__all__ = ["CifarData", "load", "is_cached", "source_facts", "clear_memory_cache"]
