"""Decode one Kineto trace file into columnar tables.

A file in Kineto's layout is inflated and cut into pieces of whole events as it is read
(``stream.py``); each piece becomes columns (``native.py``, else ``pydecode.py``) before
the next is read. Other layouts are read whole (``rawio.py``, which repairs known writer
bugs). The modules: ``rawio`` (bytes), ``pydecode`` + ``side_tables`` (Python decoder),
``native`` (native scanner), ``columns`` and ``symbols`` (helpers).
"""

from __future__ import annotations

import gc
import logging
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import pandas as pd

from hta.errors import TraceLoadError
from hta.kineto import native
from hta.kineto.columns import (
    Table,
    _concat_tables,
    _frame,
    _mask,
    _table_len,
)
from hta.kineto.files import RemotePath, trace_location
from hta.kineto.heap import release_free_memory
from hta.kineto.pftrace import is_protobuf_file, to_kineto_json
from hta.kineto.pydecode import (
    _EVENT_COLUMNS,
    _TABLE_COLUMNS,
    Accumulator,
    _Partial,
)
from hta.kineto.rawio import (
    _DECODE_ERRORS,
    INFLATE_ERRORS,
    _repairs,
    _require_events,
    _top_level_values,
    parse_top_level,
    read_bytes,
    text_size,
)
from hta.kineto.stream import NotStreamable, iter_event_chunks, piece_bytes, read_ahead
from hta.kineto.symbols import SymbolTable

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

logger = logging.getLogger(__name__)

CHUNK_EVENTS = 16_384


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
    cupti_metrics: pd.DataFrame
    instants: pd.DataFrame
    flows: pd.DataFrame
    counters: pd.DataFrame
    metadata_events: pd.DataFrame
    top_level: dict[str, Any]
    file_bytes: int  # size of the file as stored (compressed), local or behind a URL
    uncompressed_bytes: int
    warnings: list[str]
    named_ids: dict[str, int]
    #: the decoders' counts: ``complete`` events kept, and of them ``missing_dur``,
    #: ``negative_dur``, ``long_dur``; events dropped (``missing_ts``, ``far_ts``) ...
    stats: dict[str, int] = field(default_factory=dict)


#: Columns holding symbol ids, and columns holding pid/tid values, per table.
_SYMBOL_COLUMNS = {"events": ("cat", "name"), "instants": ("name", "cat", "scope"),
                   "flows": ("ph", "cat", "name")}
_ID_COLUMNS = {"events": ("pid", "tid"), "instants": ("pid", "tid"), "flows": ("pid", "tid"),
               "metadata_events": ("pid", "tid"), "counters": ("pid", "tid")}
#: Below this much JSON text a file is decoded in one process (the Python decoder).
PARALLEL_MIN_TEXT_BYTES = 96 << 20
#: Below this much JSON text a file is scanned on one thread (the native scanner).
THREADED_MIN_TEXT_BYTES = 16 << 20


def _decode_items(items: list[msgspec.Raw], chunk_events: int,
                  acc: Accumulator | None = None) -> _Partial:
    acc = acc or Accumulator()
    for start in range(0, len(items), chunk_events):
        part = items[start:start + chunk_events]
        acc.decode_chunk(b"[" + b",".join(part) + b"]", part)
    return acc.partial()


def _decode_text(text: bytes) -> _Partial:
    """Worker side of a parallel decode: one JSON array of whole events."""
    gc.disable()
    acc = Accumulator()
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
                vals = np.asarray(frame_cols[col])
                out = vals.copy()
                for old, new in id_map.items():  # matched on the old values: no chaining
                    out[vals == old] = new
                frame_cols[col] = out


#: The counts each partial's ``stats`` holds (summed when partials are merged).
_COUNTED_STATS = ("missing_dur", "negative_dur", "long_dur", "missing_ts", "wide_ids",
                  "complete")


