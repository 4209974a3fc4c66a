"""The selection vocabulary: the markers, the two argument aliases and the one normaliser
of each (what :mod:`hta.model.selection` builds its :class:`~hta.model.selection.Selection`
from, and what every front end and analysis reads a ``ranks`` or ``iterations`` argument
with).

It imports nothing of the model, so the lowest modules (:mod:`hta.model.trace`,
:mod:`hta.model.runner`) can use it too; import the names from
:mod:`hta.model.selection`, which re-exports them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


class Marker:
    """A named selection value (:data:`ALL`, :data:`FIRST`)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name  # unpickles as the module-level singleton


#: Every rank, or every event (the whole trace).
ALL = Marker("ALL")
#: The first ``ProfilerStep`` of the selected ranks.
FIRST = Marker("FIRST")

#: What callers may pass for ranks: a rank, several, ``None``, ``"all"`` or :data:`ALL`.
Ranks = Iterable[int] | int | Marker | None
#: What callers may pass for iterations: a step, several, ``None``, ``"all"``,
#: :data:`ALL` or :data:`FIRST`.
Iterations = Iterable[int] | int | str | Marker | None


def _is_all(value: object) -> bool:
    return value is ALL or (isinstance(value, str) and value.strip().lower() == "all")


def normalize_ranks(ranks: Ranks | str) -> tuple[int, ...] | Marker:
    """``ranks`` as a sorted tuple of distinct ints, or :data:`ALL` for ``None``, ``ALL``
    or ``"all"`` (any case). The one reading of a ``ranks`` argument."""
    if ranks is None or _is_all(ranks):
        return ALL
    if isinstance(ranks, Marker):
        raise ValueError(f"ranks={ranks!r}: pass rank numbers, or ALL for every rank")
    if isinstance(ranks, (int, np.integer)):
        return (int(ranks),)
    if isinstance(ranks, str):
        raise TypeError(f"ranks={ranks!r}: pass rank numbers (ints), not text")
    return tuple(sorted({int(r) for r in ranks}))


def normalize_iterations(iterations: Iterations, *, none_means: Marker = ALL
                         ) -> tuple[int, ...] | Marker:
    """``iterations`` as a sorted tuple of step numbers, :data:`ALL` or :data:`FIRST`.
    The one reading of an ``iterations`` argument.

    ``None`` becomes ``none_means``; the text ``"all"`` (any case) becomes :data:`ALL`.
    """
    if iterations is None:
        return none_means
    if isinstance(iterations, Marker):
        return iterations
    if isinstance(iterations, str):
        if _is_all(iterations):
            return ALL
        raise ValueError(f"iterations={iterations!r}: pass a step number, a list of them, "
                         "\"all\" (every event) or FIRST (the first step)")
    if isinstance(iterations, (int, np.integer)):
        return (int(iterations),)
    return tuple(sorted({int(i) for i in iterations}))


def rank_list(ranks: Ranks | str) -> list[int] | None:
    """:func:`normalize_ranks` as a list, ``None`` for every rank."""
    wanted = normalize_ranks(ranks)
    return None if isinstance(wanted, Marker) else list(wanted)


def iteration_list(iterations: Iterations) -> list[int] | None:
    """:func:`normalize_iterations` as a list, ``None`` for every event (``None``,
    :data:`ALL`, ``"all"``); :data:`FIRST` raises (resolve it against the job first:
    :meth:`hta.model.selection.Selection.resolve`)."""
    wanted = normalize_iterations(iterations)
    if wanted is FIRST:
        raise ValueError("iterations=FIRST depends on the steps the ranks hold: resolve the "
                         "selection against the job first")
    return None if isinstance(wanted, Marker) else list(wanted)


def selected_ranks(loaded: Sequence[int], ranks: Ranks | str = None) -> list[int]:
    """``ranks`` (:func:`normalize_ranks`) as a sorted list of ``loaded`` ranks (all when
    ``None``/``ALL``); an unknown rank raises ``KeyError`` naming the loaded ones."""
    wanted = normalize_ranks(ranks)
    if isinstance(wanted, Marker):
        return sorted(loaded)
    known = set(loaded)
    for r in wanted:
        if r not in known:
            raise KeyError(f"rank {r} is not loaded; loaded ranks: {sorted(loaded)}")
    return list(wanted)


__all__ = ["ALL", "FIRST", "Iterations", "Marker", "Ranks", "iteration_list",
           "normalize_iterations", "normalize_ranks", "rank_list", "selected_ranks"]
