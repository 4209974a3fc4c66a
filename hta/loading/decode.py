"""Decode one Kineto trace file into columnar tables.

The file is decompressed in one go, its top level split into raw JSON values, and
``traceEvents`` decoded in chunks straight into typed structs (see ``structs.py``).
Each chunk is turned into NumPy columns before the next one is decoded, so peak memory
is the file's text plus one chunk of structs plus the compact columns.
"""

from __future__ import annotations

import gc
import gzip
import logging
import math
import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from hta.loading import native
from hta.loading.errors import TraceLoadError
from hta.loading.files import RemotePath, trace_location
from hta.loading.stream import NotStreamable, iter_event_chunks
from hta.loading.structs import EMPTY_ARGS, Args, CounterEvent, Event
from hta.loading.timeparse import decimal_us_to_ns

logger = logging.getLogger(__name__)

CHUNK_EVENTS = 16_384
INT64_MAX = np.iinfo(np.int64).max

_event_list_decoder = msgspec.json.Decoder(list[Event])
_counter_list_decoder = msgspec.json.Decoder(list[CounterEvent])
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])

try:  # Intel ISA-L inflates gzip 2-3x faster than zlib when it is installed.
    from isal import igzip as _fast_gzip
    from isal import isal_zlib as _fast_gzip_zlib
except ImportError:  # pragma: no cover - optional dependency
    _fast_gzip = None
    _fast_gzip_zlib = None


@dataclass
class SymbolTable:
    """Interns strings into dense integer ids."""

    strings: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def ids(self, values: list[Any]) -> np.ndarray:
        """Return the id of each value, adding unseen ones."""
        index = self.index
        strings = self.strings
        for key in dict.fromkeys(values):
            if key not in index:
                text = key if isinstance(key, str) else ("" if key is None else str(key))
                if text not in index:
                    index[text] = len(strings)
                    strings.append(text)
                index[key] = index[text]
        return np.fromiter(map(index.__getitem__, values), dtype=np.int32, count=len(values))

    def id_of(self, value: str) -> int:
        """Return the id of one string, adding it when unseen."""
        return int(self.ids([value])[0])


@dataclass
class DecodedTrace:
    """Everything read from one file, before the trace model links it together."""

    path: str
    symbols: SymbolTable
    columns: dict[str, np.ndarray]
    kernel_args: pd.DataFrame
    memory_args: pd.DataFrame
    copy_sizes: pd.DataFrame
    collective_args: pd.DataFrame
    op_args: pd.DataFrame
    sync_args: pd.DataFrame
    instants: pd.DataFrame
    flows: pd.DataFrame
    counters: pd.DataFrame
    metadata_events: pd.DataFrame
    top_level: dict[str, Any]
    uncompressed_bytes: int
    warnings: list[str]
    named_ids: dict[str, int]


# ---------------------------------------------------------------------------------------
# reading bytes


INFLATE_ERRORS: tuple[type[BaseException], ...] = (EOFError, zlib.error) + (
    (_fast_gzip_zlib.error,) if _fast_gzip_zlib is not None else ()
)