def _merge(parts: list[_Partial]) -> _Partial:
    """Concatenate partial results, unifying their symbol ids and named pid/tid ids."""
    if len(parts) == 1:
        return parts[0]
    symbols = SymbolTable()
    named: dict[str, int] = {}
    columns: dict[str, list[np.ndarray]] = {k: [] for k in _EVENT_COLUMNS}
    tables: dict[str, list[Table]] = {k: [] for k in _TABLE_COLUMNS}
    stats: dict[str, Any] = {key: 0 for key in _COUNTED_STATS}
    stats["other_phases"] = {}
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
        for key in _COUNTED_STATS:
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


#: Pieces (about 4 MiB of text each) decoded between two returns of freed memory to the
#: operating system (:func:`hta.kineto.heap.release_free_memory`, a few ms each).
TRIM_EVERY = 16


def can_fork() -> bool:
    """Whether worker processes can be forked (Linux): they then inherit the loaded
    modules, and no ``if __name__ == "__main__"`` guard is needed in user scripts."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods() and sys.platform == "linux"


def _decode_streaming(path: Path | RemotePath, workers: int, overlap: bool = False,
                      piece: int = 0) -> tuple[_Partial, dict[str, msgspec.Raw], int]:
    """Decode a file piece by piece (see :mod:`hta.kineto.stream`).

    With ``workers > 1`` and the native scanner, pieces are scanned on that many
    threads (:func:`_decode_threaded`). With ``workers > 1`` and the Python decoder,
    ``workers - 1`` forked processes decode pieces while this one inflates and splits
    the file and decodes every ``workers``-th piece itself (rather than wait); at most
    ``2 * workers`` pieces are in flight. Else, with ``overlap``, a thread inflates and
    cuts the next pieces while this one decodes (:func:`hta.kineto.stream.read_ahead`:
    two pieces ahead). Every path but the processes' cuts the file at the same places,
    so symbols and named ids are numbered alike. ``piece``: about how much text a piece
    holds (:func:`hta.kineto.stream.piece_bytes`).
    """
    if workers > 1 and native.available():
        return _decode_threaded(path, workers, piece)
    if workers <= 1 or not can_fork():
        acc = Accumulator()
        # Pieces are views of the inflated text (that stay valid when read ahead by a
        # thread), cut the same way for both decoders and every number of workers.
        chunks = (read_ahead(iter_event_chunks(path, bare=True, owned=True, piece_bytes=piece))
                  if overlap else iter_event_chunks(path, bare=True, piece_bytes=piece))
        for i, (kind, payload) in enumerate(chunks, start=1):
            if kind == "bare":
                acc.decode_bare(payload)
            elif kind == "events":
                acc.decode_chunk(payload)
            else:
                top, size = payload
            if i % TRIM_EVERY == 0:
                release_free_memory()  # keep the heap near what the columns hold
        part = acc.partial()
        del acc
        release_free_memory()
        return part, top, size
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    pieces = iter_event_chunks(path)
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


def _decode_threaded(path: Path | RemotePath, workers: int, piece: int = 0
                     ) -> tuple[_Partial, dict[str, msgspec.Raw], int]:
    """Decode a file's pieces on ``workers`` threads, added to the columns in file order.

    A thread inflates and cuts the file (:func:`~hta.kineto.stream.read_ahead`); the
    native scanner, which runs without the GIL, reads pieces on ``workers - 1`` pool
    threads and on this one; this thread adds each scanned piece in the order of the
    file, so symbols, ids and rows are those of a one-thread load (pool threads also
    make the chunk's sparse columns dense, work this thread would do). When the oldest
    piece is not scanned yet, this thread scans a piece no pool thread has started
    rather than wait. A piece the scanner declines is read by the Python decoder, as in
    a one-thread load. Memory: the columns, plus at most ``workers + 5`` pieces of text
    (4 or 16 MiB each) in flight: ``workers + 2`` handed to the scanner, two read
    ahead, one being cut.
    """
    from concurrent.futures import ThreadPoolExecutor

    acc = Accumulator()
    in_flight: deque[_Scan] = deque()
    added = 0

    def add_oldest() -> None:
        nonlocal added
        while not in_flight[0].done() and _scan_one_here(in_flight):
            pass
        oldest = in_flight.popleft()
        acc.add_scanned(oldest.result(), oldest.text, bare=oldest.bare)
        added += 1
        if added % TRIM_EVERY == 0:
            release_free_memory()

    pieces = read_ahead(iter_event_chunks(path, bare=True, owned=True, piece_bytes=piece),
                        depth=2)
    with ThreadPoolExecutor(max_workers=workers - 1, thread_name_prefix="hta-scan") as pool:
        for kind, payload in pieces:
            if kind == "top":
                top, size = payload
                continue
            in_flight.append(_Scan(pool, payload, kind == "bare"))
            if len(in_flight) > workers + 1:
                add_oldest()
        while in_flight:
            add_oldest()
    part = acc.partial()  # the accumulator is emptied of it
    release_free_memory()
    return part, top, size


class _Scan:
    """One piece of text handed to the scanner on a pool thread (or, when no pool
    thread has started it yet, scanned by whoever asks first)."""

    def __init__(self, pool: ThreadPoolExecutor, text: bytes | memoryview, bare: bool
                 ) -> None:
        self.text = text
        self.bare = bare
        self.future = pool.submit(native.scan_dense, text, bare)
        self.scanned: native.Chunk | None = None
        self.here = False

    def done(self) -> bool:
        return self.here or self.future.done()

    def take_over(self) -> bool:
        """Scan the piece in this thread if no pool thread has started it."""
        if self.here or not self.future.cancel():
            return False
        self.scanned = native.scan(self.text, self.bare)
        self.here = True
        return True

    def result(self) -> native.Chunk | None:
        return self.scanned if self.here else self.future.result()


def _scan_one_here(in_flight: deque[_Scan]) -> bool:
    """Scan, in this thread, the newest piece no pool thread has started; False: none."""
    return any(piece.take_over() for piece in reversed(in_flight))


def decode_trace(
    path: str | Path | RemotePath, chunk_events: int = CHUNK_EVENTS, workers: int = 1
) -> DecodedTrace:
    """Read one trace file into columns and side tables.

    ``path`` may be an fsspec URL or a :class:`~hta.kineto.files.RemotePath` (read
    through fsspec); local paths are read as plain files. With ``workers > 1`` a large
    file's events are decoded by that many processes. Raises :class:`TraceLoadError`
    naming the file when it cannot be read as a trace.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived containers: the cyclic GC only slows us down
    location = trace_location(path)
    try:
        if is_protobuf_file(location):
            return _decode_protobuf(location, chunk_events, workers)
        return _decode_trace(location, chunk_events, workers)
    except RecursionError as exc:
        raise TraceLoadError(
            location, "a value is nested deeper than the JSON decoder allows "
            "(arrays or objects within each other, thousands of levels deep)",
            "no profiler writes such a file; it was damaged or edited",
        ) from exc
    finally:
        if gc_was_enabled:
            gc.enable()


def _decode_protobuf(path: Path | RemotePath, chunk_events: int, workers: int = 1
                     ) -> DecodedTrace:
    """A Perfetto protobuf trace (:mod:`hta.kineto.pftrace`): turned into Kineto's JSON,
    decoded as JSON from a temporary file (on ``workers`` threads when it is large),
    reported under its own name."""
    import dataclasses
    import tempfile

    text, notes = to_kineto_json(path, read_bytes(path))
    with tempfile.TemporaryDirectory(prefix="hta-pftrace-") as folder:
        tmp = Path(folder) / "trace.json"
        tmp.write_bytes(text)
        del text
        decoded = _decode_trace(tmp, chunk_events, workers)
    return dataclasses.replace(decoded, path=str(path), file_bytes=_file_bytes(path),
                               warnings=notes + decoded.warnings)


def _streaming_workers(text: int, workers: int) -> int:
    """How many workers decode this file: threads for the native scanner when the file
    holds at least :data:`THREADED_MIN_TEXT_BYTES` of text, processes for the Python
    decoder from :data:`PARALLEL_MIN_TEXT_BYTES` (the native scanner decodes faster than
    processes can ship columns back), else one; ``text``: the file's bytes of text."""
    if workers <= 1:
        return 1
    least = THREADED_MIN_TEXT_BYTES if native.available() else PARALLEL_MIN_TEXT_BYTES
    return workers if text >= least else 1


def _decode_whole(path: Path | RemotePath, chunk_events: int
                  ) -> tuple[_Partial, dict[str, msgspec.Raw], int, list[str]]:
    """Decode a file held in memory at once (any JSON layout; repairs known bugs).

    Repairs are tried only when decoding fails, so a clean file is read once.
    """
    bom: list[str] = []
    data = read_bytes(path, bom)
    uncompressed = len(data)
    try:
        top, items, repairs = parse_top_level(path, data)
        repairs = bom + repairs
        events = _require_events(path, top, items)
        del data
        return _decode_items(events, chunk_events), top, uncompressed, repairs
    except _DECODE_ERRORS as first:
        error: Exception = first
    data = read_bytes(path)
    notes: list[str] = list(bom)
    for what, repaired in _repairs(data):
        notes.append(what)
        try:
            top, items, _ = parse_top_level(path, repaired)
            events = _require_events(path, top, items)
            return _decode_items(events, chunk_events), top, uncompressed, list(notes)
        except _DECODE_ERRORS as exc:
            error = exc
    raise TraceLoadError(path, f"invalid JSON inside traceEvents: {error}",
                         "a name may contain an unescaped quote, or the file was edited by hand"
                         ) from error


def _decode_trace(path: Path | RemotePath, chunk_events: int, workers: int) -> DecodedTrace:
    repairs: list[str] = []
    try:
        text = text_size(path)
        part, top, uncompressed = _decode_streaming(path, _streaming_workers(text, workers),
                                                    overlap=workers > 1,
                                                    piece=piece_bytes(text))
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
    part = _drop_far_events(part)
    warnings = [f"repaired: {r}" for r in repairs] + part.warnings + _stats_warnings(part)
    for w in warnings:
        logger.warning("%s: %s", path, w)
    symbols = SymbolTable()
    symbols.ids(part.symbols)
    tables = {name: _frame(name, table) for name, table in part.tables.items()}
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
        cupti_metrics=tables["cupti_metrics"],
        instants=tables["instants"],
        flows=tables["flows"],
        counters=tables["counters"],
        metadata_events=tables["metadata_events"],
        top_level=_top_level_values(path, top),
        file_bytes=_file_bytes(path),
        uncompressed_bytes=uncompressed,
        warnings=warnings,
        named_ids=part.named_ids,
        stats={k: v for k, v in part.stats.items() if k != "other_phases"},
    )


