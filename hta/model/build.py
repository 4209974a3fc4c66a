"""Turn a decoded file into a linked :class:`RankTrace`."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from hta.kineto import schema as kineto_schema
from hta.kineto.decode import DecodedTrace
from hta.kineto.heap import release_free_memory
from hta.kineto.schema import Table
from hta.model import links
from hta.model.rules import (
    CPU_KINDS,
    GPU_KINDS,
    KIND_CODE,
    KINDS,
    MEMORY_KINDS,
    RUNTIME_KINDS,
    RuleSet,
    kind_mask,
    kinds,
)
from hta.model.schema import EVENT_DTYPES, KIND_DTYPE, MAX_DEPTH, NARROWED, TABLES
from hta.model.trace import ARG_TABLES, EVENT_TABLES, RankTrace

logger = logging.getLogger(__name__)

def time_origin_ns(decoded: DecodedTrace) -> int:
    """What to add to the file's timestamps to make them absolute epoch nanoseconds.

    Newer Kineto writes ``ts`` relative to ``baseTimeNanoseconds`` (a double cannot hold
    an epoch in ns); older traces write absolute epoch microseconds and no base.
    """
    base = _int_or_none(decoded.top_level.get("baseTimeNanoseconds"))
    ts = decoded.columns["ts"]
    if not base or base <= 0:
        return 0
    if ts.size and int(ts.max()) >= base // 2:
        return 0  # already absolute despite the base: do not add it twice
    return base


def build_rank(decoded: DecodedTrace, rank: int, rules: RuleSet) -> RankTrace:
    """Sort, classify and link the events of one decoded file."""
    cols = dict(decoded.columns)
    base = time_origin_ns(decoded)
    if base:
        cols["ts"] = cols["ts"] + base
    order = np.argsort(cols["ts"], kind="stable")
    n = order.shape[0]
    # Reorder column by column, dropping each decoded column as soon as it is copied, so
    # peak memory holds one extra column rather than a second table.
    sorted_cols: dict[str, np.ndarray] = {}
    narrowed: list[str] = []
    for name in list(cols):
        column = cols.pop(name)[order]
        if name in NARROWED:
            column = _narrowed(name, column, narrowed)
        sorted_cols[name] = column.astype(EVENT_DTYPES.get(name, column.dtype), copy=False)
        decoded.columns.pop(name, None)
    end = sorted_cols["ts"] + sorted_cols["dur"]
    new_row = np.empty(n, dtype=np.int64)
    new_row[order] = np.arange(n, dtype=np.int64)
    tables: dict[str, pd.DataFrame] = {}
    for name in ARG_TABLES:
        tables[name] = _by_event(getattr(decoded, name), new_row, TABLES[name])
    for name in EVENT_TABLES:
        frame = getattr(decoded, name)
        if base and "ts" in frame and len(frame):
            frame = frame.assign(ts=frame["ts"].to_numpy(dtype=np.int64) + base)
        tables[name] = frame
    symbols = list(decoded.symbols.strings)
    release_free_memory()  # the decoded columns are gone: give their memory back
    coll = tables["collective_args"]
    codes = kinds(symbols, sorted_cols["cat"], sorted_cols["name"], rules,
                  coll["index"].to_numpy() if len(coll) else None)
    warnings = list(decoded.warnings) + narrowed
    linked = link_columns(codes, sorted_cols, end, symbols, warnings)
    # the frame built at once, in the columns' order (each column added to a frame
    # costs a pass over its columns): "index", the decoded columns, "end", "kind", links
    events = pd.DataFrame({"index": np.arange(n, dtype=EVENT_DTYPES["index"]), **sorted_cols,
                           "end": end, "kind": pd.Categorical.from_codes(codes, dtype=KIND_DTYPE),
                           **linked}, copy=False)
    rank_trace = RankTrace(rank=rank, events=events, symbols=symbols, tables=tables, meta={})
    rank_trace.classified_by(rules)
    sizes = decoded.copy_sizes
    if len(sizes):
        fill_copy_bytes(rank_trace, new_row[sizes["row"].to_numpy(dtype=np.int64)],
                        sizes["size"].to_numpy(dtype=np.float64))
    rank_trace.meta = build_metadata(decoded, rank, rank_trace, warnings)
    rank_trace.meta["time_origin_ns"] = base
    return rank_trace


def _by_event(frame: pd.DataFrame, new_row: np.ndarray, table: Table) -> pd.DataFrame:
    """An arg table keyed by the events' sorted rows: its decoded ``row`` (position among
    the decoded events, the first column) becomes ``index`` (the event's row once
    sorted), and the rows follow it (stable: rows of one event keep their order), as
    ``table`` (:data:`hta.model.schema.ARG_TABLES`) lays it out. A new frame; the decoded
    one is not changed."""
    if not len(frame):  # most arg tables of a rank
        return kineto_schema.frame(table, {})
    columns = frame.items()
    label, rows = next(columns)
    if label != "row":  # not as decoded: keyed as it is
        return frame.copy()
    index = new_row[rows.to_numpy(dtype=np.int64)]
    order = np.argsort(index, kind="stable")
    moved = not (order[1:] > order[:-1]).all()  # else in order already: nothing to move
    data: dict[str, Any] = {"index": index[order] if moved else index}
    for col, column in columns:
        # NumPy columns as arrays, the others (text) as their pandas arrays
        values = column.to_numpy() if isinstance(column.dtype, np.dtype) else column.array
        data[col] = values.take(order) if moved else values.copy()
    return pd.DataFrame(data, copy=False)


def _narrowed(name: str, column: np.ndarray, warnings: list[str]) -> np.ndarray:
    """``column`` with the values its narrower model dtype cannot hold set to -1 (and a
    warning saying so): :data:`hta.model.schema.NARROWED`."""
    info = np.iinfo(EVENT_DTYPES[name])
    bad = (column < info.min) | (column > info.max)
    if not bad.any():
        return column
    first = int(column[bad][0])
    warnings.append(f"{int(bad.sum())} event(s) have a {name} outside {info.min}..{info.max} "
                    f"(e.g. {first}); kept as -1 (absent)")
    column = column.copy()
    column[bad] = -1
    return column


#: What the overlap warning means for the results (said once, with the count).
OVERLAP_CONSEQUENCE = (": each stays a child of the event it starts in, so call stacks and "
                       "the operator a kernel is attributed to treat it as nested; GPU "
                       "times and breakdowns are not affected, nothing to do")


def link_columns(codes: np.ndarray, cols: dict[str, np.ndarray], end: np.ndarray,
                 symbols: list[str], warnings: list[str]) -> dict[str, np.ndarray]:
    """The ``iteration``, ``parent``, ``depth``, ``index_correlation`` and ``op_index``
    columns of events sorted by start (``codes``: their kind codes; ``cols``: their
    decoded columns; ``end``: ``ts + dur``)."""
    ts = cols["ts"]
    cpu = kind_mask(codes, CPU_KINDS | {"other"}) & (cols["pid"] >= 0)
    gpu = kind_mask(codes, GPU_KINDS)
    cpu &= ~gpu
    parent, depth, partial = links.call_stacks(ts, end, cols["pid"], cols["tid"], cpu)
    if partial:
        warnings.append(f"{partial} CPU event(s) overlap their parent without nesting in it"
                        f"{OVERLAP_CONSEQUENCE}")
    runtime = kind_mask(codes, RUNTIME_KINDS)
    cols["correlation"] = links.correlation_or_external_id(cols, runtime, gpu)
    corr = links.correlation_links(cols["correlation"], runtime, gpu)
    op_index = np.full(len(ts), links.NO_LINK, dtype=np.int64)
    is_op = codes == KIND_CODE["cpu_op"]
    rt_rows = np.flatnonzero(runtime)
    op_index[rt_rows] = links.enclosing_ops(parent, is_op, rt_rows)
    g_rows = np.flatnonzero(gpu & (corr >= 0))
    op_index[g_rows] = op_index[corr[g_rows]]
    # iterations
    step_candidates = kind_mask(codes, {"user_annotation", "cpu_op"})
    starts, ends, numbers = links.step_spans(symbols, cols["name"], step_candidates, ts, end)
    if starts.size == 0:
        iteration = np.zeros(len(ts), dtype=np.int64)
    else:
        iteration = links.assign_iterations(ts, starts, ends, numbers)
        linked = gpu & (corr >= 0)
        iteration[linked] = iteration[corr[linked]]
    return {
        "iteration": iteration.astype(EVENT_DTYPES["iteration"], copy=False),
        "parent": parent.astype(EVENT_DTYPES["parent"], copy=False),
        "depth": np.minimum(depth, MAX_DEPTH).astype(EVENT_DTYPES["depth"], copy=False),
        "index_correlation": corr.astype(EVENT_DTYPES["index_correlation"], copy=False),
        "op_index": op_index.astype(EVENT_DTYPES["op_index"], copy=False),
    }


def fill_copy_bytes(rt: RankTrace, size_rows: np.ndarray, sizes: np.ndarray) -> None:
    """Give copies without a ``bytes`` arg the ``size`` arg of their own event (MTIA DMA
    requests) or of the runtime call that launched them (ROCm ``hipMemcpy*``)."""
    ev = rt.events
    memory = np.flatnonzero(kind_mask(ev["kind"].array.codes, MEMORY_KINDS))
    if memory.size == 0:
        return
    size_of = np.full(len(ev), np.nan)
    size_of[size_rows] = sizes
    table = rt.tables["memory_args"]
    known = np.zeros(len(ev), dtype=bool)
    if len(table):
        idx = table["index"].to_numpy(dtype=np.int64)
        known[idx[~np.isnan(table["bytes"].to_numpy(dtype=np.float64))]] = True
    need = memory[~known[memory]]
    if need.size == 0:
        return
    launch = ev["index_correlation"].to_numpy()[need]
    value = size_of[need]
    via_launch = np.where(launch >= 0, size_of[np.clip(launch, 0, None)], np.nan)
    value = np.where(np.isnan(value), via_launch, value)
    ok = ~np.isnan(value)
    if not ok.any():
        return
    filled = pd.Series(value[ok], index=need[ok])
    if len(table):
        table = table.copy()
        existing = table["index"].isin(filled.index)
        table.loc[existing, "bytes"] = filled.reindex(table.loc[existing, "index"]).to_numpy()
        fresh = filled[~filled.index.isin(table["index"])]
    else:
        fresh = filled
    extra = pd.DataFrame({"index": fresh.index.to_numpy(dtype=np.int64),
                          "bytes": fresh.to_numpy(), "bandwidth_gbps": np.nan})
    rt.tables["memory_args"] = pd.concat(
        [t for t in (table, extra) if len(t)], ignore_index=True
    ).sort_values("index", kind="stable").reset_index(drop=True)


def build_metadata(
    decoded: DecodedTrace, rank: int, rt: RankTrace, warnings: list[str]
) -> dict[str, Any]:
    """Rank-level facts: world size, devices, process groups, time origin, settings."""
    top = decoded.top_level
    info = top.get("distributedInfo")
    if not isinstance(info, dict):
        info = {}
    pg_config = info.get("pg_config") or []
    ev = rt.events
    codes = rt.kind_codes()
    gpu = kind_mask(codes, GPU_KINDS)
    counts = np.bincount(codes, minlength=len(KINDS))
    settings = {
        k: v for k, v in top.items()
        if k not in ("traceEvents", "deviceProperties", "distributedInfo", "traceName")
        and not isinstance(v, (list, dict))
    }
    return {
        "rank": rank,
        "source": decoded.path,
        "file_bytes": decoded.file_bytes,
        "uncompressed_bytes": decoded.uncompressed_bytes,
        "world_size": _int_or_none(info.get("world_size")),
        "backend": info.get("backend"),
        "nccl_version": info.get("nccl_version"),
        "process_groups": pg_config if isinstance(pg_config, list) else [],
        "distributed_info": info,
        "device_properties": top.get("deviceProperties") or [],
        "schema_version": top.get("schemaVersion"),
        "base_time_ns": _int_or_none(top.get("baseTimeNanoseconds")),
        "trace_name": top.get("traceName"),
        "settings": settings,
        "trace_start_ns": int(ev["ts"].min()) if len(ev) else None,
        "trace_end_ns": int(ev["end"].max()) if len(ev) else None,
        "has_gpu_events": bool(gpu.any()),
        "event_kinds": {KINDS[c]: int(counts[c])  # most frequent first, as value_counts
                        for c in sorted(np.flatnonzero(counts), key=lambda c: -counts[c])},
        "named_ids": dict(decoded.named_ids),
        "warnings": warnings,
    }


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


__all__ = ["build_rank", "KINDS"]
