"""Graph-replayed kernels with the operator calls that captured them, as a side table of
the replay trace's rank, for the operator tables.

The capture merge (:mod:`hta.analysis.capture`) finds, for each kernel of a graph
replay, the operator call that launched it while the graph was captured. Where it is
asked to (``TraceAnalysis.merge_capture_traces``, or on first use of the operator
tables when the trace folder has ``capture_traces/``), the merge is kept on the rank as
the side table :data:`TABLE` (:class:`AttachReplayed`), one row per replayed GPU event
that found its operator:

* ``ts``, ``stream``: the replayed event's start and stream (its key: they stay the same
  when the rank is restricted to some steps, where row numbers change; an event whose
  key is not unique among the replayed ones is left out of the table);
* ``call``: the captured operator call (0, 1, ... per rank: one per graph replay and
  operator call of the capture);
* ``op``, ``category``, ``input_dims``, ``input_types``: the operator, its category
  (``""`` where its name has none) and its recorded shapes and types;
* ``flops``, ``bytes``, ``peak_key``, ``matrix``: its performance model per call (NaN and
  ``""`` where none applies), the same on every row of the call.

With the table there, the operator calls of :func:`hta.analysis.perf.calls.op_calls`
leave those events out of the operator around the graph launch (they counted there, or
nowhere, before) and the operator tables add one row per captured call
(``captured`` true); so each replayed kernel counts once: with its captured call, or as
before where it found none. Without the table nothing changes and nothing is computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hta.model.trace import RankTrace

#: The side table's name in ``RankTrace.tables``.
TABLE = "graph_capture"
TABLE_COLUMNS = ["ts", "stream", "call", "op", "category", "input_dims", "input_types",
                 "flops", "bytes", "peak_key", "matrix"]


def empty_table() -> pd.DataFrame:
    """A table of :data:`TABLE_COLUMNS` with no row."""
    return pd.DataFrame({c: [] for c in TABLE_COLUMNS})


@dataclass(frozen=True)
class AttachReplayed:
    """A rank transform (``Job.add_transform``): put each rank's table (by rank) in its
    ``tables`` as :data:`TABLE`, or take it out for a rank that has none; picklable, so a
    distributed job applies it where the rank is read."""

    tables: Mapping[int, pd.DataFrame] = field(default_factory=dict)

    def __call__(self, rt: RankTrace) -> None:
        table = self.tables.get(rt.rank)
        if table is None or not len(table):
            if rt.tables.pop(TABLE, None) is None:
                return
        else:
            rt.tables[TABLE] = table
        rt.generation += 1  # values derived from the rank are computed again


def has_capture_merge(rt: RankTrace) -> bool:
    """Whether the rank holds a capture merge's table (:data:`TABLE`, not empty)."""
    table = rt.tables.get(TABLE)
    return table is not None and bool(len(table))


def replayed_slots(rt: RankTrace, rows: np.ndarray) -> np.ndarray | None:
    """Per GPU event at the positions ``rows``: its captured call (``call`` of
    :data:`TABLE`), -1 where it has none; ``None`` when the rank has no table (nothing
    looked at, :func:`has_capture_merge`)."""
    if not has_capture_merge(rt):
        return None
    table = rt.tables[TABLE]
    return slots_in(table, rt.column("ts")[rows],
                    rt.column("stream")[rows])


def slots_in(table: pd.DataFrame, ts: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """The ``call`` of :data:`TABLE`'s row keyed by each (``ts``, ``stream``), -1 for none
    (the table's keys are unique)."""
    out = np.full(len(ts), -1, dtype=np.int64)
    t_ts = table["ts"].to_numpy(np.int64)
    cand = np.flatnonzero(np.isin(ts, t_ts))
    if not cand.size:
        return out
    key = pd.MultiIndex.from_arrays([t_ts, table["stream"].to_numpy(np.int64)])
    hit = key.get_indexer(pd.MultiIndex.from_arrays(
        [np.asarray(ts, np.int64)[cand], np.asarray(stream, np.int64)[cand]]))
    out[cand] = np.where(hit >= 0, table["call"].to_numpy(np.int64)[np.clip(hit, 0, None)],
                         -1)
    return out


def calls_of(table: pd.DataFrame) -> pd.DataFrame:
    """One row per captured call, at position ``call`` (the table's calls are 0 .. n-1)."""
    calls = table.drop_duplicates("call").sort_values("call", kind="stable")
    return calls.reset_index(drop=True)


def first_rows(rows: np.ndarray, slots: np.ndarray, n_calls: int) -> np.ndarray:
    """Per call (0 .. ``n_calls - 1``): the least of ``rows`` whose slot it is (its first
    event: rows are in start order), -1 for a call with none of them."""
    first = np.full(n_calls, np.iinfo(np.int64).max, dtype=np.int64)
    hit = slots >= 0
    np.minimum.at(first, slots[hit], np.asarray(rows, np.int64)[hit])
    return np.where(first == np.iinfo(np.int64).max, -1, first)


__all__ = ["TABLE", "TABLE_COLUMNS", "AttachReplayed", "calls_of", "empty_table",
           "first_rows", "has_capture_merge", "replayed_slots", "slots_in"]
