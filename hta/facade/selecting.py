"""The one place a :class:`~hta.trace_analysis.TraceAnalysis` method turns its ``ranks``
and ``iterations`` arguments into the :class:`~hta.model.selection.Selection` its analyses
take.

Each method that takes them calls :func:`selected` once, first, and hands the object on:
to an analysis (``NAME.run(self.t, selection)``), the runner, or another method's
selection-taking helper. What a user may pass is the whole vocabulary of
:mod:`hta.model.selection`: :data:`~hta.model.selection.ALL` or ``"all"`` (any case) for
every rank or every event, :data:`~hta.model.selection.FIRST` for the first
``ProfilerStep`` of the selected ranks (every event when they have none), a number, a list
or a ``range``. So ``analyzer.get_temporal_breakdown(ranks=[0, 1], iterations=hta.FIRST)``
works on every method, as the package's front page shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hta.model.selection import FIRST, Iterations, Ranks, Selection, resolve

if TYPE_CHECKING:
    from hta.model.job import Job

#: What a method whose selection other methods hand on accepts as ``ranks``: the user's
#: forms, or the ``Selection`` a calling method made already (:func:`selected`).
RanksOrSelection = Ranks | Selection


def selected(job: Job, ranks: RanksOrSelection = None, iterations: Iterations = None) -> Selection:
    """The :class:`~hta.model.selection.Selection` of ``ranks`` and ``iterations`` as a
    user passed them (``None``: every rank, every event), with
    :data:`~hta.model.selection.FIRST` replaced by the first step of the selected ranks
    (:data:`~hta.model.selection.ALL` when they have none). A ``Selection`` passed as
    ``ranks`` (a method handing its own on) is returned as it is. A bool raises
    ``TypeError``: it is HTA's positional ``visualize`` landing in the wrong place (here
    ``ranks`` comes first)."""
    if isinstance(ranks, Selection):
        return ranks
    for name, value in (("ranks", ranks), ("iterations", iterations)):
        if isinstance(value, bool):
            raise TypeError(
                f"{name}={value!r} looks like HTA's positional `visualize`; here {name} "
                f"comes first, so pass visualize={value} by keyword.")
    selection = Selection.of(ranks, iterations)
    if selection.iterations is FIRST:
        return Selection(selection.ranks, resolve(Selection(selection.ranks, FIRST), job,
                                                  strict=False).iterations)
    return selection


__all__ = ["RanksOrSelection", "selected"]
