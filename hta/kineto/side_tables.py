"""The typed side tables of complete events (kernel, memory, collective, operator and
synchronisation args) and the counters table, from decoded structs (Python decoder)."""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
import numpy as np

from hta.kineto.columns import _dims, float_column, int_column, raw_text, timestamps_ns
from hta.kineto.schema import EVENT_TABLES, key_of
from hta.kineto.structs import Args, CounterEvent

if TYPE_CHECKING:
    from hta.kineto.sink import ColumnSink

_counter_list_decoder = msgspec.json.Decoder(list[CounterEvent])


class ArgValues(Protocol):
    """One decoder's view of the args of a chunk's complete events; ``sel`` picks events
    (positions among the chunk's complete events)."""

    def floats(self, field: str, sel: np.ndarray) -> np.ndarray:
        """Float64 values (NaN absent)."""

    def ints(self, field: str, sel: np.ndarray, label: str) -> np.ndarray:
        """Int64 values (-1 absent; ``label`` names the arg in warnings)."""

    def texts(self, field: str, sel: np.ndarray) -> list[str]:
        """Values as text."""

    def raws(self, field: str, sel: np.ndarray) -> list[str]:
        """Raw JSON text of the values (``""`` absent)."""

    def dims(self, field: str, sel: np.ndarray) -> np.ndarray:
        """``[x, y, z]`` values as an (n, 3) int64 array (-1 absent)."""

    def nonempty(self, field: str) -> np.ndarray:
        """Per complete event: whether the text field is set and not empty."""

    def op_dims(self, sel: np.ndarray) -> list[str]:
        """``Input Dims`` raw text, else the legacy ``Input dims`` (``""`` absent)."""


#: Where each arg-table column comes from: ``(how, field, extra)``, ``how`` one of the
#: :class:`ArgValues` methods, ``field`` a :data:`hta.kineto.schema.RAW_KEYS` field (the
#: column's ``source``), ``extra`` the index of a ``dims`` value. Columns in the schema's
#: order (:mod:`hta.kineto.schema`); ``row`` is added. Warnings name the field's raw key.
ARG_SOURCES: dict[str, dict[str, tuple[str, str, Any]]] = {
    "kernel_args": {
        **{f"{k}_{a}": ("dims", k, i) for k in ("grid", "block") for i, a in enumerate("xyz")},
        "registers_per_thread": ("floats", "registers_per_thread", None),
        "shared_memory_bytes": ("floats", "shared_memory", None),
        "blocks_per_sm": ("floats", "blocks_per_sm", None),
        "warps_per_sm": ("floats", "warps_per_sm", None),
        "est_achieved_occupancy_pct": ("floats", "occupancy_pct", None),
    },
    "memory_args": {"bytes": ("floats", "nbytes", None),
                    "bandwidth_gbps": ("floats", "bandwidth_gbps", None)},
    "collective_args": {
        "collective_name": ("texts", "collective_name", None),
        "dtype": ("texts", "dtype", None),
        "in_msg_nelems": ("floats", "in_msg_nelems", None),
        "out_msg_nelems": ("floats", "out_msg_nelems", None),
        "group_size": ("floats", "group_size", None),
        "process_group_name": ("texts", "pg_name", None),
        "process_group_desc": ("texts", "pg_desc", None),
        "process_group_ranks": ("raws", "pg_ranks", None),
        "seq": ("floats", "seq", None),
        "in_split_sizes": ("raws", "in_split", None),
        "out_split_sizes": ("raws", "out_split", None),
    },
    "op_args": {"input_type": ("raws", "input_type", None),
                "concrete_inputs": ("raws", "concrete_inputs", None),
                "fwd_thread_id": ("ints", "fwd_thread_id", None)},
    "sync_args": {
        "wait_on_stream": ("ints", "wait_on_stream", None),
        "wait_on_event_correlation": ("ints", "wait_on_event_corr", None),
    },
}


