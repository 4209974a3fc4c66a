"""The typed side tables of complete events (kernel, memory, collective, operator and
synchronisation args) and the counters table, from decoded structs (Python decoder)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from hta.loading.columns import _dims, float_column, int_column, raw_text, timestamps_ns
from hta.loading.structs import CounterEvent, Event

if TYPE_CHECKING:
    from hta.loading.events import _Accumulator

_counter_list_decoder = msgspec.json.Decoder(list[CounterEvent])


def side_tables(acc: _Accumulator, events: list[Event], args: list[Any], cat: np.ndarray,
                rows: np.ndarray) -> None:
    """Rows of the typed side tables (kernel, memory, copy size, collective, operator,
    synchronisation args) for one chunk of complete events; ``rows`` are their row ids."""
    warnings = acc.warnings
    sel = acc._rows_for(acc.kernel_cats, cat)
    if sel.size:
        a = [args[i] for i in sel]
        grid = _dims([x.grid for x in a])
        block = _dims([x.block for x in a])
        acc.add_table("kernel_args", {
            "row": rows[sel],
            "grid_x": grid[:, 0], "grid_y": grid[:, 1], "grid_z": grid[:, 2],
            "block_x": block[:, 0], "block_y": block[:, 1], "block_z": block[:, 2],
            "registers_per_thread": float_column([x.registers_per_thread for x in a]),
            "shared_memory_bytes": float_column([x.shared_memory for x in a]),
            "blocks_per_sm": float_column([x.blocks_per_sm for x in a]),
            "warps_per_sm": float_column([x.warps_per_sm for x in a]),
            "est_achieved_occupancy_pct": float_column([x.occupancy_pct for x in a]),
        })
    sizes = float_column([x.size for x in args])
    has_size = np.flatnonzero(~np.isnan(sizes))
    if has_size.size:
        acc.add_table("copy_sizes", {"row": rows[has_size], "size": sizes[has_size]})
    sel = acc._rows_for(acc.memory_cats, cat)
    if sel.size:
        a = [args[i] for i in sel]
        acc.add_table("memory_args", {
            "row": rows[sel],
            "bytes": float_column([x.nbytes for x in a]),
            "bandwidth_gbps": float_column([x.bandwidth_gbps for x in a]),
        })
    sel = np.flatnonzero([bool(x.collective_name) for x in args])
    if sel.size:
        a = [args[i] for i in sel]
        acc.add_table("collective_args", {
            "row": rows[sel],
            "collective_name": [str(x.collective_name) for x in a],
            "dtype": [str(x.dtype) for x in a],
            "in_msg_nelems": float_column([x.in_msg_nelems for x in a]),
            "out_msg_nelems": float_column([x.out_msg_nelems for x in a]),
            "group_size": float_column([x.group_size for x in a]),
            "process_group_name": [str(x.pg_name) for x in a],
            "process_group_desc": [str(x.pg_desc) for x in a],
            "process_group_ranks": raw_text([x.pg_ranks for x in a]),
            "seq": float_column([x.seq for x in a]),
        })
    sel = acc._rows_for(acc.op_cats, cat)
    if sel.size:
        a = [args[i] for i in sel]
        dims = [x.input_dims if len(x.input_dims) else x.input_dims_legacy for x in a]
        seq = int_column([x.sequence_number for x in a], "Sequence number", warnings)
        has = (np.fromiter(map(len, dims), dtype=np.int64, count=len(dims)) > 0) | (seq >= 0)
        if has.any():
            keep = np.flatnonzero(has)
            if keep.size != len(a):
                a = [a[i] for i in keep]
                dims = [dims[i] for i in keep]
            acc.add_table("op_args", {
                "row": rows[sel[keep]],
                "input_dims": raw_text(dims),
                "input_type": raw_text([x.input_type for x in a]),
                "concrete_inputs": raw_text([x.concrete_inputs for x in a]),
                "sequence_number": seq[keep],
                "fwd_thread_id": int_column(
                    [x.fwd_thread_id for x in a], "Fwd thread id", warnings),
            })
    sel = acc._rows_for(acc.sync_cats, cat)
    if sel.size:
        a = [args[i] for i in sel]
        acc.add_table("sync_args", {
            "row": rows[sel],
            "wait_on_stream": int_column([x.wait_on_stream for x in a], "wait_on_stream",
                                         warnings),
            "wait_on_event_correlation": int_column(
                [x.wait_on_event_corr for x in a], "wait_on_cuda_event_record_corr_id",
                warnings),
        })


COUNTER_COLUMNS = ("ts", "pid", "tid", "name", "series", "value")


def _counter_rows(acc: _Accumulator, items: list[msgspec.Raw]) -> None:
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
