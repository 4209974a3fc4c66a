"""Which ranks and iterations an analysis looks at: one vocabulary for every front end.

A :class:`Selection` names ranks and iterations (``ProfilerStep#N`` numbers). Both may be
:data:`ALL`; iterations may also be :data:`FIRST` (the first step of the selected ranks,
HTA's default for trace comparison). The front ends turn their arguments into a
``Selection`` once (:meth:`Selection.of`), resolve it against the loaded job once
(:func:`resolve`: unknown ranks and steps fail there, with what exists named),
and hand the resolved selection to each analysis.

What each value means, everywhere:

========================  ==============================================================
``ranks=ALL``             every loaded rank
``ranks=[0, 2]`` / ``3``  those ranks (ascending, duplicates dropped)
``iterations=ALL``        every event, inside steps or not (the whole trace)
``iterations=FIRST``      the first ``ProfilerStep`` of the selected ranks; every event
                          when they have no step
``iterations=[4, 5]``     the events of those steps (GPU work counts in the step of the
                          CPU launch that enqueued it)
========================  ==============================================================

``None`` is accepted from callers as "the default of that front end", which
:meth:`Selection.of` turns into an explicit marker (``ALL`` unless the caller says
otherwise), so no analysis ever has to guess what ``None`` meant.

**The step table** (:func:`rank_steps`, :func:`step_table`): one row per rank and
``ProfilerStep#N`` span, columns :data:`STEP_COLUMNS` = ``rank``, ``step`` (N), ``ts`` and
``end`` (int ns), ``dur`` (ns). A step is an event named exactly ``ProfilerStep#N`` of kind
``user_annotation`` (or ``cpu_op`` in older traces): the spans that give every event its
``iteration`` (:func:`hta.model.links.step_spans`). A step number seen twice on one rank
(a GPU-annotation copy, say) keeps its first span.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hta.model.declared import Analysis, Columns
from hta.model.derived import derived
from hta.model.links import step_spans
from hta.model.rules import KIND_CODE, codes_in
from hta.model.runner import restrict_rank
from hta.model.trace import RankTrace
from hta.model.vocabulary import (
    ALL,
    EVERYTHING,
    FIRST,
    Iterations,
    Marker,
    Ranks,
    Selection,
    StepList,
    brief_list,
    format_ranges,
    iteration_list,
    normalize_iterations,
    normalize_ranks,
    rank_list,
)

if TYPE_CHECKING:
    from hta.model.job import Job
    from hta.model.trace import Trace


STEP_COLUMNS = ["rank", "step", "ts", "end", "dur"]
STEPS = Columns.typed(STEP_COLUMNS, "int64")
_STEP_KINDS = np.array([KIND_CODE["user_annotation"], KIND_CODE["cpu_op"]], dtype=np.int64)


def rank_step_spans(rt: RankTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, step number) of every ``ProfilerStep#N`` span of one rank, by start:
    :func:`hta.model.links.step_spans` over its ``user_annotation`` and ``cpu_op`` rows, the
    spans that gave its events their ``iteration`` (a number seen twice is kept twice).
    The one computation of a loaded rank's steps; :func:`rank_steps` is its table."""
    ev = rt.events
    if not len(ev):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    starts, ends, numbers = step_spans(
        rt.symbols, rt.column("name"),
        codes_in(rt.kind_codes(), _STEP_KINDS),
        rt.column("ts"), rt.column("end"))
    return starts, ends, np.asarray(numbers, dtype=np.int64)


def rank_steps(rt: RankTrace) -> pd.DataFrame:
    """One rank's ``ProfilerStep`` spans (columns :data:`STEP_COLUMNS`), by start time
    (:func:`rank_step_spans`; a step number seen twice keeps its first span). Computed once
    per rank (:func:`hta.model.derived.derived`)."""
    if not len(rt.events):
        return STEPS.empty()
    return derived(rt, "model.rank_steps", lambda: _rank_steps(rt))


