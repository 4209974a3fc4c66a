"""Breakdown analyses on ``TraceAnalysis`` (temporal, idle time, kernels, overlap)."""

from __future__ import annotations


class BreakdownMixin:
    """Methods added by the breakdown analyses."""
