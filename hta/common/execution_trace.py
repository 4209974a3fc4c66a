"""HTA's execution-trace functions: not supported here.

This package reads Kineto traces only; PyTorch execution traces (the ``_et.json`` graph
of operators) are not loaded, so they cannot be correlated with the Kineto events. The
functions below raise :class:`NotImplementedError` saying what to use instead: the
operators' input shapes and types are in each rank's ``op_args`` table
(``analyzer.t.rank(r).table("op_args")``), or joined onto the events by
:class:`hta.common.trace.Trace` with ``ParserConfig.ARGS_INPUT_SHAPE``.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["add_et_column", "correlate_execution_trace", "load_execution_trace"]

_INSTEAD = ("execution traces are not read by this package; the operators' input shapes "
            "and types are in analyzer.t.rank(r).table('op_args') (see "
            "docs/coming_from_hta.md)")


def load_execution_trace(et_file: str) -> NoReturn:
    """Not supported (see the module docstring)."""
    raise NotImplementedError(f"load_execution_trace: {_INSTEAD}")


def correlate_execution_trace(trace: Any, rank: int, et: Any) -> NoReturn:
    """Not supported (see the module docstring)."""
    raise NotImplementedError(f"correlate_execution_trace: {_INSTEAD}")


def add_et_column(trace_df: Any, et: Any, column: str) -> NoReturn:
    """Not supported (see the module docstring)."""
    raise NotImplementedError(f"add_et_column: {_INSTEAD}")
