"""hta: fast, correct analysis of PyTorch profiler (Kineto) traces."""

__version__ = "0.1.0"

