"""Choosing the ranks and iterations an analysis runs on (read by the one pair of
normalisers, :func:`hta.model.selection.normalize_ranks` and
:func:`hta.model.selection.normalize_iterations`)."""

from __future__ import annotations

import pandas as pd

from hta.model.declared import check_whole_ranks
from hta.model.job import Job
from hta.model.selection import EVERYTHING, Iterations, Selection, iteration_list
from hta.model.trace import RankTrace


def select_ranks(trace: Job, selection: Selection = EVERYTHING) -> list[RankTrace]:
    """The selection's ranks (every loaded rank for :data:`~hta.model.selection.ALL`), in
    ascending order; unknown ranks raise."""
    wanted = selection.rank_list
    if wanted is None:
        return list(trace)
    return [trace.rank(r) for r in wanted]


def rank_numbers(trace: Job, selection: Selection = EVERYTHING) -> list[int]:
    """The rank numbers the selection names, ascending: every loaded rank for
    :data:`~hta.model.selection.ALL`; not checked against the loaded ones here (the runner
    does)."""
    wanted = selection.rank_list
    return sorted(trace.get_ranks()) if wanted is None else wanted


def select_iterations(events: pd.DataFrame, iterations: Iterations = None) -> pd.DataFrame:
    """Rows of the given ``ProfilerStep`` numbers (all rows when ``None``).

    GPU events carry the iteration of the CPU launch that enqueued them, so a kernel
    launched in step N counts in step N even if it runs after the step's CPU span ends.
    """
    wanted = iteration_list(iterations)
    if wanted is None:
        return events
    return events[events["iteration"].isin(wanted)]


__all__ = ["check_whole_ranks", "rank_numbers", "select_iterations", "select_ranks"]
