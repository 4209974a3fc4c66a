"""GPU kernel breakdown: which kinds of GPU work, and which kernels, take the time.

Kernel types come from the event kinds (see :mod:`hta.analysis.gpu_work`):
``COMPUTATION``, ``COMMUNICATION`` and, with ``include_memory_kernels``, ``MEMORY``
(memcpy and memset). Names are never matched here, so RCCL, NVSHMEM, DeepEP and custom
all-reduce kernels are ``COMMUNICATION`` when the kind rules say so.

**Kernel type table** (:func:`kernel_type_breakdown`, HTA's first frame): the time when
at least one kernel of a type runs is cut by which types run together; each piece goes to
one class, ``COMPUTATION``, ``COMMUNICATION``, ``MEMORY``, ``COMPUTATION overlapping
COMMUNICATION``, ... (types joined by `` overlapping `` in that order). Classes partition
the GPU busy time, so nothing is counted twice. Columns: ``kernel_type``, ``sum`` (µs,
summed over the selected ranks), ``percentage`` (100 x sum / total busy time of the
selected types). Example: compute ``[0, 10)`` µs and NCCL ``[6, 12)``: COMPUTATION 6,
COMPUTATION overlapping COMMUNICATION 4, COMMUNICATION 2 (50%, 33.3%, 16.7%).

**Kernel table** (:func:`kernel_breakdown`, HTA's second frame): per rank, kernel type
and kernel name, the durations of the individual kernels: ``sum (us)``, ``max (us)``,
``min (us)``, ``stddev`` (µs), ``mean (us)``, ``count``; the tail is folded into
``"others"`` as described in :mod:`hta.analysis.aggregate`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.aggregate import STATS, check_folding, kept_names, label_stats, name_totals
from hta.analysis.gpu_work import CLASS_NAMES, MEMORY, rank_gpu_work
from hta.analysis.intervals import coverage
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.selection import EVERYTHING, Selection, StepList
from hta.model.trace import RankMapper, RankTrace

KERNEL_COLUMNS = ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)",
                  "kernel_type", "rank", "count"]
#: The tables of no rank of the per-rank passes: time per kernel-type class, the totals
#: per kernel name (:func:`hta.analysis.aggregate.name_totals`) and the statistics
#: (:func:`hta.analysis.aggregate.label_stats`).
TYPE_TIME = Columns.typed(("rank", "kernel_type", "ns"), "float64")
TOTALS = Columns.of({"group": "int64", "text": "object", "dur": "int64"})
STATS_TABLE = Columns.typed(("rank", "group", "name", *STATS), "float64")


def gpu_kernel_breakdown(
    trace: RankMapper, selection: Selection = EVERYTHING,
    duration_ratio: float = 0.8,
    num_kernels: int = 10, include_memory_kernels: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """HTA's pair: (:func:`kernel_type_breakdown`, :func:`kernel_breakdown`)."""
    return (
        kernel_type_breakdown(trace, selection, include_memory_kernels=include_memory_kernels),
        kernel_breakdown(trace, selection, duration_ratio=duration_ratio, num_kernels=num_kernels,
                         include_memory_kernels=include_memory_kernels),
    )


def kernel_type_breakdown(
    trace: RankMapper, selection: Selection = EVERYTHING,
    include_memory_kernels: bool = True,
    by_rank: bool = False,
) -> pd.DataFrame:
    """Time per kernel-type class (see the module docstring), longest first.

    With ``by_rank`` there is one set of rows per rank (a leading ``rank`` column) and
    ``percentage`` is relative to that rank's busy time; otherwise sums are over the
    selected ranks. Each rank's time per class is computed where the rank is
    (:func:`rank_kernel_type_time`), then added up here.
    """
    n_types = 3 if include_memory_kernels else 2
    out = KERNEL_TYPE_TIME.run(trace, selection, n_types)
    if not len(out):
        return pd.DataFrame(columns=(["rank"] if by_rank else []) + ["kernel_type", "sum",
                                                                     "percentage"])
    keys = ["rank", "kernel_type"] if by_rank else ["kernel_type"]
    out = out.groupby(keys, sort=False)["ns"].sum().reset_index()
    out = out[out["ns"] > 0]
    total = out.groupby("rank")["ns"].transform("sum") if by_rank else out["ns"].sum()
    out["sum"] = out["ns"] / 1e3
    out["percentage"] = 100.0 * out["ns"] / total
    out = out.sort_values((["rank"] if by_rank else []) + ["ns"],
                          ascending=[True] * by_rank + [False], kind="stable")
    return out[keys + ["sum", "percentage"]].reset_index(drop=True)


def rank_kernel_type_time(rt: RankTrace, iterations: StepList,
                          n_types: int) -> pd.DataFrame:
    """One rank's time per kernel-type class (every class, empty ones included):
    ``rank``, ``kernel_type``, ``ns`` (time the class covers). The per-rank part of
    :func:`kernel_type_breakdown`."""
    w = rank_gpu_work(rt, iterations)
    sel = w.cls < n_types
    table = coverage(w.ts[sel], w.end[sel], w.cls[sel], n_types)[0]
    return pd.DataFrame({"rank": rt.rank, "kernel_type": _class_labels(n_types),
                         "ns": table[1:]})


KERNEL_TYPE_TIME = Analysis("Kernel types", rank_kernel_type_time, TYPE_TIME, steps=PER_STEP)


