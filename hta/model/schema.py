"""The columns of a loaded rank: its events table and each side table, with dtype, unit
and meaning: one table (data) that the decoders, the model, the cache and the docs read.

The decoded part lives in :mod:`hta.kineto.schema`, because the file format sits below
the model and must not import it (the layer contract in ``pyproject.toml``); this module
builds the loaded rank's schema from it by adding what the model computes: the events'
``index``, ``end``, ``kind``, ``iteration`` and row links, and ``index`` (the event's row
after sorting) in place of the decoders' ``row`` in the arg tables. ``copy_sizes`` is
decoded but not kept: building folds it into ``memory_args.bytes``.

``python3 -m hta.model.schema`` rewrites the column reference of ``docs/loading.md``
(sections 4 and 5) from it, with the raw Kineto key each column is read from
(:attr:`hta.kineto.schema.Column.source`, :data:`hta.kineto.schema.RAW_KEYS`); a test
checks that the page holds exactly that text, and that a loaded rank's tables have
exactly these columns and dtypes, with both decoders.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pandas as pd

from hta.kineto.schema import (
    DECODED_ARG_TABLES,
    DECODED_EVENT_COLUMNS,
    DTYPES,
    EVENT_TABLES,
    SYMBOL_ID,
    Column,
    Table,
)
from hta.model.rules import KINDS

_INDEX = Column("index", "int64", "", "row of the event in `events`")


#: Decoded columns the events table keeps narrower than decoded: small ids (a GPU's
#: index, a CUDA graph's id). A value outside their range (none seen in real traces)
#: becomes -1, with a load warning naming the column and the value.
NARROWED: dict[str, str] = {"device": "int32", "graph_id": "int32"}
#: Deepest call stack ``depth`` holds (int16); deeper events keep this depth.
MAX_DEPTH = int(np.iinfo(np.int16).max)

#: The events table of a rank (``RankTrace.events``), in column order.
EVENT_COLUMNS: tuple[Column, ...] = (
    Column("index", "int32", "", "the row number (0 .. n-1); side tables and links refer "
           "to it"),
    *(replace(c, dtype=NARROWED[c.name], meaning=f"{c.meaning} (and for a value outside "
              f"{NARROWED[c.name]}, with a load warning)") if c.name in NARROWED else c
      for c in DECODED_EVENT_COLUMNS),
    Column("end", "int64", "ns", "`ts + dur`"),
    Column("kind", "category", "", "one of the event kinds (`hta.model.rules.KINDS`)"),
    Column("iteration", "int32", "", "`ProfilerStep` number, -1 outside every step, 0 when "
           "there are no steps"),
    Column("parent", "int32", "", "row of the enclosing event on the same CPU thread, -1 for "
           "roots and non-CPU rows"),
    Column("depth", "int16", "", "call-stack depth: 0 for roots, -1 for non-CPU rows "
           "(at most 32,767)"),
    Column("index_correlation", "int32", "", "GPU row -> row of its runtime call; runtime "
           "call -> row of its first GPU event; -1 unlinked"),
    Column("op_index", "int32", "", "row of the innermost `cpu_op` around the launch (GPU "
           "rows: their launch's), -1 none"),
)

#: Side tables keyed by ``index`` (the row of the event they describe), sorted by it.
ARG_TABLES: dict[str, Table] = {
    name: Table(t.row, (_INDEX, *(c for c in t.columns if c.name != "row")))
    for name, t in DECODED_ARG_TABLES.items()
}
#: Every side table of a rank (``RankTrace.tables``), by name.
TABLES: dict[str, Table] = {**ARG_TABLES, **EVENT_TABLES}
#: Event columns holding row numbers of other events (-1: no link).
LINK_COLUMNS = ("parent", "index_correlation", "op_index")
#: Columns holding ids into the symbol table: the events' and each side table's.
SYMBOL_COLUMNS: dict[str, tuple[str, ...]] = {
    name: tuple(c.name for c in t.columns if c.unit == SYMBOL_ID) for name, t in TABLES.items()
    if any(c.unit == SYMBOL_ID for c in t.columns)
}

KIND_DTYPE = pd.CategoricalDtype(list(KINDS))
#: NumPy dtype of each numeric events column. Row numbers, links and step numbers are
#: int32 (a rank holds fewer than 2**31 events, and 4 bytes a column and event matter on
#: ranks of millions of events), the call depth int16; decoded ids stay int64 as written
#: (a stream of 4294967295 is in real traces), but for :data:`NARROWED`.
EVENT_DTYPES: dict[str, np.dtype] = {c.name: DTYPES[c.dtype] for c in EVENT_COLUMNS
                                     if c.dtype in ("int64", "int32", "int16", "float64")}


def schema_key() -> str:
    """A short hash of every table's column names and dtypes: part of the cache key, so
    a change of the schema never reads an entry written under another."""
    text = repr([(c.name, c.dtype) for c in EVENT_COLUMNS]) + repr(
        {name: [(c.name, c.dtype) for c in t.columns] for name, t in TABLES.items()})
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def dtype_of(column: Column) -> np.dtype | pd.api.extensions.ExtensionDtype:
    """The column's dtype as the loaded table has it."""
    return KIND_DTYPE if column.dtype == "category" else DTYPES[column.dtype]


