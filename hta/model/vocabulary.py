"""The selection vocabulary: the markers, the two argument aliases, the one normaliser
of each, and :class:`Selection`, the one object in which ranks and steps travel from a
front end to the runner and the analyses (:mod:`hta.model.selection` documents the
values and holds the step table).

It imports nothing of the model, so the lowest modules (:mod:`hta.model.trace`,
:mod:`hta.model.runner`) can use it too; import the names from
:mod:`hta.model.selection`, which re-exports them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
#: The steps a per-rank function is given: step numbers (a resolved selection's
#: :attr:`Selection.iteration_list`), or ``None`` for every event.
StepList = Iterable[int] | None


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


def whole_numbers(value: object, what: str) -> list[int]:
    """``value``, an int or a sequence of ints (NumPy's too), as a list in its order;
    ``TypeError`` naming ``what`` for anything else (text, floats, bools, None)."""
    def whole(v: object) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)

    if whole(value):
        return [int(value)]  # type: ignore[call-overload]
    if (isinstance(value, (Sequence, np.ndarray, range, set, frozenset))
            and not isinstance(value, (str, bytes)) and all(whole(v) for v in value)):
        return [int(v) for v in value]
    raise TypeError(f"{what} must be an int or a list of ints, got {value!r}")


def rank_list(ranks: Ranks | str) -> list[int] | None:
    """:func:`normalize_ranks` as a list, ``None`` for every rank."""
    wanted = normalize_ranks(ranks)
    return None if isinstance(wanted, Marker) else list(wanted)


def iteration_list(iterations: Iterations) -> list[int] | None:
    """:func:`normalize_iterations` as a list, ``None`` for every event (``None``,
    :data:`ALL`, ``"all"``); :data:`FIRST` raises (resolve it against the job first:
    :func:`hta.model.selection.resolve`)."""
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


@dataclass(frozen=True)
class Selection:
    """Ranks and iterations to analyse, the one object in which they travel from a front
    end to the runner and the analyses (:mod:`hta.model.selection` says what each value
    means). Build it with :meth:`of`; an analysis reads :attr:`rank_list` and
    :attr:`iteration_list`."""

    ranks: tuple[int, ...] | Marker = ALL
    iterations: tuple[int, ...] | Marker = ALL

    @classmethod
    def of(cls, ranks: Ranks = None, iterations: Iterations = None, *,
           none_means: Marker = ALL) -> Selection:
        """A selection from what a caller passed (``None`` iterations: ``none_means``)."""
        return cls(normalize_ranks(ranks), normalize_iterations(iterations,
                                                                none_means=none_means))

    @property
    def rank_list(self) -> list[int] | None:
        """The ranks as a list, ``None`` for every rank."""
        return None if isinstance(self.ranks, Marker) else list(self.ranks)

    @property
    def iteration_list(self) -> list[int] | None:
        """The steps as a list, ``None`` for every event (:data:`FIRST` raises: resolve the
        selection against the job first, :func:`hta.model.selection.resolve`)."""
        if self.iterations is FIRST:
            raise ValueError("resolve the selection against the job before reading its "
                             "iterations (FIRST depends on the steps the ranks hold)")
        return None if isinstance(self.iterations, Marker) else list(self.iterations)

    def every_event(self) -> Selection:
        """The same ranks, every event (for an analysis that reads whole ranks)."""
        return Selection(self.ranks, ALL)

    def describe(self) -> str:
        """A short text for headers and logs, e.g. ``ranks 0-3, steps 5-7``."""
        ranks = ("all ranks" if isinstance(self.ranks, Marker)
                 else f"rank(s) {format_ranges(self.ranks)}")
        if self.iterations is ALL:
            steps = "every event"
        elif isinstance(self.iterations, Marker):  # FIRST
            steps = "the first step"
        else:
            steps = f"step(s) {format_ranges(self.iterations)}"
        return f"{ranks}, {steps}"


#: Every rank, every event: the default selection of every analysis.
EVERYTHING = Selection()


def format_ranges(values: Iterable[int], sep: str = ", ") -> str:
    """Distinct ``values`` as runs, e.g. ``[0, 1, 2, 5]`` as ``0-2, 5`` (``sep`` between
    runs)."""
    ordered = sorted(set(values))
    out: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return sep.join(out)


def brief_list(values: list[int], most: int = 20) -> str:
    """The first ``most`` values, comma separated, `` ...`` when there are more."""
    return ", ".join(map(str, values[:most])) + (" ..." if len(values) > most else "")


__all__ = ["ALL", "EVERYTHING", "FIRST", "Iterations", "Marker", "Ranks", "Selection",
           "StepList", "brief_list", "format_ranges", "iteration_list",
           "normalize_iterations", "normalize_ranks", "rank_list", "selected_ranks",
           "whole_numbers"]