def _columns(values: ArgValues, name: str, sel: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {}
    dims: dict[str, np.ndarray] = {}
    for column, (how, field, extra) in ARG_SOURCES[name].items():
        if how == "dims":
            if field not in dims:
                dims[field] = values.dims(field, sel)
            out[column] = dims[field][:, extra]
        elif how == "ints":
            out[column] = values.ints(field, sel, key_of(field))
        else:
            out[column] = getattr(values, how)(field, sel)
    return out


def side_tables(acc: ColumnSink, values: ArgValues, cat: np.ndarray, rows: np.ndarray
                ) -> None:
    """Rows of the typed side tables (kernel, memory, copy size, collective, operator,
    synchronisation args) for one chunk of complete events, from either decoder's
    ``values``; ``rows`` are their row ids."""
    sel = acc._rows_for(acc.kernel_cats, cat)
    if sel.size:
        acc.add_table("kernel_args", {"row": rows[sel], **_columns(values, "kernel_args", sel)})
    sizes = values.floats("size", np.arange(rows.size))
    has_size = np.flatnonzero(~np.isnan(sizes))
    if has_size.size:
        acc.add_table("copy_sizes", {"row": rows[has_size], "size": sizes[has_size]})
    sel = acc._rows_for(acc.memory_cats, cat)
    if sel.size:
        acc.add_table("memory_args", {"row": rows[sel], **_columns(values, "memory_args", sel)})
    sel = np.flatnonzero(values.nonempty("collective_name"))
    if sel.size:
        acc.add_table("collective_args", {"row": rows[sel],
                                          **_columns(values, "collective_args", sel)})
    sel = acc._rows_for(acc.op_cats, cat)
    if sel.size:
        dims = values.op_dims(sel)
        seq = values.ints("sequence_number", sel, key_of("sequence_number"))
        has = np.fromiter(map(bool, dims), dtype=bool, count=len(dims)) | (seq >= 0)
        if has.any():
            keep = np.flatnonzero(has)
            cols = _columns(values, "op_args", sel[keep])
            acc.add_table("op_args", {
                "row": rows[sel[keep]], "input_dims": [dims[i] for i in keep.tolist()],
                "input_type": cols["input_type"],
                "concrete_inputs": cols["concrete_inputs"], "sequence_number": seq[keep],
                "fwd_thread_id": cols["fwd_thread_id"]})
    sel = acc._rows_for(acc.sync_cats, cat)
    if sel.size:
        acc.add_table("sync_args", {"row": rows[sel], **_columns(values, "sync_args", sel)})


class StructArgs:
    """:class:`ArgValues` of the Python decoder: the events' decoded ``Args`` structs."""

    def __init__(self, args: list[Args], warnings: list[str]) -> None:
        self.args = args
        self.warnings = warnings

    def _pick(self, field: str, sel: np.ndarray) -> list[Any]:
        get = attrgetter(field)
        if sel.size == len(self.args):  # every event (``sel`` is always ascending)
            return list(map(get, self.args))
        args = self.args
        return [get(args[i]) for i in sel.tolist()]

    def floats(self, field: str, sel: np.ndarray) -> np.ndarray:
        return float_column(self._pick(field, sel))

    def ints(self, field: str, sel: np.ndarray, label: str) -> np.ndarray:
        return int_column(self._pick(field, sel), label, self.warnings)

    def texts(self, field: str, sel: np.ndarray) -> list[str]:
        return [str(v) for v in self._pick(field, sel)]

    def raws(self, field: str, sel: np.ndarray) -> list[str]:
        return raw_text(self._pick(field, sel))

    def dims(self, field: str, sel: np.ndarray) -> np.ndarray:
        return _dims(self._pick(field, sel))

    def nonempty(self, field: str) -> np.ndarray:
        return np.array(list(map(bool, map(attrgetter(field), self.args))), dtype=bool)

    def op_dims(self, sel: np.ndarray) -> list[str]:
        args = self.args
        return raw_text([args[i].input_dims if len(args[i].input_dims)
                         else args[i].input_dims_legacy for i in sel.tolist()])


class PhaseValues(Protocol):
    """One decoder's view of a chunk's events of one phase (instants, flows or metadata);
    ``field`` names an event field, or an ``Args`` field when the event has none."""

    def symbols(self, field: str) -> np.ndarray:
        """Ids in the rank's symbol table."""

    def ids(self, field: str) -> np.ndarray:
        """pid/tid values (named ones as the sink's stable negative ids)."""

    def ints(self, field: str, label: str) -> np.ndarray:
        """Int64 values (-1 absent; ``label`` names the field in warnings)."""

    def floats(self, field: str) -> np.ndarray:
        """Float64 values (NaN absent)."""

    def texts(self, field: str) -> list[str]:
        """Values as text."""


#: Columns of the instants, flows and metadata tables in the schema's order:
#: ``(how, field)``, ``how`` one of the :class:`PhaseValues` methods or ``"ts"`` (the
#: timestamps the decoder converted), ``field`` a :data:`hta.kineto.schema.RAW_KEYS`
#: field (the column's ``source``). Warnings name the field's raw key.
PHASE_SOURCES: dict[str, dict[str, tuple[str, str]]] = {
    "instants": {
        "ts": ("ts", "ts"),
        "name": ("symbols", "name"),
        "cat": ("symbols", "cat"),
        "pid": ("ids", "pid"),
        "tid": ("ids", "tid"),
        "scope": ("symbols", "s"),
        "addr": ("ints", "addr"),
        "bytes": ("floats", "mem_bytes"),
        "total_allocated": ("floats", "total_allocated"),
        "total_reserved": ("floats", "total_reserved"),
        "device_type": ("ints", "device_type"),
        "device_id": ("ints", "device_id"),
    },
    "flows": {
        "ph": ("symbols", "ph"),
        "id": ("ints", "id"),
        "ts": ("ts", "ts"),
        "pid": ("ids", "pid"),
        "tid": ("ids", "tid"),
        "cat": ("symbols", "cat"),
        "name": ("symbols", "name"),
    },
    "metadata_events": {
        "name": ("texts", "name"),
        "pid": ("ids", "pid"),
        "tid": ("ids", "tid"),
        "value": ("texts", "meta_name"),
        "labels": ("texts", "labels"),
        "sort_index": ("ints", "sort_index"),
    },
}


def phase_columns(name: str, values: PhaseValues, ts: np.ndarray | None = None
                  ) -> dict[str, Any]:
    """The columns of table ``name`` (a :data:`PHASE_SOURCES` key) from either decoder's
    ``values``, evaluated in column order (symbols are interned in first-seen order)."""
    out: dict[str, Any] = {}
    for column, (how, field) in PHASE_SOURCES[name].items():
        if how == "ts":
            out[column] = ts
        elif how == "ints":
            out[column] = values.ints(field, key_of(field))
        else:
            out[column] = getattr(values, how)(field)
    return out


COUNTER_COLUMNS = tuple(EVENT_TABLES["counters"].names)


def _counter_rows(acc: ColumnSink, items: list[msgspec.Raw]) -> None:
    """``C`` events of ``items`` into the counters table: one row per (event, series)."""
    picked = [r for r in items if b'"C"' in bytes(r)]
    if not picked:
        return
    evs = [e for e in _counter_list_decoder.decode(b"[" + b",".join(picked) + b"]")
           if e.ph == "C"]
    ts, present = timestamps_ns([e.ts for e in evs], acc.warnings)
    rows: dict[str, list[Any]] = {k: [] for k in COUNTER_COLUMNS}
    for e, t, ok in zip(evs, ts.tolist(), present.tolist()):
        if not ok:
            continue
        for series, value in e.args.items():
            try:
                fval = float(value)
            except (TypeError, ValueError):
                continue
            rows["ts"].append(t)
            rows["pid"].append(e.pid)
            rows["tid"].append(e.tid)
            rows["name"].append(str(e.name))
            rows["series"].append(str(series))
            rows["value"].append(fval)
    acc.add_table("counters", {
        "ts": np.asarray(rows["ts"], dtype=np.int64),
        "pid": acc.ids_column(rows["pid"]),
        "tid": acc.ids_column(rows["tid"]),
        "name": rows["name"],
        "series": rows["series"],
        "value": np.asarray(rows["value"], dtype=np.float64),
    })


#: Category of the CUPTI range profiler's per-kernel events (their args are the metrics).
PROFILER_RANGE_CATEGORY = "cuda_profiler_range"


class _RangeEvent(msgspec.Struct, gc=False):
    ph: str = ""
    cat: Any = ""
    ts: msgspec.Raw = msgspec.Raw()
    args: dict = msgspec.field(default_factory=dict)


_range_list_decoder = msgspec.json.Decoder(list[_RangeEvent])


def _profiler_range_rows(acc: ColumnSink, items: list[msgspec.Raw], rows: np.ndarray) -> None:
    """The metrics of the chunk's CUPTI range-profiler events into ``cupti_metrics``: one
    row per (event, metric), in file order and the args' order; NaN for a value that is
    not a number. ``rows`` are the row ids those events got, in file order."""
    needle = PROFILER_RANGE_CATEGORY.encode()
    picked = [r for r in items if needle in bytes(r)]
    evs = [e for e in _range_list_decoder.decode(b"[" + b",".join(picked) + b"]")
           if e.ph == "X" and e.cat == PROFILER_RANGE_CATEGORY]
    _, present = timestamps_ns([e.ts for e in evs], [])
    evs = [e for e, ok in zip(evs, present.tolist()) if ok]
    if len(evs) != rows.size:
        acc.warnings.append(f"{rows.size} CUPTI range event(s) decoded but {len(evs)} read "
                            "again for their metrics; their metrics are left out")
        return
    row_of: list[int] = []
    metric: list[str] = []
    value: list[float] = []
    for row, e in zip(rows.tolist(), evs):
        for key, v in e.args.items():
            row_of.append(row)
            metric.append(str(key))
            try:
                value.append(float(v))
            except (TypeError, ValueError):
                value.append(float("nan"))
    acc.add_table("cupti_metrics", {"row": np.asarray(row_of, dtype=np.int64),
                                    "metric": metric,
                                    "value": np.asarray(value, dtype=np.float64)})
