"""One rank decoded on several threads gives the tables of a one-thread decode.

The threaded decode (:func:`hta.kineto.decode._decode_threaded`) scans pieces on a pool
of threads and adds them in file order; it must give the very same columns, symbol ids,
named ids, side tables and warnings as ``workers=1``, whatever the layout, wherever the
pieces are cut, whichever thread scans a piece and whichever pieces the scanner declines.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_native_decode import ODDITIES, _text, _trace_files, assert_same
from test_split_layouts import _layouts, _tricky_events

from hta.kineto import decode, native, stream
from hta.kineto.decode import decode_trace

pytestmark = pytest.mark.skipif(not native.built(),
                                reason="the native scanner (hta.kineto._scan) is not built")


@pytest.fixture
def threaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file is large enough to be scanned on threads; the native scanner is on."""
    monkeypatch.setenv("HTA_NATIVE", "1")
    monkeypatch.setattr(decode, "THREADED_MIN_TEXT_BYTES", 0)


def _both(path: Path, workers: int = 3) -> None:
    one = decode_trace(path, workers=1)
    assert_same(one, decode_trace(path, workers=workers))


@pytest.mark.parametrize("path", _trace_files(), ids=lambda p: str(p.relative_to(p.parents[1])))
def test_same_tables_on_real_and_sample_traces(path: Path, threaded: None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "TARGET_CHUNK", 1 << 18)  # many pieces even on small files
    _both(path)


