"""Memory bandwidth of GPU copies and memsets, per direction.

Per copy
--------
Every event whose ``kind`` is a memory kind (``memcpy_htod``, ``memcpy_dtoh``,
``memcpy_dtod``, ``memcpy_ptop``, ``memcpy_other``, ``memset``) is one *copy*, named by its
direction: ``Memcpy HtoD``, ``Memcpy DtoH``, ``Memcpy DtoD``, ``Memcpy PtoP``,
``Memcpy Other``, ``Memset``. Its bandwidth in GB/s (10^9 bytes per second) is

* the writer's ``memory bandwidth (GB/s)`` arg when it is a finite number >= 0;
* otherwise ``bytes / dur`` (bytes per ns is exactly GB/s) when ``bytes >= 0`` and
  ``dur > 0``;
* otherwise undefined (NaN): a zero-duration copy without the arg, or a copy without
  ``bytes``.

A bandwidth is never negative. Example: 1 MiB (1048576 bytes) in 1000 ns without the arg is
1048.576 GB/s.

Time series
-----------
:func:`memory_bw_time_series` is, per rank, device (``pid``) and direction, the sum of the
bandwidths of the copies running at each instant: a copy adds its bandwidth over
``[ts, ts + dur)``. Zero-duration copies and copies with an undefined bandwidth add
nothing. At one timestamp the copies that end are removed before those that start are
added, so back-to-back copies never count twice. One row per timestamp at which the
value changes; the value holds until the next row; it is exactly 0 whenever no copy runs.
Example: copies of 10 GB/s over [0, 100) and 20 GB/s over [50, 150) ns: rows (0, 10),
(50, 30), (100, 20), (150, 0).

Summary
-------
:func:`memory_bw_summary`, per rank and direction: ``count`` (copies),
``zero_duration_count``, ``total_bytes``, ``busy_time(us)`` (the union of the copies'
intervals), ``achieved_bw_gbps`` (bytes of the copies with ``dur > 0`` divided by the
busy time in ns), and the statistics of the per-copy bandwidth over the copies where it is
defined: ``mean_bw_gbps``, ``std_bw_gbps`` (sample, ddof=1), ``min_bw_gbps``,
``p25_bw_gbps``, ``p50_bw_gbps``, ``p75_bw_gbps``, ``max_bw_gbps``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.intervals import union_length
from hta.analysis.side_columns import side_slots
from hta.model.declared import WHOLE, Analysis, Columns, check_whole_ranks
from hta.model.rules import KINDS, MEMORY_KINDS, codes_in, kind_codes
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankMapper, RankTrace

#: Direction names, as HTA and Kineto name them.
DIRECTION = {
    "memcpy_htod": "Memcpy HtoD",
    "memcpy_dtoh": "Memcpy DtoH",
    "memcpy_dtod": "Memcpy DtoD",
    "memcpy_ptop": "Memcpy PtoP",
    "memcpy_other": "Memcpy Other",
    "memset": "Memset",
}
_MEMORY_CODES = kind_codes(MEMORY_KINDS)
_DIRECTION_BY_CODE = np.array([DIRECTION.get(k, "") for k in KINDS], dtype=object)

COPY_COLUMNS = ["rank", "index", "pid", "stream", "name", "ts", "dur", "bytes",
                "memory_bw_gbps", "bw_source"]
SERIES_COLUMNS = ["rank", "pid", "name", "ts", "memory_bw_gbps"]
SUMMARY_COLUMNS = [
    "rank", "name", "count", "zero_duration_count", "total_bytes", "busy_time(us)",
    "achieved_bw_gbps", "mean_bw_gbps", "std_bw_gbps", "min_bw_gbps", "p25_bw_gbps",
    "p50_bw_gbps", "p75_bw_gbps", "max_bw_gbps",
]
COPIES = Columns.typed(COPY_COLUMNS, "float64")
SERIES = Columns.typed(SERIES_COLUMNS, "float64")
SUMMARY = Columns.typed(SUMMARY_COLUMNS, "float64")


def memory_copies(trace: RankMapper, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """One row per copy or memset (:data:`COPY_COLUMNS`), in start order per rank.

    ``ts``/``dur`` in integer ns, ``bytes`` (NaN when absent), ``memory_bw_gbps`` as
    defined in this module's docstring and ``bw_source``: ``"arg"``, ``"bytes/dur"`` or
    ``"undefined"``. Found per rank, where the rank is, each rank first restricted to
    the selection's ``ProfilerStep`` numbers (every event when it names none).
    """
    return MEMORY_COPIES.run(trace, selection)


def rank_memory_copies(rt: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`memory_copies`: its copies and memsets, in start order."""
    copies = _rank_copies(rt)
    return copies if len(copies) else COPIES.empty()


