"""The native column builder (``hta.kineto._scan`` + ``native.py``) against the Python
decoder: identical tables, symbol ids and warnings on every real and sample trace and on
hand-written oddities; the scanner declines what it cannot decode exactly; and the
package loads without the extension."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, SHARED_TRACES, absent_reason

from hta.kineto import native, stream
from hta.kineto.decode import DecodedTrace, decode_trace
from hta.kineto.schema import DECODED_TABLES

pytestmark = pytest.mark.skipif(not native.built(),
                                reason="the native scanner (hta.kineto._scan) is not built")

TABLES = tuple(DECODED_TABLES)


def _decode(path: Path, monkeypatch: pytest.MonkeyPatch, use_native: bool) -> DecodedTrace:
    monkeypatch.setenv("HTA_NATIVE", "1" if use_native else "0")
    return decode_trace(path)


def assert_same(a: DecodedTrace, b: DecodedTrace) -> None:
    """Two decodes of one file are identical: columns, symbols, tables, warnings."""
    assert a.symbols.strings == b.symbols.strings
    assert a.columns.keys() == b.columns.keys()
    for key, col in a.columns.items():
        assert col.dtype == b.columns[key].dtype, key
        np.testing.assert_array_equal(col, b.columns[key], err_msg=key)
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), obj=name)
    assert a.named_ids == b.named_ids
    assert a.warnings == b.warnings
    assert a.top_level == b.top_level
    assert a.uncompressed_bytes == b.uncompressed_bytes


def _trace_files() -> list[Path]:
    files = sorted(p for p in (ROOT / "sample_traces").rglob("*.json*")
                   if ".hta_cache" not in p.parts and p.name != "pair.json")  # manifests
    if SHARED_TRACES.exists():
        files += sorted(p for p in SHARED_TRACES.rglob("*.json*")
                        if ".hta_cache" not in p.parts and "execution_trace" not in p.parts
                        and "memory_analysis" not in p.parts)
    return files


@pytest.mark.parametrize("path", _trace_files(), ids=lambda p: str(p.relative_to(p.parents[1])))
def test_same_tables_on_real_and_sample_traces(path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    python = _decode(path, monkeypatch, False)
    fast = _decode(path, monkeypatch, True)
    assert_same(python, fast)
    assert len(fast.columns["ts"]) > 0


def test_the_scanner_takes_real_kineto_chunks() -> None:
    """On a real trace every piece is decoded natively (none falls back)."""
    from hta.kineto.stream import iter_event_chunks

    path = SHARED_TRACES / "df_index_resolver" / "df_index_resolver.json.gz"
    if not path.exists():
        pytest.skip(absent_reason(path))
    pieces = [p for kind, p in iter_event_chunks(path) if kind == "events"]
    assert pieces and all(native.scan(p) is not None for p in pieces)


def _event(**fields: Any) -> dict[str, Any]:
    base = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2,
            "ts": 1712195495519689.047, "dur": 5.5, "args": {"External id": 3}}
    base.update(fields)
    return base


def _text(events: list[Any]) -> str:
    """Kineto's layout (one event per line) so the streaming path and scanner see it."""
    body = ",\n  ".join(json.dumps(e) if not isinstance(e, str) else e for e in events)
    return '{"schemaVersion": 1, "traceEvents": [\n  ' + body + "\n]}"


KERNEL = _event(cat="kernel", name="k<1>", pid=0, tid=7, args={
    "device": 0, "stream": 7, "correlation": 11, "registers per thread": 32,
    "shared memory": 0, "blocks per SM": 0.5, "warps per SM": 2.0, "grid": [4, 1, 1],
    "block": [128, 1, 1], "est. achieved occupancy %": 12})

