"""Launch statistics, queue length, memory bandwidth, counters and operator views."""

from __future__ import annotations


class CountersMixin:
    """Methods added by the launch/queue/bandwidth/operator analyses."""
