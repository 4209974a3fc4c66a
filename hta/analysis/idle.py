"""Idle time breakdown: why is a GPU stream idle?

Per rank and stream (the ``stream`` column of GPU work: kernels, memcpy, memset), the
events are ordered by start. An *idle interval* is a gap between the end of everything
that ran before on the stream and the start of the next event: ``gap = ts_next -
max(end of every earlier event on the stream)``, counted when ``gap > 0`` (events that
touch or overlap on a stream leave no gap). Each gap gets one category, from the event
that ends it:

* ``host_wait``: that event's launch call (its runtime row, through ``index_correlation``)
  started after the stream went idle (``launch.ts > previous end``): the CPU had not even
  begun to enqueue the work, so the GPU waited for the host;
* ``kernel_wait``: otherwise, when ``gap < consecutive_kernel_delay_ns``: the work was
  enqueued in time and the gap is the launch overhead of back-to-back work;
* ``other``: every other gap (e.g. waiting for an event recorded on another stream, or
  work whose launch call is not in the trace).

Example (ns, threshold 1000): K1 ``[0, 100)``, K2 launched at 50, runs ``[150, 300)``:
gap 50, launch at 50 <= 100, 50 < 1000: ``kernel_wait`` 50. K3 launched at 400, runs
``[420, 500)``: gap 120, launch 400 > 300: ``host_wait`` 120. K4 launched at 410, runs
``[2000, 2100)``: gap 1500 >= 1000: ``other`` 1500.

The threshold is in nanoseconds, always. HTA documents its ``consecutive_kernel_delay``
in ns but compares it with µs gaps; our default, 30 000 ns, is the 30 µs HTA applies in
effect.

Iterations: with a selection, only gaps between two consecutive GPU events of the same
selected iteration on a stream count (gaps between steps belong to no step).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import GpuWork, as_list, rank_gpu_work
from hta.analysis.queue import _dense_pairs
from hta.model.arrays import distinct
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.selection import EVERYTHING, Selection, StepList
from hta.model.trace import RankMapper, RankTrace

DEFAULT_CONSECUTIVE_KERNEL_DELAY_NS = 30_000
CATEGORIES = ("host_wait", "kernel_wait", "other")
HOST_WAIT, KERNEL_WAIT, OTHER = 0, 1, 2
INTERVAL_COLUMNS = ["rank", "stream", "iteration", "start", "end", "idle_time(ns)",
                    "idle_category"]


#: The table without rows of :func:`idle_intervals` (:data:`INTERVAL_COLUMNS`).
INTERVALS = Columns.of({c: "int64" for c in INTERVAL_COLUMNS[:-1]}
                       | {"idle_category": pd.CategoricalDtype(CATEGORIES)})
#: The tables without rows of :func:`idle_time_breakdown` and :func:`idle_interval_stats`.
TOTALS = Columns.of({"rank": "int64", "stream": "int64", "idle_category": "object",
                     "idle_time": "float64", "idle_time_ratio": "float64",
                     "idle_intervals": "int64"})
INTERVAL_STATS = Columns.of({"rank": "float64", "stream": "float64", "idle_category": "object"}
                            | {c: "float64" for c in ("count", "mean", "std", "min", "25%",
                                                      "50%", "75%", "max")})


def idle_intervals(
    trace: RankMapper, selection: Selection = EVERYTHING,
    streams: Iterable[int] | int | None = None,
    consecutive_kernel_delay_ns: int = DEFAULT_CONSECUTIVE_KERNEL_DELAY_NS,
) -> pd.DataFrame:
    """Every idle interval, one row each: ``rank``, ``stream``, ``iteration`` (of the event
    ending the gap), ``start``/``end`` (absolute ns), ``idle_time(ns)`` and
    ``idle_category`` (see the module docstring). Found per rank, where the rank is."""
    _check_threshold(consecutive_kernel_delay_ns)
    return IDLE_INTERVALS.run(trace, selection, streams, consecutive_kernel_delay_ns)


def idle_time_breakdown(
    trace: RankMapper, selection: Selection = EVERYTHING,
    streams: Iterable[int] | int | None = None,
    consecutive_kernel_delay_ns: int = DEFAULT_CONSECUTIVE_KERNEL_DELAY_NS,
) -> pd.DataFrame:
    """Idle time per rank, stream and category (HTA's first table).

    Columns: ``rank``, ``stream``, ``idle_category`` (all three categories for every
    stream), ``idle_time`` (µs, HTA's name: the sum of the category's gaps),
    ``idle_time_ratio`` (``idle_time`` / the stream's total idle time; 0 for a stream that
    is never idle), and ``idle_intervals`` (number of gaps). A stream with a single event
    has no gaps and shows zeros. Computed per rank, where the rank is.
    """
    return idle_time_breakdown_and_stats(trace, selection, streams=streams,
                                         consecutive_kernel_delay_ns=consecutive_kernel_delay_ns)[0]


def idle_time_breakdown_and_stats(
    trace: RankMapper, selection: Selection = EVERYTHING,
    streams: Iterable[int] | int | None = None,
    consecutive_kernel_delay_ns: int = DEFAULT_CONSECUTIVE_KERNEL_DELAY_NS,
    show_idle_interval_stats: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """HTA's pair: (:func:`idle_time_breakdown`, :func:`idle_interval_stats` or None),
    finding the gaps once per rank, where the rank is (both tables are per rank)."""
    _check_threshold(consecutive_kernel_delay_ns)
    totals, stats = IDLE_BREAKDOWN.run(trace, selection, streams, consecutive_kernel_delay_ns,
                                       show_idle_interval_stats)
    return totals, stats if show_idle_interval_stats else None


def rank_idle_intervals(rt: RankTrace, iterations: StepList,
                        streams: Iterable[int] | int | None, delay_ns: int
                        ) -> pd.DataFrame:
    """One rank's rows of :func:`idle_intervals`: every gap on its selected streams."""
    return _collect(rt, streams, iterations, delay_ns)[0]


IDLE_INTERVALS = Analysis("Idle intervals", rank_idle_intervals, INTERVALS, steps=PER_STEP)


def rank_idle_breakdown(rt: RankTrace, iterations: StepList,
                        streams: Iterable[int] | int | None, delay_ns: int,
                        with_stats: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One rank's part of :func:`idle_time_breakdown_and_stats`: (its idle totals per
    stream and category, its gap statistics, an empty frame unless ``with_stats``)."""
    intervals, keys = _collect(rt, streams, iterations, delay_ns)
    stats = idle_interval_stats(intervals) if with_stats else pd.DataFrame()
    return _totals(intervals, keys), stats


#: The tables of no rank: the totals, and the statistics (which
#: :func:`idle_time_breakdown_and_stats` drops unless it was asked for them).
IDLE_BREAKDOWN = Analysis("Idle time breakdown", rank_idle_breakdown, (TOTALS, INTERVAL_STATS),
                          steps=PER_STEP)


def _totals(intervals: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, stream) of ``keys`` and category: the gaps' sum and count, with NumPy
    (one row per key and category, in the keys' order, then :data:`CATEGORIES`')."""
    n_cat = len(CATEGORIES)
    key_rank = keys["rank"].to_numpy(dtype=np.int64)
    key_stream = keys["stream"].to_numpy(dtype=np.int64)
    slot = _slots(key_rank, key_stream, intervals["rank"].to_numpy(dtype=np.int64),
                  intervals["stream"].to_numpy(dtype=np.int64))
    cell = slot * n_cat + intervals["idle_category"].cat.codes.to_numpy().astype(np.int64)
    size = len(keys) * n_cat
    gap = intervals["idle_time(ns)"].to_numpy(dtype=np.int64)
    if int(gap.sum()) < 1 << 53:  # float64 sums of integer ns are exact below 2**53
        sums = np.rint(np.bincount(cell, weights=gap, minlength=size)).astype(np.int64)
    else:  # pragma: no cover - over a hundred days of idle time
        sums = np.zeros(size, dtype=np.int64)
        np.add.at(sums, cell, gap)
    count = np.bincount(cell, minlength=size).astype(np.int64)
    total = np.repeat(sums.reshape(-1, n_cat).sum(axis=1), n_cat)
    ratio = np.where(total > 0, sums / np.where(total > 0, total, 1), 0.0)
    return pd.DataFrame({
        "rank": np.repeat(key_rank, n_cat),
        "stream": np.repeat(key_stream, n_cat),
        "idle_category": np.array(list(CATEGORIES) * len(keys), dtype=object),
        "idle_time": sums / 1e3,
        "idle_time_ratio": ratio,
        "idle_intervals": count,
    })


def _slots(key_a: np.ndarray, key_b: np.ndarray, a: np.ndarray, b: np.ndarray
           ) -> np.ndarray:
    """Row of (``key_a``, ``key_b``) holding each (``a``, ``b``) pair; every pair is a key."""
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    lookup = {pair: i for i, pair in enumerate(zip(key_a.tolist(), key_b.tolist()))}
    uniq_a, uniq_b, inverse = _dense_pairs(a, b)
    slot_of = np.array([lookup[pair] for pair in zip(uniq_a.tolist(), uniq_b.tolist())],
                       dtype=np.int64)
    return slot_of[inverse]


def idle_interval_stats(intervals: pd.DataFrame) -> pd.DataFrame:
    """Statistics of the gaps of :func:`idle_intervals` (HTA's second table), in µs.

    One row per (rank, stream, category) that has gaps: ``count``, ``mean``, ``std``
    (sample, NaN for one gap), ``min``, ``25%``, ``50%``, ``75%``, ``max``.
    """
    if not len(intervals):
        return INTERVAL_STATS.empty()
    us = intervals.assign(idle_time=intervals["idle_time(ns)"] / 1e3)
    stats = (us.groupby(["rank", "stream", "idle_category"], observed=True)["idle_time"]
             .describe().reset_index())
    stats["idle_category"] = stats["idle_category"].astype(str)
    return stats


def _collect(rt: RankTrace, streams: Iterable[int] | int | None,
             iterations: StepList, delay_ns: int
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the rank's idle intervals, its sorted (rank, stream) pairs that have selected GPU
    work)."""
    _check_threshold(delay_ns)
    w = rank_gpu_work(rt, iterations)
    keep = np.ones(len(w), dtype=bool) if streams is None else np.isin(
        w.stream, as_list(streams))
    intervals = _rank_intervals(w, keep, iterations is not None, delay_ns)
    if not len(intervals):
        intervals = INTERVALS.empty()
    return intervals, pd.DataFrame({"rank": rt.rank, "stream": distinct(w.stream[keep])})


def _rank_intervals(w: GpuWork, keep: np.ndarray, by_iteration: bool,
                    delay_ns: int) -> pd.DataFrame:
    stream, it, ts, end = w.stream[keep], w.iteration[keep], w.ts[keep], w.end[keep]
    launch = w.launch_ts[keep]
    group = _pair_ids(stream, it) if by_iteration else stream
    order = _by_group_then_start(group, ts)
    stream, it, ts, end, launch, group = (a[order] for a in (stream, it, ts, end, launch,
                                                             group))
    running_end = pd.Series(end).groupby(group).cummax().to_numpy(dtype=np.int64)
    prev_end = np.r_[np.int64(0), running_end[:-1]]
    same = np.r_[False, group[1:] == group[:-1]]
    gap = ts - prev_end
    rows = np.flatnonzero(same & (gap > 0))
    prev_end, gap, launch = prev_end[rows], gap[rows], launch[rows]
    category = np.where((launch >= 0) & (launch > prev_end), HOST_WAIT,
                        np.where(gap < delay_ns, KERNEL_WAIT, OTHER))
    return pd.DataFrame({
        "rank": w.rank, "stream": stream[rows], "iteration": it[rows],
        "start": prev_end, "end": ts[rows], "idle_time(ns)": gap,
        "idle_category": pd.Categorical.from_codes(category, categories=CATEGORIES),
    })


def _by_group_then_start(group: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """``np.lexsort((ts, group))``; when the rows already come by start (GPU work does) a
    stable sort by group alone gives the same order, a radix sort when the group ids fit
    in 16 bits."""
    if ts.size > 1 and bool(np.all(ts[1:] >= ts[:-1])):
        small = group.size and int(group.min()) >= 0 and int(group.max()) < 1 << 16
        return np.argsort(group.astype(np.uint16) if small else group, kind="stable")
    return np.lexsort((ts, group))


def _pair_ids(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One int id per distinct (a, b) pair, ordered like the pairs."""
    ua, ia = np.unique(a, return_inverse=True)
    ub, ib = np.unique(b, return_inverse=True)
    return ia.reshape(-1).astype(np.int64) * max(ub.size, 1) + ib.reshape(-1)


def _check_threshold(delay_ns: int) -> None:
    if not isinstance(delay_ns, (int, np.integer)) or delay_ns < 0:
        raise ValueError(
            f"consecutive_kernel_delay_ns must be a non-negative integer number of "
            f"nanoseconds, got {delay_ns!r}; e.g. 30_000 for 30 µs."
        )
