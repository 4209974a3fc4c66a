"""A file's rank is worked out in one place, the file format's :mod:`hta.kineto.rank`: its
rules, and the early look at a file's head (``peek_rank``) agreeing with the full load on
every trace at hand."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import SAMPLE_TRACES, SHARED_TRACES

from hta.errors import TraceLoadError
from hta.kineto.decode import decode_trace
from hta.kineto.discovery import is_trace_name
from hta.kineto.rank import MAX_WORLD_SIZE, file_rank, peek_rank, rank_from_filename


@pytest.mark.parametrize(("name", "rank"), [
    ("rank-3.json", 3), ("rank_3.json.gz", 3), ("rank3.json", 3), ("worker3.json", 3),
    ("host-a.worker3.pt.trace.json.gz", 3), ("RANK-3.json", 3),
    ("train_rank-3.Apr_03_18_51_38.1102.pt.trace.json.gz", 3),
    ("myrank3.json", None), ("ranking.json", None), ("trace.json", None),
])
def test_rank_from_the_file_name(name: str, rank: int | None) -> None:
    assert rank_from_filename(name) == rank
    assert rank_from_filename(Path("/some/dir") / name) == rank


def _info(**info: object) -> dict[str, object]:
    return {"distributedInfo": info}


def test_the_rules_in_order() -> None:
    # 1. the given rank wins
    assert file_rank("rank-3.json", _info(rank=5), given=7) == (7, [])
    # 2. distributedInfo.rank beats the file name; quoted and 3.0 are ranks
    assert file_rank("rank-3.json", _info(rank=5)) == (5, [])
    assert file_rank("x.json", _info(rank="4")) == (4, [])
    assert file_rank("x.json", _info(rank=4.0)) == (4, [])
    # 3. the file name
    assert file_rank("rank-3.json", {}) == (3, [])
    assert file_rank("rank-3.json", _info(world_size=8)) == (3, [])
    # 4. a lone file is rank 0
    assert file_rank("x.json", {}, lone_file=True) == (0, [])
    # 5. otherwise no rank
    with pytest.raises(TraceLoadError, match="no rank found"):
        file_rank("x.json", {})


@pytest.mark.parametrize("bad", [-1, 1.5, "three", True, 2**70, MAX_WORLD_SIZE, None])
def test_a_distributed_rank_that_is_not_a_rank_is_not_used(bad: object) -> None:
    rank, notes = file_rank("rank-2.json", _info(rank=bad))
    assert rank == 2 and "is not a rank" in notes[0] and "from the file name" in notes[0]
    rank, notes = file_rank("x.json", _info(rank=bad), lone_file=True)
    assert rank == 0 and "the only file" in notes[0]
    with pytest.raises(TraceLoadError, match="is not a rank"):
        file_rank("x.json", _info(rank=bad))


def test_a_rank_beyond_its_world_size_is_kept_with_a_warning() -> None:
    assert file_rank("x.json", _info(rank=99, world_size=2)) == (
        99, ["distributedInfo.rank 99 is not below its world_size 2"])
    assert file_rank("x.json", _info(rank=99, world_size=1)) == (99, [])


@pytest.mark.parametrize(("text", "rank"), [
    ('"distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4}', 3),
    ('"distributedInfo": {"rank": "3"}', 3),
    ('"distributedInfo": {"rank": -1}', None),
    ('"distributedInfo": {"rank": 1.5}', None),
    (f'"distributedInfo": {{"rank": {MAX_WORLD_SIZE}}}', None),  # not a rank: the load decides
    ('"distributedInfo": {"world_size": 4}', None),
])
@pytest.mark.parametrize("gz", [False, True])
def test_peek_gives_the_loads_rank_or_none(tmp_path: Path, text: str, rank: int | None,
                                           gz: bool) -> None:
    body = ('{"schemaVersion": 1, ' + text + ', "traceEvents": [{"ph": "X", "name": "a", '
            '"cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}').encode()
    path = tmp_path / ("rank-7.json.gz" if gz else "rank-7.json")
    path.write_bytes(gzip.compress(body) if gz else body)
    assert peek_rank(path) == rank
    top = json.loads(body)
    loaded, _ = file_rank(path, top)
    assert loaded == (rank if rank is not None else 7)


def _trace_files() -> list[Path]:
    roots = [SAMPLE_TRACES] + ([SHARED_TRACES] if SHARED_TRACES.exists() else [])
    return sorted(p for root in roots for p in root.rglob("*")
                  if p.is_file() and is_trace_name(p)
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


@pytest.mark.slow
def test_peek_agrees_with_the_full_rules_on_every_trace_at_hand() -> None:
    checked = 0
    for path in _trace_files():
        peeked = peek_rank(path)
        try:
            top = decode_trace(path).top_level
        except TraceLoadError:  # not a Kineto trace (an execution trace): no rank to find
            continue
        lone = sum(is_trace_name(p) for p in path.parent.iterdir() if p.is_file()) == 1
        try:
            rank, _ = file_rank(path, top, lone_file=lone)
        except TraceLoadError:
            rank = None
        if peeked is not None:
            assert peeked == rank, path
        checked += 1
    assert checked >= 5