MEMORY_COPIES = Analysis("Memory copies", rank_memory_copies, COPIES)


def _copy_rows(rt: RankTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rank's copy and memset rows, their bytes and their bandwidth arg (NaN where
    the trace has none)."""
    rows = np.flatnonzero(codes_in(rt.kind_codes(), _MEMORY_CODES))
    nbytes = np.full(rows.size, np.nan)
    arg_bw = np.full(rows.size, np.nan)
    if not rows.size:
        return rows, nbytes, arg_bw
    table, slot = side_slots(rt, "memory_args")
    if len(table):
        where = slot[rows]
        has = where >= 0
        nbytes[has] = table["bytes"].to_numpy(dtype=np.float64)[where[has]]
        arg_bw[has] = table["bandwidth_gbps"].to_numpy(dtype=np.float64)[where[has]]
    return rows, nbytes, arg_bw


def copy_totals(rt: RankTrace) -> tuple[int, float, int]:
    """The rank's copies (count and bytes, missing bytes left out) and memsets (count):
    what :func:`rank_memory_bw_summary`'s ``count`` and ``total_bytes`` add up to, over
    the copy directions and over ``Memset``, without the per-direction statistics."""
    rows, nbytes, _ = _copy_rows(rt)
    is_set = _DIRECTION_BY_CODE[rt.kind_codes()[rows]] == "Memset"
    copies = nbytes[~is_set]
    moved = float(np.nansum(copies)) if copies.size else 0.0
    return int(copies.size), moved, int(is_set.sum())


def _rank_copies(rt: RankTrace) -> pd.DataFrame:
    rows, nbytes, arg_bw = _copy_rows(rt)
    if rows.size == 0:
        return pd.DataFrame(columns=COPY_COLUMNS)
    codes = rt.kind_codes()
    dur = rt.column("dur")[rows]
    with np.errstate(divide="ignore", invalid="ignore"):
        computed = np.where((dur > 0) & (nbytes >= 0), nbytes / np.where(dur > 0, dur, 1),
                            np.nan)
    use_arg = np.isfinite(arg_bw) & (arg_bw >= 0)
    use_computed = ~use_arg & np.isfinite(computed)
    bw = np.where(use_arg, arg_bw, np.where(use_computed, computed, np.nan))
    source = np.where(use_arg, "arg", np.where(use_computed, "bytes/dur", "undefined"))
    stream = rt.column("stream")[rows]
    return pd.DataFrame({
        "rank": rt.rank,
        "index": rt.column("index")[rows],
        "pid": rt.column("pid")[rows],
        "stream": np.where(stream >= 0, stream, rt.column("tid")[rows]),
        "name": _DIRECTION_BY_CODE[codes[rows]],
        "ts": rt.column("ts")[rows],
        "dur": dur,
        "bytes": nbytes,
        "memory_bw_gbps": bw,
        "bw_source": source,
    }, columns=COPY_COLUMNS)


def memory_bw_time_series(trace: RankMapper, selection: Selection = EVERYTHING,
                          copies: pd.DataFrame | None = None) -> pd.DataFrame:
    """Concurrent copy bandwidth per rank, device and direction (:data:`SERIES_COLUMNS`).

    ``ts`` in integer ns, ``memory_bw_gbps`` in GB/s; definition in this module's
    docstring. Sorted by rank, pid, name, ts. Computed per rank, where the rank is; pass
    ``copies`` (from :func:`memory_copies`) to reuse it instead.
    """
    if copies is None:
        return MEMORY_BW_SERIES.run(trace, selection)
    check_whole_ranks(selection, MEMORY_BW_SERIES.name)
    return bw_series(copies)


def rank_memory_bw_series(rt: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`memory_bw_time_series`: its copy bandwidth per device and
    direction over time."""
    return bw_series(rank_memory_copies(rt))


MEMORY_BW_SERIES = Analysis("Memory bandwidth", rank_memory_bw_series, SERIES, steps=WHOLE)


