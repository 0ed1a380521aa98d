"""CIFAR Lab's engine (never imports streamlit): ``python -m cifarlab``, the tests, the pages."""
