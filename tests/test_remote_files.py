"""Trace folders behind fsspec URLs: ``memory://`` (remote-style storage, read through
fsspec) and ``file://`` (a local path) load exactly like the same files on disk."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pandas as pd
import pytest
from conftest import shared_trace
from scale_cases import assert_same_answers, make_job

import hta.job.rank_load as rank_load_module
from hta.errors import TraceDiscoveryError
from hta.kineto.decode import decode_trace
from hta.kineto.discovery import discover
from hta.kineto.files import RemotePath, is_url, trace_location
from hta.kineto.rank import peek_rank
from hta.trace_analysis import TraceAnalysis


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("job4")
    make_job(folder, ranks=4)
    return folder


@pytest.fixture(scope="module")
def on_disk(job: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=job, cache=False, progress=False)


@pytest.fixture
def memory_job(job: Path) -> Iterator[str]:
    """The job's files copied into fsspec's in-memory filesystem; yields the folder URL."""
    fs = fsspec.filesystem("memory")
    root = f"/hta-test-{uuid.uuid4().hex[:8]}"
    for path in sorted(job.glob("*.json.gz")):
        fs.pipe(f"{root}/{path.name}", path.read_bytes())
    fs.pipe(f"{root}/notes.txt", b"not a trace")
    try:
        yield f"memory://{root.lstrip('/')}"
    finally:
        fs.rm(root, recursive=True)


def _load(location: Any, **kwargs: Any) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=location, cache=False, progress=False, **kwargs)


@pytest.mark.parametrize("max_workers", [1, 2])
def test_memory_url_loads_like_the_files_on_disk(memory_job: str, on_disk: TraceAnalysis,
                                                 max_workers: int) -> None:
    # max_workers=2: forked workers read the in-memory files they inherited
    remote = _load(memory_job, max_workers=max_workers)
    assert remote.trace_dir == memory_job
    assert_same_answers(on_disk, remote, ranks=[0, 3])
    assert remote.t.rank(2).meta["source"].startswith(memory_job + "/rank-2")


def test_memory_url_kept_out_of_memory(memory_job: str, on_disk: TraceAnalysis) -> None:
    remote = _load(memory_job, in_memory=False, max_workers=2)
    assert [h.source for h in remote.t.handles.values()] == [
        f"{memory_job}/rank-{r}.json.gz" for r in range(4)]
    assert_same_answers(on_disk, remote, ranks=[1])
    remote.close()


def test_memory_url_trace_files_and_rank_selection(memory_job: str,
                                                   on_disk: TraceAnalysis) -> None:
    files = {2: f"{memory_job}/rank-2.json.gz", 0: "rank-0.json.gz"}
    picked = TraceAnalysis(trace_dir=memory_job, trace_files=files, cache=False,
                           progress=False)
    assert picked.ranks == [0, 2]
    pd.testing.assert_frame_equal(picked.t.get_trace(2), on_disk.t.get_trace(2))
    only = _load(memory_job, ranks=[3])
    assert only.ranks == [3]
    assert peek_rank(RemotePath(f"{memory_job}/rank-3.json.gz")) == 3


def test_memory_url_cache_is_written_and_read(memory_job: str, on_disk: TraceAnalysis,
                                              tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    TraceAnalysis(trace_dir=memory_job, cache_dir=tmp_path, progress=False, max_workers=1)
    assert len(list(tmp_path.iterdir())) == 4

    def no_decode(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("decoded again instead of read from the cache")

    monkeypatch.setattr(rank_load_module, "decode_trace", no_decode)
    again = TraceAnalysis(trace_dir=memory_job, cache_dir=tmp_path, progress=False,
                          max_workers=1)
    assert_same_answers(on_disk, again, ranks=[0])


def test_url_traces_cache_in_the_user_cache(memory_job: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    TraceAnalysis(trace_dir=memory_job, progress=False, max_workers=1)
    assert len(list((tmp_path / "hta").iterdir())) == 4


def test_file_url_is_a_local_path(job: Path, on_disk: TraceAnalysis) -> None:
    assert trace_location(job.as_uri()) == job
    assert isinstance(trace_location(job.as_uri()), Path)
    remote = _load(job.as_uri())
    assert_same_answers(on_disk, remote, ranks=[1])
    real = shared_trace("trace_filter")
    pd.testing.assert_frame_equal(_load(real.as_uri()).get_rank_summary(),
                                  _load(real).get_rank_summary())


def test_plain_json_through_fsspec_decodes_like_the_file(tmp_path: Path) -> None:
    import gzip

    src = shared_trace("ns_resolution_trace")
    packed = next(p for p in sorted(src.iterdir()) if p.name.endswith(".json.gz"))
    path = tmp_path / packed.name.removesuffix(".gz")  # plain JSON: the other read path
    path.write_bytes(gzip.decompress(packed.read_bytes()))
    url = f"memory://hta-plain-{uuid.uuid4().hex[:8]}/{path.name}"
    fsspec.filesystem("memory").pipe(url, path.read_bytes())
    try:
        local, remote = decode_trace(path), decode_trace(url)
        assert remote.path == url
        for name, column in local.columns.items():
            assert (remote.columns[name] == column).all(), name
        assert remote.top_level == local.top_level
    finally:
        fsspec.filesystem("memory").rm(url)


def test_url_errors_say_what_is_wrong() -> None:
    with pytest.raises(TraceDiscoveryError, match="trace folder not found: memory://nowhere"):
        _load("memory://nowhere")
    with pytest.raises(TraceDiscoveryError, match="install the fsspec implementation for "
                                                  "nosuchproto"):
        _load("nosuchproto://bucket/job")
    with pytest.raises(TraceDiscoveryError, match="file:// URL naming another host"):
        _load("file://otherhost/job")
    with pytest.raises(TraceDiscoveryError, match="trace file not found: memory://x/y.json"):
        discover(trace_files=["memory://x/y.json"])


def test_remote_path_parts() -> None:
    p = RemotePath("s3://bucket/job/rank-1.json.gz")
    assert (p.name, str(p.parent), str(p.parent / "x.json")) == (
        "rank-1.json.gz", "s3://bucket/job", "s3://bucket/job/x.json")
    assert is_url("gs://b/x") and is_url("file:///x") and not is_url("/tmp/x")
    assert not hasattr(p, "__fspath__")  # never opened as a local file by mistake
