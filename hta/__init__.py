"""hta: fast, correct analysis of PyTorch profiler (Kineto) traces.

The front door::

    import hta

    analyzer = hta.load("traces/")              # a TraceAnalysis over every rank
    analyzer.get_findings()                     # what slows the job down, and why
    analyzer.get_temporal_breakdown(ranks=[0, 1], iterations=hta.FIRST)

``load``, :class:`TraceAnalysis` (HTA's entry point, also importable from
``hta.trace_analysis``), :class:`TraceDiff`, and the selection vocabulary
(:class:`Selection`, :data:`ALL`, :data:`FIRST`). Names are imported on first use, so
``import hta`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hta._version import __version__

if TYPE_CHECKING:
    from hta.model.selection import ALL, FIRST, Selection
    from hta.trace_analysis import TraceAnalysis
    from hta.trace_diff import TraceDiff

__all__ = ["ALL", "FIRST", "Selection", "TraceAnalysis", "TraceDiff", "__version__", "load"]


def load(trace_dir: str | None = None, **options: Any) -> TraceAnalysis:
    """Load every rank of a job: ``TraceAnalysis(trace_dir, **options)`` (see its
    arguments: ``trace_files``, ``ranks``, ``cache``, ``client`` for a Dask cluster ...)."""
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis(trace_dir, **options)


def __getattr__(name: str) -> Any:
    # Imported on first use (PEP 562), so that ``import hta`` does not load pandas.
    value: Any
    if name == "TraceAnalysis":
        from hta.trace_analysis import TraceAnalysis

        value = TraceAnalysis
    elif name == "TraceDiff":
        from hta.trace_diff import TraceDiff

        value = TraceDiff
    elif name in ("Selection", "ALL", "FIRST"):
        from hta.model import selection

        value = getattr(selection, name)
    else:
        raise AttributeError(f"module 'hta' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