#: Traces mixing ordinary events with one oddity each; both paths must agree.
ODDITIES: dict[str, list[Any]] = {
    "plain": [_event(), KERNEL],
    "escaped names": [_event(name='say "hi" \\ caf\u00e9 \U0001F600'), _event(name="a\u00e9")],
    "escaped name text": ['{"ph": "X", "cat": "cpu_op", "name": "q\\"\\u00e9\\ud83d\\ude00",'
                          ' "pid": 1, "tid": 1, "ts": 5.5, "dur": 1}'],
    "named pid and tid": [_event(pid="Spans", tid="PyTorch Profiler"), _event(pid="0x10"),
                          _event(pid="", tid=3), _event()],
    "exponent ts": [_event(ts=1.5e3), _event()],
    "string ts": [_event(ts="1000.5"), _event()],
    "missing ts and dur": [_event(ts=None), {"ph": "X", "name": "a", "ts": 3},
                           {"ph": "X", "name": "b", "dur": 2}],
    "negative and fractional": [_event(ts=-5.25, dur=-1), _event(ts=1.0005, dur=0.0004),
                                _event(ts=17, dur=3)],
    "null values": [_event(args={"External id": None, "stream": None}), _event(dur=None)],
    "null name": [_event(name=None), _event()],
    "int name": [_event(name=5), _event()],
    "string ints": [_event(args={"External id": "0x1c", "correlation": "7"}), _event()],
    "float int": [_event(args={"stream": 7.0}), _event()],
    "huge int": [_event(args={"correlation": 2**70}), _event()],
    "bool arg": [_event(args={"cbid": True}), _event()],
    "duplicate key": ['{"ph": "X", "name": "a", "name": "b", "ts": 1, "dur": 1}'],
    "odd dims": [_event(cat="kernel", args={"grid": [1, 2]}),
                 _event(cat="kernel", args={"grid": "n/a", "block": [1, 2, 3, 4]}),
                 _event(cat="kernel", args={"grid": ["0x2", 1, 1]})],
    "other phases": [_event(), {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                                "ts": 4.5, "args": {"Addr": 77, "Bytes": 512,
                                                    "Total Allocated": 1024}},
                     {"ph": "s", "id": 9, "pid": 1, "tid": 2, "ts": 5, "cat": "ac2g",
                      "name": "ac2g"},
                     {"ph": "f", "id": 9, "pid": 0, "tid": 7, "ts": 6, "cat": "ac2g",
                      "name": "ac2g", "bp": "e"},
                     {"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
                      "args": {"name": "python", "labels": "CPU", "sort_index": 3}},
                     {"ph": "C", "name": "mem", "pid": 1, "tid": 0, "ts": 7,
                      "args": {"used": 3, "free": 4.5}},
                     {"ph": "B", "name": "x", "pid": 1, "tid": 1, "ts": 1},
                     {"name": "no phase", "ts": 2}, {"ph": "I", "name": "j", "ts": 3}],
    "args of every side table": [
        KERNEL,
        _event(cat="gpu_memcpy", name="Memcpy HtoD", args={"bytes": 4096,
                                                           "memory bandwidth (GB/s)": 1.5}),
        _event(cat="cuda_runtime", name="cudaMemcpyAsync", args={"size": 4096}),
        _event(name="record_param_comms", args={
            "Collective name": "allreduce", "dtype": "Float", "In msg nelems": 10,
            "Out msg nelems": 10, "Group size": 2, "Process Group Name": "0",
            "Process Group Description": "default_pg", "Process Group Ranks": [0, 1],
            "Seq": 4}),
        _event(args={"Input Dims": [[2, 3], []], "Input type": ["float", ""],
                     "Sequence number": 9, "Fwd thread id": 1}),
        _event(args={"Input dims": [[5]]}),
        _event(cat="cuda_sync", name="Event Sync", args={
            "wait_on_stream": 7, "wait_on_cuda_event_record_corr_id": 11}),
        _event(cat="user_annotation", name="ProfilerStep#1", args={"Seq": "x"}),
    ],
    "unknown nested values": [_event(args={"External id": 1, "extra": {"a": [1, {"b": None}],
                                                                      "c": "\u00e9"}}),
                              _event(extra=[True, False, None, -1.5e-3])],
    "not an object": [_event(), "[1, 2]", "17"],
    "args not an object": [_event(args=None), _event()],
    "lone flow without ts": [_event(), {"ph": "f", "id": 1, "pid": 0, "tid": 7,
                                        "cat": "ac2g", "name": "ac2g", "bp": "e"}],
}