def _stats_warnings(part: _Partial) -> list[str]:
    """The warnings the decoders' counts call for, and those about a file that decodes
    but holds nothing to analyse (no complete events, no categories)."""
    stats = part.stats
    out: list[str] = []
    if stats["missing_dur"]:
        out.append(f"{stats['missing_dur']} complete event(s) had no 'dur'; taken as 0")
    if stats["negative_dur"]:
        out.append(f"{stats['negative_dur']} complete event(s) had a negative 'dur'; "
                   "clamped to 0")
    if stats["long_dur"]:
        out.append(f"{stats['long_dur']} complete event(s) had a 'dur' over one day or not "
                   "finite; taken as 0")
    if stats["missing_ts"]:
        out.append(f"{stats['missing_ts']} complete event(s) had no usable 'ts'; dropped")
    if stats.get("far_ts"):
        out.append(f"{stats['far_ts']} event(s) lay more than one day from the trace's "
                   "other events; dropped")
    if stats["wide_ids"]:
        out.append(f"{stats['wide_ids']} pid/tid value(s) beyond int64; each kept apart as "
                   "a named process or thread")
    if stats["other_phases"]:
        out.append(f"events of unsupported phases ignored: {stats['other_phases']}")
    n = len(part.columns["ts"])
    if n == 0:
        others = sum(_table_len(t) for t in part.tables.values()) + part.counter_count
        out.append("no complete ('X') events: the rank shows no activity" + (
            f" (the file has {others} other event(s): metadata, instants, flows, counters)"
            if others else " ('traceEvents' is empty)"))
    else:
        empty = part.symbols.index("") if "" in part.symbols else -1
        if empty >= 0 and bool((part.columns["cat"] == empty).all()):
            out.append("no complete event has a 'cat': none can be told apart (kernels, "
                       "operators, copies), every event counts as other")
        if empty >= 0 and bool((part.columns["name"] == empty).all()):
            out.append(f"none of its {n:,} complete events has a 'name': tables and figures "
                       "by operator or kernel show one unnamed row, and rules that look "
                       "for a name (steps, syncs, collectives) find nothing; the file was "
                       "written by a tool that drops names, or edited")
    return out


