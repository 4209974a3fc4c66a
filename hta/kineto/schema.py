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
class Column:
    """One column: name, dtype name (see :data:`DTYPES`), unit (``""`` for none) and
    what it holds, in one line."""

    name: str
    dtype: str
    unit: str
    meaning: str


@dataclass(frozen=True)
class Table:
    """A side table: what one row stands for, and its columns in order."""

    row: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return [c.name for c in self.columns]


def _c(name: str, dtype: str, unit: str, meaning: str) -> Column:
    return Column(name, dtype, unit, meaning)


#: Columns of the decoded events (complete events, file order), before the model sorts
#: and links them.
DECODED_EVENT_COLUMNS: tuple[Column, ...] = (
    _c("ts", "int64", "ns", "start, absolute ns (the file's µs converted exactly, plus its "
       "time origin once loaded)"),
    _c("dur", "int64", "ns", "duration (`>= 0`; missing or negative durations are 0)"),
    _c("cat", "int32", SYMBOL_ID, "category: id into `symbols` (`rt.decoded()` shows text)"),
    _c("name", "int32", SYMBOL_ID, "name: id into `symbols`"),
    _c("pid", "int64", "", "process id; GPU events: the device; named pids: negative ids"),
    _c("tid", "int64", "", "thread id; GPU events: the stream"),
    _c("correlation", "int64", "", "`args.correlation` (runtime call <-> GPU work), -1 "
       "absent"),
    _c("external_id", "int64", "", "`args[\"External id\"]` (or legacy `external id`), -1 "
       "absent"),
    _c("stream", "int64", "", "`args.stream`, -1 absent (4294967295 as written: no stream)"),
    _c("device", "int64", "", "`args.device`, -1 absent"),
    _c("graph_id", "int64", "", "`args[\"graph id\"]` (CUDA graphs), -1 absent"),
)

_ROW = _c("row", "int64", "", "position of the event among the decoded complete events")