def bw_series(copies: pd.DataFrame) -> pd.DataFrame:
    """:func:`memory_bw_time_series` of the rows of :func:`memory_copies`."""
    live = copies[(copies["dur"] > 0) & np.isfinite(copies["memory_bw_gbps"])]
    if len(live) == 0:
        return SERIES.empty()
    group_cols = ["rank", "pid", "name"]
    keys = live[group_cols].drop_duplicates().sort_values(group_cols, ignore_index=True)
    key = live[group_cols].merge(keys.reset_index(), on=group_cols, how="left")["index"]
    key = key.to_numpy()
    n = len(live)
    bw = live["memory_bw_gbps"].to_numpy(dtype=np.float64)
    start = live["ts"].to_numpy(dtype=np.int64)
    end = start + live["dur"].to_numpy(dtype=np.int64)
    all_key = np.concatenate([key, key])
    all_ts = np.concatenate([start, end])
    delta = np.concatenate([bw, -bw])
    active_step = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    # ends (-1) before starts (+1) at the same timestamp
    order = np.lexsort((active_step, all_ts, all_key))
    all_key, all_ts = all_key[order], all_ts[order]
    delta, active_step = delta[order], active_step[order]
    value = pd.Series(delta).groupby(all_key).cumsum().to_numpy()
    active = np.cumsum(active_step)  # each group nets to zero
    value = np.where(active == 0, 0.0, np.maximum(value, 0.0))
    last_at_ts = np.r_[(all_key[1:] != all_key[:-1]) | (all_ts[1:] != all_ts[:-1]), True]
    all_key, all_ts, value = all_key[last_at_ts], all_ts[last_at_ts], value[last_at_ts]
    first = np.r_[True, all_key[1:] != all_key[:-1]]
    changed = first | np.r_[True, value[1:] != value[:-1]]
    all_key, all_ts, value = all_key[changed], all_ts[changed], value[changed]
    out = keys.iloc[all_key].reset_index(drop=True)
    out["ts"] = all_ts
    out["memory_bw_gbps"] = value
    return out[SERIES_COLUMNS]


def memory_bw_summary(trace: RankMapper, selection: Selection = EVERYTHING,
                      copies: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per rank and direction, the statistics of :data:`SUMMARY_COLUMNS`.

    Definitions in this module's docstring. Example: one HtoD copy of 1000 bytes over
    [0, 100) ns with the arg 10 GB/s and one of 3000 bytes over [50, 150) ns without it:
    count 2, busy 0.15 µs, achieved 4000/150 = 26.67 GB/s, per-copy bandwidths 10 and 30.
    Computed per rank, where the rank is; pass ``copies`` to reuse them instead.
    """
    if copies is None:
        return MEMORY_BW_SUMMARY.run(trace, selection)
    check_whole_ranks(selection, MEMORY_BW_SUMMARY.name)
    return bw_summary(copies)


def rank_memory_bw_summary(rt: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`memory_bw_summary`: the statistics of its copies per
    direction."""
    return bw_summary(rank_memory_copies(rt))


MEMORY_BW_SUMMARY = Analysis("Memory bandwidth summary", rank_memory_bw_summary, SUMMARY,
                             steps=WHOLE)
#: :func:`rank_memory_bw_summary` of each rank restricted to the selected steps (the
#: summary of :func:`memory_copies` of a selection of steps, computed where each rank
#: is: only the statistics come back, not every copy).
MEMORY_BW_SUMMARY_OF_STEPS = Analysis("Memory bandwidth summary", rank_memory_bw_summary,
                                      SUMMARY)


def bw_summary(copies: pd.DataFrame) -> pd.DataFrame:
    """:func:`memory_bw_summary` of the rows of :func:`memory_copies`."""
    if len(copies) == 0:
        return SUMMARY.empty()
    rows = []
    for (rank, name), grp in copies.groupby(["rank", "name"], sort=True):
        dur = grp["dur"].to_numpy()
        start = grp["ts"].to_numpy()
        busy = union_length(start, start + dur)
        positive = dur > 0
        moved = float(np.nansum(grp["bytes"].to_numpy()[positive]))
        bw = grp["memory_bw_gbps"].dropna()
        rows.append({
            "rank": rank,
            "name": name,
            "count": len(grp),
            "zero_duration_count": int(np.count_nonzero(~positive)),
            "total_bytes": float(np.nansum(grp["bytes"].to_numpy())),
            "busy_time(us)": busy / 1e3,
            "achieved_bw_gbps": moved / busy if busy > 0 else np.nan,
            "mean_bw_gbps": bw.mean() if len(bw) else np.nan,
            "std_bw_gbps": bw.std() if len(bw) > 1 else np.nan,
            "min_bw_gbps": bw.min() if len(bw) else np.nan,
            "p25_bw_gbps": bw.quantile(0.25) if len(bw) else np.nan,
            "p50_bw_gbps": bw.quantile(0.5) if len(bw) else np.nan,
            "p75_bw_gbps": bw.quantile(0.75) if len(bw) else np.nan,
            "max_bw_gbps": bw.max() if len(bw) else np.nan,
        })
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)

