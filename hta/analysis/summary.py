"""Per-rank overview: event counts, GPU work by kind, GPU busy and idle time.

Definitions (all times in integer nanoseconds, shown in µs):

* ``events``: complete events of the rank (instant, flow, counter and metadata events
  are counted separately in ``other_events``).
* ``gpu_events``: events that occupy a GPU engine (kernels, memcpy, memset); one count
  column per kind (``computation``, ``communication``, ``memcpy_htod`` ...).
* ``span``: last end minus first start over those GPU events.
* ``busy``: length of the union of their intervals, over every device and stream of the
  rank (two overlapping kernels count once).
* ``idle``: ``span - busy``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.intervals import union_length
from hta.model.declared import WHOLE, Analysis
from hta.model.rules import GPU_WORK_KINDS, KIND_CODE, KINDS, codes_in, kind_codes
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import EVENT_TABLES, RankTrace, Trace

GPU_WORK_ORDER = [k for k in KINDS if k in GPU_WORK_KINDS]


def rank_summary(trace: Trace, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """One row per rank with the columns described in this module's docstring."""
    return RANK_SUMMARY.run(trace, selection)


def summary_of_rank(rt: RankTrace) -> pd.DataFrame:
    """One rank's row of :func:`rank_summary` (the runner's per-rank function)."""
    return pd.DataFrame([_summary_row(rt)])


def event_counts(rt: RankTrace) -> tuple[int, int]:
    """The rank's ``events`` and ``gpu_events`` (:func:`rank_summary`'s columns)."""
    codes = rt.kind_codes()
    return int(codes.size), int(np.count_nonzero(codes_in(codes, _GPU_WORK_CODES)))


_GPU_WORK_CODES = kind_codes(GPU_WORK_KINDS)


#: :func:`rank_summary`, declared (a rank's row is made where the rank is).
RANK_SUMMARY = Analysis("Rank summary", summary_of_rank, steps=WHOLE, add_rank=True)


def _summary_row(rt: RankTrace) -> dict[str, Any]:
    codes = rt.kind_codes()
    gpu = codes_in(codes, _GPU_WORK_CODES)
    by_kind = np.bincount(codes[gpu], minlength=len(KINDS))
    counts = {k: by_kind[KIND_CODE[k]] for k in GPU_WORK_ORDER}
    n_gpu = int(np.count_nonzero(gpu))
    if n_gpu:
        ts, end = rt.column("ts")[gpu], rt.column("end")[gpu]
        start = int(ts.min())
        span = int(end.max()) - start
        busy = union_length(ts, end)
    else:
        span = busy = 0
    ev = rt.events
    row: dict[str, Any] = {
        "rank": rt.rank,
        "events": len(ev),
        "other_events": int(sum(len(rt.tables.get(t, ())) for t in EVENT_TABLES)),
        "gpu_events": n_gpu,
    }
    row.update({k: int(counts[k]) for k in GPU_WORK_ORDER})
    row.update({
        "gpu_span(us)": span / 1e3,
        "gpu_busy(us)": busy / 1e3,
        "gpu_idle(us)": (span - busy) / 1e3,
        "gpu_idle_pctg": round(100.0 * (span - busy) / span, 2) if span else np.nan,
    })
    return row
