"""One schema (``hta.model.schema``, built on ``hta.kineto.schema``): a loaded rank's
events and side tables have exactly its columns and dtypes, with both decoders, full or
empty, fresh or from the cache; the docs' column reference is generated from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT
from kineto_builder import TraceBuilder
from test_cache import rich_trace

from hta.kineto import native
from hta.kineto.decode import decode_trace
from hta.kineto.schema import DECODED_EVENT_COLUMNS, DECODED_TABLES, DTYPES
from hta.model.schema import EVENT_COLUMNS, TABLES, check_frame, generated_parts, markdown
from hta.trace_analysis import TraceAnalysis

DECODERS = ["python"] + (["native"] if native.built() else [])


def _problems(rt) -> list[str]:
    problems = check_frame(rt.events, EVENT_COLUMNS, "events")
    if sorted(rt.tables) != sorted(TABLES):
        problems.append(f"tables {sorted(rt.tables)}, schema {sorted(TABLES)}")
    for name, table in TABLES.items():
        if name in rt.tables:
            problems += check_frame(rt.tables[name], table.columns, name)
    return problems


def _bare_trace() -> TraceBuilder:
    """A trace without a single side-table row: every side table is empty."""
    b = TraceBuilder(rank=0)
    b.complete("main", "python_function", ts=0, dur=1_000)
    return b


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("case", ["full", "empty"])
def test_loaded_rank_matches_the_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        decoder: str, case: str) -> None:
    monkeypatch.setenv("HTA_NATIVE", "1" if decoder == "native" else "0")
    (rich_trace() if case == "full" else _bare_trace()).write(tmp_path / "job" / "rank-0.json")
    fresh = TraceAnalysis(trace_dir=tmp_path / "job", cache=False, progress=False)
    rt = fresh.t.rank(0)
    assert _problems(rt) == []
    if case == "full":  # the full case fills every side table
        assert all(len(rt.tables[name]) for name in TABLES), {
            n: len(f) for n, f in rt.tables.items()}
    else:
        assert not any(len(rt.tables[name]) for name in TABLES)
    cache = tmp_path / "cache"
    TraceAnalysis(trace_dir=tmp_path / "job", cache_dir=cache, progress=False)
    reopened = TraceAnalysis(trace_dir=tmp_path / "job", cache_dir=cache, progress=False)
    assert _problems(reopened.t.rank(0)) == []


@pytest.mark.parametrize("decoder", DECODERS)
def test_decoded_tables_match_the_kineto_schema(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                decoder: str) -> None:
    monkeypatch.setenv("HTA_NATIVE", "1" if decoder == "native" else "0")
    decoded = decode_trace(rich_trace().write(tmp_path / "rank-0.json"))
    assert {k: v.dtype for k, v in decoded.columns.items()} == {
        c.name: DTYPES[c.dtype] for c in DECODED_EVENT_COLUMNS}
    for name, table in DECODED_TABLES.items():
        frame = getattr(decoded, name)
        assert list(frame.columns) == table.names, name
        assert [frame[c.name].dtype for c in table.columns] == [
            DTYPES[c.dtype] for c in table.columns], name


def test_docs_column_reference_is_generated_from_the_schema() -> None:
    page = (ROOT / "docs" / "loading.md").read_text()
    parts = generated_parts(page)
    assert sorted(parts) == ["events", "tables"]
    for part, text in parts.items():
        assert text == markdown(part), (
            f"docs/loading.md's {part} reference is stale: run python3 -m hta.model.schema")
    for c in EVENT_COLUMNS:
        assert f"| `{c.name}` | {c.dtype} |" in parts["events"]
    for name in TABLES:
        assert f"`{name}`: one row per" in parts["tables"]


def test_every_column_has_a_unit_field_and_a_meaning() -> None:
    columns = list(EVENT_COLUMNS) + [c for t in TABLES.values() for c in t.columns]
    assert all(c.meaning and "\n" not in c.meaning for c in columns)
    assert {c.dtype for c in columns} <= set(DTYPES) | {"category"}
