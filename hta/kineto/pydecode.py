"""Decoding events with the pure-Python decoder: msgspec structs to columns, chunk by chunk
(the native scanner, when built, takes the same chunks first: see ``native.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from hta.kineto import native
from hta.kineto.columns import (
    INT64_MAX,
    Table,
    _concat_tables,
    _mask,
    _table_len,
    durations_ns,
    float_column,
    int_column,
    timestamps_ns,
)
from hta.kineto.schema import DECODED_EVENT_COLUMNS, DECODED_TABLES, DTYPES, key_of
from hta.kineto.side_tables import (
    PROFILER_RANGE_CATEGORY,
    StructArgs,
    _counter_rows,
    _profiler_range_rows,
    phase_columns,
    side_tables,
)
from hta.kineto.structs import EMPTY_ARGS, PHASE_GROUP, Args, Event
from hta.kineto.symbols import SymbolTable

_event_list_decoder = msgspec.json.Decoder(list[Event])


def _ints(args: list[Args], field: str, warnings: list[str]) -> np.ndarray:
    """An int64 column of an ``Args`` field (warnings name its raw key)."""
    return int_column([getattr(a, field) for a in args], key_of(field), warnings)


_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])


class Accumulator:
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
        self.long_dur = 0
        self.missing_ts = 0
        self.wide_ids = 0  # pid/tid integers beyond int64, kept as names
        self.other_phases: dict[str, int] = {}
        self.named_ids: dict[str, int] = {}
        self.kernel_cats = {"kernel", "Kernel"}
        self.memory_cats = {"gpu_memcpy", "gpu_memset", "Memcpy", "Memset"}
        self.op_cats = {"cpu_op", "Operator", "user_annotation"}
        self.sync_cats = {"cuda_sync"}
        self.range_cats = {PROFILER_RANGE_CATEGORY}
        self.range_rows: list[np.ndarray] = []  # this chunk's CUPTI ranges (row ids)

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
            number = int(text, 0)
        except ValueError:
            number = None
        if number is not None:
            if -INT64_MAX <= number <= INT64_MAX:
                return number
            self.wide_ids += 1  # beyond int64: told apart by its text, as a name is
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
        """One side table's rows so far, as columns (taken out of the accumulator, so
        its pieces are freed as soon as they are joined)."""
        return _concat_tables(self.tables.pop(name, []), columns)

    def column(self, name: str, dtype: Any) -> np.ndarray:
        """One event column so far, taken out of the accumulator (see :meth:`table`)."""
        parts = self.cols.pop(name, None)
        if not parts:
            return np.zeros(0, dtype=dtype)
        return np.concatenate(parts).astype(dtype, copy=False)

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
        cat = self.symbols.ids([e.cat for e in events])
        args = [e.args for e in events]
        rows = self.add_complete(float_column([e.dur for e in events]), {
            "ts": ts,
            "cat": cat,
            "name": self.symbols.ids([e.name for e in events]),
            "external_id": _ints(args, "external_id", warnings),
            "external_id_legacy": _ints(args, "external_id_legacy", warnings),
            "pid": self.ids_column([e.pid for e in events]),
            "tid": self.ids_column([e.tid for e in events]),
            **{f: _ints(args, f, warnings) for f in ("correlation", "stream", "device",
                                                      "graph_id")},
        })
        side_tables(self, StructArgs(args, warnings), cat, rows)

    def add_complete(self, dur_us: np.ndarray, columns: dict[str, np.ndarray]) -> np.ndarray:
        """Add one chunk of complete events (both decoders): ``columns`` holds every event
        column but ``dur`` (in :data:`_EVENT_COLUMNS`), plus ``external_id_legacy``,
        used where ``external_id`` is absent. Returns the events' row ids."""
        dur, missing, negative, too_long = durations_ns(dur_us)
        self.missing_dur += missing
        self.negative_dur += negative
        self.long_dur += too_long
        legacy = columns.pop("external_id_legacy")
        columns["external_id"] = np.where(columns["external_id"] >= 0,
                                          columns["external_id"], legacy)
        columns["dur"] = dur
        for name, values in columns.items():
            self.add_col(name, values)
        rows = np.arange(dur.shape[0]) + self.row_offset
        self.row_offset += dur.shape[0]
        ranges = self._rows_for(self.range_cats, columns["cat"])
        if ranges.size:
            self.range_rows.append(rows[ranges])
        return rows

    def _rows_for(self, cats: set[str], cat_ids: np.ndarray) -> np.ndarray:
        wanted = [self.symbols.index[c] for c in cats if c in self.symbols.index]
        if not wanted:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(np.isin(cat_ids, wanted))

    # -- other phases ----------------------------------------------------------------
    def instants(self, events: list[Event]) -> None:
        ts, present = timestamps_ns([e.ts for e in events], self.warnings)
        self.add_table("instants", phase_columns("instants", _EventFields(self, events), ts),
                       present)

    def flows(self, events: list[Event]) -> None:
        ts, present = timestamps_ns([e.ts for e in events], self.warnings)
        self.add_table("flows", phase_columns("flows", _EventFields(self, events), ts),
                       present)

    def metadata(self, events: list[Event]) -> None:
        self.add_table("metadata_events",
                       phase_columns("metadata_events", _EventFields(self, events)))

    def decode_bare(self, text: memoryview) -> None:
        """Decode events separated by commas (no brackets): natively, else as an array."""
        self.add_scanned(native.scan(text, bare=True) if native.available() else None, text,
                         bare=True)

    def add_scanned(self, scanned: native.Chunk | None, text: bytes | memoryview,
                    bare: bool = False) -> None:
        """Add a JSON array of events (``bare``: events separated by commas) that
        :func:`hta.kineto.native.scan` already scanned, elsewhere (another thread);
        ``scanned`` None: the scanner declined it, so the Python decoder reads ``text``,
        exactly as :meth:`decode_chunk` and :meth:`decode_bare` would."""
        if scanned is not None:
            self._add_scanned(scanned, text, bare=bare)
        elif bare:
            self.decode_chunk(b"[" + bytes(text) + b"]", use_native=False)
        else:
            self.decode_chunk(text, use_native=False)

    def _add_scanned(self, scanned: native.Chunk, text: bytes | memoryview,
                     items: list[msgspec.Raw] | None = None, bare: bool = False) -> None:
        before = self.counter_count
        native.Builder(self, scanned).add()
        if self.counter_count > before or self.range_rows:
            if items is None:
                items = _raw_list_decoder.decode(b"[" + bytes(text) + b"]" if bare else text)
            self._reread(items, before)

    def _reread(self, items: list[msgspec.Raw], counters_before: int) -> None:
        """Tables read from a chunk's raw events after both decoders' pass: counter rows
        (when the chunk had ``C`` events) and CUPTI range metrics (when it had ranges)."""
        if self.counter_count > counters_before:
            _counter_rows(self, items)
        if self.range_rows:
            rows = np.concatenate(self.range_rows)
            self.range_rows = []
            _profiler_range_rows(self, items, rows)

    def decode_chunk(self, text: bytes | memoryview, items: list[msgspec.Raw] | None = None,
                     use_native: bool = True) -> None:
        """Decode a JSON array of events and add them (``items``: the same, pre-split)."""
        if use_native and native.available() and (scanned := native.scan(text)) is not None:
            self._add_scanned(scanned, text, items)
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
        if self.counter_count > before or self.range_rows:
            self._reread(items if items is not None else _raw_list_decoder.decode(text), before)

    def partial(self) -> _Partial:
        """Everything accumulated so far; the accumulator is emptied of it."""
        return _accumulator_partial(self)

    def chunk(self, events: list[Event]) -> None:
        by_phase: dict[str, list[Event]] = {}
        complete = [e for e in events if e.ph == "X"]
        if len(complete) != len(events):
            group = PHASE_GROUP.get
            for e in events:
                if e.ph != "X":
                    by_phase.setdefault(group(e.ph, e.ph), []).append(e)
        if complete:
            self.complete(complete)
        for ph, evs in by_phase.items():
            self.add_phase(ph, self, evs, len(evs))

    def add_phase(self, group: str, decoder: Any, events: Any, count: int) -> None:
        """Add the ``count`` events of one phase group (a :data:`PHASE_GROUP` value or
        another phase) through ``decoder``: this accumulator with structs, or the native
        builder with rows, so both decoders route phases alike."""
        if group == "i":
            decoder.instants(events)
        elif group == "s":
            decoder.flows(events)
        elif group == "M":
            decoder.metadata(events)
        elif group == "C":
            self.counter_count += count
        else:
            key = group or "<none>"
            self.other_phases[key] = self.other_phases.get(key, 0) + count


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


