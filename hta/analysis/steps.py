"""ProfilerStep spans of each rank: the steps ``get_profiler_steps`` lists.

A step is an event named exactly ``ProfilerStep#N`` of kind ``user_annotation`` (or, in
older traces, ``cpu_op``), the same spans that give every event its ``iteration``
(:func:`hta.model.links.step_spans`). :func:`profiler_steps` gives one row per rank and
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
from hta.model.links import step_spans
from hta.model.rules import KIND_CODE
from hta.model.selection import STEP_COLUMNS, rank_steps
from hta.model.trace import RankTrace, Trace

COLUMNS = STEP_COLUMNS
_STEP_KINDS = np.array([KIND_CODE["user_annotation"], KIND_CODE["cpu_op"]], dtype=np.int64)


def rank_step_spans(rt: RankTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, step number) of one rank's ``ProfilerStep#N`` spans, sorted by start:
    :func:`hta.model.links.step_spans` over its ``user_annotation`` and ``cpu_op`` rows."""
    ev = rt.events
    return step_spans(rt.symbols, ev["name"].to_numpy(),
                      np.isin(ev["kind"].cat.codes.to_numpy(), _STEP_KINDS),
                      ev["ts"].to_numpy(), ev["end"].to_numpy())


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