def test_the_threaded_path_is_taken(tmp_path: Path, threaded: None,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = decode._decode_threaded

    def spy(path: Any, workers: int, piece: int) -> Any:
        calls.append(workers)
        return real(path, workers, piece)

    monkeypatch.setattr(decode, "_decode_threaded", spy)
    path = tmp_path / "rank-0.json"
    path.write_text(_text(ODDITIES["plain"] * 10), encoding="utf-8")
    decode_trace(path, workers=4)
    decode_trace(path, workers=1)
    assert calls == [4]


def test_small_files_stay_on_one_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    monkeypatch.setattr(decode, "_decode_threaded", lambda *a: pytest.fail("threaded"))
    path = tmp_path / "rank-0.json"
    path.write_text(_text(ODDITIES["plain"] * 10), encoding="utf-8")
    assert path.stat().st_size < decode.THREADED_MIN_TEXT_BYTES
    decode_trace(path, workers=4)


@pytest.mark.parametrize("piece_bytes", [256, 4096])
@pytest.mark.parametrize("name", sorted(ODDITIES))
def test_oddities_cut_anywhere(name: str, piece_bytes: int, tmp_path: Path, threaded: None,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Escaped quotes, nested args, named pids, other phases, pieces the scanner
    declines: small pieces cut events in the middle of a block."""
    monkeypatch.setattr(stream, "TARGET_CHUNK", piece_bytes)
    path = tmp_path / "rank-0.json"
    path.write_text(_text(ODDITIES[name] * 20), encoding="utf-8")
    _both(path)


@pytest.mark.parametrize("piece_bytes", [300, 2048, 1 << 16])
def test_every_layout_cut_anywhere(piece_bytes: int, tmp_path: Path, threaded: None,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Kineto's layout, compact one-line JSON and indented gzip, with names holding
    quotes, backslashes, braces and brackets, and nested args."""
    monkeypatch.setattr(stream, "TARGET_CHUNK", piece_bytes)
    src = {"schemaVersion": 1, "deviceProperties": [{"name": "GPU"}],
           "traceEvents": _tricky_events(600, seed=5), "traceName": "x"}
    for path in _layouts(src, tmp_path).values():
        _both(path, workers=2)


def test_byte_order_mark_and_crlf(tmp_path: Path, threaded: None,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "TARGET_CHUNK", 512)
    events = _tricky_events(200, seed=1)
    body = ",\r\n  ".join(json.dumps(e) for e in events)
    crlf = tmp_path / "crlf.json.gz"
    with gzip.open(crlf, "wt", newline="") as fh:
        fh.write('{"traceEvents": [\r\n  ' + body + "\r\n]}")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps({"traceEvents": events}).encode())
    for path in (crlf, bom):
        _both(path)


def test_declined_pieces_go_to_the_python_decoder(tmp_path: Path, threaded: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever pieces the scanner declines, the result is that of one thread (the
    Python decoder reads exactly those pieces, as a one-thread decode does)."""
    monkeypatch.setattr(stream, "TARGET_CHUNK", 1024)
    path = tmp_path / "rank-0.json"
    path.write_text(_text(ODDITIES["args of every side table"] * 30), encoding="utf-8")
    real = native.scan
    seen: dict[bytes, int] = {}

    def every_third(text: Any, bare: bool = False) -> Any:
        key = bytes(text)
        seen.setdefault(key, len(seen))
        return None if seen[key] % 3 == 0 else real(text, bare)

    monkeypatch.setattr(native, "scan", every_third)
    one = decode_trace(path, workers=1)
    assert_same(one, decode_trace(path, workers=3))
    assert len(seen) > 6


def test_this_thread_scans_when_the_pool_is_slow(tmp_path: Path, threaded: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The adding thread takes over pieces no pool thread has started: the same tables."""
    monkeypatch.setattr(stream, "TARGET_CHUNK", 1024)
    path = tmp_path / "rank-0.json"
    path.write_text(_text(_tricky_events(400, seed=2)), encoding="utf-8")
    real = native.scan
    main = threading.get_ident()
    here: list[int] = []

    def slow_in_pool(text: Any, bare: bool = False) -> Any:
        if threading.get_ident() == main:
            here.append(1)
        else:
            time.sleep(0.01)
        return real(text, bare)

    one = decode_trace(path, workers=1)
    monkeypatch.setattr(native, "scan", slow_in_pool)
    assert_same(one, decode_trace(path, workers=2))
    assert here  # some pieces were scanned by the adding thread


def test_an_error_in_a_piece_is_raised(tmp_path: Path, threaded: None,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "TARGET_CHUNK", 1024)
    path = tmp_path / "rank-0.json"
    path.write_text(_text(_tricky_events(300)), encoding="utf-8")

    def broken(text: Any, bare: bool = False) -> Any:
        raise MemoryError("no memory for this piece")

    monkeypatch.setattr(native, "scan", broken)
    with pytest.raises(MemoryError, match="no memory"):
        decode_trace(path, workers=2)


@pytest.mark.parametrize("files,max_workers,share", [(1, 4, 4), (2, 4, 2), (3, 4, 1),
                                                     (8, 4, 1), (1, 1, 1)])
def test_each_file_gets_its_share_of_the_workers(files: int, max_workers: int, share: int,
                                                 tmp_path: Path) -> None:
    from hta.job.executors import resolve_executor
    from hta.job.load import _load_tasks

    paths = [tmp_path / f"rank-{i}.json" for i in range(files)]
    tasks = _load_tasks(paths, {}, (), resolve_executor(None, None, max_workers), None,
                        max_workers, None)
    assert [t.decode_workers for t in tasks] == [share] * files


def test_a_truncated_file_is_one_load_error(tmp_path: Path, threaded: None,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzip stream cut short fails as on one thread: one TraceLoadError naming it."""
    from hta.errors import TraceLoadError

    monkeypatch.setattr(stream, "TARGET_CHUNK", 1024)
    whole = gzip.compress(_text(_tricky_events(2000)).encode())
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(whole[: len(whole) * 2 // 3])
    for workers in (1, 3):
        with pytest.raises(TraceLoadError, match="truncated or corrupt"):
            decode_trace(path, workers=workers)


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_a_file_behind_a_url_decodes_alike_on_threads(packed: bool, tmp_path: Path,
                                                      threaded: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A file read through fsspec (``memory://``) is cut and scanned on threads too."""
    import uuid

    fsspec = pytest.importorskip("fsspec")
    monkeypatch.setattr(stream, "TARGET_CHUNK", 2048)
    text = _text(_tricky_events(500, seed=4)).encode()
    data = gzip.compress(text) if packed else text
    url = f"memory://hta-split-{uuid.uuid4().hex[:8]}/rank-0.json" + (".gz" if packed else "")
    fsspec.filesystem("memory").pipe(url, data)
    local = tmp_path / "rank-0.json"
    local.write_bytes(text)
    try:
        one = decode_trace(local, workers=1)
        assert_same(one, decode_trace(url, workers=3))
    finally:
        fsspec.filesystem("memory").rm(url)
