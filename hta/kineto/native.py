"""Columns from the native scanner (``hta.kineto._scan``, built from ``_native/scan.c``).

The scanner turns one JSON array of events into typed columns, one entry per event, with
strings interned once per chunk. This module does what the Python decoder does with
decoded structs (split by phase, complete events into columns, the side tables, instants,
flows and metadata), but with NumPy operations over whole columns: the only Python-level
loops run over distinct strings, not events.

Set ``HTA_NATIVE=0`` to use the pure-Python decoder; it is also used when the extension
is not built (no compiler at install time) and for any chunk the scanner declines (an
unexpected value type, malformed JSON, ...), so every warning and error is unchanged.
The results are identical to the Python decoder's, symbol ids and all
(``tests/test_native_decode.py``).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from hta.kineto.side_tables import phase_columns, side_tables
from hta.kineto.structs import PHASE_GROUP

if TYPE_CHECKING:
    from hta.kineto.sink import ColumnSink

logger = logging.getLogger(__name__)

try:
    from hta.kineto import _scan  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built where a C compiler is available
    _scan = None

#: Dense columns, one entry per event (symbols: local ids into the chunk's strings).
SYM = ("ph", "cat", "name")
#: Sparse columns, (rows, values) for the events that carry the field, in scan.c's order:
#: name -> (dtype, default, values per row).
SPARSE: dict[str, tuple[Any, Any, int]] = {
    **{k: (np.int32, 0, 1) for k in ("bp", "s", "collective_name", "dtype", "pg_name",
                                     "pg_desc", "meta_name", "labels")},
    **{k: (np.int64, -1, 1) for k in (
        "id", "external_id", "external_id_legacy", "correlation", "stream", "device", "cbid",
        "cid", "graph_id", "sequence_number", "fwd_thread_id", "wait_on_stream",
        "wait_on_event_corr", "addr", "device_type", "device_id", "sort_index")},
    **{k: (np.float64, np.nan, 1) for k in (
        "registers_per_thread", "shared_memory", "blocks_per_sm", "warps_per_sm",
        "occupancy_pct", "nbytes", "size", "bandwidth_gbps", "in_msg_nelems",
        "out_msg_nelems", "group_size", "seq", "mem_bytes", "total_allocated",
        "total_reserved")},
    "grid": (np.int64, -1, 3), "block": (np.int64, -1, 3),
}
RAW = ("pg_ranks", "input_dims", "input_dims_legacy", "input_type", "in_split", "out_split",
       "concrete_inputs")
#: A scanner built from older sources returns fewer raw fields: it is not used.
_STALE = _scan is not None and getattr(_scan, "RAW_FIELDS", 0) != len(RAW)
if _STALE:  # pragma: no cover - depends on the build
    logger.warning("the native trace scanner was built from older sources and is not "
                   "used; rebuild it (pip install -e .) for faster loading")


def built() -> bool:
    """Whether the native scanner was compiled at install time."""
    return _scan is not None


def available() -> bool:
    """Whether the native scanner is built (from these sources) and not switched off
    (``HTA_NATIVE=0``)."""
    return (_scan is not None and not _STALE
            and os.environ.get("HTA_NATIVE", "1") not in ("0", "", "false"))


class _Columns(dict):
    """Dense columns by name; a sparse column is made dense when first asked for."""

    def __init__(self, n: int, sparse: dict[str, tuple[bytes, bytes]]) -> None:
        super().__init__()
        self.n = n
        self.sparse = sparse

    def __missing__(self, name: str) -> np.ndarray:
        dtype, default, width = SPARSE[name]
        rows, values = self.sparse[name]
        shape = (self.n, width) if width > 1 else (self.n,)
        out = np.full(shape, default, dtype=dtype)
        vals = np.frombuffer(values, dtype=dtype)
        out[np.frombuffer(rows, dtype=np.int32)] = vals.reshape(-1, width) if width > 1 else vals
        self[name] = out
        return out


class Chunk:
    """One scanned chunk: columns by field name, with row selection."""

    def __init__(self, result: tuple[Any, ...]) -> None:
        (n, strings, sym, ids, sparse, ts, ts_present, dur), raws = result
        self.n: int = n
        self.strings: list[str] = strings
        self.cols: dict[str, np.ndarray] = _Columns(n, dict(zip(SPARSE, sparse)))
        for name, buf in zip(SYM, sym):
            self.cols[name] = np.frombuffer(buf, dtype=np.int32)
        self.cols["pid"] = np.frombuffer(ids[0], dtype=np.int64)
        self.cols["tid"] = np.frombuffer(ids[1], dtype=np.int64)
        self.cols["pid_sym"] = np.frombuffer(ids[2], dtype=np.int32)
        self.cols["tid_sym"] = np.frombuffer(ids[3], dtype=np.int32)
        self.cols["ts"] = np.frombuffer(ts, dtype=np.int64)
        self.cols["ts_present"] = np.frombuffer(ts_present, dtype=np.bool_)
        self.cols["dur"] = np.frombuffer(dur, dtype=np.float64)
        #: raw JSON text of the Raw fields, one entry per event (None where absent)
        self.raws: dict[str, list[str | None]] = dict(zip(RAW, raws))

    def densify(self) -> Chunk:
        """Make every sparse field some event of the chunk carries dense now (NumPy fills
        and scatters, mostly without the GIL): done on the thread that scanned the
        chunk, it spares the thread that adds chunks in order that work."""
        cols = self.cols
        if isinstance(cols, _Columns):
            for field, (rows, _) in cols.sparse.items():
                if rows and field not in cols:
                    cols[field]  # noqa: B018 - __missing__ makes it dense
        return self


def scan(text: bytes | bytearray | memoryview, bare: bool = False) -> Chunk | None:
    """Scan one JSON array of events (``bare``: events separated by commas, without the
    brackets); None when the scanner declines it."""
    if _scan is None:
        return None
    result = _scan.scan(text, bare)
    return None if result is None else Chunk(result)


def scan_dense(text: bytes | bytearray | memoryview, bare: bool = False) -> Chunk | None:
    """:func:`scan`, then every sparse field the chunk carries made dense
    (:meth:`Chunk.densify`): what a pool thread does for the thread that adds chunks."""
    chunk = scan(text, bare)
    return None if chunk is None else chunk.densify()


def _first_seen(values: np.ndarray) -> np.ndarray:
    """Distinct values in order of first appearance."""
    uniq, first = np.unique(values, return_index=True)
    return uniq[np.argsort(first, kind="stable")]


class Builder:
    """Adds one scanned chunk to a :class:`~hta.kineto.sink.ColumnSink`."""

    def __init__(self, acc: ColumnSink, chunk: Chunk) -> None:
        self.acc = acc
        self.chunk = chunk
        self.strings = chunk.strings

    # -- helpers ---------------------------------------------------------------------
    def symbols(self, field: str, rows: np.ndarray) -> np.ndarray:
        """Global symbol ids of a string field over ``rows``, interned in first-seen order
        (as the Python decoder interns them)."""
        local = self.chunk.cols[field][rows]
        if not local.size:
            return np.zeros(0, dtype=np.int32)
        order = _first_seen(local)
        glob = self.acc.symbols.ids([self.strings[i] for i in order])
        lut = np.zeros(len(self.strings), dtype=np.int32)
        lut[order] = glob
        return lut[local]

    def texts(self, field: str, rows: np.ndarray) -> list[str]:
        """A string field over ``rows`` as a list of str."""
        strings = self.strings
        return [strings[i] for i in self.chunk.cols[field][rows].tolist()]

    def ids(self, field: str, rows: np.ndarray) -> np.ndarray:
        """pid/tid over ``rows``: integers as they are, names through the accumulator's
        stable negative ids (first-seen order, as ``ColumnSink.ids_column``)."""
        values = self.chunk.cols[field][rows]  # indexing copies: safe to write
        named = self.chunk.cols[field + "_sym"][rows]
        is_named = named >= 0
        if is_named.any():
            local = named[is_named]
            order = _first_seen(local)
            lut = np.zeros(len(self.strings), dtype=np.int64)
            for i in order.tolist():
                lut[i] = self.acc._id_of(self.strings[i])
            values[is_named] = lut[local]
        return values

    def raw_text(self, field: str, rows: np.ndarray) -> list[str]:
        values = self.chunk.raws[field]
        return [values[i] or "" for i in rows.tolist()]

    def col(self, field: str, rows: np.ndarray) -> np.ndarray:
        return self.chunk.cols[field][rows]

    # -- the chunk -------------------------------------------------------------------
    def add(self) -> None:
        """Split by phase and add everything, in the Python decoder's order."""
        chunk = self.chunk
        ph_local = chunk.cols["ph"]
        ph_uniq = _first_seen(ph_local) if chunk.n else np.zeros(0, dtype=np.int32)
        ph_text = {int(i): self.strings[i] for i in ph_uniq}
        group_of = {i: PHASE_GROUP.get(t, t) for i, t in ph_text.items()}
        complete_ids = [i for i, t in ph_text.items() if t == "X"]
        if complete_ids:
            self.complete(np.flatnonzero(ph_local == complete_ids[0]))
        groups: dict[str, list[int]] = {}
        for i in ph_uniq.tolist():
            if ph_text[i] != "X":
                groups.setdefault(group_of[i], []).append(i)
        if not groups:
            return
        firsts = {}
        for g, locals_ in groups.items():
            rows = np.flatnonzero(np.isin(ph_local, locals_))
            firsts[g] = (int(rows[0]), rows)
        for g, (_, rows) in sorted(firsts.items(), key=lambda kv: kv[1][0]):
            self.acc.add_phase(g, self, rows, rows.size)

    def complete(self, rows: np.ndarray) -> None:
        acc = self.acc
        present = self.chunk.cols["ts_present"][rows]
        if not present.all():
            acc.missing_ts += int((~present).sum())
            rows = rows[present]
        if rows.size == 0:
            return
        cat = self.symbols("cat", rows)
        # (indexing by rows copies: no column keeps the chunk's buffers alive)
        ids = acc.add_complete(self.col("dur", rows), {
            "ts": self.col("ts", rows),
            "cat": cat,
            "name": self.symbols("name", rows),
            "external_id": self.col("external_id", rows),
            "external_id_legacy": self.col("external_id_legacy", rows),
            "pid": self.ids("pid", rows),
            "tid": self.ids("tid", rows),
            **{c: self.col(c, rows) for c in ("correlation", "stream", "device", "graph_id")},
        })
        side_tables(self.acc, _ChunkArgs(self, rows), cat, ids)

    def instants(self, ev: np.ndarray) -> None:
        self._phase("instants", ev)

    def flows(self, ev: np.ndarray) -> None:
        self._phase("flows", ev)

    def metadata(self, ev: np.ndarray) -> None:
        self.acc.add_table("metadata_events", phase_columns("metadata_events",
                                                            _PhaseRows(self, ev)))

    def _phase(self, name: str, ev: np.ndarray) -> None:
        """Table ``name`` of events ``ev`` that carry a timestamp (instants, flows)."""
        present = self.col("ts_present", ev)
        self.acc.add_table(name, phase_columns(name, _PhaseRows(self, ev), self.col("ts", ev)),
                           present)


