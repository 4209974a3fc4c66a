"""Launch queue length per GPU stream: how much work the CPU has enqueued ahead of the GPU.

Definition
----------
For each rank and GPU stream (``pid`` = device, ``stream``), every paired GPU event (see
:mod:`hta.analysis.launch`: kernels, memcpy, memset with a ``runtime_launch`` partner)
adds +1 to the queue when its launch call starts and -1 when it starts on the GPU. A graph
launch adds one per kernel, each on the kernel's own stream.

* Ties: at one timestamp, increments count before decrements, so a kernel that starts the
  very nanosecond it is launched never makes the queue negative.
* Clock skew: a GPU event that starts before its launch call is enqueued at its own start
  (increment time = min(launch start, GPU start)); such events are counted in
  :func:`hta.analysis.launch.launch_pairing_summary` (``gpu_before_launch``).
* Unpaired launches (no GPU event: no stream, no decrement) and unpaired GPU events (no
  launch: no increment) are left out and counted in ``launch_pairing_summary``; the
  summary also gives ``unpaired_gpu_events`` per stream.

With these rules the length is never negative and always ends at 0.

:func:`queue_length_time_series` is a step function: one row per distinct timestamp at
which the length changes, holding the length after every change at that instant; the
value holds until the next row. Example (one stream): launches at 0 and 10 ns, their
kernels start at 10 and 30 ns: rows ``(0, 1)``, ``(30, 0)``; at 10 ns one kernel is enqueued
and one starts, so the length stays 1 and no row is written.

:func:`queue_length_summary` statistics are time-weighted over the stream's *window*, from
its first row to its last (when the queue is back to 0): ``mean`` and ``std`` (population)
weight each value by how long it holds; ``min``, ``25%``, ``50%``, ``75%``, ``90%``
are the smallest values the queue is at or below for that fraction of the window; ``max``
is the largest value reached. On the example: window 30 ns at length 1, so mean 1, min 1,
max 1.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from hta.analysis.launch import rank_launch_pairs
from hta.analysis.thinning import envelope
from hta.model.declared import WHOLE, Analysis, Columns, check_whole_ranks
from hta.model.derived import derived
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankMapper, RankTrace

logger = logging.getLogger(__name__)

#: CUDA's launch queue holds 1024 pending operations per stream.
CUDA_MAX_LAUNCH_QUEUE_PER_STREAM = 1024

SERIES_COLUMNS = ["rank", "pid", "tid", "stream", "ts", "queue_length"]
QUANTILES = (0.25, 0.5, 0.75, 0.9)
SUMMARY_COLUMNS = [
    "rank", "pid", "stream", "count", "mean", "std", "min", "25%", "50%", "75%", "90%", "max",
    "duration(us)", "unpaired_gpu_events",
]
BLOCKED_COLUMNS = [
    "rank", "pid", "stream", "duration_at_max_queue_length(us)",
    "relative_duration_at_max_queue_length",
]
SERIES = Columns.typed(SERIES_COLUMNS, "int64")
SUMMARY = Columns.typed(SUMMARY_COLUMNS, "float64")
BLOCKED = Columns.typed(BLOCKED_COLUMNS, "float64")
STREAM_COUNTS = Columns.typed(("rank", "pid", "stream", "paired", "unpaired"), "int64")
SPANS = Columns.typed(("rank", "span(ns)"), "int64")


def queue_length_time_series(trace: RankMapper, selection: Selection = EVERYTHING
                             ) -> pd.DataFrame:
    """Queue length per rank and stream as a step function (columns :data:`SERIES_COLUMNS`).

    ``ts`` is in integer ns (absolute epoch), ``tid`` equals the GPU events' tid (the
    stream). Definition in this module's docstring. Sorted by rank, pid, stream, ts.
    Computed per rank, where the rank is; the series travels (one row per change).
    """
    return QUEUE_SERIES.run(trace, selection)


def rank_queue_series(rt: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`queue_length_time_series`: its queue length per stream,
    one row per change."""
    series = _rank_series(rt)
    return series if len(series) else SERIES.empty()


QUEUE_SERIES = Analysis("Queue length", rank_queue_series, SERIES, steps=WHOLE)