def kernel_breakdown(
    trace: RankMapper, selection: Selection = EVERYTHING,
    duration_ratio: float = 0.8,
    num_kernels: int = 10, include_memory_kernels: bool = True,
) -> pd.DataFrame:
    """Duration statistics per rank, kernel type and kernel (columns :data:`KERNEL_COLUMNS`).

    Top kernels are chosen per kernel type over all selected ranks together (see
    :mod:`hta.analysis.aggregate`), so each kept kernel has a row on every rank that ran
    it. Sorted by ``kernel_type``, ``name``, ``rank`` as HTA does. Two passes over the
    ranks, each where the rank is: each rank's total time per kernel
    (:func:`rank_kernel_totals`), the choice of the top kernels over those totals, then
    each rank's statistics of the chosen kernels (:func:`rank_kernel_stats`).
    """
    check_folding(num_kernels, duration_ratio)
    totals = [KERNEL_TOTALS.run(trace, selection, include_memory_kernels)]
    kept = kept_names(totals, num_kernels, duration_ratio)
    stats = KERNEL_STATS.run(trace, selection, include_memory_kernels, kept)
    return _breakdown_table(stats)


def rank_kernel_breakdown(rt: RankTrace, iterations: StepList = None,
                          duration_ratio: float = 0.8, num_kernels: int = 10,
                          include_memory_kernels: bool = True) -> pd.DataFrame:
    """:func:`kernel_breakdown` of one rank alone (its top kernels chosen over its own
    totals): both passes where the rank is."""
    check_folding(num_kernels, duration_ratio)
    args = (iterations, include_memory_kernels)
    kept = kept_names([rank_kernel_totals(rt, *args)], num_kernels, duration_ratio)
    return _breakdown_table(rank_kernel_stats(rt, *args, kept))


def rank_kernel_sums(rt: RankTrace, iterations: StepList = None) -> pd.DataFrame:
    """``rank``, ``kernel_type``, ``name``, ``sum (us)`` and ``count`` of every kernel of
    the rank, memory kernels included and nothing folded: those columns of
    :func:`rank_kernel_breakdown` with ``num_kernels`` past every kernel, in its order
    (``kernel_type``, ``name``, ``rank``), without the other statistics."""
    w = rank_gpu_work(rt, iterations)
    if not w.ts.size:
        return rank_kernel_breakdown(rt, iterations, duration_ratio=1.0, num_kernels=2**62,
                                     include_memory_kernels=True)[list(SUMS_COLUMNS)]
    key = w.cls.astype(np.int64) * np.int64(len(rt.symbols) + 1) + w.name
    first, inverse = np.unique(key, return_index=True, return_inverse=True)[1:]
    total = np.bincount(inverse, weights=(w.end - w.ts).astype(np.float64))
    out = pd.DataFrame({
        "rank": np.full(first.size, rt.rank, dtype=np.int64),
        "kernel_type": np.asarray(CLASS_NAMES, dtype=object)[w.cls[first].astype(int)],
        "name": np.asarray(rt.symbols, dtype=object)[w.name[first]],
        "sum (us)": total / 1e3,
        "count": np.bincount(inverse).astype(np.int64),
    })
    return out.sort_values(["kernel_type", "name", "rank"], ignore_index=True)


#: :func:`rank_kernel_sums`' columns.
SUMS_COLUMNS = ("rank", "kernel_type", "name", "sum (us)", "count")


def _breakdown_table(stats: pd.DataFrame) -> pd.DataFrame:
    """:data:`KERNEL_COLUMNS` from the ranks' :func:`rank_kernel_stats`, sorted as HTA does."""
    out = pd.DataFrame({
        "name": stats["name"],
        "sum (us)": stats["sum"] / 1e3, "max (us)": stats["max"] / 1e3,
        "min (us)": stats["min"] / 1e3, "stddev": stats["std"] / 1e3,
        "mean (us)": stats["mean"] / 1e3,
        "kernel_type": np.asarray(CLASS_NAMES, dtype=object)[stats["group"].to_numpy(int)],
        "rank": stats["rank"].astype(np.int64), "count": stats["count"].astype(np.int64),
    })
    return out.sort_values(["kernel_type", "name", "rank"], ignore_index=True)


def _kernel_frame(rt: RankTrace, iterations: StepList,
                  include_memory_kernels: bool) -> pd.DataFrame:
    """``rank``, ``group`` (class), ``name`` (symbol id), ``dur`` of the rank's selected
    work."""
    w = rank_gpu_work(rt, iterations)
    sel = (w.cls != MEMORY) | include_memory_kernels
    return pd.DataFrame({"rank": rt.rank, "group": w.cls[sel], "name": w.name[sel],
                         "dur": (w.end - w.ts)[sel]})


def rank_kernel_totals(rt: RankTrace, iterations: StepList,
                       include_memory_kernels: bool) -> pd.DataFrame:
    """One rank's total duration per class and kernel name (text): the first pass of
    :func:`kernel_breakdown` (see :func:`hta.analysis.aggregate.name_totals`)."""
    return name_totals(_kernel_frame(rt, iterations, include_memory_kernels), rt.symbols)


KERNEL_TOTALS = Analysis("Kernel totals", rank_kernel_totals, TOTALS, steps=PER_STEP)


def rank_kernel_stats(rt: RankTrace, iterations: StepList,
                      include_memory_kernels: bool, kept: pd.DataFrame) -> pd.DataFrame:
    """One rank's duration statistics per class and kept kernel (the others folded): the
    second pass of :func:`kernel_breakdown` (see
    :func:`hta.analysis.aggregate.label_stats`)."""
    return label_stats(_kernel_frame(rt, iterations, include_memory_kernels), rt.symbols,
                       kept)


KERNEL_STATS = Analysis("Kernel statistics", rank_kernel_stats, STATS_TABLE, steps=PER_STEP)


def _class_labels(n_types: int) -> list[str]:
    """Label of every non-empty mask: the types whose bit is set, joined."""
    return [" overlapping ".join(CLASS_NAMES[k] for k in range(n_types) if m >> k & 1)
            for m in range(1, 1 << n_types)]