def check_frame(frame: pd.DataFrame, columns: tuple[Column, ...], what: str) -> list[str]:
    """Where ``frame`` departs from ``columns`` (names, order, dtypes); empty when it
    matches exactly."""
    problems = []
    names = [c.name for c in columns]
    if list(frame.columns) != names:
        problems.append(f"{what}: columns {list(frame.columns)}, schema {names}")
    for c in columns:
        if c.name in frame and frame[c.name].dtype != dtype_of(c):
            problems.append(f"{what}.{c.name}: dtype {frame[c.name].dtype}, schema "
                            f"{dtype_of(c)}")
    return problems


def _read_from(column: Column) -> str:
    """The raw keys a column is read from, for the docs (first present wins)."""
    return ", else ".join(f"`{key}`" for key in column.raw_keys)


def _table_md(columns: tuple[Column, ...]) -> list[str]:
    lines = ["| column | dtype | unit | read from | meaning |", "|---|---|---|---|---|"]
    lines += [f"| `{c.name}` | {c.dtype} | {c.unit} | {_read_from(c)} | {c.meaning} |"
              for c in columns]
    return lines


def markdown(part: str) -> str:
    """A generated part of the column reference in ``docs/loading.md``: ``"events"`` (the
    events table) or ``"tables"`` (every side table)."""
    if part == "events":
        return "\n".join(_table_md(EVENT_COLUMNS)) + "\n"
    out: list[str] = []
    for title, tables in (("Arg tables (keyed by `index`, sorted by it)", ARG_TABLES),
                          ("Event tables (the events that are not complete events, in file "
                           "order)", EVENT_TABLES)):
        out += [f"### {title}", ""]
        for name, t in tables.items():
            out += [f"`{name}`: one row per {t.row}.", "", *_table_md(t.columns), ""]
    return "\n".join(out).rstrip() + "\n"


#: Marks around the generated parts of a page: ``<!-- schema:events -->`` ... ``<!-- /schema -->``.
BEGIN, END = "<!-- schema:{} (generated by python3 -m hta.model.schema) -->", "<!-- /schema -->"


def generated_parts(page: str) -> dict[str, str]:
    """The generated parts a page holds, by part name (text between the marks)."""
    out = {}
    for part in ("events", "tables"):
        begin = BEGIN.format(part)
        if begin in page:
            start = page.index(begin) + len(begin) + 1
            out[part] = page[start:page.index(END, start)]
    return out


def update_page(page: str) -> str:
    """``page`` with each generated part rewritten from the schema."""
    for part, old in generated_parts(page).items():
        begin = BEGIN.format(part)
        page = page.replace(f"{begin}\n{old}{END}", f"{begin}\n{markdown(part)}{END}")
    return page


if __name__ == "__main__":  # pragma: no cover - the docs' generator
    import sys
    from pathlib import Path

    for arg in sys.argv[1:] or ["docs/loading.md"]:
        path = Path(arg)
        path.write_text(update_page(path.read_text()))