def _stream_of(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    stream = events["stream"].to_numpy()[rows]
    return np.where(stream >= 0, stream, events["tid"].to_numpy()[rows])


def thinned_queue_series(trace: RankMapper, selection: Selection,
                         max_points_per_line: int
                         ) -> tuple[pd.DataFrame, bool]:
    """:func:`queue_length_time_series` with each (rank, pid, stream) line cut to about
    ``max_points_per_line`` rows (:func:`hta.analysis.thinning.envelope`), where the
    rank is: a figure's rows travel, not every change of a big job's queues. Also
    whether any line was cut. Each rank is first restricted to the selection's
    ``ProfilerStep`` numbers, where it lives (every event when it names none)."""
    series, cut = THINNED_QUEUE_SERIES.run(trace, selection, max_points_per_line)
    return series, bool(cut["thinned"].any()) if len(cut) else False


def rank_thinned_queue_series(rt: RankTrace, max_points_per_line: int
                              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One rank's rows of :func:`thinned_queue_series` (each line cut to about
    ``max_points_per_line`` rows), and whether a line was cut (``rank``, ``thinned``)."""
    series = rank_queue_series(rt)
    shown, thinned = envelope(series, ["rank", "pid", "stream"], "ts", ["queue_length"],
                              max_points_per_line)
    return shown, pd.DataFrame({"rank": np.array([rt.rank], dtype=np.int64),
                                "thinned": np.full(1, thinned)})


THINNED_QUEUE_SERIES = Analysis("Queue length", rank_thinned_queue_series,
                                (SERIES, Columns.of({"rank": "int64", "thinned": "bool"})))


def _rank_series(rt: RankTrace) -> pd.DataFrame:
    """One rank's series (computed once per rank: the summary, the full-queue time and
    the figure's rows share it, :func:`hta.model.derived.derived`)."""
    return derived(rt, "queue_series", lambda: _compute_rank_series(rt))


def _compute_rank_series(rt: RankTrace) -> pd.DataFrame:
    ev = rt.events
    pairs = rank_launch_pairs(rt)
    gpu, launch = pairs.gpu, pairs.launch
    if gpu.size == 0:
        return pd.DataFrame(columns=SERIES_COLUMNS)
    ts = rt.column("ts")
    pid = rt.column("pid")[gpu]
    tid = rt.column("tid")[gpu]
    stream = _stream_of(ev, gpu)
    uniq_pid, uniq_stream, key = _dense_pairs(pid, stream)
    start = ts[gpu]
    enqueue = np.minimum(ts[launch], start)
    n = gpu.size
    all_key = np.concatenate([key, key])
    all_ts = np.concatenate([enqueue, start])
    step = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
    # increments (+1) sort before decrements (-1) at equal (stream, ts)
    order = _by_stream_time_step(all_key, all_ts, step)
    all_key, all_ts, step = all_key[order], all_ts[order], step[order]
    # every stream nets to zero, so a global running sum restarts at 0 on each stream
    length = np.cumsum(step)
    last_at_ts = np.r_[(all_key[1:] != all_key[:-1]) | (all_ts[1:] != all_ts[:-1]), True]
    all_key, all_ts, length = all_key[last_at_ts], all_ts[last_at_ts], length[last_at_ts]
    first_of_stream = np.r_[True, all_key[1:] != all_key[:-1]]
    changed = first_of_stream | np.r_[True, length[1:] != length[:-1]]
    all_key, all_ts, length = all_key[changed], all_ts[changed], length[changed]
    tid_of_key = np.zeros(len(uniq_pid), dtype=np.int64)
    tid_of_key[key] = tid
    return pd.DataFrame({
        "rank": np.full(len(all_key), rt.rank, dtype=np.int64),
        "pid": uniq_pid[all_key],
        "tid": tid_of_key[all_key],
        "stream": uniq_stream[all_key],
        "ts": all_ts,
        "queue_length": length,
    }, columns=SERIES_COLUMNS)


def _by_stream_time_step(key: np.ndarray, ts: np.ndarray, step: np.ndarray) -> np.ndarray:
    """An order by stream, then time, increments (+1) before decrements (-1): what
    ``np.lexsort((-step, ts, key))`` gives, from one stable sort of a packed int64 when
    the streams times the time span fit (else the lexsort)."""
    if ts.size == 0:
        return np.zeros(0, dtype=np.int64)
    low = int(ts.min())
    span = 2 * (int(ts.max()) - low + 1)
    if (int(key.max()) + 1) * span >= 1 << 62:  # pragma: no cover - spans of years
        return np.lexsort((-step, ts, key))
    packed = key.astype(np.int64) * span + (ts - low) * 2 + (step < 0)
    # stable (timsort on int64): the rows come in long sorted runs (launches and starts by
    # time), which it merges in near-linear time; quicksort takes 15x longer on them
    return np.argsort(packed, kind="stable")


def _dense_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (a, b) pairs of two integer arrays in lexicographic order (as two
    arrays) and each row's index among them: what ``np.unique(np.stack([a, b], 1),
    axis=0, return_inverse=True)`` gives, from one sort of a packed int64 key (the
    row-wise sort of ``axis=0`` is several times slower)."""
    a = a.astype(np.int64, copy=False)
    b = b.astype(np.int64, copy=False)
    if a.size == 0:
        return a[:0], b[:0], np.zeros(0, dtype=np.int64)
    a_min, b_min = int(a.min()), int(b.min())
    width = int(b.max()) - b_min + 1
    if (int(a.max()) - a_min + 1) * width >= 1 << 62:  # pragma: no cover - huge ids
        uniq, key = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
        return uniq[:, 0], uniq[:, 1], key.reshape(-1)
    packed = (a - a_min) * width + (b - b_min)
    size = (int(a.max()) - a_min + 1) * width
    if size <= max(4 * a.size, 1 << 16):  # few possible keys: a table, no sort
        present = np.zeros(size, dtype=bool)
        present[packed] = True
        uniq = np.flatnonzero(present)
        slot = np.cumsum(present) - 1
        return uniq // width + a_min, uniq % width + b_min, slot[packed].astype(np.int64)
    uniq, key = np.unique(packed, return_inverse=True)
    return uniq // width + a_min, uniq % width + b_min, key.reshape(-1)


def queue_length_summary(trace: RankMapper, selection: Selection = EVERYTHING,
                         series: pd.DataFrame | None = None) -> pd.DataFrame:
    """Time-weighted queue length statistics per rank and stream (:data:`SUMMARY_COLUMNS`).

    ``count`` is the number of GPU events queued on the stream, ``duration(us)`` the
    window, ``unpaired_gpu_events`` the GPU events of the stream that had no launch (left
    out). Computed per rank, where the rank is (only the statistics travel). Pass
    ``series`` (from :func:`queue_length_time_series`) to reuse it: then only the event
    counts per stream are computed per rank.
    """
    if series is None:
        return QUEUE_SUMMARY.run(trace, selection)
    check_whole_ranks(selection, QUEUE_SUMMARY.name)
    if len(series) == 0:
        return SUMMARY.empty()
    counts = QUEUE_STREAM_COUNTS.run(trace, Selection.of(_ranks_of(series)))
    return _summary(series, counts)


def rank_queue_summary(rt: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`queue_length_summary`: the time-weighted queue length
    statistics of each of its streams."""
    series = rank_queue_series(rt)
    if len(series) == 0:
        return SUMMARY.empty()
    return _summary(series, rank_stream_counts(rt))


