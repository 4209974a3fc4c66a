"""The raw Kineto key of every column is in the schema (``hta.kineto.schema.RAW_KEYS``,
``Column.source``), and the decoders read exactly those keys: the Python decoder's
structs take their JSON names from it, and the native scanner's C field table
(``hta/kineto/_native/scan_fields.h``, parsed here) maps each key to the same column."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

from hta.kineto import native
from hta.kineto.schema import DECODED_EVENT_COLUMNS, DECODED_TABLES, RAW_KEYS
from hta.kineto.side_tables import ARG_SOURCES, PHASE_SOURCES
from hta.kineto.structs import Args, Event

FIELDS_H = ROOT / "hta" / "kineto" / "_native" / "scan_fields.h"
#: Keys the decoders read that no column keeps (read for the scanner's sake or the
#: decoders' own: the args object itself, CUDA callback ids, breakpoint phases).
NOT_KEPT = {"args", "cbid", "cid", "bp"}


def _c_table(text: str, name: str) -> list[tuple[str, str, str]]:
    """The ``{"key", KIND, SLOT}`` entries of ``static const FieldDef NAME[]``."""
    body = re.search(rf"FieldDef {name}\[\]\s*=\s*\{{(.*?)\}};", text, re.S)
    assert body, f"no {name}[] table in {FIELDS_H}"
    return re.findall(r'\{"((?:[^"\\]|\\.)*)",\s*(K_\w+),\s*(\w+)\}', body.group(1))


def _sparse_slots(text: str) -> list[str]:
    """The sparse slots' enum, in order (their values index ``native.SPARSE`` then
    ``native.RAW``)."""
    body = re.search(r"enum\s*\{([^{}]*\bNSPARSE\b)\s*\}", text)
    assert body, f"no sparse slot enum in {FIELDS_H}"
    return [s.strip() for s in body.group(1).split(",") if s.strip()][:-1]


def _c_fields(path: Path = FIELDS_H) -> dict[tuple[str, bool], str]:
    """``(raw key, in args)`` -> the decoder field the C scanner puts its value in."""
    text = path.read_text()
    slots = _sparse_slots(text)
    first_raw = slots.index(re.search(r"#define FIRST_RAW (\w+)", text).group(1))
    sparse = list(native.SPARSE)
    assert len(sparse) == first_raw and len(native.RAW) == len(slots) - first_raw, (
        "native.SPARSE / native.RAW and scan_fields.h's slots differ in number")
    dense_sym = re.search(r"enum\s*\{\s*(S_PH[^}]*NSYM)\s*\}", text).group(1)
    sym = [s.strip() for s in dense_sym.split(",")][:-1]

    def field(kind: str, slot: str) -> str:
        if kind in ("K_DSTR", "K_DSSTR"):
            return native.SYM[sym.index(slot)]
        if kind == "K_ID":
            return ("pid", "tid")[int(slot)]
        if kind in ("K_TS", "K_DUR", "K_ARGS"):
            return {"K_TS": "ts", "K_DUR": "dur", "K_ARGS": "args"}[kind]
        i = slots.index(slot)
        return sparse[i] if i < first_raw else native.RAW[i - first_raw]

    out: dict[tuple[str, bool], str] = {}
    for table, in_args in (("TOP", False), ("ARGS", True)):
        for key, kind, slot in _c_table(text, table):
            assert (key, in_args) not in out, f"{key!r} twice in {table}[]"
            out[(key, in_args)] = field(kind, slot)
    return out


def test_the_c_field_table_reads_the_schemas_keys_into_the_same_columns() -> None:
    c_fields = _c_fields()
    schema = {(raw.key, raw.in_args): field for field, raw in RAW_KEYS.items()}
    missing_in_c = {k: v for k, v in schema.items() if k not in c_fields}
    not_in_schema = {k: v for k, v in c_fields.items() if k not in schema}
    moved = {k: (schema[k], c_fields[k]) for k in schema.keys() & c_fields.keys()
             if schema[k] != c_fields[k]}
    assert not missing_in_c, f"keys of the schema the C table does not read: {missing_in_c}"
    assert not not_in_schema, f"keys the C table reads, not in the schema: {not_in_schema}"
    assert not moved, f"key -> (schema's field, C table's field): {moved}"


def test_the_test_sees_a_changed_c_table(tmp_path: Path) -> None:
    text = FIELDS_H.read_text()
    changed = tmp_path / "scan_fields.h"
    changed.write_text(text.replace('{"correlation", K_INT, I_CORR}',
                                    '{"correlation", K_INT, I_STREAM}'))
    assert _c_fields(changed)[("correlation", True)] == "stream"
    changed.write_text(text.replace('{"Input Dims", K_RAW, R_DIMS}',
                                    '{"Input Dimz", K_RAW, R_DIMS}'))
    assert ("Input Dims", True) not in _c_fields(changed)


def test_the_python_structs_read_the_schemas_keys() -> None:
    args = dict(zip(Args.__struct_fields__, Args.__struct_encode_fields__))
    event = dict(zip(Event.__struct_fields__, Event.__struct_encode_fields__))
    assert args == {f: raw.key for f, raw in RAW_KEYS.items() if raw.in_args}
    assert event == {f: raw.key for f, raw in RAW_KEYS.items() if not raw.in_args}


def _columns():
    yield "events", DECODED_EVENT_COLUMNS
    for name, table in DECODED_TABLES.items():
        yield name, table.columns


def test_every_key_is_some_columns_source_and_every_source_a_key() -> None:
    used = set()
    for name, columns in _columns():
        for c in columns:
            assert set(c.source) <= set(RAW_KEYS), (name, c.name, c.source)
            used.update(c.source)
    assert set(RAW_KEYS) - used == NOT_KEPT


def test_the_decoders_read_each_column_from_its_source() -> None:
    for name, sources in {**ARG_SOURCES, **PHASE_SOURCES}.items():
        columns = {c.name: c for c in DECODED_TABLES[name].columns}
        for column, (_, field, *_) in sources.items():
            assert columns[column].source[:1] == (field,), (name, column, field)