#: Decoded event columns and their dtypes, and each side table's columns (both decoders
#: write exactly these: see :mod:`hta.kineto.schema`).
_EVENT_COLUMNS = {c.name: DTYPES[c.dtype] for c in DECODED_EVENT_COLUMNS}
_TABLE_COLUMNS = {name: table.names for name, table in DECODED_TABLES.items()}


_EVENT_FIELDS = frozenset(Event.__struct_fields__)


class _EventFields:
    """:class:`~hta.kineto.side_tables.PhaseValues` of the Python decoder: decoded
    events, a field read from the event or, when the event has none, from its args."""

    def __init__(self, acc: Accumulator, events: list[Event]) -> None:
        self.acc = acc
        self.events = events

    def _values(self, field: str) -> list[Any]:
        if field in _EVENT_FIELDS:
            return [getattr(e, field) for e in self.events]
        return [getattr(e.args, field) for e in self.events]

    def symbols(self, field: str) -> np.ndarray:
        return self.acc.symbols.ids(self._values(field))

    def ids(self, field: str) -> np.ndarray:
        return self.acc.ids_column(self._values(field))

    def ints(self, field: str, label: str) -> np.ndarray:
        return int_column(self._values(field), label, self.acc.warnings)

    def floats(self, field: str) -> np.ndarray:
        return float_column(self._values(field))

    def texts(self, field: str) -> list[str]:
        return [str(v) for v in self._values(field)]