@pytest.mark.parametrize("piece_bytes", [None, 256], ids=["one piece", "small pieces"])
@pytest.mark.parametrize("name", sorted(ODDITIES))
def test_same_result_on_oddities(name: str, piece_bytes: int | None, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """With small pieces every piece but the last is scanned in place ("bare"), and a
    declined piece goes to the Python decoder on its own."""
    if piece_bytes:
        monkeypatch.setattr(stream, "TARGET_CHUNK", piece_bytes)
    path = tmp_path / "rank-0.json"
    path.write_text(_text(ODDITIES[name] * 3), encoding="utf-8")
    assert_same(_decode(path, monkeypatch, False), _decode(path, monkeypatch, True))


@pytest.mark.parametrize("text,declined", [
    ('[{"ph": "X", "ts": 1.5e3}]', True),
    ('[{"ph": "X", "ts": "12"}]', True),
    ('[{"ph": "X", "name": null}]', True),
    ('[{"ph": "X", "pid": null}]', True),
    ('[{"ph": "X", "args": {"stream": "7"}}]', True),
    ('[{"ph": "X", "ph": "X"}]', True),
    ('[{"ph": "X", "name": "\\q"}]', True),
    ('[{"ph": "X", "name": "\\ud800"}]', True),
    ('[{"ph": "X", "ts": 12345678901234567}]', True),
    ('[{"ph": "X", "x": NaN}]', True),
    ('[{"ph": "X"}, 5]', True),
    ('[{"ph": "X"}', True),
    ('[{"ph": "X", "ts": 1712195495519689.047, "args": {"stream": null}}]', False),
    ("[]", False),
])
def test_scanner_declines_what_it_cannot_decode_exactly(text: str, declined: bool) -> None:
    assert (native.scan(text.encode()) is None) is declined


@pytest.mark.parametrize("text,events", [
    ("", 0), ("  \n ", 0), ('{"ph": "X"}', 1), ('\n  {"ph": "X"},\n  {"ph": "i"}\n', 2),
    ('{"ph": "X"},', None), ('[{"ph": "X"}]', None), ('{"ph": "X"} {"ph": "X"}', None),
])
def test_bare_pieces(text: str, events: int | None) -> None:
    """Events separated by commas without brackets, as the streaming reader hands them."""
    chunk = native.scan(memoryview(text.encode()), bare=True)
    assert (chunk.n if chunk is not None else None) == events


def test_exact_nanoseconds() -> None:
    chunk = native.scan(b'[{"ts": 1712195495519689.047}, {"ts": -5.25}, {"ts": 7.123456},'
                        b' {"ts": 1669783688143814}, {"ts": 0.5}, {}]')
    assert chunk is not None
    assert chunk.cols["ts"].tolist() == [1712195495519689047, -5250, 7123,
                                         1669783688143814000, 500, 0]
    assert chunk.cols["ts_present"].tolist() == [True] * 5 + [False]


def test_loads_without_the_extension() -> None:
    """With the compiled module missing, the package imports and loads (Python decoder)."""
    code = (
        "import sys; sys.modules['hta.kineto._scan'] = None\n"
        "from hta.kineto import native\n"
        "assert not native.built() and not native.available()\n"
        "from hta.trace_analysis import TraceAnalysis\n"
        f"ta = TraceAnalysis(trace_dir={str(ROOT / 'sample_traces' / 'synthetic_4rank')!r},"
        " cache=False, progress=False)\n"
        "print(sorted(ta.ranks))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0, 1, 2, 3]"


def test_switched_off_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTA_NATIVE", "0")
    assert not native.available()
    monkeypatch.setenv("HTA_NATIVE", "1")
    assert native.available()


def _partials_equal(a: Any, b: Any) -> bool:
    if a.symbols != b.symbols or a.named_ids != b.named_ids or a.warnings != b.warnings:
        return False
    if a.stats != b.stats or a.counter_count != b.counter_count:
        return False
    for key, col in a.columns.items():
        if col.dtype != b.columns[key].dtype or not np.array_equal(
                col, b.columns[key], equal_nan=col.dtype.kind == "f"):
            return False
    for name, table in a.tables.items():
        if set(table) != set(b.tables[name]):
            return False
        for col, x in table.items():
            y = b.tables[name][col]
            if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
                x, y = np.asarray(x), np.asarray(y)
                if x.dtype != y.dtype or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
                    return False
            elif list(x) != list(y):
                return False
    return True


def test_mutated_chunks_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random edits of real events: whenever the scanner accepts a chunk, msgspec accepts
    it too and both decoders give the same columns, tables and warnings."""
    import random

    import msgspec

    from hta.kineto.pydecode import Accumulator
    from hta.kineto.stream import iter_event_chunks

    def decode(text: bytes, use_native: bool) -> Any:
        monkeypatch.setenv("HTA_NATIVE", "1" if use_native else "0")
        acc = Accumulator()
        try:
            acc.decode_chunk(text)
        except (msgspec.DecodeError, ValueError) as exc:
            return type(exc).__name__
        return acc.partial()

    items: list[bytes] = []
    for path in sorted(p for p in (ROOT / "sample_traces").rglob("*.json.gz")
                       if ".hta_cache" not in p.parts):
        for kind, piece in iter_event_chunks(path):
            if kind == "events":
                items += [bytes(r) for r in msgspec.json.decode(piece, type=list[msgspec.Raw])]
    rng = random.Random(11)
    alphabet = b'{}[]",:\\ 0123456789.eE-+nulltruefalseXu'
    accepted = 0
    for _ in range(400):
        text = bytearray(b"[" + b",".join(rng.sample(items, 4)) + b"]")
        for _ in range(rng.randint(0, 2)):
            pos = rng.randrange(len(text))
            op = rng.random()
            if op < 0.4:
                text[pos] = rng.choice(alphabet)
            elif op < 0.7:
                del text[pos:pos + rng.randint(1, 3)]
            else:
                text[pos:pos] = bytes([rng.choice(alphabet)])
        if native.scan(bytes(text)) is None:
            continue
        accepted += 1
        python, fast = decode(bytes(text), False), decode(bytes(text), True)
        assert not isinstance(python, str), f"scanner accepted what msgspec rejects: {text!r}"
        assert _partials_equal(python, fast), bytes(text)
    assert accepted > 100