#: Side tables keyed by the event they describe (``row``), in the order a rank keeps them.
DECODED_ARG_TABLES: dict[str, Table] = {
    "kernel_args": Table("kernel (`kernel`, `Kernel`)", (
        _ROW,
        *(_c(f"grid_{a}", "int64", "", f"`args.grid[{i}]`, -1 absent")
          for i, a in enumerate("xyz")),
        *(_c(f"block_{a}", "int64", "", f"`args.block[{i}]`, -1 absent")
          for i, a in enumerate("xyz")),
        _c("registers_per_thread", "float64", "", "`registers per thread`"),
        _c("shared_memory_bytes", "float64", "bytes", "`shared memory`"),
        _c("blocks_per_sm", "float64", "", "`blocks per SM`"),
        _c("warps_per_sm", "float64", "", "`warps per SM`"),
        _c("est_achieved_occupancy_pct", "float64", "%", "`est. achieved occupancy %`"),
    )),
    "memory_args": Table(
        "`gpu_memcpy`/`gpu_memset` (and `Memcpy`/`Memset`), plus any other copy whose "
        "size is known (MTIA `dma_request`)", (
            _ROW,
            _c("bytes", "float64", "bytes", "the `bytes` arg, else the copy's own `size` arg "
               "(MTIA DMA), else the `size` arg of the runtime call that launched it (ROCm "
               "`hipMemcpy*`), else NaN"),
            _c("bandwidth_gbps", "float64", "GB/s", "`memory bandwidth (GB/s)` as written"),
        )),
    "collective_args": Table(
        "event whose args carry a non-empty `Collective name` (`record_param_comms` ops, "
        "NCCL kernels)", (
            _ROW,
            _c("collective_name", "str", "", "`Collective name`"),
            _c("dtype", "str", "", "`dtype` of the message"),
            _c("in_msg_nelems", "float64", "elements", "`In msg nelems`"),
            _c("out_msg_nelems", "float64", "elements", "`Out msg nelems`"),
            _c("group_size", "float64", "ranks", "`Group size`"),
            _c("process_group_name", "str", "", "`Process Group Name`"),
            _c("process_group_desc", "str", "", "`Process Group Description`"),
            _c("process_group_ranks", "str", "", "`Process Group Ranks`, the raw JSON text"),
            _c("seq", "float64", "", "`Seq` (the collective's sequence number)"),
            _c("in_split_sizes", "str", "", "`In split size`, the raw JSON text (all-to-all(v) "
               "split sizes per peer; empty when absent)"),
            _c("out_split_sizes", "str", "", "`Out split size`, the raw JSON text"),
        )),
    "op_args": Table(
        "`cpu_op`/`Operator`/`user_annotation` with `Input Dims` (or `Input dims`) or a "
        "`Sequence number`", (
            _ROW,
            _c("input_dims", "str", "", "`Input Dims`, the raw JSON text (`\"\"` absent)"),
            _c("input_type", "str", "", "`Input type`, the raw JSON text (`\"\"` absent)"),
            _c("concrete_inputs", "str", "", "`Concrete Inputs` (scalar arguments), the raw "
               "JSON text (`\"\"` absent)"),
            _c("sequence_number", "int64", "", "`Sequence number`, -1 absent"),
            _c("fwd_thread_id", "int64", "", "`Fwd thread id`, -1 absent"),
        )),
    "sync_args": Table("`cuda_sync` event", (
        _ROW,
        _c("wait_on_stream", "int64", "", "`wait_on_stream`, -1 absent"),
        _c("wait_on_event_correlation", "int64", "",
           "`wait_on_cuda_event_record_corr_id`, -1 absent"),
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
    _ROW, _c("size", "float64", "bytes", "the `size` arg")))

#: Tables of the events that are not complete events, in file order.
EVENT_TABLES: dict[str, Table] = {
    "instants": Table("instant event (`i`, `I`)", (
        _c("ts", "int64", "ns", "time, absolute ns"),
        _c("name", "int32", SYMBOL_ID, "name"),
        _c("cat", "int32", SYMBOL_ID, "category"),
        _c("pid", "int64", "", "process id"),
        _c("tid", "int64", "", "thread id"),
        _c("scope", "int32", SYMBOL_ID, "`s` (the instant's scope)"),
        _c("addr", "int64", "", "`args.Addr` (memory events), -1 absent"),
        _c("bytes", "float64", "bytes", "`args.Bytes` (memory events; negative = a free)"),
        _c("total_allocated", "float64", "bytes", "`args[\"Total Allocated\"]`"),
        _c("total_reserved", "float64", "bytes", "`args[\"Total Reserved\"]`"),
        _c("device_type", "int64", "", "`args[\"Device Type\"]`, -1 absent"),
        _c("device_id", "int64", "", "`args[\"Device Id\"]`, -1 absent"),
    )),
    "flows": Table("flow event (`s`, `f`, `t`)", (
        _c("ph", "int32", SYMBOL_ID, "phase (`s`/`f`/`t`)"),
        _c("id", "int64", "", "flow id"),
        _c("ts", "int64", "ns", "time, absolute ns"),
        _c("pid", "int64", "", "process id"),
        _c("tid", "int64", "", "thread id"),
        _c("cat", "int32", SYMBOL_ID, "category"),
        _c("name", "int32", SYMBOL_ID, "name"),
    )),
    "counters": Table("numeric series of a counter (`C`) event; non-numeric values skipped", (
        _c("ts", "int64", "ns", "time, absolute ns"),
        _c("pid", "int64", "", "process id"),
        _c("tid", "int64", "", "thread id"),
        _c("name", "str", "", "the counter's name"),
        _c("series", "str", "", "the `args` key"),
        _c("value", "float64", "", "the `args` value"),
    )),
    "metadata_events": Table("metadata event (`M`)", (
        _c("name", "str", "", "e.g. `thread_name`, `process_name`"),
        _c("pid", "int64", "", "process id"),
        _c("tid", "int64", "", "thread id"),
        _c("value", "str", "", "`args.name`"),
        _c("labels", "str", "", "`args.labels`"),
        _c("sort_index", "int64", "", "`args.sort_index`, -1 absent"),
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
    n = len(next(iter(values.values()))) if values else 0
    data: dict[str, object] = {}
    for col in table.columns:
        v = values.get(col.name)
        if v is None:
            if n:
                raise KeyError(f"side table without column {col.name!r}")
            v = []
        data[col.name] = pd.Series(v, dtype=DTYPES[col.dtype]) if col.dtype == "str" else (
            np.asarray(v, dtype=DTYPES[col.dtype]))
    return pd.DataFrame(data, copy=False)


__all__ = ["COPY_SIZES", "DECODED_ARG_TABLES", "DECODED_EVENT_COLUMNS", "DECODED_TABLES",
           "DTYPES", "EVENT_TABLES", "SYMBOL_ID", "Column", "Table", "frame"]