QUEUE_SUMMARY = Analysis("Queue length summary", rank_queue_summary, SUMMARY, steps=WHOLE)


def _ranks_of(series: pd.DataFrame) -> list[int]:
    return sorted(int(r) for r in pd.unique(series["rank"]))


def _summary(series: pd.DataFrame, counts: pd.DataFrame) -> pd.DataFrame:
    """The statistics of a non-empty ``series``, with the counts of
    :func:`rank_stream_counts`."""
    key, hold = _keys_and_hold(series)
    value = series["queue_length"].to_numpy()
    n_keys = int(key.max()) + 1
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    total = np.bincount(key, weights=hold, minlength=n_keys)
    safe = np.where(total > 0, total, 1.0)
    mean = np.bincount(key, weights=hold * value, minlength=n_keys) / safe
    var = np.bincount(key, weights=hold * (value - mean[key]) ** 2, minlength=n_keys) / safe
    rank = series["rank"].to_numpy()[first]
    pid = series["pid"].to_numpy()[first]
    stream = series["stream"].to_numpy()[first]
    columns: dict[str, np.ndarray] = {"rank": rank, "pid": pid, "stream": stream}
    paired, unpaired = _counts_of(counts, rank, pid, stream)
    columns["count"] = paired
    columns["mean"] = mean
    columns["std"] = np.sqrt(var)
    quant = _weighted_quantiles(key, value, hold, n_keys, (0.0, *QUANTILES))
    columns["min"] = quant[0.0]
    for q in QUANTILES:
        columns[f"{q:.0%}"] = quant[q]
    columns["max"] = np.maximum.reduceat(value, first)  # rows of a key are contiguous
    columns["duration(us)"] = total / 1e3
    columns["unpaired_gpu_events"] = unpaired
    return pd.DataFrame(columns, columns=SUMMARY_COLUMNS)


