"""CIFAR Lab's engine: data, model, shapes, training, evaluation, devices, jobs and the run store.

Never imports streamlit. Use it from the command line (``python -m cifarlab``), from tests, or
from the dashboard's pages.
"""
__version__ = "0.1.0"