def _accumulator_partial(acc: Accumulator) -> _Partial:
    """The accumulated columns and tables as a :class:`_Partial`."""
    return _Partial(
        columns={k: acc.column(k, t) for k, t in _EVENT_COLUMNS.items()},
        tables={k: acc.table(k, cols) for k, cols in _TABLE_COLUMNS.items()},
        symbols=acc.symbols.strings,
        named_ids=acc.named_ids,
        counter_count=acc.counter_count,
        stats={"missing_dur": acc.missing_dur, "negative_dur": acc.negative_dur,
               "long_dur": acc.long_dur, "missing_ts": acc.missing_ts,
               "wide_ids": acc.wide_ids, "complete": acc.row_offset,
               "other_phases": acc.other_phases},
        warnings=acc.warnings,
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

    def pick(field: str, kinds: tuple[type, ...], default: Any) -> Any:
        key = key_of(field)
        if key not in fields:
            return default
        try:
            v = msgspec.json.decode(fields[key])
        except msgspec.DecodeError:
            return default
        return v if isinstance(v, kinds) and not isinstance(v, bool) else default

    args = EMPTY_ARGS
    if key_of("args") in fields:
        try:
            args = _args_decoder.decode(fields[key_of("args")])
        except (msgspec.ValidationError, msgspec.DecodeError):
            args = EMPTY_ARGS
    ts = fields.get(key_of("ts"), msgspec.Raw())
    if not isinstance(pick("ts", (int, float), None), (int, float)):
        ts = msgspec.Raw()  # keep the exact text of a numeric ts, drop anything else
    return Event(
        ph=pick("ph", (str,), ""), cat=pick("cat", (str,), ""),
        name=pick("name", (str, int, float), ""), pid=pick("pid", (int, str), -1),
        tid=pick("tid", (int, str), -1), ts=ts, dur=pick("dur", (int, float, str), None),
        id=pick("id", (int, str), -1), bp=pick("bp", (str,), ""), s=pick("s", (str,), ""),
        args=args,
    )