class _PhaseRows:
    """:class:`~hta.kineto.side_tables.PhaseValues` of the native decoder: the scanned
    columns of a chunk's events ``ev``."""

    def __init__(self, builder: Builder, ev: np.ndarray) -> None:
        self.b = builder
        self.ev = ev

    def symbols(self, field: str) -> np.ndarray:
        return self.b.symbols(field, self.ev)

    def ids(self, field: str) -> np.ndarray:
        return self.b.ids(field, self.ev)

    def ints(self, field: str, label: str) -> np.ndarray:
        del label  # the scanner declines a chunk with a value it cannot convert
        return self.b.col(field, self.ev)

    def floats(self, field: str) -> np.ndarray:
        return self.b.col(field, self.ev)

    def texts(self, field: str) -> list[str]:
        return self.b.texts(field, self.ev)


class _ChunkArgs:
    """:class:`~hta.kineto.side_tables.ArgValues` of the native decoder: the scanned
    columns of a chunk's complete events (``ev``: their rows in the chunk)."""

    def __init__(self, builder: Builder, ev: np.ndarray) -> None:
        self.b = builder
        self.ev = ev

    def floats(self, field: str, sel: np.ndarray) -> np.ndarray:
        return self.b.col(field, self.ev[sel])

    def ints(self, field: str, sel: np.ndarray, label: str) -> np.ndarray:
        del label  # the scanner declines a chunk with a value it cannot convert
        return self.b.col(field, self.ev[sel])

    def texts(self, field: str, sel: np.ndarray) -> list[str]:
        return self.b.texts(field, self.ev[sel])

    def raws(self, field: str, sel: np.ndarray) -> list[str]:
        return self.b.raw_text(field, self.ev[sel])

    def dims(self, field: str, sel: np.ndarray) -> np.ndarray:
        return self.b.col(field, self.ev[sel])

    def nonempty(self, field: str) -> np.ndarray:
        set_ = np.array([bool(s) for s in self.b.strings], dtype=bool)
        return set_[self.b.col(field, self.ev)]

    def op_dims(self, sel: np.ndarray) -> list[str]:
        raws = self.b.chunk.raws
        dims, legacy = raws["input_dims"], raws["input_dims_legacy"]
        return [dims[i] or legacy[i] or "" for i in self.ev[sel].tolist()]
