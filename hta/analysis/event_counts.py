"""Events per kind: how many events of each kind a rank holds, and their time.

One row per rank and event kind that has at least one event (the ``kind`` column of the
model, :data:`hta.model.rules.KINDS`: ``cpu_op``, ``runtime_launch``, ``computation``,
``communication``, ``memcpy_htod`` ...), in the order of :data:`~hta.model.rules.KINDS`:

* ``rank``;
* ``kind``;
* ``count``: the number of complete events of that kind;
* ``time(us)``: the sum of their durations in µs (nested events each count their own:
  a ``cpu_op`` inside another adds its time too, so the kinds do not add up to the
  trace's span).

Example: a rank with three compute kernels of 10, 20 and 30 µs and one
``cudaLaunchKernel`` of 5 µs has the rows ``runtime_launch, 1, 5.0`` and
``computation, 3, 60.0``.

With ``iterations`` only the events of those ``ProfilerStep`` numbers count (GPU work in
the step of the launch that enqueued it), restricted where each rank lives. This module is
the worked example of adding an analysis (docs/architecture.md, "Adding an analysis"): a
per-rank function on one rank, declared once (:data:`EVENT_COUNTS`, an
:class:`~hta.model.declared.Analysis`) and run by the runner.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.model.declared import Analysis, Columns
from hta.model.rules import KINDS
from hta.model.trace import RankTrace

COLUMNS = ["rank", "kind", "count", "time(us)"]
#: The table of no rank (:data:`COLUMNS`).
COUNTS = Columns.of({"rank": "int64", "kind": "object", "count": "int64", "time(us)": "float64"})


def rank_event_counts(rank: RankTrace) -> pd.DataFrame:
    """One rank's ``kind``, ``count`` and ``time(us)`` (see the module docstring); the
    runner adds ``rank``."""
    ev = rank.events
    if not len(ev):
        return COUNTS.empty().drop(columns="rank")
    codes = ev["kind"].cat.codes.to_numpy(np.int64)
    dur = (ev["end"] - ev["ts"]).to_numpy(np.int64)
    count = np.bincount(codes, minlength=len(KINDS))
    time_ns = np.bincount(codes, weights=dur, minlength=len(KINDS))
    kept = np.flatnonzero(count)
    return pd.DataFrame({"kind": np.asarray(KINDS, dtype=object)[kept],
                         "count": count[kept].astype(np.int64),
                         "time(us)": time_ns[kept] / 1e3})


EVENT_COUNTS = Analysis("Event counts", rank_event_counts, COUNTS, add_rank=True)


__all__ = ["COLUMNS", "COUNTS", "EVENT_COUNTS", "rank_event_counts"]
