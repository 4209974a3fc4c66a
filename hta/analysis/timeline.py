"""The GPU timeline: what each rank's streams ran, as segments ready to draw.

Per rank and stream, the GPU work (kernels, copies, memsets: every event whose ``kind``
is in :data:`hta.model.rules.GPU_WORK_KINDS`, see :mod:`hta.analysis.gpu_work`) becomes
a list of *segments*, one row each:

* ``rank``, ``stream``;
* ``start_ns``, ``end_ns``: int64 nanoseconds on the trace clock (Kineto writes every
  rank of a job on the same host clock, so rows of different ranks line up as they are;
  the figure subtracts the earliest start it draws);
* ``busy_ns``: time the stream was busy inside the segment (the length of the union of its
  events; a segment may hold gaps shorter than the resolution);
* ``kind``: the event kind (``computation``, ``communication``, ``memcpy_htod``, ...,
  ``memset``); for a segment of several events, the kind with the most event time;
* ``count``: how many events the segment stands for; ``kind_count``: how many of them
  are of ``kind``; ``kinds``: for a segment of several events, every kind with its count
  (``"computation 120, memset 3"``), else empty;
* ``name``: the event's name, or for several events the name of the longest one;
* ``iteration``: the ``ProfilerStep`` of the launch (-1: none); segments never span two
  iterations, except in the fallback described below, where a mixed one gets -1;
* ``resolution_ns``: 0 when every event is its own segment, else the merge threshold
  used for this rank (the same on all its rows).

**Aggregation.** A rank whose selection holds at most ``max_segments`` events is drawn
exactly: one segment per event. Otherwise, on each stream in start order, an event joins
the segment of the one before it unless

1. the gap from the end of everything before it on the stream to its start is at least
   the resolution ``r``; or
2. its kind differs from the previous event's and one of the two lasts at least ``r``
   (visible events of different kinds stay apart; events narrower than ``r`` melt into
   their neighbours); or
3. its iteration differs from the previous event's.

``resolution_ns=0`` asks for every event, whatever their number. Otherwise ``r`` is the
finest resolution of at least ``resolution_ns`` (1 ns when not given) for which the rank
has at most ``max_segments`` segments, found to 1/16 of a factor of two: the budget the
browser can draw is spent on detail, so a zoomed-in figure still shows structure, and
``r`` is never much coarser than it must be. Rule 3 is dropped when even ``r`` past the
rank's span is too fine (more iterations times streams than ``max_segments``), so the
result always fits (at worst one segment per stream). The union of the segments' events
is the stream's busy time, unchanged: ``busy_ns`` summed per stream equals the length of
the union of the stream's events whatever ``r`` is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import as_list
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.rules import GPU_WORK_KINDS, KINDS
from hta.model.selection import EVERYTHING, Selection, StepList
from hta.model.trace import RankTrace, Trace

logger = logging.getLogger(__name__)

#: Segments per rank above which events are merged.
DEFAULT_MAX_SEGMENTS = 20_000
_REFINE_STEPS = 4
COLUMNS = ["rank", "stream", "kind", "start_ns", "end_ns", "busy_ns", "count", "kind_count",
           "kinds", "name", "iteration", "resolution_ns"]
#: The table of no rank (typed :data:`COLUMNS`).
SEGMENTS = Columns.of({c: "object" if c in ("kind", "kinds", "name") else "int64"
                       for c in COLUMNS})

#: The GPU work kinds in the order of :data:`KINDS`; their position is the local code.
WORK_KINDS: tuple[str, ...] = tuple(k for k in KINDS if k in GPU_WORK_KINDS)
_LOCAL_CODE = np.array([WORK_KINDS.index(k) if k in GPU_WORK_KINDS else -1 for k in KINDS],
                       dtype=np.int64)


def timeline_segments(
    trace: Trace,
    selection: Selection = EVERYTHING,
    streams: Iterable[int] | int | None = None,
    max_segments: int = DEFAULT_MAX_SEGMENTS,
    resolution_ns: int | None = None,
) -> pd.DataFrame:
    """Segments of GPU work per rank and stream, at most ``max_segments`` per rank.

    One row per segment with :data:`COLUMNS`, sorted by rank, stream and start (the
    definitions and the aggregation rule are in the module docstring). The selection's steps
    and ``streams`` keep only those ``ProfilerStep`` numbers and stream ids. Per rank, so it
    runs under the runner (:mod:`hta.model.runner`).
    """
    check_budget(max_segments, resolution_ns)
    return TIMELINE_SEGMENTS.run(trace, selection, streams, max_segments, resolution_ns)


def rank_timeline_segments(
    rank: RankTrace,
    iterations: StepList = None,
    streams: Iterable[int] | int | None = None,
    max_segments: int = DEFAULT_MAX_SEGMENTS,
    resolution_ns: int | None = None,
) -> pd.DataFrame:
    """One rank's segments of :func:`timeline_segments` (typed and empty without GPU work
    in the selection)."""
    check_budget(max_segments, resolution_ns)
    frame = _rank_segments(rank, iterations, streams, max_segments, resolution_ns)
    return pd.concat([frame], ignore_index=True) if len(frame) else SEGMENTS.empty()


TIMELINE_SEGMENTS = Analysis("GPU timeline", rank_timeline_segments, SEGMENTS, steps=PER_STEP)


def check_budget(max_segments: int, resolution_ns: int | None) -> None:
    """Raise for a ``max_segments`` below 1 or a negative ``resolution_ns``."""
    if max_segments < 1:
        raise ValueError(f"max_segments must be at least 1, got {max_segments}")
    if resolution_ns is not None and resolution_ns < 0:
        raise ValueError(f"resolution_ns must be >= 0, got {resolution_ns}")


def _rank_segments(rt: RankTrace, iterations: StepList,
                   streams: Iterable[int] | int | None, max_segments: int,
                   resolution_ns: int | None) -> pd.DataFrame:
    codes = rt.kind_codes()
    local = np.where(codes >= 0, _LOCAL_CODE[np.clip(codes, 0, None)], -1)
    keep = local >= 0
    if iterations is not None:
        keep &= np.isin(rt.column("iteration"), as_list(iterations))
    if streams is not None:
        keep &= np.isin(rt.column("stream"), as_list(streams))
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        return SEGMENTS.empty()
    stream = rt.column("stream")[rows]
    ts = rt.column("ts")[rows]
    end = np.maximum(rt.column("end")[rows], ts)
    order = np.lexsort((end, ts, stream))
    rows, stream, ts, end = rows[order], stream[order], ts[order], end[order]
    kind = local[rows]
    iteration = rt.column("iteration")[rows]
    t0 = int(ts.min())
    span = int(end.max()) - t0
    first_of_stream = np.r_[True, stream[1:] != stream[:-1]]
    prev_end = _previous_running_end(ts, end, first_of_stream, t0, span)
    dur = end - ts
    if resolution_ns == 0 or (resolution_ns is None and rows.size <= max_segments):
        res, new = 0, np.ones(rows.size, dtype=bool)
    else:
        res, new = _coarsest_needed(ts, end - ts, kind, iteration, prev_end, first_of_stream,
                                    span, max_segments, max(1, int(resolution_ns or 1)))
        logger.info("rank %d: %d GPU events drawn as %d segments (resolution %d ns)",
                    rt.rank, rows.size, int(new.sum()), res)
    names = np.asarray(rt.symbols, dtype=object)[rt.column("name")[rows]]
    return _gather(rt.rank, new, stream, ts, end, dur, prev_end, kind, iteration, names, res)


def _previous_running_end(ts: np.ndarray, end: np.ndarray, first_of_stream: np.ndarray,
                          t0: int, span: int) -> np.ndarray:
    """Per row, the latest end of the rows before it on its stream (its own start for the
    first row of a stream). Rows are sorted by stream, then start."""
    group = np.cumsum(first_of_stream) - 1
    key = group * (span + 1) + (end - t0)  # monotone across streams: one running max
    running = np.maximum.accumulate(key) - group * (span + 1) + t0
    prev = np.r_[ts[:1], running[:-1]]
    return np.where(first_of_stream, ts, prev)


def _coarsest_needed(ts: np.ndarray, dur: np.ndarray, kind: np.ndarray,
                     iteration: np.ndarray, prev_end: np.ndarray, first_of_stream: np.ndarray,
                     span: int, max_segments: int, floor: int) -> tuple[int, np.ndarray]:
    """The finest resolution (to 1/16 of an octave above ``floor``) whose segments fit
    ``max_segments``, and its segment starts. The number of segments does not grow with
    the resolution (fewer gaps and fewer long events break), so a binary search over
    ``floor * 2**k`` and then a bisection inside the octave find it."""
    def starts(res: int) -> np.ndarray:
        return _breaks(ts, dur, kind, iteration, prev_end, first_of_stream, res, True)

    top = 0
    while floor << top <= span:
        top += 1
    best = starts(floor << top)
    if int(best.sum()) > max_segments:  # too many iterations x streams: drop rule 3
        return floor << top, _breaks(ts, dur, kind, iteration, prev_end, first_of_stream,
                                     floor << top, False)
    lo, hi = 0, top  # hi fits; find the smallest k that fits
    while lo < hi:
        mid = (lo + hi) // 2
        cand = starts(floor << mid)
        if int(cand.sum()) <= max_segments:
            hi, best = mid, cand
        else:
            lo = mid + 1
    good = floor << hi
    if hi == 0:
        return good, best
    bad = good >> 1  # too fine; bisect the octave a few times to spend the budget
    for _ in range(_REFINE_STEPS):
        if good - bad <= 1:
            break
        mid = (good + bad) // 2
        cand = starts(mid)
        if int(cand.sum()) <= max_segments:
            good, best = mid, cand
        else:
            bad = mid
    return good, best


def _breaks(ts: np.ndarray, dur: np.ndarray, kind: np.ndarray, iteration: np.ndarray,
            prev_end: np.ndarray, first_of_stream: np.ndarray, res: int,
            by_iteration: bool) -> np.ndarray:
    """True where a row starts a new segment (rules 1-3 of the module docstring)."""
    new = first_of_stream | (ts - prev_end >= res)
    long = dur >= res
    new[1:] |= (kind[1:] != kind[:-1]) & (long[1:] | long[:-1])
    if by_iteration:
        new[1:] |= iteration[1:] != iteration[:-1]
    return new


def _gather(rank: int, new: np.ndarray, stream: np.ndarray, ts: np.ndarray, end: np.ndarray,
            dur: np.ndarray, prev_end: np.ndarray, kind: np.ndarray, iteration: np.ndarray,
            names: np.ndarray, res: int) -> pd.DataFrame:
    """One row per segment from the per-event arrays and the segment starts ``new``."""
    firsts = np.flatnonzero(new)
    n = firsts.size
    seg = np.cumsum(new) - 1
    busy = np.maximum(0, end - np.maximum(ts, prev_end))
    k = len(WORK_KINDS)
    cells = seg * k + kind
    time_by_kind = np.bincount(cells, weights=dur, minlength=n * k).reshape(n, k)
    count_by_kind = np.bincount(cells, minlength=n * k).reshape(n, k)
    dominant = np.where(time_by_kind.max(axis=1) > 0, time_by_kind.argmax(axis=1),
                        count_by_kind.argmax(axis=1))
    count = count_by_kind.sum(axis=1)
    longest = np.lexsort((-np.arange(seg.size), dur, seg))  # last of each seg: longest, first
    last_of_seg = np.r_[firsts[1:], seg.size] - 1
    pick = longest[last_of_seg]
    it_lo = np.minimum.reduceat(iteration, firsts)
    it_hi = np.maximum.reduceat(iteration, firsts)
    return pd.DataFrame({
        "rank": np.full(n, rank, dtype=np.int64),
        "stream": stream[firsts].astype(np.int64),
        "kind": np.asarray(WORK_KINDS, dtype=object)[dominant],
        "start_ns": ts[firsts].astype(np.int64),
        "end_ns": np.maximum.reduceat(end, firsts).astype(np.int64),
        "busy_ns": np.add.reduceat(busy, firsts).astype(np.int64),
        "count": count.astype(np.int64),
        "kind_count": count_by_kind[np.arange(n), dominant].astype(np.int64),
        "kinds": _kinds_text(count_by_kind, count),
        "name": names[pick],
        "iteration": np.where(it_lo == it_hi, it_lo, -1).astype(np.int64),
        "resolution_ns": np.full(n, res, dtype=np.int64),
    }, columns=COLUMNS)


def _kinds_text(count_by_kind: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``"computation 120, memset 3"`` for segments of several events, else ``""``."""
    out = np.full(count.size, "", dtype=object)
    for i in np.flatnonzero(count > 1):
        row = count_by_kind[i]
        out[i] = ", ".join(f"{WORK_KINDS[j]} {int(row[j])}" for j in np.flatnonzero(row))
    return out


def segments_per_rank(total: int, n_ranks: int) -> int:
    """Each rank's share of a figure's ``total`` segments (pass it as ``max_segments``
    when drawing ``n_ranks`` ranks, so the whole figure holds at most ``total`` bars)."""
    return max(1, int(total) // max(1, int(n_ranks)))


def aggregated(segments: pd.DataFrame) -> bool:
    """Whether any rank of ``segments`` was drawn with merged events."""
    return bool(len(segments)) and bool((segments["resolution_ns"] > 0).any())