def read_bytes(path: Path) -> bytes | bytearray:
    """Read a trace file, inflating gzip (detected by its magic bytes, not its name)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceLoadError(path, f"cannot read the file: {exc.strerror or exc}") from exc
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return _inflate(data)
    except (*INFLATE_ERRORS, ValueError) as exc:
        raise TraceLoadError(
            path,
            f"the gzip stream is truncated or corrupt ({exc})",
            "the profiler may have been killed while writing; collect the trace again",
        ) from exc


_INFLATE_STEP = 1 << 24


def _inflate(data: bytes) -> bytes | bytearray:
    """Inflate gzip into a buffer sized from the trailer, so the text is held once.

    Growing an output buffer while inflating costs about twice the text's size at its
    peak; the gzip trailer (ISIZE) gives the size up front for single-member files
    under 4 GiB. Anything else falls back to the library's one-shot inflate.
    """
    size = int.from_bytes(data[-4:], "little")
    zlib_mod = _fast_gzip_zlib if _fast_gzip_zlib is not None else zlib
    out = bytearray(size)
    view = memoryview(out)
    inflater = zlib_mod.decompressobj(31)
    pos = 0
    pending = data
    while True:
        chunk = inflater.decompress(pending, _INFLATE_STEP)
        if pos + len(chunk) > size:
            break  # larger than the trailer says (over 4 GiB or several members)
        view[pos:pos + len(chunk)] = chunk
        pos += len(chunk)
        pending = inflater.unconsumed_tail
        if inflater.eof or (not chunk and not pending):
            break
    view.release()
    if inflater.eof and pos == size and not inflater.unused_data:
        return out
    if not inflater.eof and pos < size and not pending:
        raise EOFError("compressed file ended before the end-of-stream marker was reached")
    del out
    return _fast_gzip.decompress(data) if _fast_gzip is not None else gzip.decompress(data)


_CONTROL = bytes(range(32))
_CONTROL_TO_SPACE = bytes.maketrans(_CONTROL, b" " * 32)
_BARE_NONFINITE = re.compile(rb"(?<=[:,\[\s])(-?Infinity|NaN)(?=[\s,\]}])")


def _repairs(data: bytes) -> list[tuple[str, bytes]]:
    """Cheap, safe rewrites of text that real writers produced but JSON forbids."""
    out: list[tuple[str, bytes]] = []
    text = data
    if any(c in text for c in (b"\x00", b"\x01", b"\x1b", b"\x7f")) or re.search(
        rb"[\x00-\x08\x0b\x0c\x0e-\x1f]", text
    ):
        text = text.translate(_CONTROL_TO_SPACE)
        out.append(("control characters replaced by spaces", text))
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        text = text.decode("utf-8", errors="replace").encode("utf-8")
        out.append(("invalid UTF-8 replaced by U+FFFD", text))
    if _BARE_NONFINITE.search(text):
        text = _BARE_NONFINITE.sub(b"null", text)
        out.append(("NaN/Infinity literals replaced by null", text))
    return out


def _position(data: bytes, exc: Exception) -> str:
    match = re.search(r"byte (\d+)", str(exc))
    if not match:
        return ""
    offset = int(match.group(1))
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f" at line {line}, column {col}"


def _split(data: bytes) -> tuple[dict[str, msgspec.Raw], list[msgspec.Raw] | None]:
    top = _top_decoder.decode(data)
    events = top.get("traceEvents")
    return top, (_raw_list_decoder.decode(events) if events is not None else None)


_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError)


def parse_top_level(
    path: Path, data: bytes
) -> tuple[dict[str, msgspec.Raw], list[msgspec.Raw] | None, list[str]]:
    """Split the file into its top-level keys and its raw events.

    Known writer bugs (control characters, invalid UTF-8, NaN literals) are repaired
    and reported; anything else raises :class:`TraceLoadError` with the position.
    """
    if not data.strip():
        raise TraceLoadError(path, "the file is empty (0 bytes)",
                             "the profiler may have failed before writing; collect it again")
    try:
        top, items = _split(data)
        return top, items, []
    except _DECODE_ERRORS as first:
        error: Exception = first
        notes: list[str] = []
        data_for_pos = data
        for what, repaired in _repairs(data):
            notes.append(what)
            data_for_pos = repaired
            try:
                top, items = _split(repaired)
                return top, items, notes
            except _DECODE_ERRORS as exc:
                error = exc
        if isinstance(error, msgspec.ValidationError):
            raise TraceLoadError(
                path,
                "the file is JSON but not a Kineto trace (its top level is not an object "
                "or 'traceEvents' is not a list)",
            ) from error
        truncated = not data.rstrip().endswith(b"}")
        hint = (
            "the file looks truncated; the profiler may have crashed while writing"
            if truncated
            else "a name may contain an unescaped quote, or the file was edited by hand"
        )
        raise TraceLoadError(
            path, f"invalid JSON{_position(data_for_pos, error)}: {error}", hint
        ) from error


# ---------------------------------------------------------------------------------------
# column helpers


def int_column(values: list[Any], name: str, warnings: list[str]) -> np.ndarray:
    """Integers (or numeric strings such as "0x1c") to int64; unusable values become -1."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.empty(len(values), dtype=np.int64)
    bad = 0
    for i, v in enumerate(values):
        if v is None:
            out[i] = -1
            continue
        try:
            if isinstance(v, str):
                v = int(v.strip(), 0)
            elif isinstance(v, float):
                v = int(v) if math.isfinite(v) else -1
            out[i] = v if -INT64_MAX <= v <= INT64_MAX else -1
            if not -INT64_MAX <= v <= INT64_MAX:
                bad += 1
        except (TypeError, ValueError):
            out[i] = -1
            bad += 1
    if bad:
        warnings.append(f"{bad} value(s) of '{name}' were not integers in int64 range")
    return out


