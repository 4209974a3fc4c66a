"""GPU kernels that matched no kind rule (they count as computation).

:func:`unclassified_kernels` is per rank (it runs where the rank is); one row per rank and
kernel name: ``count`` and ``total_duration(us)`` (the sum of ``dur``), names as text.
:func:`sorted_unclassified` gives it the order ``TraceAnalysis.get_unclassified_kernels``
shows: by rank, longest first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.model.declared import WHOLE, Analysis, Columns
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankTrace, Trace

UNCLASSIFIED_COLUMNS = ["rank", "name", "count", "total_duration(us)"]
UNCLASSIFIED = Columns.typed(UNCLASSIFIED_COLUMNS)


def unclassified_kernels(trace: Trace, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """Per (rank, kernel name) that matched no kind rule: ``count`` and
    ``total_duration(us)`` (sum of ``dur``), by rank, the longest total first; names as
    text."""
    return UNCLASSIFIED_KERNELS.run(trace, selection)


def unclassified_of_rank(rt: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`unclassified_kernels` (the runner's per-rank function)."""
    mask = rt.unclassified if len(rt.unclassified) == len(rt.events) else None
    if mask is None or not mask.any():
        return UNCLASSIFIED.empty()
    ev = rt.events[mask]
    grouped = ev.groupby("name", observed=True)["dur"].agg(["count", "sum"]).reset_index()
    return pd.DataFrame({
        "rank": rt.rank,
        "name": np.asarray(rt.symbols, dtype=object)[grouped["name"].to_numpy()],
        "count": grouped["count"].to_numpy(),
        "total_duration(us)": grouped["sum"].to_numpy() / 1e3,
    })


def sorted_unclassified(frame: pd.DataFrame) -> pd.DataFrame:
    """By rank, the longest total first (:data:`UNCLASSIFIED_COLUMNS` when empty)."""
    if not len(frame):
        return UNCLASSIFIED.empty()
    return frame.sort_values(["rank", "total_duration(us)"], ascending=[True, False],
                             ignore_index=True)


#: :func:`unclassified_kernels`, declared.
UNCLASSIFIED_KERNELS = Analysis("Unclassified kernels", unclassified_of_rank, UNCLASSIFIED,
                                steps=WHOLE, finish=sorted_unclassified, add_rank=True)


__all__ = ["UNCLASSIFIED_COLUMNS", "UNCLASSIFIED_KERNELS", "sorted_unclassified",
           "unclassified_kernels", "unclassified_of_rank"]
