"""The columns the decoders write: one table of names, dtypes, units and meanings.

Both decoders (the native scanner, :mod:`hta.kineto.native`, and the pure-Python one,
:mod:`hta.kineto.pydecode`) produce exactly these columns, and
:func:`hta.kineto.columns._frame` casts every side table to them, so an empty table has
the same columns and dtypes as a full one.

Why two schema modules: the file format (``hta.kineto``) sits below the model and may
not import it, yet both decoders must read the columns they write from one place. So
this module holds what *decoding* produces (the events' decoded columns, and side tables
whose rows point at events through ``row``, the event's position in file order), and
:mod:`hta.model.schema` builds the loaded rank's schema from it: it adds the columns the
model computes (``index``, ``end``, ``kind``, links, ``iteration``), renames ``row`` to
``index`` (the event's row after sorting) and drops ``copy_sizes`` (folded into
``memory_args`` while building). The docs' column reference is generated from that one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

#: dtype names used in the schema, and what they are in pandas (pandas 3: text is "str").
DTYPES = {"int64": np.dtype(np.int64), "int32": np.dtype(np.int32),
          "int16": np.dtype(np.int16),
          "float64": np.dtype(np.float64), "str": pd.StringDtype(na_value=np.nan)}
#: ``unit`` of columns holding ids into the rank's symbol table.
SYMBOL_ID = "symbol id"


@dataclass(frozen=True)
class RawKey:
    """A key the decoders read from each event, as Kineto writes it: in the event's
    ``args`` (``in_args``), else in the event itself."""

    key: str
    in_args: bool = True

    def __str__(self) -> str:
        return f'args["{self.key}"]' if self.in_args else self.key


def _top(*keys: str) -> dict[str, RawKey]:
    return {k: RawKey(k, in_args=False) for k in keys}


#: Every key the decoders read, by the name both decoders give its values: a field of
#: :class:`hta.kineto.structs.Event` / :class:`~hta.kineto.structs.Args` (their JSON
#: names are taken from here), a column of the native scanner (``native.SPARSE`` and
#: ``native.RAW``, the ``TOP`` and ``ARGS`` field tables of ``_native/scan_fields.h``;
#: ``tests/test_raw_keys.py`` checks that C table against this one). The one place
#: that says which raw key a column comes from: see :attr:`Column.source`. Counter
#: (``C``) and CUPTI range events' ``args`` are free-form (any key is a series or a
#: metric), and read apart.
RAW_KEYS: dict[str, RawKey] = {
    **_top("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "s", "args"),
    "external_id": RawKey("External id"),
    "external_id_legacy": RawKey("external id"),
    "correlation": RawKey("correlation"),
    "stream": RawKey("stream"),
    "device": RawKey("device"),
    "cbid": RawKey("cbid"),  # read (and handed to the scanner), kept in no column
    "cid": RawKey("cid"),  # the same
    "graph_id": RawKey("graph id"),
    # kernels
    "grid": RawKey("grid"),
    "block": RawKey("block"),
    "registers_per_thread": RawKey("registers per thread"),
    "shared_memory": RawKey("shared memory"),
    "blocks_per_sm": RawKey("blocks per SM"),
    "warps_per_sm": RawKey("warps per SM"),
    "occupancy_pct": RawKey("est. achieved occupancy %"),
    # memcpy / memset
    "nbytes": RawKey("bytes"),
    "size": RawKey("size"),
    "bandwidth_gbps": RawKey("memory bandwidth (GB/s)"),
    # collectives
    "collective_name": RawKey("Collective name"),
    "dtype": RawKey("dtype"),
    "in_msg_nelems": RawKey("In msg nelems"),
    "out_msg_nelems": RawKey("Out msg nelems"),
    "group_size": RawKey("Group size"),
    "pg_name": RawKey("Process Group Name"),
    "pg_desc": RawKey("Process Group Description"),
    "pg_ranks": RawKey("Process Group Ranks"),
    "seq": RawKey("Seq"),
    "in_split": RawKey("In split size"),
    "out_split": RawKey("Out split size"),
    # CPU operators
    "input_dims": RawKey("Input Dims"),
    "input_dims_legacy": RawKey("Input dims"),
    "input_type": RawKey("Input type"),
    "concrete_inputs": RawKey("Concrete Inputs"),
    "sequence_number": RawKey("Sequence number"),
    "fwd_thread_id": RawKey("Fwd thread id"),
    # synchronisation
    "wait_on_stream": RawKey("wait_on_stream"),
    "wait_on_event_corr": RawKey("wait_on_cuda_event_record_corr_id"),
    # [memory] instant events
    "addr": RawKey("Addr"),
    "mem_bytes": RawKey("Bytes"),
    "total_allocated": RawKey("Total Allocated"),
    "total_reserved": RawKey("Total Reserved"),
    "device_type": RawKey("Device Type"),
    "device_id": RawKey("Device Id"),
    # metadata events
    "meta_name": RawKey("name"),
    "labels": RawKey("labels"),
    "sort_index": RawKey("sort_index"),
}


def key_of(field: str) -> str:
    """The raw key (as written in the file) of a decoder field of :data:`RAW_KEYS`."""
    return RAW_KEYS[field].key


@dataclass(frozen=True)
class Column:
    """One column: name, dtype name (see :data:`DTYPES`), unit (``""`` for none), what
    it holds, in one line, and ``source``: the :data:`RAW_KEYS` fields it is read from,
    the first one present winning (empty: computed, not read)."""

    name: str
    dtype: str
    unit: str
    meaning: str
    source: tuple[str, ...] = ()

    @property
    def raw_keys(self) -> list[str]:
        """Where the column comes from in the file: ``args["External id"]``, ``ts``, ..."""
        return [str(RAW_KEYS[f]) for f in self.source]


@dataclass(frozen=True)
class Table:
    """A side table: what one row stands for, and its columns in order."""

    row: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return [c.name for c in self.columns]


def _c(name: str, dtype: str, unit: str, meaning: str, *source: str) -> Column:
    return Column(name, dtype, unit, meaning, source)


#: Columns of the decoded events (complete events, file order), before the model sorts
#: and links them.
DECODED_EVENT_COLUMNS: tuple[Column, ...] = (
    _c("ts", "int64", "ns", "start, absolute ns (the file's µs converted exactly, plus its "
       "time origin once loaded)", "ts"),
    _c("dur", "int64", "ns", "duration (`>= 0`; missing or negative durations are 0)", "dur"),
    _c("cat", "int32", SYMBOL_ID, "category: id into `symbols` (`rt.decoded()` shows text)",
       "cat"),
    _c("name", "int32", SYMBOL_ID, "name: id into `symbols`", "name"),
    _c("pid", "int64", "", "process id; GPU events: the device; named pids: negative ids",
       "pid"),
    _c("tid", "int64", "", "thread id; GPU events: the stream", "tid"),
    _c("correlation", "int64", "", "runtime call <-> GPU work, -1 absent", "correlation"),
    _c("external_id", "int64", "", "CPU op <-> the runtime calls and GPU work it launched "
       "(the legacy lower-case key where the other is absent), -1 absent",
       "external_id", "external_id_legacy"),
    _c("stream", "int64", "", "-1 absent (4294967295 as written: no stream)", "stream"),
    _c("device", "int64", "", "-1 absent", "device"),
    _c("graph_id", "int64", "", "CUDA graph, -1 absent", "graph_id"),
)

_ROW = _c("row", "int64", "", "position of the event among the decoded complete events")

#: Side tables keyed by the event they describe (``row``), in the order a rank keeps them.
DECODED_ARG_TABLES: dict[str, Table] = {
    "kernel_args": Table("kernel (`kernel`, `Kernel`)", (
        _ROW,
        *(_c(f"grid_{a}", "int64", "", f"`grid[{i}]`, -1 absent", "grid")
          for i, a in enumerate("xyz")),
        *(_c(f"block_{a}", "int64", "", f"`block[{i}]`, -1 absent", "block")
          for i, a in enumerate("xyz")),
        _c("registers_per_thread", "float64", "", "registers per thread, NaN absent",
           "registers_per_thread"),
        _c("shared_memory_bytes", "float64", "bytes", "shared memory per block, NaN absent",
           "shared_memory"),
        _c("blocks_per_sm", "float64", "", "blocks per SM, NaN absent", "blocks_per_sm"),
        _c("warps_per_sm", "float64", "", "warps per SM, NaN absent", "warps_per_sm"),
        _c("est_achieved_occupancy_pct", "float64", "%", "estimated achieved occupancy, NaN "
           "absent", "occupancy_pct"),
    )),
    "memory_args": Table(
        "`gpu_memcpy`/`gpu_memset` (and `Memcpy`/`Memset`), plus any other copy whose "
        "size is known (MTIA `dma_request`)", (
            _ROW,
            _c("bytes", "float64", "bytes", "the `bytes` arg, else the copy's own `size` arg "
               "(MTIA DMA), else the `size` arg of the runtime call that launched it (ROCm "
               "`hipMemcpy*`), else NaN", "nbytes", "size"),
            _c("bandwidth_gbps", "float64", "GB/s", "as written", "bandwidth_gbps"),
        )),
    "collective_args": Table(
        "event whose args carry a non-empty `Collective name` (`record_param_comms` ops, "
        "NCCL kernels)", (
            _ROW,
            _c("collective_name", "str", "", "the collective (`allreduce`, ...)",
               "collective_name"),
            _c("dtype", "str", "", "of the message", "dtype"),
            _c("in_msg_nelems", "float64", "elements", "input message size", "in_msg_nelems"),
            _c("out_msg_nelems", "float64", "elements", "output message size", "out_msg_nelems"),
            _c("group_size", "float64", "ranks", "ranks in the process group", "group_size"),
            _c("process_group_name", "str", "", "the process group's name", "pg_name"),
            _c("process_group_desc", "str", "", "the process group's description", "pg_desc"),
            _c("process_group_ranks", "str", "", "the raw JSON text", "pg_ranks"),
            _c("seq", "float64", "", "the collective's sequence number", "seq"),
            _c("in_split_sizes", "str", "", "the raw JSON text (all-to-all(v) split sizes "
               "per peer; empty when absent)", "in_split"),
            _c("out_split_sizes", "str", "", "the raw JSON text", "out_split"),
        )),
    "op_args": Table(
        "`cpu_op`/`Operator`/`user_annotation` with `Input Dims` (or `Input dims`) or a "
        "`Sequence number`", (
            _ROW,
            _c("input_dims", "str", "", "the raw JSON text (`\"\"` absent)", "input_dims",
               "input_dims_legacy"),
            _c("input_type", "str", "", "the raw JSON text (`\"\"` absent)", "input_type"),
            _c("concrete_inputs", "str", "", "scalar arguments, the raw JSON text (`\"\"` "
               "absent)", "concrete_inputs"),
            _c("sequence_number", "int64", "", "-1 absent", "sequence_number"),
            _c("fwd_thread_id", "int64", "", "-1 absent", "fwd_thread_id"),
        )),
    "sync_args": Table("`cuda_sync` event", (
        _ROW,
        _c("wait_on_stream", "int64", "", "-1 absent", "wait_on_stream"),
        _c("wait_on_event_correlation", "int64", "", "-1 absent", "wait_on_event_corr"),
    )),
    "cupti_metrics": Table(
        "(CUPTI range-profiler event, metric): the `args` of `cuda_profiler_range` events", (
            _ROW,
            _c("metric", "str", "", "the metric's name (an `args` key, e.g. "
               "`smsp__sass_thread_inst_executed_op_ffma_pred_on.sum`)"),
            _c("value", "float64", "", "its value (NaN when not a number), in the "
               "metric's own unit"),
        )),
}

#: Copy sizes given as ``size`` args (MTIA DMA, ROCm runtime calls); only used while
#: building (they fill ``memory_args.bytes``).
COPY_SIZES = Table("event with a numeric `size` arg", (
    _ROW, _c("size", "float64", "bytes", "the `size` arg", "size")))

#: Tables of the events that are not complete events, in file order.
EVENT_TABLES: dict[str, Table] = {
    "instants": Table("instant event (`i`, `I`)", (
        _c("ts", "int64", "ns", "time, absolute ns", "ts"),
        _c("name", "int32", SYMBOL_ID, "name", "name"),
        _c("cat", "int32", SYMBOL_ID, "category", "cat"),
        _c("pid", "int64", "", "process id", "pid"),
        _c("tid", "int64", "", "thread id", "tid"),
        _c("scope", "int32", SYMBOL_ID, "the instant's scope", "s"),
        _c("addr", "int64", "", "memory events; -1 absent", "addr"),
        _c("bytes", "float64", "bytes", "memory events; negative = a free", "mem_bytes"),
        _c("total_allocated", "float64", "bytes", "memory events: allocated after it",
           "total_allocated"),
        _c("total_reserved", "float64", "bytes", "memory events: reserved after it",
           "total_reserved"),
        _c("device_type", "int64", "", "-1 absent", "device_type"),
        _c("device_id", "int64", "", "-1 absent", "device_id"),
    )),
    "flows": Table("flow event (`s`, `f`, `t`)", (
        _c("ph", "int32", SYMBOL_ID, "phase (`s`/`f`/`t`)", "ph"),
        _c("id", "int64", "", "flow id", "id"),
        _c("ts", "int64", "ns", "time, absolute ns", "ts"),
        _c("pid", "int64", "", "process id", "pid"),
        _c("tid", "int64", "", "thread id", "tid"),
        _c("cat", "int32", SYMBOL_ID, "category", "cat"),
        _c("name", "int32", SYMBOL_ID, "name", "name"),
    )),
    "counters": Table("numeric series of a counter (`C`) event; non-numeric values skipped", (
        _c("ts", "int64", "ns", "time, absolute ns", "ts"),
        _c("pid", "int64", "", "process id", "pid"),
        _c("tid", "int64", "", "thread id", "tid"),
        _c("name", "str", "", "the counter's name", "name"),
        _c("series", "str", "", "the `args` key"),
        _c("value", "float64", "", "the `args` value"),
    )),
    "metadata_events": Table("metadata event (`M`)", (
        _c("name", "str", "", "e.g. `thread_name`, `process_name`", "name"),
        _c("pid", "int64", "", "process id", "pid"),
        _c("tid", "int64", "", "thread id", "tid"),
        _c("value", "str", "", "the thread's or process's name, ...", "meta_name"),
        _c("labels", "str", "", "the labels (`process_labels` events)", "labels"),
        _c("sort_index", "int64", "", "-1 absent", "sort_index"),
    )),
}

#: Every side table a decoder writes, by name.
DECODED_TABLES: dict[str, Table] = {**DECODED_ARG_TABLES, "copy_sizes": COPY_SIZES,
                                    **EVENT_TABLES}


def frame(table: Table, values: dict[str, Any]) -> pd.DataFrame:
    """A side table as a DataFrame with exactly the schema's columns and dtypes
    (``values``: column -> array or list; a missing column must mean an empty table)."""
    extra = set(values) - set(table.names)
    if extra:
        raise KeyError(f"columns {sorted(extra)} are not in the schema (hta.kineto.schema)")
    if not any(len(v) for v in values.values()):
        # most side tables of a file are empty: a copy of the table's empty frame costs a
        # fifth of building one (11 tables a rank)
        return _empty_frame(table).copy()
    n = len(next(iter(values.values())))
    data: dict[str, object] = {}
    for col in table.columns:
        v = values.get(col.name)
        if v is None:
            if n:
                raise KeyError(f"side table without column {col.name!r}")
            v = []
        # an array, not a Series: the frame then has no indexes to align
        data[col.name] = pd.array(v, dtype=DTYPES[col.dtype]) if col.dtype == "str" else (
            np.asarray(v, dtype=DTYPES[col.dtype]))
    return pd.DataFrame(data, copy=False)


_EMPTY_FRAMES: dict[Table, pd.DataFrame] = {}


def _empty_frame(table: Table) -> pd.DataFrame:
    """The table with no rows (built once; callers get a copy)."""
    found = _EMPTY_FRAMES.get(table)
    if found is None:
        found = _EMPTY_FRAMES[table] = pd.DataFrame(
            {c.name: pd.array([], dtype=DTYPES[c.dtype]) if c.dtype == "str"
             else np.zeros(0, dtype=DTYPES[c.dtype]) for c in table.columns}, copy=False)
    return found


__all__ = ["COPY_SIZES", "DECODED_ARG_TABLES", "DECODED_EVENT_COLUMNS", "DECODED_TABLES",
           "DTYPES", "EVENT_TABLES", "RAW_KEYS", "SYMBOL_ID", "Column", "RawKey", "Table",
           "frame", "key_of"]
