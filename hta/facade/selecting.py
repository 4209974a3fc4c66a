"""Every :class:`~hta.trace_analysis.TraceAnalysis` method that takes ``ranks`` or
``iterations`` accepts the whole selection vocabulary of :mod:`hta.model.selection`.

The analyses take one :class:`~hta.model.selection.Selection`. What a user may pass is
resolved here, once, before the method runs (a method's body then puts the two in one
object with :func:`chosen`): :data:`~hta.model.selection.ALL` or ``"all"`` (any case) for every
rank or every event, :data:`~hta.model.selection.FIRST` for the first ``ProfilerStep`` of the
selected ranks (every event when they have none), and a ``range``. So
``analyzer.get_temporal_breakdown(ranks=[0, 1], iterations=hta.FIRST)`` works on every
method, as the package's front page shows.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from hta.model.selection import (
    FIRST,
    Iterations,
    Marker,
    Ranks,
    Selection,
    normalize_iterations,
    normalize_ranks,
    rank_list,
    resolve,
)

T = TypeVar("T", bound=type)


def resolve_ranks(ranks: Any) -> Any:
    """``None``/``ALL``/``"all"`` -> ``None``; a rank, a list or a ``range`` -> a sorted
    list of distinct ranks (:func:`hta.model.selection.normalize_ranks`). A bool is
    passed on: the method names it as HTA's positional ``visualize``."""
    if isinstance(ranks, bool):
        return ranks
    return rank_list(ranks)


def resolve_iterations(job: Any, ranks: Any, iterations: Any) -> Any:
    """``None``/``ALL``/``"all"`` -> ``None``; ``FIRST`` -> ``[first step]`` of the selected
    ranks (``None`` when they have no step); a step, a list or a ``range`` -> a sorted list
    (:func:`hta.model.selection.normalize_iterations`). A bool is passed on, as for
    ranks."""
    if isinstance(iterations, bool):
        return iterations
    wanted = normalize_iterations(iterations)
    if wanted is FIRST:
        return resolve(Selection(normalize_ranks(ranks), FIRST), job).iteration_list
    return None if isinstance(wanted, Marker) else list(wanted)


def chosen(ranks: Ranks = None, iterations: Iterations = None) -> Selection:
    """The :class:`~hta.model.selection.Selection` the analyses take, from ``ranks`` and
    ``iterations`` inside a method :func:`accept_selections` wraps: the wrapper has
    resolved them already (no :data:`~hta.model.selection.FIRST` is left), so this only
    puts them in one object."""
    return Selection.of(ranks, iterations)


def _accepting(method: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(method)

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(self, *args, **kwargs)
        given = bound.arguments
        if "ranks" in given:
            given["ranks"] = resolve_ranks(given["ranks"])
        if "iterations" in given:
            given["iterations"] = resolve_iterations(self.t, given.get("ranks"),
                                                     given["iterations"])
        return method(*bound.args, **bound.kwargs)

    call.__accepts_selections__ = True  # type: ignore[attr-defined]
    return call


def accept_selections(cls: T) -> T:
    """Wrap every public method of ``cls`` (its own and its mixins') that has a ``ranks`` or
    ``iterations`` parameter so that it resolves them (:func:`resolve_ranks`,
    :func:`resolve_iterations`) before it runs."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        method = inspect.getattr_static(cls, name)
        if not inspect.isfunction(method) or getattr(method, "__accepts_selections__", False):
            continue
        params = inspect.signature(method).parameters
        if "ranks" in params or "iterations" in params:
            setattr(cls, name, _accepting(method))
    return cls


__all__ = ["accept_selections", "chosen", "resolve_iterations", "resolve_ranks"]
