"""ProfilerStep spans of each rank: the steps ``get_profiler_steps`` lists.

A step is an event named exactly ``ProfilerStep#N`` of kind ``user_annotation`` (or, in
older traces, ``cpu_op``), the same spans that give every event its ``iteration``
(:func:`hta.model.selection.rank_steps`). :func:`profiler_steps` gives one row per rank and
step: ``rank``, ``step`` (N), ``ts`` and ``end`` (int ns), ``dur`` (ns). A rank without
steps has no rows. When ``include_last_profiler_step=False`` dropped the last step's
events, its span is gone too, so the step is not listed (as in HTA, whose default drops
it).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from hta.analysis.select import select_ranks
from hta.model.selection import STEP_COLUMNS, rank_steps
from hta.model.trace import Trace

COLUMNS = STEP_COLUMNS


def profiler_steps(trace: Trace, ranks: Iterable[int] | int | None = None) -> pd.DataFrame:
    """One row per rank and ``ProfilerStep`` span (columns :data:`COLUMNS`), by rank then
    start time: the model's step table (:func:`hta.model.selection.rank_steps`)."""
    frames = [rank_steps(rt) for rt in select_ranks(trace, ranks)]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({c: np.zeros(0, dtype=np.int64) for c in COLUMNS})
    return pd.concat(frames, ignore_index=True)


def step_numbers(steps: pd.DataFrame) -> list[int]:
    """The distinct step numbers of :func:`profiler_steps`' table, ascending."""
    return sorted(int(s) for s in pd.unique(steps["step"]))