def _rank_steps(rt: RankTrace) -> pd.DataFrame:
    starts, ends, numbers = rank_step_spans(rt)
    first = np.zeros(numbers.shape[0], dtype=bool)  # a number's first span
    first[np.unique(numbers, return_index=True)[1]] = True
    starts, ends, numbers = starts[first], ends[first], numbers[first]
    return pd.DataFrame({
        "rank": np.full(starts.shape[0], rt.rank, dtype=np.int64),
        "step": numbers, "ts": starts, "end": ends,
        "dur": ends - starts,
    })


def step_table(job: Job, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """Every selected rank's ``ProfilerStep`` spans (columns :data:`STEP_COLUMNS`), by rank
    then start; computed where each rank is (:func:`hta.model.runner.run`)."""
    return STEP_TABLE.run(job, selection.every_event())


#: :func:`step_table`'s per-rank part, declared (each rank read whole, where it is).
STEP_TABLE = Analysis("Profiler steps", rank_steps, STEPS, add_rank=True)


def resolve(selection: Selection, job: Job, steps: pd.DataFrame | None = None, *,
            strict: bool = True) -> Selection:
    """``selection`` made concrete on ``job``: the loaded ranks, :data:`FIRST` replaced by
    the first step of those ranks (or :data:`ALL` when they have none), explicit steps
    checked against the steps of the selected ranks: each must exist (``strict``) or at
    least one must (``strict=False``). Unknown ranks raise ``KeyError``, unknown steps
    ``ValueError``, each naming what exists. ``steps``: the job's :func:`step_table` when
    the caller has it already."""
    loaded = job.get_ranks()
    if isinstance(selection.ranks, Marker):  # ALL, the only marker of ranks
        ranks: tuple[int, ...] = tuple(loaded)
    else:
        missing = [r for r in selection.ranks if r not in set(loaded)]
        if missing:
            which = f"rank {missing[0]} is" if len(missing) == 1 else f"ranks {missing} are"
            raise KeyError(f"{which} not loaded; loaded ranks: {loaded}")
        ranks = tuple(selection.ranks)
    iterations = selection.iterations
    if iterations is ALL:
        return Selection(ranks, ALL)
    steps = (step_table(job, Selection(ranks, ALL)) if steps is None
             else steps[steps["rank"].isin(ranks)])
    available = sorted({int(s) for s in steps["step"]})
    if isinstance(iterations, Marker):  # FIRST: ALL returned above
        return Selection(ranks, tuple(available[:1]) if available else ALL)
    missing = [i for i in iterations if i not in set(available)]
    if missing and (strict or not set(iterations) & set(available)):
        raise ValueError(
            f"iteration(s) {missing} not found; the selected ranks hold "
            f"ProfilerStep {brief_list(available) or 'none'}. Pass one of those, or \"all\" "
            "for every event.")
    return Selection(ranks, tuple(iterations))


def restrict(trace: Trace, selection: Selection = EVERYTHING) -> Trace:
    """A copy of an in-memory ``trace`` keeping the selection's ranks and only the events
    of its ``ProfilerStep`` numbers (``iteration`` column; GPU work counts in its
    launch's step; :func:`hta.model.runner.restrict_rank` per rank); every event of every
    rank: ``trace`` itself. Data is shared, rows are filtered."""
    from hta.model.trace import Trace

    wanted = selection.iteration_list
    if wanted is None:
        return trace
    ranks = selection.rank_list
    chosen = trace if ranks is None else [trace.rank(r) for r in trace.selected_ranks(ranks)]
    kept = {rt.rank: restrict_rank(rt, wanted) for rt in chosen}
    return Trace(kept, trace_dir=trace.trace_dir, skipped=trace.skipped)


__all__ = ["ALL", "EVERYTHING", "FIRST", "STEP_COLUMNS", "Iterations", "Marker", "Ranks",
           "Selection", "StepList", "brief_list", "format_ranges", "iteration_list",
           "normalize_iterations", "normalize_ranks", "rank_list", "rank_step_spans",
           "rank_steps", "resolve", "restrict", "step_table"]
