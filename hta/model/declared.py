"""An analysis declared once: its per-rank function, its columns, how it takes steps.

Every per-rank analysis of the package is one :class:`Analysis` value in its module::

    QUEUE_SERIES = Analysis("Queue length", rank_queue_series, Columns.typed(
        SERIES_COLUMNS, "int64"), steps=WHOLE)

and is run by the runner, only: ``QUEUE_SERIES.run(job, selection)`` answers for the
selection (one call of :func:`hta.model.runner.run_one`), and ``QUEUE_SERIES.work()`` is
the :class:`~hta.model.runner.RankWork` a caller gives :func:`hta.model.runner.run` with
other works, so several analyses share one visit of each rank (the report does). The
table of no rank follows from the declared :class:`Columns`, so no analysis writes it by
hand; the per-rank function answers it for a rank with nothing to say
(``QUEUE_SERIES.empty()``).

How an analysis takes the selection's ``ProfilerStep`` numbers (``steps``):

* :data:`RESTRICT`: the runner restricts each rank to the steps before the per-rank
  function runs (GPU work counts in the step of its launch);
* :data:`PER_STEP`: the function reads each rank whole and gets the steps as its first
  argument (``None``: every event), for an analysis that windows each step itself;
* :data:`WHOLE`: the analysis reads every event of its ranks and takes no steps; a
  selection that names some raises ``ValueError`` saying so, so no step is silently
  ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from hta.model.runner import RankWork, run_one
from hta.model.vocabulary import ALL, EVERYTHING, Selection

if TYPE_CHECKING:
    from hta.model.trace import RankMapper

StepsPolicy = Literal["restrict", "per_step", "whole"]
RESTRICT: StepsPolicy = "restrict"
PER_STEP: StepsPolicy = "per_step"
WHOLE: StepsPolicy = "whole"


@dataclass(frozen=True)
class Columns:
    """An output schema: column names in order, each with its dtype (a NumPy or pandas
    dtype name, ``"object"`` for text and mixed values, or a pandas dtype such as a
    ``CategoricalDtype``). :meth:`empty` is its table without rows."""

    names: tuple[str, ...]
    dtypes: tuple[Any, ...]

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> Columns:
        """From ``{name: dtype}``, in order."""
        return cls(tuple(spec), tuple(spec.values()))

    @classmethod
    def typed(cls, names: Iterable[str], dtype: Any = "object") -> Columns:
        """Every column of ``names`` with one dtype (``"object"`` by default)."""
        names = tuple(names)
        return cls(names, (dtype,) * len(names))

    def empty(self) -> pd.DataFrame:
        """The table without rows: these columns with their dtypes."""
        if not self.names:
            return pd.DataFrame([])
        return pd.DataFrame({n: _no_values(d) for n, d in zip(self.names, self.dtypes)})

    def __add__(self, other: Columns) -> Columns:
        return Columns(self.names + other.names, self.dtypes + other.dtypes)


def _no_values(dtype: Any) -> Any:
    if isinstance(dtype, str) and dtype == "object":
        return np.zeros(0, dtype=object)
    try:
        return np.zeros(0, dtype=dtype)
    except TypeError:  # a pandas extension dtype ("str", a CategoricalDtype ...)
        return pd.Series([], dtype=dtype)


def _same(frame: Any) -> Any:
    return frame


@dataclass(frozen=True)
class Analysis:
    """One per-rank analysis, declared once (see the module docstring).

    ``per_rank(rank, *args, **kwargs)`` answers one rank (module-level, so it travels to
    the worker that holds the rank); ``columns`` is its table's schema (a tuple of them
    for a function answering several tables), from which the table of no rank follows;
    ``steps`` how it takes the selection's steps; ``finish`` combines the concatenated
    per-rank tables in the caller; ``add_rank`` adds a ``rank`` column to a table
    without one; ``spread`` marks work costly per rank with small answers (a visit of an
    in-memory job of many ranks may run it in forked workers)."""

    name: str
    per_rank: Callable[..., Any]
    columns: Columns | tuple[Columns, ...] = field(default_factory=lambda: Columns((), ()))
    steps: StepsPolicy = RESTRICT
    finish: Callable[[Any], Any] = _same
    add_rank: bool = False
    spread: bool = False

    def empty(self) -> Any:
        """The table of no rank (a tuple of tables for several columns)."""
        if isinstance(self.columns, tuple):
            return tuple(c.empty() for c in self.columns)
        return self.columns.empty()

    def work(self, *args: Any, **kwargs: Any) -> RankWork:
        """The unit the runner takes to each rank: ``per_rank`` with these arguments (for
        :data:`PER_STEP`, the steps come first among them)."""
        return RankWork(self.per_rank, tuple(args), dict(kwargs), finish=self.finish,
                        description=self.name, add_rank=self.add_rank, empty=self.empty,
                        spread=self.spread)

    def run(self, job: RankMapper, selection: Selection = EVERYTHING, *args: Any,
            **kwargs: Any) -> Any:
        """The answer for ``selection``, from the runner (:func:`run_one`), the per-rank
        function called with ``args`` and ``kwargs`` (see ``steps``)."""
        return run_one(job, *self.planned(selection, *args, **kwargs))

    def planned(self, selection: Selection, *args: Any, **kwargs: Any
                ) -> tuple[RankWork, Selection]:
        """The work and the selection the runner visits for ``selection``."""
        if self.steps == PER_STEP:
            return self.work(selection.iteration_list, *args, **kwargs), selection.every_event()
        if self.steps == WHOLE:
            check_whole_ranks(selection, self.name)
        return self.work(*args, **kwargs), selection


def check_whole_ranks(selection: Selection, what: str) -> None:
    """For an analysis that reads every event of its ranks: a ``selection`` that names
    steps (or :data:`~hta.model.selection.FIRST`) raises ``ValueError`` saying what to pass
    instead, so no step is ever silently ignored."""
    if selection.iterations is not ALL:
        raise ValueError(
            f"{what} reads every event of its ranks and takes no steps "
            f"(got iterations={selection.iterations!r}): pass Selection.of(ranks), or restrict "
            "an in-memory trace to the steps first (hta.model.selection.restrict).")


__all__ = ["PER_STEP", "RESTRICT", "WHOLE", "Analysis", "Columns", "check_whole_ranks"]
