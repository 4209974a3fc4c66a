"""Event columns as NumPy arrays, and GPU work looked up per (device, stream).

Helpers of the critical path graph (:mod:`.graph`) and its synchronization edges
(:mod:`.sync`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from hta.model.symbol_masks import symbol_ids
from hta.model.trace import RankTrace

#: Edge types of the critical path graph; ``EDGE_CODE`` gives each its number.
EDGE_TYPES: tuple[str, ...] = ("cpu", "gpu", "launch", "stream", "sync", "event_wait")
EDGE_CODE = {t: i for i, t in enumerate(EDGE_TYPES)}


@dataclass
class Cols:
    """The event columns the builder needs, as NumPy arrays."""

    ts: np.ndarray
    end: np.ndarray
    dur: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    stream: np.ndarray
    corr: np.ndarray
    ic: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    codes: np.ndarray
    name: np.ndarray

    @classmethod
    def of(cls, rt: RankTrace) -> Cols:
        """The columns of a rank's events (stream ids normalised, see :func:`stream_ids`),
        from its kept arrays (:meth:`RankTrace.column`)."""
        def wide(name: str) -> np.ndarray:
            return rt.column(name).astype(np.int64, copy=False)

        return cls(ts=wide("ts"), end=wide("end"), dur=wide("dur"), pid=wide("pid"),
                   tid=wide("tid"), stream=stream_ids(rt.column("stream")),
                   corr=wide("correlation"), ic=wide("index_correlation"),
                   parent=wide("parent"), depth=wide("depth"),
                   codes=rt.kind_codes().astype(np.int16), name=wide("name"))




def stream_ids(values: np.ndarray) -> np.ndarray:
    """Stream ids with "no stream" as -1 (old traces write it as 4294967295, a uint32 -1)."""
    values = np.asarray(values, dtype=np.int64)
    return np.where((values < 0) | (values >= 2**31 - 1), -1, values)


def names_matching(symbols: list[str], pattern: re.Pattern[str]) -> np.ndarray:
    """The symbol ids whose name ``pattern`` finds, ascending (each name of a table tested
    once per process: :func:`hta.model.symbol_masks.symbol_ids`)."""
    return symbol_ids(symbols, pattern.search)


class Streams:
    """GPU work of the whole rank per (device, stream), for dependency look-ups.

    ``enqueued`` is when work was put on its stream: its launch call's start, or its own
    start when no launch is known.
    """

    def __init__(self, c: Cols, gpu_rows: np.ndarray) -> None:
        self.c = c
        stream = np.where(c.stream[gpu_rows] >= 0, c.stream[gpu_rows], c.tid[gpu_rows])
        device = c.pid[gpu_rows]
        ic = c.ic[gpu_rows]
        enq = np.where(ic >= 0, c.ts[np.clip(ic, 0, None)], c.ts[gpu_rows])
        self.groups: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.devices: list[int] = []
        if gpu_rows.size == 0:
            return
        order = np.lexsort((c.ts[gpu_rows], enq, stream, device))
        rows, device, stream, enq = gpu_rows[order], device[order], stream[order], enq[order]
        cut = np.flatnonzero((np.diff(device) != 0) | (np.diff(stream) != 0)) + 1
        for part in np.split(np.arange(rows.size), cut):
            r = rows[part]
            ends = c.end[r]
            # running arg-max of the end: the work that finishes last among the first k
            best = np.maximum.accumulate(np.where(ends == np.maximum.accumulate(ends),
                                                  np.arange(r.size), 0))
            self.groups[(int(device[part[0]]), int(stream[part[0]]))] = (enq[part], r, r[best])
        self.devices = sorted({d for d, _ in self.groups})

    def streams_of(self, device: int) -> list[int]:
        """Streams of a device that carry GPU work."""
        return [s for d, s in self.groups if d == device]

    def last_enqueued_before(self, device: int, stream: int, times: np.ndarray) -> np.ndarray:
        """Per time ``T``: the work on the stream enqueued before ``T`` that ends last, or -1.

        A synchronization on a stream (or on an event recorded on it at ``T``) waits for
        all work enqueued before ``T``; the latest-ending of it is the one it waits for.
        """
        group = self.groups.get((device, stream))
        out = np.full(times.shape[0], -1, dtype=np.int64)
        if group is None:
            return out
        enq, _, best = group
        pos = np.searchsorted(enq, times, side="left") - 1
        ok = pos >= 0
        out[ok] = best[pos[ok]]
        return out

    def first_enqueued_from(self, device: int, stream: int, times: np.ndarray) -> np.ndarray:
        """Per time ``T``: the first work enqueued on the stream at or after ``T``, or -1."""
        group = self.groups.get((device, stream))
        out = np.full(times.shape[0], -1, dtype=np.int64)
        if group is None:
            return out
        enq, rows, _ = group
        pos = np.searchsorted(enq, times, side="left")
        ok = pos < rows.size
        out[ok] = rows[pos[ok]]
        return out