def float_column(values: list[Any]) -> np.ndarray:
    """Numbers (or numeric strings) to float64; unusable values become NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            out[i] = np.nan
    return out


def raw_text(raws: list[msgspec.Raw]) -> list[str]:
    """Raw JSON values to their text ("" where absent), decoded in one C-level pass."""
    if not raws:
        return []
    text = b"\x00".join(raws).decode("utf-8", "replace")
    parts = text.split("\x00")
    if len(parts) != len(raws):  # a NUL inside a value: fall back to one at a time
        return [bytes(r).decode("utf-8", "replace") for r in raws]
    return parts


def _dims(values: list[tuple[Any, ...] | str]) -> np.ndarray:
    """``[x, y, z]`` arrays (grid, block) to an (n, 3) int64 array, -1 where absent."""
    fixed = [v if len(v) == 3 and not isinstance(v, str) else _dims3(v) for v in values]
    try:
        return np.array(fixed, dtype=np.int64).reshape(len(values), 3)
    except (TypeError, ValueError, OverflowError):
        return np.array([_dims3_int(v) for v in fixed], dtype=np.int64).reshape(len(values), 3)


def _dims3(value: tuple[Any, ...] | str) -> tuple[Any, ...]:
    if isinstance(value, str):
        return (-1, -1, -1)
    return (tuple(value) + (-1, -1, -1))[:3]


def _dims3_int(value: tuple[Any, ...]) -> tuple[int, int, int]:
    out = []
    for v in value:
        try:
            out.append(int(v, 0) if isinstance(v, str) else int(v))
        except (TypeError, ValueError):
            out.append(-1)
    return out[0], out[1], out[2]


def timestamps_ns(raws: list[msgspec.Raw], warnings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Raw ``ts`` values to int64 ns; returns (values, present mask)."""
    out = np.zeros(len(raws), dtype=np.int64)
    joined = b",".join(raws)
    if raws and b",," not in joined and joined[:1] != b"," and joined[-1:] != b",":
        present = np.ones(len(raws), dtype=bool)
        chosen = raws
    else:
        present = np.fromiter((len(r) > 0 for r in raws), dtype=bool, count=len(raws))
        chosen = [r for r, p in zip(raws, present) if p]
        joined = b",".join(chosen)
    if chosen:
        try:
            out[present] = decimal_us_to_ns(joined, len(chosen))
        except ValueError:
            vals = float_column([_safe_float(r) for r in chosen])
            ok = np.isfinite(vals)
            if not ok.all():
                warnings.append(f"{int((~ok).sum())} timestamp(s) were not numbers")
            present_idx = np.flatnonzero(present)
            present[present_idx[~ok]] = False
            out[present_idx[ok]] = np.rint(vals[ok] * 1000.0).astype(np.int64)
    return out, present


def _safe_float(raw: msgspec.Raw) -> float:
    try:
        value = msgspec.json.decode(raw)
        return float(value.strip()) if isinstance(value, str) else float(value)
    except (msgspec.DecodeError, TypeError, ValueError):
        return math.nan


# ---------------------------------------------------------------------------------------
# the per-chunk work


#: A side table while decoding: column name -> NumPy array or list (same length).
Table = dict[str, Any]


def _table_len(table: Table) -> int:
    return len(next(iter(table.values()))) if table else 0


def _mask(table: Table, keep: np.ndarray) -> Table:
    if keep.all():
        return table
    idx = np.flatnonzero(keep)
    return {c: (v[idx] if isinstance(v, np.ndarray) else [v[i] for i in idx])
            for c, v in table.items()}


def _concat_tables(parts: list[Table], columns: list[str]) -> Table:
    if not parts:
        return {c: [] for c in columns}
    out: Table = {}
    for col in parts[0]:
        values = [p[col] for p in parts]
        if isinstance(values[0], np.ndarray):
            out[col] = np.concatenate(values)
        else:
            out[col] = [x for v in values for x in v]
    return out


def _frame(table: Table) -> pd.DataFrame:
    """A finished side table as a DataFrame."""
    return pd.DataFrame(table)


#: Phases handled together, so each side table keeps the file's order.
_PHASE_GROUP = {"I": "i", "f": "s", "t": "s"}


