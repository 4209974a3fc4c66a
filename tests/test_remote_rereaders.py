"""A job loaded from an fsspec URL (``memory://``) answers the methods that need the raw
file (CUPTI counters, the augmented trace with counters, the critical-path overlay)
exactly as the same job on disk: the files are read again through ``hta.kineto.raw``,
and the time origin is the one the loader stored."""

from __future__ import annotations

import gzip
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pandas as pd
import pytest
from conftest import shared_trace

from hta.trace_analysis import TraceAnalysis


def _to_memory(folder: Path) -> Iterator[str]:
    fs = fsspec.filesystem("memory")
    root = f"/hta-reread-{uuid.uuid4().hex[:8]}"
    for path in sorted(folder.glob("*.json*")):
        fs.pipe(f"{root}/{path.name}", path.read_bytes())
    try:
        yield f"memory://{root.lstrip('/')}"
    finally:
        fs.rm(root, recursive=True)


def _pair(folder: Path, url: str) -> tuple[TraceAnalysis, TraceAnalysis]:
    on_disk = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    remote = TraceAnalysis(trace_dir=url, cache=False, progress=False)
    assert remote.t.rank(remote.ranks[0]).meta["source"].startswith("memory://")
    return on_disk, remote


@pytest.fixture
def cupti_job() -> Iterator[tuple[Path, str]]:
    folder = shared_trace("cupti_profiler")
    for url in _to_memory(folder):
        yield folder, url


@pytest.fixture
def alexnet_job() -> Iterator[tuple[Path, str]]:
    folder = shared_trace("critical_path", "alexnet")
    for url in _to_memory(folder):
        yield folder, url


def _events(path: str | Path) -> list[dict]:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)["traceEvents"]


def test_cupti_counters_from_memory_match_disk(cupti_job: tuple[Path, str]) -> None:
    on_disk, remote = _pair(*cupti_job)
    got = remote.get_cupti_counter_data_with_operators()
    pd.testing.assert_frame_equal(got, on_disk.get_cupti_counter_data_with_operators())
    assert len(got) > 0 and len(got.columns) > 8  # metric columns follow the base ones


def test_trace_with_counters_from_memory_matches_disk(alexnet_job: tuple[Path, str],
                                                     tmp_path: Path) -> None:
    on_disk, remote = _pair(*alexnet_job)
    a = on_disk.generate_trace_with_counters(output_dir=tmp_path / "disk")
    b = remote.generate_trace_with_counters(output_dir=tmp_path / "memory")
    assert sorted(a) == sorted(b)
    for rank in a:
        assert Path(a[rank]).name == Path(b[rank]).name
        assert _events(a[rank]) == _events(b[rank])
        assert len(_events(a[rank])) > len(_events(next(alexnet_job[0].glob("*.json*"))))


def test_trace_with_counters_from_a_url_needs_an_output_dir(
        cupti_job: tuple[Path, str]) -> None:
    _, remote = _pair(*cupti_job)
    with pytest.raises(ValueError, match="output_dir"):
        remote.generate_trace_with_counters()


def test_overlay_from_memory_matches_disk(alexnet_job: tuple[Path, str],
                                          tmp_path: Path) -> None:
    on_disk, remote = _pair(*alexnet_job)
    g_disk, _ = on_disk.critical_path_analysis(0, "")
    g_mem, _ = remote.critical_path_analysis(0, "")
    a = on_disk.overlay_critical_path_analysis(0, g_disk, tmp_path / "disk")
    b = remote.overlay_critical_path_analysis(0, g_mem, tmp_path / "memory")
    events = _events(a)
    assert Path(a).name == Path(b).name
    assert events == _events(b)
    assert any(e.get("cat") == "critical_path" for e in events)


def test_rereaders_use_the_stored_time_origin(cupti_job: tuple[Path, str]) -> None:
    on_disk, remote = _pair(*cupti_job)
    for job in (on_disk, remote):
        rt = job.t.rank(job.ranks[0])
        assert rt.time_origin_ns == rt.meta["time_origin_ns"]
    # the file's size is told by the format layer, for a URL as for a path
    size = next(cupti_job[0].glob("*.json*")).stat().st_size
    assert on_disk.metadata()["file_bytes"] == remote.metadata()["file_bytes"] == size