def require_durations(decoded: DecodedTrace) -> None:
    """Refuse a decoded file none of whose complete events has a usable duration: every
    figure of its rank would be zero (or a division by zero)."""
    stats = decoded.stats
    bad = stats["missing_dur"] + stats["negative_dur"] + stats["long_dur"]
    if stats["complete"] and bad >= stats["complete"]:
        raise TraceLoadError(
            decoded.path,
            f"none of its {stats['complete']} complete events has a usable 'dur' "
            f"({stats['missing_dur']} missing or not a number, {stats['negative_dur']} "
            f"negative, {stats['long_dur']} over one day or infinite)",
            "the file was written by a tool that does not record durations, or edited",
        )


#: Events further than this from the median start of a file's complete events are
#: dropped: no profiled run spans a day, and one such time would stretch every span.
MAX_SPREAD_NS = 86_400 * 10**9


def _drop_far_events(part: _Partial) -> _Partial:
    """``part`` without the complete events, instants, flows and counter samples whose
    time lies more than :data:`MAX_SPREAD_NS` from the median start of the complete
    events (their side-table rows go with them); ``stats["far_ts"]`` counts them."""
    ts = part.columns["ts"]
    part.stats["far_ts"] = 0
    if ts.size == 0:
        return part
    middle = int(np.median(ts))
    low, high = middle - MAX_SPREAD_NS, middle + MAX_SPREAD_NS
    keep = (ts >= low) & (ts <= high)
    far = int(ts.size - np.count_nonzero(keep))
    columns = part.columns
    new_row = None
    if far:
        columns = {k: v[keep] for k, v in columns.items()}
        new_row = np.cumsum(keep) - 1
        part.stats["complete"] -= far
    tables = dict(part.tables)
    for name, table in part.tables.items():
        if not _table_len(table):
            continue
        mask = None
        if new_row is not None and "row" in table:
            mask = keep[np.asarray(table["row"], dtype=np.int64)]
        if "ts" in table:
            t = np.asarray(table["ts"], dtype=np.int64)
            inside = (t >= low) & (t <= high)
            far += int(t.size - np.count_nonzero(inside))
            mask = inside if mask is None else mask & inside
        if mask is None or mask.all():
            if new_row is not None and "row" in table:
                tables[name] = {**table, "row": new_row[np.asarray(table["row"])]}
            continue
        kept = _mask(table, mask)
        if new_row is not None and "row" in kept:
            kept["row"] = new_row[np.asarray(kept["row"], dtype=np.int64)]
        tables[name] = kept
    part.stats["far_ts"] = far
    if not far:
        return part
    return _Partial(columns=columns, tables=tables, symbols=part.symbols,
                    named_ids=part.named_ids, counter_count=part.counter_count,
                    stats=part.stats, warnings=part.warnings)


def _file_bytes(path: Path | RemotePath) -> int:
    """The file's stored size (0 when it cannot be told any more)."""
    try:
        return int(path.stat().st_size)
    except OSError:
        return 0