class _Accumulator:
    """Collects per-chunk columns and side-table rows, then concatenates them."""

    def __init__(self) -> None:
        self.symbols = SymbolTable()
        self.warnings: list[str] = []
        self.cols: dict[str, list[np.ndarray]] = {}
        self.tables: dict[str, list[Table]] = {}
        self.row_offset = 0
        self.counter_count = 0
        self.missing_dur = 0
        self.negative_dur = 0
        self.missing_ts = 0
        self.other_phases: dict[str, int] = {}
        self.named_ids: dict[str, int] = {}
        self.kernel_cats = {"kernel", "Kernel"}
        self.memory_cats = {"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"}
        self.op_cats = {"cpu_op", "Operator", "user_annotation"}
        self.sync_cats = {"cuda_sync"}

    def ids_column(self, values: list[Any]) -> np.ndarray:
        """pid/tid values to int64; names such as "Spans" get stable negative ids."""
        try:
            return np.array(values, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            pass
        mapping = {v: self._id_of(v) for v in dict.fromkeys(values)}
        return np.fromiter(map(mapping.__getitem__, values), dtype=np.int64, count=len(values))

    def _id_of(self, value: Any) -> int:
        if isinstance(value, int) and -INT64_MAX <= value <= INT64_MAX:
            return value
        text = str(value).strip()
        try:
            return int(text, 0)
        except ValueError:
            pass
        sid = self.named_ids.get(text)
        if sid is None:
            sid = -2 - len(self.named_ids)
            self.named_ids[text] = sid
        return sid

    def add_col(self, name: str, values: np.ndarray) -> None:
        self.cols.setdefault(name, []).append(values)

    def add_table(self, name: str, table: Table, keep: np.ndarray | None = None) -> None:
        """Add rows to a side table (columns as arrays or lists), optionally masked."""
        if keep is not None:
            table = _mask(table, keep)
        if _table_len(table):
            self.tables.setdefault(name, []).append(table)

    def table(self, name: str, columns: list[str]) -> Table:
        """One side table's rows so far, as columns."""
        return _concat_tables(self.tables.get(name, []), columns)

    def column(self, name: str, dtype: Any) -> np.ndarray:
        parts = self.cols.get(name)
        if not parts:
            return np.zeros(0, dtype=dtype)
        return np.concatenate(parts)

    # -- complete events -------------------------------------------------------------
    def complete(self, events: list[Event]) -> None:
        warnings = self.warnings
        ts, present = timestamps_ns([e.ts for e in events], warnings)
        if not present.all():
            self.missing_ts += int((~present).sum())
            keep = np.flatnonzero(present)
            events = [events[i] for i in keep]
            ts = ts[keep]
        n = len(events)
        if n == 0:
            return
        dur_f = float_column([e.dur for e in events])
        missing = np.isnan(dur_f)
        if missing.any():
            self.missing_dur += int(missing.sum())
            dur_f[missing] = 0.0
        dur = np.rint(dur_f * 1000.0).astype(np.int64)
        negative = dur < 0
        if negative.any():
            self.negative_dur += int(negative.sum())
            dur[negative] = 0
        cat = self.symbols.ids([e.cat for e in events])
        name = self.symbols.ids([e.name for e in events])
        args = [e.args for e in events]
        ext = int_column([a.external_id for a in args], "External id", warnings)
        legacy = int_column([a.external_id_legacy for a in args], "external id", warnings)
        ext = np.where(ext >= 0, ext, legacy)
        self.add_col("ts", ts)
        self.add_col("dur", dur)
        self.add_col("cat", cat)
        self.add_col("name", name)
        self.add_col("pid", self.ids_column([e.pid for e in events]))
        self.add_col("tid", self.ids_column([e.tid for e in events]))
        self.add_col("correlation",
                     int_column([a.correlation for a in args], "correlation", warnings))
        self.add_col("external_id", ext)
        self.add_col("stream", int_column([a.stream for a in args], "stream", warnings))
        self.add_col("device", int_column([a.device for a in args], "device", warnings))
        self.add_col("graph_id", int_column([a.graph_id for a in args], "graph id", warnings))
        self._side_tables(events, args, cat, np.arange(n) + self.row_offset)
        self.row_offset += n

    def _rows_for(self, cats: set[str], cat_ids: np.ndarray) -> np.ndarray:
        wanted = [self.symbols.index[c] for c in cats if c in self.symbols.index]
        if not wanted:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(np.isin(cat_ids, wanted))

    def _side_tables(
        self, events: list[Event], args: list[Any], cat: np.ndarray, rows: np.ndarray
    ) -> None:
        warnings = self.warnings
        sel = self._rows_for(self.kernel_cats, cat)
        if sel.size:
            a = [args[i] for i in sel]
            grid = _dims([x.grid for x in a])
            block = _dims([x.block for x in a])
            self.add_table("kernel_args", {
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
            self.add_table("copy_sizes", {"row": rows[has_size], "size": sizes[has_size]})
        sel = self._rows_for(self.memory_cats, cat)
        if sel.size:
            a = [args[i] for i in sel]
            self.add_table("memory_args", {
                "row": rows[sel],
                "bytes": float_column([x.nbytes for x in a]),
                "bandwidth_gbps": float_column([x.bandwidth_gbps for x in a]),
            })
        sel = np.flatnonzero([bool(x.collective_name) for x in args])
        if sel.size:
            a = [args[i] for i in sel]
            self.add_table("collective_args", {
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
        sel = self._rows_for(self.op_cats, cat)
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
                self.add_table("op_args", {
                    "row": rows[sel[keep]],
                    "input_dims": raw_text(dims),
                    "input_type": raw_text([x.input_type for x in a]),
                    "sequence_number": seq[keep],
                    "fwd_thread_id": int_column(
                        [x.fwd_thread_id for x in a], "Fwd thread id", warnings),
                })
        sel = self._rows_for(self.sync_cats, cat)
        if sel.size:
            a = [args[i] for i in sel]
            self.add_table("sync_args", {
                "row": rows[sel],
                "wait_on_stream": int_column([x.wait_on_stream for x in a], "wait_on_stream",
                                             warnings),
                "wait_on_event_correlation": int_column(
                    [x.wait_on_event_corr for x in a], "wait_on_cuda_event_record_corr_id",
                    warnings),
            })

    # -- other phases ----------------------------------------------------------------
    def instants(self, events: list[Event]) -> None:
        ts, present = timestamps_ns([e.ts for e in events], self.warnings)
        args = [e.args for e in events]
        w = self.warnings
        self.add_table("instants", {
            "ts": ts,
            "name": self.symbols.ids([e.name for e in events]),
            "cat": self.symbols.ids([e.cat for e in events]),
            "pid": self.ids_column([e.pid for e in events]),
            "tid": self.ids_column([e.tid for e in events]),
            "scope": self.symbols.ids([e.s for e in events]),
            "addr": int_column([a.addr for a in args], "Addr", w),
            "bytes": float_column([a.mem_bytes for a in args]),
            "total_allocated": float_column([a.total_allocated for a in args]),
            "total_reserved": float_column([a.total_reserved for a in args]),
            "device_type": int_column([a.device_type for a in args], "Device Type", w),
            "device_id": int_column([a.device_id for a in args], "Device Id", w),
        }, present)

    def flows(self, events: list[Event]) -> None:
        ts, present = timestamps_ns([e.ts for e in events], self.warnings)
        self.add_table("flows", {
            "ph": self.symbols.ids([e.ph for e in events]),
            "id": int_column([e.id for e in events], "id", self.warnings),
            "ts": ts,
            "pid": self.ids_column([e.pid for e in events]),
            "tid": self.ids_column([e.tid for e in events]),
            "cat": self.symbols.ids([e.cat for e in events]),
            "name": self.symbols.ids([e.name for e in events]),
        }, present)

    def metadata(self, events: list[Event]) -> None:
        w = self.warnings
        self.add_table("metadata_events", {
            "name": [str(e.name) for e in events],
            "pid": self.ids_column([e.pid for e in events]),
            "tid": self.ids_column([e.tid for e in events]),
            "value": [str(e.args.meta_name) for e in events],
            "labels": [str(e.args.labels) for e in events],
            "sort_index": int_column([e.args.sort_index for e in events], "sort_index", w),
        })

    def decode_chunk(self, text: bytes | memoryview, items: list[msgspec.Raw] | None = None
                     ) -> None:
        """Decode a JSON array of events and add them (``items``: the same, pre-split)."""
        if native.available() and (scanned := native.scan(text)) is not None:
            before = self.counter_count
            native.Builder(self, scanned).add()
            del scanned
            if self.counter_count > before:
                _counter_rows(self, items if items is not None else _raw_list_decoder.decode(text))
            return
        try:
            events = _event_list_decoder.decode(text)
        except msgspec.ValidationError as exc:
            if items is None:
                items = _raw_list_decoder.decode(text)
            events = _decode_one_by_one(items, self.warnings, exc)
        before = self.counter_count
        self.chunk(events)
        del events
        if self.counter_count > before:
            _counter_rows(self, items if items is not None else _raw_list_decoder.decode(text))

    def partial(self) -> _Partial:
        """Everything accumulated so far."""
        return _accumulator_partial(self)

    def chunk(self, events: list[Event]) -> None:
        by_phase: dict[str, list[Event]] = {}
        complete = [e for e in events if e.ph == "X"]
        if len(complete) != len(events):
            group = _PHASE_GROUP.get
            for e in events:
                if e.ph != "X":
                    by_phase.setdefault(group(e.ph, e.ph), []).append(e)
        if complete:
            self.complete(complete)
        for ph, evs in by_phase.items():
            if ph == "i":
                self.instants(evs)
            elif ph == "s":
                self.flows(evs)
            elif ph == "M":
                self.metadata(evs)
            elif ph == "C":
                self.counter_count += len(evs)
            else:
                self.other_phases[ph or "<none>"] = (
                    self.other_phases.get(ph or "<none>", 0) + len(evs)
                )


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


def _top_level_values(path: Path, top: dict[str, msgspec.Raw]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in top.items():
        if key == "traceEvents":
            continue
        try:
            out[key] = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            logger.warning("%s: top-level key %r is not valid JSON; ignored", path, key)
    return out


@dataclass
class _Partial:
    """Columns and tables decoded from a contiguous range of events.

    Tables are plain columns (arrays or lists), not DataFrames: partials travel back from
    worker processes and are merged, and DataFrames are built once at the end.
    """

    columns: dict[str, np.ndarray]
    tables: dict[str, Table]
    symbols: list[str]
    named_ids: dict[str, int]
    counter_count: int
    stats: dict[str, Any]
    warnings: list[str]


_EVENT_COLUMNS = {
    "ts": np.int64, "dur": np.int64, "cat": np.int32, "name": np.int32, "pid": np.int64,
    "tid": np.int64, "correlation": np.int64, "external_id": np.int64, "stream": np.int64,
    "device": np.int64, "graph_id": np.int64,
}
_TABLE_COLUMNS = {
    "kernel_args": ["row"], "memory_args": ["row"], "collective_args": ["row"],
    "copy_sizes": ["row", "size"],
    "op_args": ["row"], "sync_args": ["row"],
    "instants": ["ts", "name", "cat", "pid", "tid"],
    "flows": ["ph", "id", "ts", "pid", "tid", "cat", "name"],
    "metadata_events": ["name", "pid", "tid", "value"],
    "counters": list(COUNTER_COLUMNS),
}
#: Columns holding symbol ids, and columns holding pid/tid values, per table.
_SYMBOL_COLUMNS = {"events": ("cat", "name"), "instants": ("name", "cat", "scope"),
                   "flows": ("ph", "cat", "name")}
_ID_COLUMNS = {"events": ("pid", "tid"), "instants": ("pid", "tid"), "flows": ("pid", "tid"),
               "metadata_events": ("pid", "tid"), "counters": ("pid", "tid")}
#: Below this much JSON text a file is decoded in one process.
PARALLEL_MIN_TEXT_BYTES = 96 << 20


def text_size(path: Path) -> int:
    """Bytes of JSON text in a file: its size, or for gzip the size in its trailer."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        if fh.read(2) != b"\x1f\x8b" or size < 18:
            return size
        fh.seek(-4, 2)
        return int.from_bytes(fh.read(4), "little")


def _decode_items(items: list[msgspec.Raw], chunk_events: int,
                  acc: _Accumulator | None = None) -> _Partial:
    acc = acc or _Accumulator()
    for start in range(0, len(items), chunk_events):
        part = items[start:start + chunk_events]
        acc.decode_chunk(b"[" + b",".join(part) + b"]", part)
    return acc.partial()


def _accumulator_partial(acc: _Accumulator) -> _Partial:
    """The accumulated columns and tables as a :class:`_Partial`."""
    return _Partial(
        columns={k: acc.column(k, t) for k, t in _EVENT_COLUMNS.items()},
        tables={k: acc.table(k, cols) for k, cols in _TABLE_COLUMNS.items()},
        symbols=acc.symbols.strings,
        named_ids=acc.named_ids,
        counter_count=acc.counter_count,
        stats={"missing_dur": acc.missing_dur, "negative_dur": acc.negative_dur,
               "missing_ts": acc.missing_ts, "other_phases": acc.other_phases},
        warnings=acc.warnings,
    )


def _decode_text(text: bytes) -> _Partial:
    """Worker side of a parallel decode: one JSON array of whole events."""
    gc.disable()
    acc = _Accumulator()
    acc.decode_chunk(text)
    return acc.partial()


def _remap(values: np.ndarray, mapping: np.ndarray) -> np.ndarray:
    return mapping[values].astype(values.dtype, copy=False)


def _fix_ids(frame_cols: dict[str, np.ndarray], which: str, sym_map: np.ndarray,
             id_map: dict[int, int]) -> None:
    """Rewrite a partial's symbol ids and named pid/tid ids into the merged ones."""
    for col in _SYMBOL_COLUMNS.get(which, ()):
        if col in frame_cols and len(frame_cols[col]):
            frame_cols[col] = _remap(np.asarray(frame_cols[col]), sym_map)
    if id_map:
        for col in _ID_COLUMNS.get(which, ()):
            if col in frame_cols and len(frame_cols[col]):
                vals = np.asarray(frame_cols[col]).copy()
                for old, new in id_map.items():
                    vals[vals == old] = new
                frame_cols[col] = vals


def _merge(parts: list[_Partial]) -> _Partial:
    """Concatenate partial results, unifying their symbol ids and named pid/tid ids."""
    if len(parts) == 1:
        return parts[0]
    symbols = SymbolTable()
    named: dict[str, int] = {}
    columns: dict[str, list[np.ndarray]] = {k: [] for k in _EVENT_COLUMNS}
    tables: dict[str, list[Table]] = {k: [] for k in _TABLE_COLUMNS}
    stats: dict[str, Any] = {"missing_dur": 0, "negative_dur": 0, "missing_ts": 0,
                             "other_phases": {}}
    warnings: list[str] = []
    counter_count = 0
    row_offset = 0
    for part in parts:
        sym_map = symbols.ids(part.symbols).astype(np.int64)
        id_map: dict[int, int] = {}
        for text, old in part.named_ids.items():
            if text not in named:
                named[text] = -2 - len(named)
            id_map[old] = named[text]

        cols = dict(part.columns)
        _fix_ids(cols, "events", sym_map, id_map)
        for k in _EVENT_COLUMNS:
            columns[k].append(cols[k])
        for name, table in part.tables.items():
            if not _table_len(table):
                continue
            data = dict(table)
            _fix_ids(data, name, sym_map, id_map)
            if "row" in data:
                data["row"] = np.asarray(data["row"]) + row_offset
            tables[name].append(data)
        row_offset += len(part.columns["ts"])
        counter_count += part.counter_count
        for key in ("missing_dur", "negative_dur", "missing_ts"):
            stats[key] += part.stats[key]
        for ph, n in part.stats["other_phases"].items():
            stats["other_phases"][ph] = stats["other_phases"].get(ph, 0) + n
        warnings.extend(w for w in part.warnings if w not in warnings)
    return _Partial(
        columns={k: np.concatenate(v) for k, v in columns.items()},
        tables={k: _concat_tables(v, _TABLE_COLUMNS[k]) for k, v in tables.items()},
        symbols=symbols.strings, named_ids=named, counter_count=counter_count,
        stats=stats, warnings=warnings,
    )


def can_fork() -> bool:
    """Whether worker processes can be forked (Linux): they then inherit the loaded
    modules, and no ``if __name__ == "__main__"`` guard is needed in user scripts."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods() and sys.platform == "linux"


def _decode_streaming(path: Path, workers: int) -> tuple[_Partial, dict[str, msgspec.Raw], int]:
    """Decode a file in Kineto's layout piece by piece (see :mod:`hta.loading.stream`).

    With ``workers > 1``, ``workers - 1`` forked processes decode pieces while this one
    inflates and splits the file and decodes every ``workers``-th piece itself (rather
    than wait); at most ``2 * workers`` pieces are in flight.
    """
    pieces = iter_event_chunks(path)
    if workers <= 1 or not can_fork():
        acc = _Accumulator()
        for kind, payload in pieces:
            if kind == "events":
                acc.decode_chunk(payload)
            else:
                top, size = payload
        return acc.partial(), top, size
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork")
    results: list[Future | _Partial] = []
    with ProcessPoolExecutor(max_workers=workers - 1, mp_context=ctx) as pool:
        for i, (kind, payload) in enumerate(pieces):
            if kind != "events":
                top, size = payload
            elif i % workers == workers - 1:
                results.append(_decode_text(payload))
            else:
                pending = [f for f in results if isinstance(f, Future) and not f.done()]
                if len(pending) >= 2 * workers:
                    pending[0].result()
                results.append(pool.submit(_decode_text, payload))
        parts = [r.result() if isinstance(r, Future) else r for r in results]
    return _merge(parts), top, size


def decode_trace(
    path: str | Path | RemotePath, chunk_events: int = CHUNK_EVENTS, workers: int = 1
) -> DecodedTrace:
    """Read one trace file into columns and side tables.

    ``path`` may be an fsspec URL or a :class:`~hta.loading.files.RemotePath` (read
    through fsspec); local paths are read as plain files. With ``workers > 1`` a large
    file's events are decoded by that many processes. Raises :class:`TraceLoadError`
    naming the file when it cannot be read as a trace.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived containers: the cyclic GC only slows us down
    try:
        return _decode_trace(trace_location(path), chunk_events, workers)
    finally:
        if gc_was_enabled:
            gc.enable()


def _decode_whole(path: Path, chunk_events: int
                  ) -> tuple[_Partial, dict[str, msgspec.Raw], int, list[str]]:
    """Decode a file held in memory at once (any JSON layout; repairs known bugs).

    Repairs are tried only when decoding fails, so a clean file is read once.
    """
    data = read_bytes(path)
    uncompressed = len(data)
    try:
        top, items, repairs = parse_top_level(path, data)
        _require_events(path, top, items)
        del data
        return _decode_items(items, chunk_events), top, uncompressed, repairs
    except _DECODE_ERRORS as first:
        error: Exception = first
    data = read_bytes(path)
    notes: list[str] = []
    for what, repaired in _repairs(data):
        notes.append(what)
        try:
            top, items, _ = parse_top_level(path, repaired)
            _require_events(path, top, items)
            return _decode_items(items, chunk_events), top, uncompressed, list(notes)
        except _DECODE_ERRORS as exc:
            error = exc
    raise TraceLoadError(path, f"invalid JSON inside traceEvents: {error}",
                         "a name may contain an unescaped quote, or the file was edited by hand"
                         ) from error


def _require_events(path: Path, top: dict[str, msgspec.Raw],
                    items: list[msgspec.Raw] | None) -> None:
    if items is None:
        keys = ", ".join(sorted(top)[:6]) or "none"
        raise TraceLoadError(
            path,
            f"the file is JSON but not a Kineto trace: no 'traceEvents' (top-level keys: {keys})",
            "point hta at the profiler's .json or .json.gz output",
        )


def _decode_trace(path: Path, chunk_events: int, workers: int) -> DecodedTrace:
    repairs: list[str] = []
    try:
        # The native scanner decodes faster than worker processes can ship columns back.
        streaming_workers = workers if (text_size(path) >= PARALLEL_MIN_TEXT_BYTES
                                        and not native.available()) else 1
        part, top, uncompressed = _decode_streaming(path, streaming_workers)
    except (NotStreamable, msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError,
            KeyError):
        part, top, uncompressed, repairs = _decode_whole(path, chunk_events)
    except FileNotFoundError as exc:
        raise TraceLoadError(path, "the file does not exist (was it moved?)") from exc
    except PermissionError as exc:
        raise TraceLoadError(path, "permission denied: the file cannot be read") from exc
    except INFLATE_ERRORS as exc:
        raise TraceLoadError(
            path,
            f"the gzip stream is truncated or corrupt ({exc})",
            "the profiler may have been killed while writing; collect the trace again",
        ) from exc
    warnings = [f"repaired: {r}" for r in repairs] + part.warnings
    stats = part.stats
    if stats["missing_dur"]:
        warnings.append(f"{stats['missing_dur']} complete event(s) had no 'dur'; taken as 0")
    if stats["negative_dur"]:
        warnings.append(f"{stats['negative_dur']} complete event(s) had a negative 'dur'; "
                        "clamped to 0")
    if stats["missing_ts"]:
        warnings.append(f"{stats['missing_ts']} complete event(s) had no usable 'ts'; dropped")
    if stats["other_phases"]:
        warnings.append(f"events of unsupported phases ignored: {stats['other_phases']}")
    for w in warnings:
        logger.warning("%s: %s", path, w)
    symbols = SymbolTable()
    symbols.ids(part.symbols)
    tables = {name: _frame(table) for name, table in part.tables.items()}
    return DecodedTrace(
        path=str(path),
        symbols=symbols,
        columns=part.columns,
        kernel_args=tables["kernel_args"],
        memory_args=tables["memory_args"],
        copy_sizes=tables["copy_sizes"],
        collective_args=tables["collective_args"],
        op_args=tables["op_args"],
        sync_args=tables["sync_args"],
        instants=tables["instants"],
        flows=tables["flows"],
        counters=tables["counters"],
        metadata_events=tables["metadata_events"],
        top_level=_top_level_values(path, top),
        uncompressed_bytes=uncompressed,
        warnings=warnings,
        named_ids=part.named_ids,
    )


def _decode_one_by_one(
    part: list[msgspec.Raw], warnings: list[str], first_error: Exception
) -> list[Event]:
    """Slow path for a chunk holding an event of an unexpected shape.

    Each event is decoded on its own; one that does not fit :class:`Event` is decoded
    loosely and keeps its core fields (its args too when they fit), so one odd value
    never costs the event.
    """
    decoder = msgspec.json.Decoder(Event)
    out: list[Event] = []
    loose = 0
    skipped = 0
    for raw in part:
        try:
            out.append(decoder.decode(raw))
            continue
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        event = _loose_event(raw)
        if event is None:
            skipped += 1
        else:
            loose += 1
            out.append(event)
    if loose:
        warnings.append(f"{loose} event(s) had a field of an unexpected type; read loosely "
                        f"({first_error})")
    if skipped:
        warnings.append(f"{skipped} event(s) that are not JSON objects skipped")
    return out


_args_decoder = msgspec.json.Decoder(Args)


def _loose_event(raw: msgspec.Raw) -> Event | None:
    """An event whose fields have unexpected types, keeping what can be kept."""
    try:
        fields = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None

    def pick(key: str, kinds: tuple[type, ...], default: Any) -> Any:
        if key not in fields:
            return default
        try:
            v = msgspec.json.decode(fields[key])
        except msgspec.DecodeError:
            return default
        return v if isinstance(v, kinds) and not isinstance(v, bool) else default

    args = EMPTY_ARGS
    if "args" in fields:
        try:
            args = _args_decoder.decode(fields["args"])
        except (msgspec.ValidationError, msgspec.DecodeError):
            args = EMPTY_ARGS
    ts = fields.get("ts", msgspec.Raw())
    if not isinstance(pick("ts", (int, float), None), (int, float)):
        ts = msgspec.Raw()  # keep the exact text of a numeric ts, drop anything else
    return Event(
        ph=pick("ph", (str,), ""), cat=pick("cat", (str,), ""),
        name=pick("name", (str, int, float), ""), pid=pick("pid", (int, str), -1),
        tid=pick("tid", (int, str), -1), ts=ts, dur=pick("dur", (int, float, str), None),
        id=pick("id", (int, str), -1), bp=pick("bp", (str,), ""), s=pick("s", (str,), ""),
        args=args,
    )
