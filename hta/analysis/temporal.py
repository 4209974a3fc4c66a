"""Temporal breakdown: is the GPU computing, communicating, copying memory, or idle?

Per rank, over its GPU work (kernels, memcpy, memset: see :mod:`hta.analysis.gpu_work`),
all streams and devices together, times in integer ns shown in µs:

* ``kernel_time``: last GPU work end - first GPU work start (the GPU span);
* ``idle_time``: the span minus the union of all GPU work intervals;
* ``compute_time``: the union of ``computation`` kernels;
* ``non_compute_time``: the rest, ``kernel_time - idle_time - compute_time``, i.e. the
  time when only communication and/or memory work runs;
* ``*_pctg``: 100 * value / ``kernel_time``, rounded to 2 decimals.

The detail (:func:`temporal_breakdown_detail`) splits ``non_compute_time`` exactly into
``exposed_comm_time`` (communication running while no computation does) and
``exposed_memory_time`` (memory work running while neither computation nor
communication does), and also gives the unions ``comm_time`` and ``memory_time``.

Example: compute ``[0, 10)`` µs, NCCL ``[5, 20)``, memcpy ``[18, 25)``, compute
``[30, 40)``: ``kernel_time`` 40, union 35 so ``idle_time`` 5, ``compute_time`` 20,
``non_compute_time`` 15 = ``exposed_comm_time`` 10 (10..20) + ``exposed_memory_time`` 5
(20..25); ``comm_time`` 15, ``memory_time`` 7.

Iterations: with ``iterations=None`` the whole trace is one window. With a selection,
each selected ``ProfilerStep`` is its own window (GPU work launched in that step, from its
first start to its last end) and the rank's figures are the sums over those windows, so
the time between steps and the unselected steps count nowhere.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import COMM, COMPUTE, MEMORY, as_list, gpu_work
from hta.analysis.intervals import coverage, mask_total
from hta.model.arrays import distinct
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.job import Job
from hta.model.selection import EVERYTHING, Selection, StepList
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

HTA_COLUMNS = [
    "rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)",
    "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg",
]
#: The breakdown's table of no rank (:data:`HTA_COLUMNS`, object columns: the table it has
#: always answered for no rank).
BREAKDOWN = Columns.typed(HTA_COLUMNS)
#: The detail's columns (with ``per_iteration``, ``iteration`` follows ``rank``).
DETAIL = Columns.of({"rank": "int64"} | {c: "float64" for c in HTA_COLUMNS[1:] + [
    "exposed_comm_time(us)", "exposed_memory_time(us)", "comm_time(us)", "memory_time(us)",
    "exposed_comm_time_pctg", "exposed_memory_time_pctg"]} | {"note": "str"})
_CP, _CM, _MEM = 1 << COMPUTE, 1 << COMM, 1 << MEMORY
NO_GPU_WORK = "no GPU work (kernels, memcpy, memset) on this rank in the selection"
ZERO_SPAN = "GPU work spans 0 ns (zero-duration events only): percentages undefined"


def temporal_breakdown(trace: Job, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """HTA's ``get_temporal_breakdown`` table: one row per rank, columns :data:`HTA_COLUMNS`.

    Definitions in this module's docstring. A rank without GPU work gets zeros and NaN
    percentages (the detail says why in its ``note`` column, and a warning is logged).
    """
    return TEMPORAL_BREAKDOWN.run(trace, selection)


def temporal_breakdown_detail(
    trace: Job, selection: Selection = EVERYTHING,
    per_iteration: bool = False,
) -> pd.DataFrame:
    """The temporal breakdown with exposed communication and memory time.

    One row per rank, or per (rank, iteration) when ``per_iteration`` (iteration -1 holds
    GPU work launched outside every ``ProfilerStep``). Columns: HTA's (see
    :data:`HTA_COLUMNS`), then ``exposed_comm_time(us)``, ``exposed_memory_time(us)``,
    ``comm_time(us)``, ``memory_time(us)``, their ``*_pctg`` for the two exposed ones, and
    ``note`` (empty, or why a row is empty). ``non_compute_time(us)`` equals
    ``exposed_comm_time(us) + exposed_memory_time(us)`` exactly.
    """
    return TEMPORAL_BREAKDOWN_DETAIL.run(trace, selection, per_iteration)


def rank_breakdown(rank: RankTrace, iterations: StepList = None
                   ) -> pd.DataFrame:
    """One rank's row of :func:`temporal_breakdown` (:data:`HTA_COLUMNS`)."""
    return rank_breakdown_detail(rank, iterations)[HTA_COLUMNS]


