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

from collections.abc import Iterable

import numpy as np
import pandas as pd

from hta.analysis.aggregate import folded_stats
from hta.analysis.gpu_work import CLASS_NAMES, MEMORY, gpu_work
from hta.analysis.intervals import coverage
from hta.analysis.select import select_ranks
from hta.model.trace import Trace

KERNEL_COLUMNS = ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)",
                  "kernel_type", "rank", "count"]


def gpu_kernel_breakdown(
    trace: Trace, ranks: Iterable[int] | int | None = None,
    iterations: Iterable[int] | int | None = None, duration_ratio: float = 0.8,
    num_kernels: int = 10, include_memory_kernels: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """HTA's pair: (:func:`kernel_type_breakdown`, :func:`kernel_breakdown`)."""
    return (
        kernel_type_breakdown(trace, ranks, iterations, include_memory_kernels),
        kernel_breakdown(trace, ranks, iterations, duration_ratio, num_kernels,
                         include_memory_kernels),
    )


def kernel_type_breakdown(
    trace: Trace, ranks: Iterable[int] | int | None = None,
    iterations: Iterable[int] | int | None = None, include_memory_kernels: bool = True,
    by_rank: bool = False,
) -> pd.DataFrame:
    """Time per kernel-type class (see the module docstring), longest first.

    With ``by_rank`` there is one set of rows per rank (a leading ``rank`` column) and
    ``percentage`` is relative to that rank's busy time; otherwise sums are over the
    selected ranks.
    """
    n_types = 3 if include_memory_kernels else 2
    rows = []
    for rt in select_ranks(trace, ranks):
        w = gpu_work(rt.rank, rt.events, iterations)
        sel = w.cls < n_types
        table = coverage(w.ts[sel], w.end[sel], w.cls[sel], n_types)[0]
        rows.append(pd.DataFrame({"rank": rt.rank, "kernel_type": _class_labels(n_types),
                                  "ns": table[1:]}))
    if not rows:
        return pd.DataFrame(columns=(["rank"] if by_rank else []) + ["kernel_type", "sum",
                                                                     "percentage"])
    out = pd.concat(rows, ignore_index=True)
    keys = ["rank", "kernel_type"] if by_rank else ["kernel_type"]
    out = out.groupby(keys, sort=False)["ns"].sum().reset_index()
    out = out[out["ns"] > 0]
    total = out.groupby("rank")["ns"].transform("sum") if by_rank else out["ns"].sum()
    out["sum"] = out["ns"] / 1e3
    out["percentage"] = 100.0 * out["ns"] / total
    out = out.sort_values((["rank"] if by_rank else []) + ["ns"],
                          ascending=[True] * by_rank + [False], kind="stable")
    return out[keys + ["sum", "percentage"]].reset_index(drop=True)


def kernel_breakdown(
    trace: Trace, ranks: Iterable[int] | int | None = None,
    iterations: Iterable[int] | int | None = None, duration_ratio: float = 0.8,
    num_kernels: int = 10, include_memory_kernels: bool = True,
) -> pd.DataFrame:
    """Duration statistics per rank, kernel type and kernel (columns :data:`KERNEL_COLUMNS`).

    Top kernels are chosen per kernel type over all selected ranks together (see
    :mod:`hta.analysis.aggregate`), so each kept kernel has a row on every rank that ran
    it. Sorted by ``kernel_type``, ``name``, ``rank`` as HTA does.
    """
    frames = []
    for rt in select_ranks(trace, ranks):
        w = gpu_work(rt.rank, rt.events, iterations)
        sel = (w.cls != MEMORY) | include_memory_kernels
        frames.append(pd.DataFrame({"rank": rt.rank, "group": w.cls[sel],
                                    "name": w.name[sel], "dur": (w.end - w.ts)[sel]}))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        {"rank": [], "group": [], "name": [], "dur": []})
    stats = folded_stats(frame, trace.symbols, num_kernels, duration_ratio)
    out = pd.DataFrame({
        "name": stats["name"],
        "sum (us)": stats["sum"] / 1e3, "max (us)": stats["max"] / 1e3,
        "min (us)": stats["min"] / 1e3, "stddev": stats["std"] / 1e3,
        "mean (us)": stats["mean"] / 1e3,
        "kernel_type": np.asarray(CLASS_NAMES, dtype=object)[stats["group"].to_numpy(int)],
        "rank": stats["rank"].astype(np.int64), "count": stats["count"].astype(np.int64),
    })
    return out.sort_values(["kernel_type", "name", "rank"], ignore_index=True)


def _class_labels(n_types: int) -> list[str]:
    """Label of every non-empty mask: the types whose bit is set, joined."""
    return [" overlapping ".join(CLASS_NAMES[k] for k in range(n_types) if m >> k & 1)
            for m in range(1, 1 << n_types)]
