"""User annotation breakdown: time per ``record_function`` label (forward, backward, ...).

With ``use_gpu_annotation=True`` (default) the ranges are the ``gpu_user_annotation``
events (kind ``gpu_annotation``): the span each label covers on the GPU timeline, from the
first to the last GPU work it encloses. Otherwise the CPU ``user_annotation`` ranges
(kind ``user_annotation``, ``ProfilerStep#N`` included) are used.

Per rank and label, over the individual ranges: ``sum (us)``, ``max (us)``, ``min (us)``,
``stddev`` (µs), ``mean (us)``, ``count``. Nested ranges each count under their own label
(a 10 µs ``forward`` containing a 4 µs ``attention`` gives 10 and 4). Labels beyond the
top ones are folded into ``"others"`` (:mod:`hta.analysis.aggregate`); labels matching a
regular expression of ``allowlist_patterns`` are never folded.

A rank with no such ranges has no rows; when no selected rank has any, the table is empty
and a warning names the kind that was looked for (HTA returns None instead).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pandas as pd

from hta.analysis.aggregate import STATS, check_folding, kept_names, label_stats, name_totals
from hta.analysis.select import select_iterations
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.selection import EVERYTHING, Selection, StepList
from hta.model.trace import RankMapper, RankTrace

logger = logging.getLogger(__name__)

COLUMNS = ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "rank",
           "count"]
#: The table without rows of :func:`user_annotation_breakdown` (:data:`COLUMNS`).
BREAKDOWN = Columns.typed(COLUMNS, "float64")
#: The tables of no rank of the per-rank passes: the totals per label
#: (:func:`hta.analysis.aggregate.name_totals`) and the statistics
#: (:func:`hta.analysis.aggregate.label_stats`).
TOTALS = Columns.of({"group": "int64", "text": "object", "dur": "int64"})
STATS_TABLE = Columns.typed(("rank", "group", "name", *STATS), "float64")


def user_annotation_breakdown(
    trace: RankMapper, selection: Selection = EVERYTHING,
    use_gpu_annotation: bool = True,
    duration_ratio: float = 0.8, num_kernels: int = 1000,
    allowlist_patterns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Duration statistics per rank and annotation name (columns :data:`COLUMNS`),
    sorted by ``rank`` then ``name``.

    Two passes over the ranks, each where the rank is: the total time per label of each
    rank (:func:`rank_annotation_totals`), the choice of the top labels over all ranks,
    then each rank's statistics of the chosen labels (:func:`rank_annotation_stats`).
    """
    check_folding(num_kernels, duration_ratio)
    kind = "gpu_annotation" if use_gpu_annotation else "user_annotation"
    totals = [ANNOTATION_TOTALS.run(trace, selection, kind)]
    if not any(len(t) for t in totals):
        logger.warning("no %s events in the selected ranks and iterations", kind)
        return BREAKDOWN.empty()
    kept = kept_names(totals, num_kernels, duration_ratio, keep=allowlist_patterns)
    stats = ANNOTATION_STATS.run(trace, selection, kind, kept)
    out = pd.DataFrame({
        "name": stats["name"],
        "sum (us)": stats["sum"] / 1e3, "max (us)": stats["max"] / 1e3,
        "min (us)": stats["min"] / 1e3, "stddev": stats["std"] / 1e3,
        "mean (us)": stats["mean"] / 1e3, "rank": stats["rank"].astype(np.int64),
        "count": stats["count"].astype(np.int64),
    })
    return out.sort_values(["rank", "name"], ignore_index=True)


def _annotation_frame(rt: RankTrace, iterations: StepList, kind: str
                      ) -> pd.DataFrame:
    """``rank``, ``group`` (0), ``name`` (symbol id), ``dur`` of the rank's ranges of
    ``kind``."""
    ev = select_iterations(rt.events, iterations)
    ev = ev[(ev["kind"] == kind).to_numpy()]
    return pd.DataFrame({"rank": rt.rank, "group": 0, "name": ev["name"].to_numpy(),
                         "dur": ev["dur"].to_numpy()})


def rank_annotation_totals(rt: RankTrace, iterations: StepList, kind: str
                           ) -> pd.DataFrame:
    """One rank's total duration per label (text) of its ranges of ``kind``: the first
    pass of :func:`user_annotation_breakdown`."""
    return name_totals(_annotation_frame(rt, iterations, kind), rt.symbols)


ANNOTATION_TOTALS = Analysis("Annotation totals", rank_annotation_totals, TOTALS,
                             steps=PER_STEP)


def rank_annotation_stats(rt: RankTrace, iterations: StepList, kind: str,
                          kept: pd.DataFrame) -> pd.DataFrame:
    """One rank's duration statistics per kept label (the others folded): the second
    pass of :func:`user_annotation_breakdown`."""
    return label_stats(_annotation_frame(rt, iterations, kind), rt.symbols, kept)


ANNOTATION_STATS = Analysis("Annotation statistics", rank_annotation_stats, STATS_TABLE,
                            steps=PER_STEP)
