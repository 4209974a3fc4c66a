"""Every :class:`~hta.trace_analysis.TraceAnalysis` method that takes ``ranks`` or
``iterations`` accepts the whole selection vocabulary of :mod:`hta.model.selection`.

The analyses take ranks as ``None`` (every rank), a rank or a list, and iterations as
``None`` (every event), a step or a list. What a user may also pass is resolved here, once,
before the method runs: :data:`~hta.model.selection.ALL` or ``"all"`` (any case) for every
rank or every event, :data:`~hta.model.selection.FIRST` for the first ``ProfilerStep`` of the
selected ranks (every event when they have none), and a ``range``. So
``analyzer.get_temporal_breakdown(ranks=[0, 1], iterations=hta.FIRST)`` works on every
method, as the package's front page shows.
"""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from hta.model.selection import ALL, FIRST, Iterations, Marker, Ranks, Selection, normalize_ranks

T = TypeVar("T", bound=type)


def _is_all(value: Any) -> bool:
    return value is ALL or (isinstance(value, str) and value.strip().lower() == "all")


def resolve_ranks(ranks: Any) -> Any:
    """``ALL``/``"all"`` -> ``None``; a ``range`` or one rank -> a list; anything else
    unchanged (the analyses check it)."""
    if ranks is None or _is_all(ranks):
        return None
    if isinstance(ranks, Marker):
        raise ValueError(f"ranks={ranks!r}: pass rank numbers, or ALL for every rank")
    if isinstance(ranks, range):
        return list(ranks)
    if isinstance(ranks, numbers.Integral) and not isinstance(ranks, bool):
        return [int(ranks)]
    return ranks


def resolve_iterations(job: Any, ranks: Any, iterations: Any) -> Any:
    """``ALL``/``"all"`` -> ``None``; ``FIRST`` -> ``[first step]`` of the selected ranks
    (``None`` when they have no step); a ``range`` -> a list; anything else unchanged."""
    if iterations is None or _is_all(iterations):
        return None
    if iterations is FIRST:
        chosen = Selection(normalize_ranks(ranks), FIRST).resolve(job)
        return chosen.iteration_list
    if isinstance(iterations, Marker):
        raise ValueError(f"iterations={iterations!r}: pass step numbers, ALL or FIRST")
    if isinstance(iterations, str):
        raise ValueError(f"iterations={iterations!r}: pass a step number, a list of them, "
                         "\"all\" (every event) or FIRST (the first step)")
    if isinstance(iterations, range):
        return list(iterations)
    return iterations


def resolved(value: Ranks | Iterations) -> Iterable[int] | int | None:
    """``ranks`` or ``iterations`` inside a method :func:`accept_selections` wraps, typed as
    the analyses take them: the wrapper has resolved it already (no ``ALL``, ``FIRST`` or
    ``"all"`` is left), so this returns ``value`` unchanged; it only tells the type
    checker so."""
    return cast("Iterable[int] | int | None", value)


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


__all__ = ["accept_selections", "resolve_iterations", "resolve_ranks", "resolved"]
