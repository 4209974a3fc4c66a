"""The Arrow cache of loaded ranks.

A reload from the cache gives back exactly what a fresh load gives (events, every side
table, symbols, metadata, unclassified kernels); the cache sits in ``.hta_cache`` beside
the traces or, when that folder cannot be written, in ``$XDG_CACHE_HOME/hta``; a changed
file or changed kind rules miss the cache; ``cache=False`` writes nothing; a damaged
entry is ignored and rebuilt; nothing in it is a pickle.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import shared_trace
from kineto_builder import TraceBuilder

import hta.job.rank_load as rank_load_module
from hta.job.cache import CACHE_FORMAT_VERSION, fingerprint
from hta.model.rules import Rule, RuleSet
from hta.model.trace import ARG_TABLES, EVENT_TABLES
from hta.trace_analysis import TraceAnalysis

ENTRY_FILES = {"events.arrow", "symbols.arrow", "meta.json", "manifest.json"} | {
    f"{t}.arrow" for t in ARG_TABLES + EVENT_TABLES}
ARROW_MAGIC = b"ARROW1"


def rich_trace(rank: int = 0, op_name: str = "aten::mm") -> TraceBuilder:
    """A trace with a row in every side table."""
    b = TraceBuilder(rank=rank, world_size=2)
    b.annotation("ProfilerStep#1", ts=0, dur=100_000)
    b.cpu_op(op_name, ts=100, dur=2_900, **{"Input Dims": [[2, 3], [3, 4]],
                                            "Input type": ["float", "float"],
                                            "Sequence number": 7, "Fwd thread id": 0})
    b.launch_kernel("sm80_xmma_gemm", cpu_ts=200, cpu_dur=500, gpu_ts=30_000, gpu_dur=3_001,
                    grid=[4, 1, 1], block=[128, 1, 1], **{"registers per thread": 32,
                                                          "est. achieved occupancy %": 50})
    b.launch_kernel("zz_unknown_kernel", cpu_ts=900, cpu_dur=100, gpu_ts=34_000, gpu_dur=10)
    b.memcpy("HtoD (Pinned -> Device)", cpu_ts=1_000, cpu_dur=100, gpu_ts=40_000,
             gpu_dur=500, nbytes=4096, **{"memory bandwidth (GB/s)": 8.192})
    b.cpu_op("record_param_comms", ts=2_000, dur=100, **{
        "Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1024,
        "Out msg nelems": 1024, "Group size": 2, "Process Group Name": "0",
        "Process Group Description": "default_pg", "Process Group Ranks": [0, 1]})
    b.launch_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", cpu_ts=2_010, cpu_dur=50,
                    gpu_ts=45_000, gpu_dur=7_000, stream=20,
                    **{"Collective name": "allreduce", "Group size": 2})
    b.runtime("cudaStreamSynchronize", ts=3_000, dur=60_000, correlation=500)
    b.gpu("Stream Sync", "cuda_sync", ts=3_100, dur=59_000, correlation=500,
          wait_on_stream=20)
    b.instant("[memory]", ts=150, **{"Addr": 1234, "Bytes": 4096, "Total Allocated": 4096,
                                     "Total Reserved": 8192, "Device Type": 1,
                                     "Device Id": 0})
    b.flow("s", 1, 200, pid=1000, tid=1000)
    b.flow("f", 1, 30_000, pid=0, tid=7)
    b.events.append({"ph": "C", "name": "util", "pid": 0, "tid": 0, "ts": 1.5,
                     "args": {"sm": 80.5}})
    b.events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": 7,
                     "args": {"name": "stream 7"}})
    b.complete("PyTorch Profiler (0)", "Trace", ts=0, dur=200_000, pid="Spans", tid="Traces")
    b.gpu("sm80_xmma_gemm", "cuda_profiler_range", ts=90_000, dur=10,
          **{"smsp__inst_executed.sum": 1234, "dram__bytes_read.sum": 5.5})
    return b


def assert_same_rank(a: Any, b: Any) -> None:
    """Two RankTrace objects hold identical data."""
    assert a.rank == b.rank
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)
    assert a.symbols == b.symbols
    assert set(a.tables) == set(b.tables) == set(ARG_TABLES + EVENT_TABLES)
    for name in a.tables:
        pd.testing.assert_frame_equal(a.tables[name], b.tables[name], check_exact=True,
                                      obj=name)
    assert a.meta == b.meta
    assert np.array_equal(a.unclassified, b.unclassified)


def entries(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []


# --------------------------------------------------------------------------------------------
# identical reload
# --------------------------------------------------------------------------------------------


def test_single_file_reload_from_cache_is_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "job"
    rich_trace().write(folder / "rank-0.json.gz")
    cache = tmp_path / "cache"
    fresh = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    first = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    assert len(entries(cache)) == 1
    monkeypatch.setattr(rank_load_module, "decode_trace", _no_decode)
    again = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    for loaded in (first, again):
        assert_same_rank(fresh.t.rank(0), loaded.t.rank(0))
    rt = again.t.rank(0)
    assert all(len(rt.tables[t]) for t in ARG_TABLES + EVENT_TABLES)  # none trivially empty
    assert again.get_unclassified_kernels()["name"].tolist() == ["zz_unknown_kernel"]
    assert rt.meta["named_ids"] and rt.meta["warnings"] == []


def _no_decode(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("the trace was decoded again instead of read from the cache")


def test_multi_rank_real_trace_reload_from_cache_is_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = shared_trace("trace_filter")
    folder = tmp_path / "trace_filter"
    shutil.copytree(src, folder)
    cache = tmp_path / "cache"
    fresh = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False, max_workers=1)
    assert len(entries(cache)) == 2
    monkeypatch.setattr(rank_load_module, "decode_trace", _no_decode)
    again = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False, max_workers=1)
    assert again.ranks == fresh.ranks == [0, 1]
    assert again.t.symbols == fresh.t.symbols
    for r in fresh.ranks:
        assert_same_rank(fresh.t.rank(r), again.t.rank(r))


# --------------------------------------------------------------------------------------------
# where the cache lives
# --------------------------------------------------------------------------------------------


def test_default_cache_is_beside_the_traces(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    rich_trace(0).write(folder / "rank-0.json.gz")
    rich_trace(1).write(folder / "rank-1.json")
    TraceAnalysis(trace_dir=folder, progress=False, max_workers=1)
    root = folder / ".hta_cache"
    found = entries(root)
    assert [p.name.split(".")[0] for p in found] == ["rank-0", "rank-1"]
    for entry in found:
        key = entry.name.split(".", 1)[1]
        assert len(key) == 24 and all(c in "0123456789abcdef" for c in key)
        assert {p.name for p in entry.iterdir()} == ENTRY_FILES
    # the cache folder is hidden from discovery: loading again still finds two ranks
    assert TraceAnalysis(trace_dir=folder, progress=False).ranks == [0, 1]


def test_read_only_trace_folder_falls_back_to_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "job"
    rich_trace().write(folder / "rank-0.json")
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user (root) whom chmod does not stop from writing")
        TraceAnalysis(trace_dir=folder, progress=False)
        assert not (folder / ".hta_cache").exists()
        assert len(entries(xdg / "hta")) == 1
    finally:
        folder.chmod(stat.S_IRWXU)


def test_unwritable_local_cache_falls_back_to_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Works even as root: a *file* named .hta_cache makes the local cache unusable.
    folder = tmp_path / "job"
    rich_trace().write(folder / "rank-0.json")
    (folder / ".hta_cache").write_text("not a folder")
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    analyzer = TraceAnalysis(trace_dir=folder, progress=False)
    assert analyzer.ranks == [0]
    assert (folder / ".hta_cache").read_text() == "not a folder"
    found = entries(xdg / "hta")
    assert len(found) == 1 and {p.name for p in found[0].iterdir()} == ENTRY_FILES


def test_cache_false_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "job"
    rich_trace(0).write(folder / "rank-0.json")
    rich_trace(1).write(folder / "rank-1.json")
    before = sorted(p.name for p in folder.iterdir())
    xdg = tmp_path / "xdg"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    for path in (folder, folder / "rank-0.json"):
        TraceAnalysis(trace_dir=path, cache=False, progress=False, max_workers=1)
    assert sorted(p.name for p in folder.iterdir()) == before
    assert not xdg.exists()
    assert list(scratch.iterdir()) == []  # temporary rank folders are removed too


# --------------------------------------------------------------------------------------------
# invalidation
# --------------------------------------------------------------------------------------------


def test_changing_the_file_changes_the_fingerprint(tmp_path: Path) -> None:
    path = rich_trace().write(tmp_path / "rank-0.json")
    key = fingerprint(path)
    assert fingerprint(path) == key  # stable
    text = path.read_text()
    path.write_text(text.replace("aten::mm", "aten::mv"))  # same size, one byte differs
    assert path.stat().st_size == len(text)
    assert fingerprint(path) != key
    path.write_text(text + " ")
    assert fingerprint(path) != key
    path.write_text(text)
    assert fingerprint(path) == key  # content, not mtime
    copy = tmp_path / "elsewhere.json"
    copy.write_text(text)
    assert fingerprint(copy) == key
    assert fingerprint(path, RuleSet([Rule("communication", name="x")]).fingerprint()) != key


def test_changed_file_is_reloaded_not_served_stale(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    path = rich_trace(op_name="aten::mm").write(folder / "rank-0.json")
    cache = tmp_path / "cache"
    first = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    assert "aten::mm" in set(first.get_events()["name"])
    path.write_text(path.read_text().replace("aten::mm", "aten::mv"))
    second = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    names = set(second.get_events()["name"])
    assert "aten::mv" in names and "aten::mm" not in names
    assert len(entries(cache)) == 2  # one entry per content


def test_kind_rules_are_part_of_the_key(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    rich_trace().write(folder / "rank-0.json")
    cache = tmp_path / "cache"
    default = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    custom = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False,
                           kind_rules=[Rule("communication", name="zz_unknown_kernel")])

    def kind_of(analyzer: TraceAnalysis) -> str:
        ev = analyzer.get_events()
        return str(ev.loc[ev["name"] == "zz_unknown_kernel", "kind"].iloc[0])

    assert kind_of(default) == "computation"
    assert kind_of(custom) == "communication"
    assert custom.get_unclassified_kernels().empty
    assert len(entries(cache)) == 2


def damage_truncate_events(entry: Path) -> None:
    data = (entry / "events.arrow").read_bytes()
    (entry / "events.arrow").write_bytes(data[: len(data) // 2])


def damage_garbage_meta(entry: Path) -> None:
    (entry / "meta.json").write_text("{not json")


def damage_meta_not_a_dict(entry: Path) -> None:
    (entry / "meta.json").write_text("[]")


def damage_missing_table(entry: Path) -> None:
    (entry / "kernel_args.arrow").unlink()


def damage_old_version(entry: Path) -> None:
    meta = json.loads((entry / "meta.json").read_text())
    meta["cache_format_version"] = CACHE_FORMAT_VERSION - 1
    (entry / "meta.json").write_text(json.dumps(meta))


def damage_events_not_parquet(entry: Path) -> None:
    (entry / "events.arrow").write_bytes(b"\x80\x04K\x01.")  # a pickle: must never load


@pytest.mark.parametrize("damage", [
    damage_truncate_events, damage_garbage_meta, damage_meta_not_a_dict, damage_missing_table,
    damage_old_version, damage_events_not_parquet,
], ids=lambda f: f.__name__.removeprefix("damage_"))
@pytest.mark.parametrize("ranks", [1, 2], ids=["single-file", "multi-file"])
def test_damaged_entry_is_ignored_and_rebuilt(tmp_path: Path, damage: Any, ranks: int,
                                               caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "job"
    for r in range(ranks):
        rich_trace(r).write(folder / f"rank-{r}.json")
    cache = tmp_path / "cache"
    fresh = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False, max_workers=1)
    entry = entries(cache)[0]
    damage(entry)
    with caplog.at_level(logging.WARNING, logger="hta"):
        again = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False,
                              max_workers=1)
    assert again.skipped == {}
    note = [w for w in again.t.rank(0).meta["warnings"] if w.startswith("the cache entry ")]
    assert len(note) == 1 and note[0].endswith("rebuilt from the trace")  # said, not silent
    again.t.rank(0).meta["warnings"].remove(note[0])
    for r in range(ranks):
        assert_same_rank(fresh.t.rank(r), again.t.rank(r))
    if damage is not damage_old_version:
        assert any("ignoring unreadable cache entry" in rec.getMessage()
                   and str(entry) in rec.getMessage() for rec in caplog.records)
    # rebuilt in place, as a complete Arrow entry
    assert {p.name for p in entry.iterdir()} == ENTRY_FILES
    assert (entry / "events.arrow").read_bytes()[:6] == ARROW_MAGIC


# --------------------------------------------------------------------------------------------
# no pickle
# --------------------------------------------------------------------------------------------


def test_nothing_in_the_cache_is_a_pickle(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    rich_trace(0).write(folder / "rank-0.json")
    rich_trace(1).write(folder / "rank-1.json.gz")
    cache = tmp_path / "cache"
    TraceAnalysis(trace_dir=folder / "rank-0.json", cache_dir=cache, progress=False)
    TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False, max_workers=1)
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert len(files) == 2 * len(ENTRY_FILES)  # rank-0's entry is shared by both loads
    for path in files:
        data = path.read_bytes()
        assert not data.startswith(b"\x80"), f"{path} looks like a pickle"
        if path.suffix == ".arrow":
            assert data[:6] == ARROW_MAGIC and data[-6:] == ARROW_MAGIC, path
        elif path.name == "manifest.json":
            assert set(json.loads(data)) == ENTRY_FILES - {"manifest.json"}
        else:
            assert path.name == "meta.json"
            meta = json.loads(data)
            assert meta["cache_format_version"] == CACHE_FORMAT_VERSION
            assert meta["rank"] in (0, 1)


# --------------------------------------------------------------------------------------------
# a cache that cannot be written never costs a rank
# --------------------------------------------------------------------------------------------


def test_unwritable_cache_dir_single_file_still_loads(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    rich_trace().write(folder / "rank-0.json")
    (tmp_path / "blocker").write_text("a file where the cache folder should go")
    analyzer = TraceAnalysis(trace_dir=folder, cache_dir=tmp_path / "blocker" / "cache",
                             progress=False)
    assert analyzer.ranks == [0] and analyzer.skipped == {}


def test_unwritable_cache_dir_multi_file_still_loads(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    rich_trace(0).write(folder / "rank-0.json")
    rich_trace(1).write(folder / "rank-1.json")
    (tmp_path / "blocker").write_text("a file where the cache folder should go")
    analyzer = TraceAnalysis(trace_dir=folder, cache_dir=tmp_path / "blocker" / "cache",
                             progress=False)
    assert analyzer.ranks == [0, 1] and analyzer.skipped == {}
