"""Traces augmented with counter tracks: queue length per stream, copy bandwidth per direction.

For each rank, the original trace file is copied with every original event kept byte for
byte (see :mod:`hta.export.rawtrace`) and Chrome-trace counter events (``"ph": "C"``)
appended:

* ``Queue Length``: one track per GPU stream, ``pid`` = the GPU events' pid (the device),
  ``tid`` and ``id`` = the stream, ``args = {"Queue Length": n}``; the values of
  :func:`hta.analysis.queue.queue_length_time_series`.
* ``Memcpy BW``: one track per device and direction, ``pid`` = the device, ``tid`` = 0,
  ``id`` = the direction (``"Memcpy HtoD"`` ...), ``args = {"<direction>": GB/s}``; the
  values of :func:`hta.analysis.bandwidth.memory_bw_time_series`.

``ts`` is written in µs with three decimals (exact ns), relative to
``baseTimeNanoseconds`` when the file's timestamps are (Kineto's newer format), absolute
otherwise, so the counters line up with the original events. The ``id`` keeps the tracks
apart in chrome://tracing and Perfetto; the args key keeps them apart for loaders that
ignore ``id`` (this project's ``counters`` table has ``name``, ``series``, ``pid``, ``tid``).

Output: ``<name><suffix>.json[.gz]`` beside the input or in ``output_dir``, gzip when the
input is gzip; the input itself is never overwritten.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from hta.analysis.bandwidth import memory_bw_time_series
from hta.analysis.queue import queue_length_time_series
from hta.analysis.select import select_ranks
from hta.export.rawtrace import (
    append_events,
    output_path,
    read_raw,
    source_of,
    time_origin_ns,
    write_raw,
)
from hta.model.trace import RankTrace, Trace

logger = logging.getLogger(__name__)

QUEUE_LENGTH_COUNTER = "Queue Length"
MEMCPY_BW_COUNTER = "Memcpy BW"


class TimeSeriesTypes(enum.Flag):
    """Which counter tracks to add (HTA's flag, combinable with ``|``)."""

    QUEUE_LENGTH = enum.auto()
    MEMCPY_BANDWIDTH = enum.auto()


_BY_NAME = {"queue_length": TimeSeriesTypes.QUEUE_LENGTH,
            "memcpy_bandwidth": TimeSeriesTypes.MEMCPY_BANDWIDTH,
            "memory_bandwidth": TimeSeriesTypes.MEMCPY_BANDWIDTH}


def parse_time_series(value: TimeSeriesTypes | str | Iterable[str] | None) -> TimeSeriesTypes:
    """``None`` (both), a :class:`TimeSeriesTypes`, a name or names (``"queue_length"``,
    ``"memcpy_bandwidth"``)."""
    if value is None:
        return TimeSeriesTypes.QUEUE_LENGTH | TimeSeriesTypes.MEMCPY_BANDWIDTH
    if isinstance(value, TimeSeriesTypes):
        return value
    names = [value] if isinstance(value, str) else list(value)
    flags = TimeSeriesTypes(0)
    for name in names:
        try:
            flags |= _BY_NAME[str(name).lower()]
        except KeyError:
            raise ValueError(f"unknown time series {name!r}; choose from "
                             "'queue_length', 'memcpy_bandwidth'") from None
    return flags


def us_text(ns: np.ndarray) -> list[str]:
    """Integer ns as µs text with exactly three decimals (``1500`` -> ``"1.500"``)."""
    ns = np.asarray(ns, dtype=np.int64)
    mag = np.abs(ns)
    whole = (mag // 1000).tolist()
    frac = (mag % 1000).tolist()
    sign = ns < 0
    return [f"{'-' if s else ''}{w}.{f:03d}" for s, w, f in zip(sign.tolist(), whole, frac)]


def _pid_texts(pids: np.ndarray, named_ids: dict[str, int]) -> list[str]:
    """JSON text of each pid: the original name for the loader's negative name ids."""
    names = {v: k for k, v in named_ids.items()}
    uniq = {int(p) for p in np.unique(pids).tolist()}
    text = {p: (msgspec.json.encode(names[p]).decode() if p in names else str(p))
            for p in uniq}
    return [text[p] for p in pids.tolist()]


def counter_events(queue: pd.DataFrame, bandwidth: pd.DataFrame, origin_ns: int,
                   named_ids: dict[str, int] | None = None) -> list[bytes]:
    """JSON text of the counter events of one rank (queue rows first, then bandwidth)."""
    named_ids = named_ids or {}
    out: list[bytes] = []
    if len(queue):
        ts = us_text(queue["ts"].to_numpy(dtype=np.int64) - origin_ns)
        pid = _pid_texts(queue["pid"].to_numpy(dtype=np.int64), named_ids)
        stream = queue["stream"].to_numpy(dtype=np.int64).tolist()
        tid = queue["tid"].to_numpy(dtype=np.int64).tolist()
        value = queue["queue_length"].to_numpy(dtype=np.int64).tolist()
        out.extend(
            (f'{{"ph":"C","name":"{QUEUE_LENGTH_COUNTER}","id":{s},"pid":{p},"tid":{t},'
             f'"ts":{x},"args":{{"{QUEUE_LENGTH_COUNTER}":{v}}}}}').encode()
            for s, p, t, x, v in zip(stream, pid, tid, ts, value))
    if len(bandwidth):
        ts = us_text(bandwidth["ts"].to_numpy(dtype=np.int64) - origin_ns)
        pid = _pid_texts(bandwidth["pid"].to_numpy(dtype=np.int64), named_ids)
        name = [msgspec.json.encode(n).decode() for n in bandwidth["name"].tolist()]
        value = [repr(float(v)) for v in bandwidth["memory_bw_gbps"].tolist()]
        out.extend(
            (f'{{"ph":"C","name":"{MEMCPY_BW_COUNTER}","id":{n},"pid":{p},"tid":0,'
             f'"ts":{x},"args":{{{n}:{v}}}}}').encode()
            for n, p, x, v in zip(name, pid, ts, value))
    return out


def write_trace_with_counters(rt: RankTrace, queue: pd.DataFrame, bandwidth: pd.DataFrame,
                              out: Path) -> Path:
    """Copy the rank's trace file to ``out`` with the given series as counter events.

    ``queue`` and ``bandwidth`` are this rank's rows of the two time series (columns as
    returned by the analyses).
    """
    raw = read_raw(source_of(rt))
    origin = time_origin_ns(raw)
    extra = counter_events(queue, bandwidth, origin, rt.meta.get("named_ids") or {})
    write_raw(raw, append_events(raw.events_text, extra), out, gzipped=raw.gzipped)
    logger.info("Wrote %s (%d counter events added)", out, len(extra))
    return out


def generate_trace_with_counters(
    trace: Trace,
    time_series: TimeSeriesTypes | str | Iterable[str] | None = None,
    ranks: Iterable[int] | int | None = None,
    output_suffix: str = "_with_counters",
    output_dir: str | Path | None = None,
) -> dict[int, Path]:
    """Write one augmented trace per selected rank; returns rank -> output path.

    ``time_series`` picks the tracks (default both, see :func:`parse_time_series`).
    ``output_suffix`` goes before ``.json`` (an empty suffix is only allowed with another
    ``output_dir``); files go beside the inputs unless ``output_dir`` is given.
    """
    kinds = parse_time_series(time_series)
    written: dict[int, Path] = {}
    for rt in select_ranks(trace, ranks):
        source = source_of(rt)
        out = output_path(source, suffix=output_suffix, output_dir=output_dir)
        queue = (queue_length_time_series(trace, rt.rank)
                 if TimeSeriesTypes.QUEUE_LENGTH in kinds else pd.DataFrame())
        bandwidth = (memory_bw_time_series(trace, rt.rank)
                     if TimeSeriesTypes.MEMCPY_BANDWIDTH in kinds else pd.DataFrame())
        written[rt.rank] = write_trace_with_counters(rt, queue, bandwidth, out)
    return written
