"""Tables as uncompressed Arrow IPC files, and reading them back without decoding.

:func:`map_columns` gives the columns of a file as NumPy arrays that *are* the file's
pages: the file is memory-mapped copy-on-write (``MAP_PRIVATE``), so opening costs no
copy, only the pages an analysis touches are ever read from disk or the page cache, and
the arrays stay writable (a write lands in a private copy of its page; the file never
changes). Each mapping holds one file descriptor until its arrays are freed; past
:data:`MAX_MAPPED` live mappings in one process, columns are copied instead.

:class:`ArrowTables` holds a rank's (small, possibly string-holding) side tables as
Arrow tables and converts each to pandas on first use, through Arrow's pandas
conversion, which restores the dtypes recorded when it was written.
"""

from __future__ import annotations

import functools
import json
import mmap
import threading
import weakref
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

#: Live copy-on-write mappings allowed in one process before columns are copied instead
#: (each holds a file descriptor).
MAX_MAPPED = 512

_live: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()


def write_table(table: pa.Table, path: Path) -> None:
    """Write ``table`` as one uncompressed Arrow IPC file (one record batch per chunk)."""
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def read_column(path: Path, name: str) -> list[Any]:
    """One column of a file as a Python list (the symbol table)."""
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all().column(name).to_pylist()


def map_columns(path: Path) -> dict[str, np.ndarray]:
    """Every column of a file as a writable NumPy array over a copy-on-write mapping.

    Fixed-width numeric columns without nulls are views of the mapping; any other column
    (booleans, strings, columns with nulls) is converted by Arrow, as are all columns
    when :data:`MAX_MAPPED` mappings are already alive.
    """
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        if size == 0:
            raise pa.ArrowInvalid(f"{path} is empty")
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
    buffer = pa.py_buffer(mapped)
    table = pa.ipc.open_file(buffer).read_all()
    share = len(_live) < MAX_MAPPED
    columns: dict[str, np.ndarray] = {}
    viewed = False
    for name, column in zip(table.column_names, table.columns):
        view = _view(mapped, buffer, column) if share else None
        viewed |= view is not None
        columns[name] = view if view is not None else column.to_numpy()
    if viewed:
        _live.add(mapped)
    del table, buffer
    return columns


def _view(mapped: mmap.mmap, buffer: pa.Buffer, column: pa.ChunkedArray) -> np.ndarray | None:
    """The column as a view of the mapping, or None when it is not a plain numeric one."""
    if column.num_chunks != 1:
        return None
    array = column.chunk(0)
    kind = array.type
    if array.null_count or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return None
    dtype = np.dtype(kind.to_pandas_dtype())
    data = array.buffers()[1]
    if data is None:
        return np.empty(0, dtype=dtype) if len(array) == 0 else None
    offset = data.address - buffer.address + array.offset * dtype.itemsize
    if offset < 0 or offset + len(array) * dtype.itemsize > buffer.size:
        return None
    return np.frombuffer(mapped, dtype=dtype, count=len(array), offset=offset)


def read_table(path: Path) -> pa.Table:
    """A whole file as an Arrow table over a read-only mapping of it (read into memory
    instead past :data:`MAX_MAPPED` live mappings). Convert it to pandas before changing
    anything: the conversion copies."""
    if len(_live) >= MAX_MAPPED:
        return pa.ipc.open_file(pa.py_buffer(path.read_bytes())).read_all()
    with open(path, "rb") as fh:
        if fh.seek(0, 2) == 0:
            raise pa.ArrowInvalid(f"{path} is empty")
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    _live.add(mapped)
    return pa.ipc.open_file(pa.py_buffer(mapped)).read_all()


#: Columns (pandas type, NumPy type) that Arrow's plain conversion gives back as they were
#: written: numbers, booleans and (pandas 3) strings.
_PLAIN_COLUMNS = frozenset(
    [(t, t) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                      "uint32", "uint64", "float32", "float64")] + [("object", "str")])


def to_frame(table: pa.Table) -> pd.DataFrame:
    """``table`` as pandas, with the dtypes and index recorded when it was written. A
    table whose record holds nothing the plain conversion would not give (a default
    index, columns of numbers, booleans or strings: every side table this package
    writes) skips reading that record, a third of the conversion of a small table, and
    is made column by column (:func:`_plain_frame`) where it can be."""
    meta = table.schema.metadata
    plain = _plain(meta.get(b"pandas") if meta else None)
    frame = _plain_frame(table) if plain else None
    return frame if frame is not None else table.to_pandas(ignore_metadata=plain)


