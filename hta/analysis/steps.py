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

import pandas as pd

from hta.analysis.select import check_whole_ranks
from hta.model.selection import EVERYTHING, STEP_COLUMNS, Selection, step_table
from hta.model.trace import Trace

COLUMNS = STEP_COLUMNS


def profiler_steps(trace: Trace, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """One row per rank and ``ProfilerStep`` span (columns :data:`COLUMNS`), by rank then
    start time: the model's step table (:func:`hta.model.selection.step_table`)."""
    check_whole_ranks(selection, "profiler_steps")
    return step_table(trace, selection)


def step_numbers(steps: pd.DataFrame) -> list[int]:
    """The distinct step numbers of :func:`profiler_steps`' table, ascending."""
    return sorted(int(s) for s in pd.unique(steps["step"]))
