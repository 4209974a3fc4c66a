"""Choosing the ranks and iterations an analysis runs on."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from hta.model.job import Job
from hta.model.trace import RankTrace


def select_ranks(trace: Job, ranks: Iterable[int] | int | None = None) -> list[RankTrace]:
    """The requested ranks (all when ``None``), in ascending order; unknown ranks raise."""
    if ranks is None:
        return list(trace)
    if isinstance(ranks, int):
        ranks = [ranks]
    return [trace.rank(r) for r in sorted(set(ranks))]


def select_iterations(
    events: pd.DataFrame, iterations: Iterable[int] | int | None = None
) -> pd.DataFrame:
    """Rows of the given ``ProfilerStep`` numbers (all rows when ``None``).

    GPU events carry the iteration of the CPU launch that enqueued them, so a kernel
    launched in step N counts in step N even if it runs after the step's CPU span ends.
    """
    if iterations is None:
        return events
    if isinstance(iterations, int):
        iterations = [iterations]
    return events[events["iteration"].isin(list(iterations))]