def _counts_of(counts: pd.DataFrame, rank: np.ndarray, pid: np.ndarray, stream: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Paired and unpaired event counts of each (rank, pid, stream), 0 when absent."""
    found = dict(zip(zip(counts["rank"].tolist(), counts["pid"].tolist(),
                         counts["stream"].tolist()),
                     zip(counts["paired"].tolist(), counts["unpaired"].tolist())))
    pairs = [found.get(k, (0, 0)) for k in zip(rank.tolist(), pid.tolist(), stream.tolist())]
    out = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return out[:, 0], out[:, 1]


def _keys_and_hold(series: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Dense (rank, pid, stream) id per row and how long each row's value holds (ns)."""
    rank = series["rank"].to_numpy()
    pid = series["pid"].to_numpy()
    stream = series["stream"].to_numpy()
    new = np.r_[True, (rank[1:] != rank[:-1]) | (pid[1:] != pid[:-1])
                | (stream[1:] != stream[:-1])]
    key = np.cumsum(new) - 1
    ts = series["ts"].to_numpy()
    hold = np.r_[ts[1:] - ts[:-1], 0].astype(np.float64)
    hold[np.r_[new[1:], True]] = 0.0  # the last row of a stream holds until nothing
    return key, hold


def _weighted_quantiles(key: np.ndarray, value: np.ndarray, hold: np.ndarray, n_keys: int,
                        quantiles: tuple[float, ...]) -> dict[float, np.ndarray]:
    """Per key, the smallest value held at or below for at least fraction q of the time
    (NaN for a key that holds no value for any time)."""
    if value.size and int(value.min()) >= 0 and n_keys * (int(value.max()) + 1) <= 1 << 22:
        return _quantiles_by_histogram(key, value, hold, n_keys, quantiles)
    order = np.lexsort((value, key))
    k, v, w = key[order], value[order], hold[order]
    cum = np.cumsum(w)
    total = np.bincount(k, weights=w, minlength=n_keys)
    start = np.r_[0.0, cum][np.searchsorted(k, np.arange(n_keys))]
    frac = (cum - start[k]) / np.where(total > 0, total, 1.0)[k]
    result: dict[float, np.ndarray] = {}
    for q in quantiles:
        reached = np.flatnonzero((frac >= q - 1e-12) & (w > 0) if q > 0 else (w > 0))
        kr = k[reached]  # sorted: the first row of each key is its answer
        head = np.r_[True, kr[1:] != kr[:-1]] if kr.size else np.zeros(0, dtype=bool)
        arr = np.full(n_keys, np.nan)
        arr[kr[head]] = v[reached[head]]
        result[q] = arr
    return result


def _quantiles_by_histogram(key: np.ndarray, value: np.ndarray, hold: np.ndarray,
                            n_keys: int, quantiles: tuple[float, ...]
                            ) -> dict[float, np.ndarray]:
    """:func:`_weighted_quantiles` for small non-negative integer values: per key, the
    time held at each value (a histogram), its running sum, and the first value whose
    running share reaches q among the values held for some time. The same answers as the
    sort: a value's rows reach a share exactly when its histogram bin does (hold times are
    integer ns, summed exactly in float64 below 2**53 ns)."""
    width = int(value.max()) + 1
    held = np.bincount(key * width + value, weights=hold,
                       minlength=n_keys * width).reshape(n_keys, width)
    cum = np.cumsum(held, axis=1)
    total = cum[:, -1]
    frac = cum / np.where(total > 0, total, 1.0)[:, None]
    positive = held > 0
    result: dict[float, np.ndarray] = {}
    for q in quantiles:
        ok = positive & (frac >= q - 1e-12) if q > 0 else positive
        first = np.argmax(ok, axis=1)
        result[q] = np.where(ok.any(axis=1), first, np.nan).astype(np.float64)
    return result


def rank_stream_counts(rt: RankTrace) -> pd.DataFrame:
    """One rank's paired and unpaired GPU events per (``rank``, ``pid``, ``stream``):
    columns ``rank``, ``pid``, ``stream``, ``paired``, ``unpaired``, sorted by pid and
    stream."""
    ev = rt.events
    pairs = rank_launch_pairs(rt)
    rows = np.concatenate([pairs.gpu, pairs.unpaired_gpu])
    if rows.size == 0:
        return STREAM_COUNTS.empty()
    pid, stream, key = _dense_pairs(rt.column("pid")[rows], _stream_of(ev, rows))
    n = pairs.gpu.size
    return pd.DataFrame({
        "rank": np.full(len(pid), rt.rank, dtype=np.int64),
        "pid": pid,
        "stream": stream,
        "paired": np.bincount(key[:n], minlength=len(pid)).astype(np.int64),
        "unpaired": np.bincount(key[n:], minlength=len(pid)).astype(np.int64),
    })


QUEUE_STREAM_COUNTS = Analysis("Queue length counts", rank_stream_counts, STREAM_COUNTS)


def time_spent_blocked_on_full_queue(
    trace: RankMapper,
    queue_length_threshold: int = CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
    selection: Selection = EVERYTHING,
    series: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Time each stream's queue spends at or above ``queue_length_threshold``.

    One row per rank and stream that has queue data (:data:`BLOCKED_COLUMNS`), 0 when the
    threshold is never reached. ``duration_at_max_queue_length(us)`` sums the time the
    step function holds a value ``>= queue_length_threshold``;
    ``relative_duration_at_max_queue_length`` divides it by the rank's trace duration (last
    event end minus first event start, every complete event). Example: threshold 2, queue
    at 2 from 100 to 250 ns and at 3 from 250 to 300 ns, trace 0..1000 ns: 0.2 µs, 0.2.
    Computed per rank, where the rank is; with ``series`` given, only each rank's trace
    duration is.
    """
    if series is None:
        return BLOCKED_ON_FULL_QUEUE.run(trace, selection, queue_length_threshold)
    check_whole_ranks(selection, BLOCKED_ON_FULL_QUEUE.name)
    if len(series) == 0:
        return BLOCKED.empty()
    spans = TRACE_SPANS.run(trace, Selection.of(_ranks_of(series)))
    return _blocked(series, queue_length_threshold, spans)


def rank_blocked_on_full_queue(rt: RankTrace, queue_length_threshold: int) -> pd.DataFrame:
    """One rank's rows of :func:`time_spent_blocked_on_full_queue`: per stream, the time
    its queue holds at least ``queue_length_threshold`` entries."""
    series = rank_queue_series(rt)
    if len(series) == 0:
        return BLOCKED.empty()
    return _blocked(series, queue_length_threshold, rank_span(rt))


BLOCKED_ON_FULL_QUEUE = Analysis("Full queue", rank_blocked_on_full_queue, BLOCKED, steps=WHOLE)


def rank_span(rt: RankTrace) -> pd.DataFrame:
    """One rank's row ``rank``, ``span(ns)``: last event end minus first event start (0
    when empty)."""
    return pd.DataFrame({"rank": np.array([rt.rank], dtype=np.int64),
                         "span(ns)": np.array([_trace_duration(rt)], dtype=np.int64)})


TRACE_SPANS = Analysis("Trace spans", rank_span, SPANS)


def _blocked(series: pd.DataFrame, queue_length_threshold: int, spans: pd.DataFrame
             ) -> pd.DataFrame:
    key, hold = _keys_and_hold(series)
    n_keys = int(key.max()) + 1
    full = series["queue_length"].to_numpy() >= queue_length_threshold
    blocked = np.bincount(key, weights=np.where(full, hold, 0.0), minlength=n_keys)
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    rank = series["rank"].to_numpy()[first]
    span_of = dict(zip(spans["rank"].tolist(), spans["span(ns)"].tolist()))
    span = np.array([span_of[int(r)] for r in rank], dtype=np.float64)
    return pd.DataFrame({
        "rank": rank,
        "pid": series["pid"].to_numpy()[first],
        "stream": series["stream"].to_numpy()[first],
        "duration_at_max_queue_length(us)": blocked / 1e3,
        "relative_duration_at_max_queue_length": np.where(span > 0, blocked / np.where(
            span > 0, span, 1.0), np.nan),
    }, columns=BLOCKED_COLUMNS)


def _trace_duration(rt: RankTrace) -> int:
    ev = rt.events
    if len(ev) == 0:
        return 0
    return int(ev["end"].max()) - int(ev["ts"].min())