def _plain_frame(table: pa.Table) -> pd.DataFrame | None:
    """What Arrow's plain conversion gives for ``table``, made from its columns: floats,
    and integers and booleans without missing values, as NumPy arrays, strings as pandas' own
    Arrow-backed strings (where those are pandas' default string type, pandas 3), in one
    ``DataFrame`` call (half the time of the conversion on a side table of a few hundred
    rows, most of its cost being per table). None where a column is of another kind
    (the caller converts it through Arrow)."""
    string_type = _arrow_strings()
    columns: dict[str, Any] = {}
    for name, column in zip(table.column_names, table.columns):
        kind = column.type
        if pa.types.is_floating(kind) or ((pa.types.is_integer(kind) or pa.types.is_boolean(
                kind)) and not column.null_count):
            columns[name] = column.to_numpy()  # a missing float is NaN, as Arrow gives it
        elif string_type is not None and (pa.types.is_string(kind)
                                          or pa.types.is_large_string(kind)):
            columns[name] = pd.arrays.ArrowStringArray(column, dtype=string_type)
        else:
            return None
    # repeated names would be lost in the dict; no columns would lose the row count
    return pd.DataFrame(columns) if 0 < len(columns) == table.num_columns else None


@functools.cache
def _arrow_strings() -> pd.StringDtype | None:
    """The string dtype Arrow's conversion gives text columns, where it is pandas'
    Arrow-backed one (pandas 3); None otherwise (pandas 2 gives Python objects)."""
    dtype = pa.table({"s": pa.array(["x"], type=pa.large_string())}).to_pandas()["s"].dtype
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        return dtype
    return None


@functools.lru_cache(maxsize=256)
def _plain(record: bytes | None) -> bool:
    """Whether a table's pandas record (JSON) restores nothing beyond Arrow's plain
    conversion (see :func:`to_frame`)."""
    if record is None:
        return False
    try:
        meta = json.loads(record)
        return meta.get("index_columns") == [] and meta.get("column_indexes") == [] \
            and not meta.get("attributes") and all(
                c.get("metadata") is None and c.get("name") == c.get("field_name")
                and (c.get("pandas_type"), c.get("numpy_type")) in _PLAIN_COLUMNS
                for c in meta.get("columns", ()))
    except (ValueError, TypeError, AttributeError):
        return False


class ArrowTables(MutableMapping[str, pd.DataFrame]):
    """Side tables of a reopened rank: held as Arrow tables, each converted to a pandas
    DataFrame (with the dtypes it was written with) the first time it is looked up.

    Behaves as the plain ``dict`` of DataFrames it stands for; pickled, it becomes one.
    """

    def __init__(self, raw: Mapping[str, pa.Table],
                 frames: Mapping[str, pd.DataFrame] | None = None) -> None:
        self._order = list(raw) + [k for k in (frames or {}) if k not in raw]
        self._raw = dict(raw)
        self._frames = dict(frames or {})
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> pd.DataFrame:
        frame = self._frames.get(name)
        if frame is not None:
            return frame
        with self._lock:
            if name not in self._frames:
                raw = self._raw.get(name)
                if raw is None:
                    raise KeyError(name)
                self._frames[name] = to_frame(raw)
                del self._raw[name]
            return self._frames[name]

    def __setitem__(self, name: str, frame: pd.DataFrame) -> None:
        with self._lock:
            self._raw.pop(name, None)
            self._frames[name] = frame
            if name not in self._order:
                self._order.append(name)

    def __delitem__(self, name: str) -> None:
        with self._lock:
            if name not in self._order:
                raise KeyError(name)
            self._raw.pop(name, None)
            self._frames.pop(name, None)
            self._order.remove(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._order

    def copy(self) -> ArrowTables:
        """A mapping that may be changed without touching this one (tables are shared)."""
        with self._lock:
            return ArrowTables({k: self._raw[k] for k in self._order if k in self._raw},
                               {k: self._frames[k] for k in self._order if k in self._frames})

    def __reduce__(self) -> tuple[type, tuple[dict[str, pd.DataFrame]]]:
        return (dict, (dict(self.items()),))

    def __repr__(self) -> str:
        return f"ArrowTables({self._order})"
