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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

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
    write_raw,
)
from hta.model.job import Job
from hta.model.selection import Ranks, Selection
from hta.model.trace import RankTrace

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


def _pid_text(pid: int, names: dict[int, str]) -> str:
    """JSON text of a pid: the original name for the loader's negative name ids."""
    return msgspec.json.encode(names[pid]).decode() if pid in names else str(pid)


def _rows(keys: pd.DataFrame, template: Callable[..., tuple[str, str, str]],
          ts_ns: np.ndarray, values: list[str]) -> list[str]:
    """One JSON object per row: ``head + ts + middle + value + tail``, where
    ``template(*key)`` gives ``(head, middle, tail)`` once per distinct key, so each row
    costs one string operation."""
    cols = list(keys.columns)
    codes = keys.groupby(cols, sort=False).ngroup().to_numpy()
    uniq = keys.drop_duplicates().itertuples(index=False, name=None)
    templates = [template(*key) for key in uniq]
    parts = [templates[c] for c in codes.tolist()]
    ts = us_text(ts_ns) if (ts_ns < 0).any() else None
    if ts is not None:
        return [f"{h}{t}{m}{v}{e}" for (h, m, e), t, v in zip(parts, ts, values)]
    whole = (ts_ns // 1000).tolist()
    frac = (ts_ns % 1000).tolist()
    return [f"{h}{w}.{f:03d}{m}{v}{e}"
            for (h, m, e), w, f, v in zip(parts, whole, frac, values)]


def _queue_template(names: dict[int, str]) -> Callable[..., tuple[str, str, str]]:
    def template(stream: int, pid: int, tid: int) -> tuple[str, str, str]:
        return (f'{{"ph":"C","name":"{QUEUE_LENGTH_COUNTER}","id":{stream},'
                f'"pid":{_pid_text(pid, names)},"tid":{tid},"ts":',
                f',"args":{{"{QUEUE_LENGTH_COUNTER}":', "}}")
    return template


def _bandwidth_template(names: dict[int, str]) -> Callable[..., tuple[str, str, str]]:
    def template(direction: str, pid: int) -> tuple[str, str, str]:
        text = msgspec.json.encode(direction).decode()
        return (f'{{"ph":"C","name":"{MEMCPY_BW_COUNTER}","id":{text},'
                f'"pid":{_pid_text(pid, names)},"tid":0,"ts":', f',"args":{{{text}:', "}}")
    return template


def counter_events(queue: pd.DataFrame, bandwidth: pd.DataFrame, origin_ns: int,
                   named_ids: dict[str, int] | None = None) -> bytes:
    """JSON text of the counter events of one rank, comma-separated (queue rows first)."""
    names = {v: k for k, v in (named_ids or {}).items()}
    parts: list[str] = []
    if len(queue):
        parts += _rows(
            queue[["stream", "pid", "tid"]].astype(np.int64), _queue_template(names),
            queue["ts"].to_numpy(dtype=np.int64) - origin_ns,
            [str(v) for v in queue["queue_length"].astype(np.int64).tolist()])
    if len(bandwidth):
        parts += _rows(
            pd.DataFrame({"name": bandwidth["name"], "pid": bandwidth["pid"].astype(np.int64)}),
            _bandwidth_template(names), bandwidth["ts"].to_numpy(dtype=np.int64) - origin_ns,
            [repr(float(v)) for v in bandwidth["memory_bw_gbps"].tolist()])
    return ",".join(parts).encode()


def write_trace_with_counters(rt: RankTrace, queue: pd.DataFrame, bandwidth: pd.DataFrame,
                              out: Path, storage_options: dict[str, Any] | None = None
                              ) -> Path:
    """Copy the rank's trace file to ``out`` with the given series as counter events.

    ``queue`` and ``bandwidth`` are this rank's rows of the two time series (columns as
    returned by the analyses). ``storage_options`` go to fsspec when the rank was loaded
    from a URL.
    """
    raw = read_raw(source_of(rt, storage_options), storage_options)
    origin = rt.time_origin_ns
    extra = counter_events(queue, bandwidth, origin, rt.meta.get("named_ids") or {})
    write_raw(raw, append_events(raw.events_text, extra), out, gzipped=raw.gzipped)
    logger.info("Wrote %s (%d counter events added)", out, len(queue) + len(bandwidth))
    return out


def generate_trace_with_counters(
    trace: Job,
    time_series: TimeSeriesTypes | str | Iterable[str] | None = None,
    ranks: Ranks = None,
    output_suffix: str = "_with_counters",
    output_dir: str | Path | None = None,
    storage_options: dict[str, Any] | None = None,
) -> dict[int, Path]:
    """Write one augmented trace per selected rank; returns rank -> output path.

    ``time_series`` picks the tracks (default both, see :func:`parse_time_series`).
    ``output_suffix`` goes before ``.json`` (an empty suffix is only allowed with another
    ``output_dir``); files go beside the inputs unless ``output_dir`` is given.
    """
    kinds = parse_time_series(time_series)
    written: dict[int, Path] = {}
    for rt in select_ranks(trace, Selection.of(ranks)):
        source = source_of(rt, storage_options)
        out = output_path(source, suffix=output_suffix, output_dir=output_dir)
        queue = (queue_length_time_series(trace, Selection.of(rt.rank))
                 if TimeSeriesTypes.QUEUE_LENGTH in kinds else pd.DataFrame())
        bandwidth = (memory_bw_time_series(trace, Selection.of(rt.rank))
                     if TimeSeriesTypes.MEMCPY_BANDWIDTH in kinds else pd.DataFrame())
        written[rt.rank] = write_trace_with_counters(rt, queue, bandwidth, out,
                                                     storage_options)
    return written
