"""The GPU work of one rank as plain numpy columns, shared by the breakdown analyses.

*GPU work* is every event whose ``kind`` is in :data:`hta.model.rules.GPU_WORK_KINDS`:
kernels, memory copies and memsets, whatever their stream, including those whose launch
call is outside the trace (``index_correlation == -1``): the GPU was busy with them.
``gpu_sync`` records and ``gpu_user_annotation`` ranges are not work.

Each row gets a *class* from its kind (never from its name, so the user's kind rules
apply): :data:`COMPUTE` (``computation``), :data:`COMM` (``communication``: NCCL, RCCL,
NVSHMEM, DeepEP, custom all-reduce, anything with collective args) or :data:`MEMORY`
(``memcpy_*``, ``memset``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from hta.model.derived import derived
from hta.model.rules import KINDS, MEMORY_KINDS
from hta.model.selection import Marker, StepList, normalize_iterations
from hta.model.trace import RankTrace

COMPUTE, COMM, MEMORY = 0, 1, 2
#: Labels of the classes, as HTA names its kernel types.
CLASS_NAMES = ("COMPUTATION", "COMMUNICATION", "MEMORY")

_CLASS_OF_KIND = np.array(
    [COMPUTE if k == "computation" else COMM if k == "communication"
     else MEMORY if k in MEMORY_KINDS else -1 for k in KINDS],
    dtype=np.int8,
)


@dataclass(frozen=True)
class GpuWork:
    """Columns of the selected GPU work rows of one rank, in trace (start time) order.

    ``launch_ts`` / ``launch_end`` are the start and end of the runtime call that enqueued
    the row (``-1`` when it has none in the trace).
    """

    rank: int
    ts: np.ndarray
    end: np.ndarray
    cls: np.ndarray
    name: np.ndarray
    stream: np.ndarray
    iteration: np.ndarray
    launch_ts: np.ndarray
    launch_end: np.ndarray

    def __len__(self) -> int:
        return int(self.ts.shape[0])


def work_class(kind: pd.Series) -> np.ndarray:
    """Class (:data:`COMPUTE`, :data:`COMM`, :data:`MEMORY`, or -1) of each row's kind."""
    return classes_of_codes(kind.cat.codes.to_numpy())


def classes_of_codes(codes: np.ndarray) -> np.ndarray:
    """:func:`work_class` of ``kind`` codes (positions in :data:`~hta.model.rules.KINDS`,
    -1 for a missing kind)."""
    return np.where(codes >= 0, _CLASS_OF_KIND[np.clip(codes, 0, None)], -1).astype(np.int8)


def rank_work_class(rt: RankTrace) -> np.ndarray:
    """:func:`work_class` of every row of the rank's events (read-only; computed once per
    rank, :func:`hta.model.derived.derived`)."""
    return derived(rt, "work_class", lambda: classes_of_codes(rt.kind_codes()))


def gpu_work(rank: int, events: pd.DataFrame,
             iterations: StepList = None) -> GpuWork:
    """The GPU work rows of ``events`` (optionally only those of the given iterations)."""
    cls = work_class(events["kind"])
    keep = cls >= 0
    if iterations is not None:
        keep &= np.isin(events["iteration"].to_numpy(), as_list(iterations))
    rows = np.flatnonzero(keep)
    launch_ts, launch_end = _launch_times(events, rows)
    return GpuWork(
        rank=rank,
        ts=events["ts"].to_numpy()[rows],
        end=events["end"].to_numpy()[rows],
        cls=cls[rows],
        name=events["name"].to_numpy()[rows],
        stream=events["stream"].to_numpy()[rows],
        iteration=events["iteration"].to_numpy()[rows],
        launch_ts=launch_ts,
        launch_end=launch_end,
    )


def rank_gpu_work(rt: RankTrace, iterations: StepList = None) -> GpuWork:
    """:func:`gpu_work` of the rank's events, computed once per rank and steps (the
    breakdowns, the overview and the findings read the same,
    :func:`hta.model.derived.derived`); its arrays are read-only."""
    key = None if iterations is None else tuple(as_list(iterations))
    return derived(rt, ("gpu_work", key),
                   lambda: read_only(gpu_work(rt.rank, rt.events, iterations)))


D = TypeVar("D", bound=Any)


def read_only(w: D) -> D:
    """A copy of the dataclass ``w`` with read-only views of its arrays: a value kept for
    the next analysis (:func:`hta.model.derived.derived`) cannot be changed by this one."""
    views = {}
    for f in fields(w):
        value = getattr(w, f.name)
        if isinstance(value, np.ndarray):
            value = value.view()
            value.flags.writeable = False
            views[f.name] = value
    return replace(w, **views)


def as_list(values: Iterable[int] | int) -> list[int]:
    """An int or an iterable of ints (steps, ranks or stream ids) as a sorted list of
    distinct ints: :func:`hta.model.selection.normalize_iterations`, which reads every
    ``iterations`` argument; ``None``, ``"all"`` and the markers are not numbers here."""
    wanted = normalize_iterations(values)
    if isinstance(wanted, Marker):
        raise TypeError(f"expected a number or a list of numbers, got {values!r}")
    return list(wanted)


def index_positions(events: pd.DataFrame, values: np.ndarray) -> np.ndarray:
    """Row positions in ``events`` of ``index`` values (a link column's), int64; -1 where
    a value names no row (-1 included).

    For the functions that take a bare events table. In a rank's table ``index`` is the
    row's position (the model keeps it so; analyses given the rank read links with
    :meth:`~hta.model.trace.RankTrace.link`), so the values are their own positions; a
    frame cut from one by hand (``events[mask]``, which keeps the old numbers) is looked
    up by ``index``.
    """
    values = np.asarray(values, dtype=np.int64)
    index = events["index"].to_numpy(np.int64)
    n = index.size
    if n == 0 or (index[0] == 0 and index[-1] == n - 1
                  and np.array_equal(index, np.arange(n))):
        return np.where((values >= 0) & (values < n), values, -1)
    lookup = np.full(int(index.max()) + 2, -1, dtype=np.int64)  # last slot: no row
    lookup[index] = np.arange(n, dtype=np.int64)
    return lookup[np.where((values >= 0) & (values < lookup.size - 1), values, -1)]


def _launch_times(events: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of the launch call of each of ``rows`` (-1 where unlinked)."""
    pos = index_positions(events, events["index_correlation"].to_numpy()[rows])
    ok = pos >= 0
    safe = np.where(ok, pos, 0)
    if len(events) == 0:
        return np.full(rows.size, -1, np.int64), np.full(rows.size, -1, np.int64)
    ts = np.where(ok, events["ts"].to_numpy()[safe], -1)
    end = np.where(ok, events["end"].to_numpy()[safe], -1)
    return ts.astype(np.int64), end.astype(np.int64)
