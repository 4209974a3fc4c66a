"""Timing shared by the benchmark scripts (run as ``python benchmarks/bench_x.py``, so
this folder is on ``sys.path``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median wall time (s) of ``repeat`` calls of ``fn``, and its last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def median_time(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall time (s) of ``repeat`` calls of ``fn``."""
    return timed(fn, repeat)[0]
