"""Critical path analysis on ``TraceAnalysis``."""

from __future__ import annotations


class CriticalPathMixin:
    """Methods added by the critical path analysis."""