TEMPORAL_BREAKDOWN = Analysis("Temporal breakdown", rank_breakdown, BREAKDOWN, steps=PER_STEP)


def rank_breakdown_detail(rank: RankTrace, iterations: StepList = None,
                          per_iteration: bool = False) -> pd.DataFrame:
    """One rank's rows of :func:`temporal_breakdown_detail` (one, or one per iteration)."""
    return _rank_rows(rank.rank, rank.events, iterations, per_iteration)


TEMPORAL_BREAKDOWN_DETAIL = Analysis("Temporal breakdown", rank_breakdown_detail, DETAIL,
                                     steps=PER_STEP)


def _rank_rows(rank: int, events: pd.DataFrame, iterations: StepList,
               per_iteration: bool) -> pd.DataFrame:
    w = gpu_work(rank, events, iterations)
    if per_iteration or iterations is not None:
        wanted = [] if iterations is None else as_list(iterations)
        labels = distinct(np.concatenate([w.iteration, np.asarray(wanted, dtype=np.int64)]))
        labels = labels if labels.size else np.array([-1], dtype=np.int64)
        groups = np.searchsorted(labels, w.iteration)
    else:
        labels, groups = np.zeros(1, dtype=np.int64), np.zeros(len(w), dtype=np.int64)
    table = coverage(w.ts, w.end, w.cls, 3, groups, labels.size)
    counts = np.bincount(groups, minlength=labels.size)
    if not per_iteration:
        table, counts = table.sum(axis=0, keepdims=True), counts.sum(keepdims=True)
    frame = _columns(table)
    frame.insert(0, "rank", rank)
    if per_iteration:
        frame.insert(1, "iteration", labels)
    frame["note"] = np.where(counts == 0, NO_GPU_WORK,
                             np.where(frame["kernel_time(us)"] == 0, ZERO_SPAN, ""))
    if (counts == 0).any():
        logger.warning("rank %d: %s", rank, NO_GPU_WORK)
    return frame


def _columns(table: np.ndarray) -> pd.DataFrame:
    """Named times (µs) and percentages from a compute/comm/memory coverage table (ns)."""
    span = table.sum(axis=1)
    ns = {
        "idle_time": table[:, 0],
        "compute_time": mask_total(table, all_of=_CP),
        "non_compute_time": mask_total(table, any_of=_CM | _MEM, none_of=_CP),
        "kernel_time": span,
        "exposed_comm_time": mask_total(table, all_of=_CM, none_of=_CP),
        "exposed_memory_time": mask_total(table, all_of=_MEM, none_of=_CP | _CM),
        "comm_time": mask_total(table, all_of=_CM),
        "memory_time": mask_total(table, all_of=_MEM),
    }
    out = {f"{k}(us)": v / 1e3 for k, v in ns.items()}
    with np.errstate(invalid="ignore", divide="ignore"):
        for k in ("idle_time", "compute_time", "non_compute_time", "exposed_comm_time",
                  "exposed_memory_time"):
            out[f"{k}_pctg"] = np.round(100.0 * ns[k] / np.where(span > 0, span, np.nan), 2)
    frame = pd.DataFrame(out)
    order = HTA_COLUMNS[1:] + [
        "exposed_comm_time(us)", "exposed_memory_time(us)", "comm_time(us)",
        "memory_time(us)", "exposed_comm_time_pctg", "exposed_memory_time_pctg",
    ]
    return frame[order]
