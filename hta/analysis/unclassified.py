"""GPU kernels that matched no kind rule (they count as computation).

:func:`unclassified_kernels` is per rank (it runs where the rank is); one row per rank and
kernel name: ``count`` and ``total_duration(us)`` (the sum of ``dur``), names as text.
:func:`sorted_unclassified` gives it the order ``TraceAnalysis.get_unclassified_kernels``
shows: by rank, longest first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.select import check_whole_ranks, rank_numbers
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankTrace, Trace

UNCLASSIFIED_COLUMNS = ["rank", "name", "count", "total_duration(us)"]


def unclassified_kernels(trace: Trace, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """Per (rank, kernel name) that matched no kind rule: ``count`` and
    ``total_duration(us)`` (sum of ``dur``), ranks ascending; names as text."""
    check_whole_ranks(selection, "unclassified_kernels")
    frames = [unclassified_of_rank(trace.rank(r)) for r in rank_numbers(trace, selection)]
    frames = [f for f in frames if len(f)]
    if not frames:
        return no_unclassified()
    return pd.concat(frames, ignore_index=True)


def unclassified_of_rank(rt: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`unclassified_kernels` (the runner's per-rank function)."""
    mask = rt.unclassified if len(rt.unclassified) == len(rt.events) else None
    if mask is None or not mask.any():
        return no_unclassified()
    ev = rt.events[mask]
    grouped = ev.groupby("name", observed=True)["dur"].agg(["count", "sum"]).reset_index()
    return pd.DataFrame({
        "rank": rt.rank,
        "name": np.asarray(rt.symbols, dtype=object)[grouped["name"].to_numpy()],
        "count": grouped["count"].to_numpy(),
        "total_duration(us)": grouped["sum"].to_numpy() / 1e3,
    })


def no_unclassified() -> pd.DataFrame:
    """:func:`unclassified_kernels` of no rank (:data:`UNCLASSIFIED_COLUMNS`)."""
    return pd.DataFrame(columns=UNCLASSIFIED_COLUMNS)


def sorted_unclassified(frame: pd.DataFrame) -> pd.DataFrame:
    """By rank, the longest total first (:data:`UNCLASSIFIED_COLUMNS` when empty)."""
    if not len(frame):
        return pd.DataFrame(columns=UNCLASSIFIED_COLUMNS)
    return frame.sort_values(["rank", "total_duration(us)"], ascending=[True, False],
                             ignore_index=True)


__all__ = ["UNCLASSIFIED_COLUMNS", "no_unclassified", "sorted_unclassified",
           "unclassified_kernels", "unclassified_of_rank"]
