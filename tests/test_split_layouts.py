"""Any JSON layout streams: compact one-line and indented traces are cut at event ends
(:mod:`hta.kineto.split`) and decode to the same tables as Kineto's one-event-per-line
layout, in bounded pieces, with the C and the NumPy splitter alike."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_TRACES, absent_reason

from hta.kineto import split, stream
from hta.kineto.decode import DecodedTrace, decode_trace
from hta.kineto.split import Splitter

TABLES = ("kernel_args", "memory_args", "copy_sizes", "collective_args", "op_args",
          "sync_args", "counters", "metadata_events")
SPLITTERS = [pytest.param(False, id="numpy"),
             pytest.param(True, id="C", marks=pytest.mark.skipif(
                 split._split is None, reason="the C splitter is not built"))]


def _tricky_events(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Events whose names hold every character that matters to the splitter: quotes,
    escaped backslashes, braces and brackets inside strings, nested args."""
    rng = random.Random(seed)
    names = ['a"b', "c\\\\", "x{y}", "[z]", '\\"q', "plain", "}", "]", "é✓"]
    return [{"ph": "X", "cat": "cpu_op", "name": rng.choice(names) + str(i), "pid": 1,
             "tid": 2, "ts": 10 * i, "dur": 5,
             "args": {"l": [1, {"k": "}]"}], "Input Dims": [[2, 3], []]}}
            for i in range(n)]


def _boundaries(body: bytes, native: bool, cuts: list[int]) -> tuple[list[int], int]:
    sp = Splitter(native=native)
    pos, ends, array_end = 0, [], -1
    for cut in cuts:
        found = sp.scan(body[:cut], pos)
        pos = found.scanned
        if found.last_end >= 0:
            ends.append(found.last_end)
        if found.array_end >= 0:
            array_end = found.array_end
            break
    return ends, array_end


@pytest.mark.parametrize("native", SPLITTERS)
@pytest.mark.parametrize("indent", [None, 0, 2, 4], ids=lambda i: f"indent={i}")
def test_splitter_finds_every_event_end_at_any_cut(native: bool, indent: int | None) -> None:
    events = _tricky_events(200)
    text = json.dumps({"traceEvents": events, "after": [1]}, indent=indent,
                      ensure_ascii=False).encode()
    body = text[text.index(b"[") + 1:]
    rng = random.Random(1)
    for _ in range(25):
        cuts = sorted(rng.sample(range(1, len(body)), 12)) + [len(body)]
        ends, array_end = _boundaries(body, native, cuts)
        assert array_end == body.rindex(b"]", 0, body.rindex(b"after"))
        got, prev = [], 0
        for end in ends:
            got += json.loads(b"[" + body[prev:end].lstrip(b", \n") + b"]")
            prev = end
        assert got == events


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth > 3 or pick < 0.4:
        return rng.choice(['a"b', "\\", "{", "}", "[", "]", '\\"', "", "x", 1, 2.5, None])
    if pick < 0.7:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice("abc}{]["): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def test_c_and_numpy_splitters_agree_at_every_cut() -> None:
    """On valid JSON cut anywhere (so a cut may fall inside a string or an escape), the
    two splitters report the same boundaries and the same state."""
    if split._split is None:
        pytest.skip("the C splitter is not built")
    rng = random.Random(2)
    for _ in range(150):
        events = [_random_json(rng) for _ in range(rng.randint(0, 6))]
        text = json.dumps(events, indent=rng.choice([None, 1])).encode()[1:]
        a, b = Splitter(native=True), Splitter(native=False)
        pos_a = pos_b = 0
        for cut in sorted(rng.sample(range(len(text) + 1), min(6, len(text) + 1))):
            ra, rb = a.scan(text[:cut], pos_a), b.scan(text[:cut], pos_b)
            assert (ra, a.in_string, a.escaped, a.depth) == \
                (rb, b.in_string, b.escaped, b.depth), (text, cut)
            pos_a, pos_b = ra.scanned, rb.scanned


def _layouts(src: dict[str, Any], folder: Path) -> dict[str, Path]:
    events = ",\n  ".join(json.dumps(e) for e in src["traceEvents"])
    rest = {k: v for k, v in src.items() if k != "traceEvents"}
    kineto = '{\n  "traceEvents": [\n  ' + events + "\n  ],\n" + json.dumps(rest)[1:]
    paths = {"kineto": folder / "kineto.json", "compact": folder / "compact.json",
             "indent": folder / "indent.json.gz"}
    paths["kineto"].write_text(kineto)
    paths["compact"].write_text(json.dumps(src, separators=(",", ":")))
    with gzip.open(paths["indent"], "wt") as fh:
        json.dump(src, fh, indent=2)
    return paths


def _named(decoded: DecodedTrace, col: np.ndarray) -> np.ndarray:
    """pid/tid ids with the named ones (negative, numbered in first-seen order, which
    depends on where pieces are cut) replaced by their names."""
    names = {v: k for k, v in decoded.named_ids.items()}
    return np.asarray([names.get(int(v), int(v)) for v in col], dtype=object)


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Raw JSON text cells (kept as written, so spacing differs by layout) parsed."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = [_parsed(v) for v in out[col]]
    return out


def _parsed(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def assert_same_content(a: DecodedTrace, b: DecodedTrace) -> None:
    """The same events and tables; symbol and named pid/tid ids may differ (they are
    numbered in first-seen order, which depends on where pieces are cut)."""
    sa = np.asarray(a.symbols.strings, dtype=object)
    sb = np.asarray(b.symbols.strings, dtype=object)
    for key, col in a.columns.items():
        other = b.columns[key]
        if key in ("name", "cat"):
            np.testing.assert_array_equal(sa[col], sb[other], err_msg=key)
        elif key in ("pid", "tid"):
            np.testing.assert_array_equal(_named(a, col), _named(b, other), err_msg=key)
        else:
            np.testing.assert_array_equal(col, other, err_msg=key)
    for name in TABLES:
        pd.testing.assert_frame_equal(_plain(getattr(a, name)), _plain(getattr(b, name)),
                                      obj=name)
    assert a.warnings == b.warnings and a.named_ids.keys() == b.named_ids.keys()
    assert a.top_level.keys() == b.top_level.keys()


@pytest.mark.parametrize("native", ["0", "1"], ids=["python", "native"])
def test_every_layout_decodes_alike_in_small_pieces(native: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTA_NATIVE", native)
    monkeypatch.setattr(stream, "TARGET_CHUNK", 2048)
    src = {"schemaVersion": 1, "deviceProperties": [{"name": "GPU"}],
           "traceEvents": _tricky_events(400, seed=3), "traceName": "x"}
    paths = _layouts(src, tmp_path)
    pieces = [k for k, _ in stream.iter_event_chunks(paths["compact"])]
    assert pieces.count("events") > 10  # streamed, not one whole document
    want = decode_trace(paths["kineto"])
    for layout in ("compact", "indent"):
        assert_same_content(want, decode_trace(paths[layout]))
        # read ahead by a thread (a lone file, several cores): the same content
        assert_same_content(want, decode_trace(paths[layout], workers=2))
    assert_same_content(want, decode_trace(paths["kineto"], workers=2))


def test_read_ahead_keeps_order_and_raises_in_order() -> None:
    assert list(stream.read_ahead(iter(range(50)), depth=2)) == list(range(50))

    def failing():
        yield 1
        yield 2
        raise stream.NotStreamable("no boundaries")

    got = []
    with pytest.raises(stream.NotStreamable, match="no boundaries"):
        for item in stream.read_ahead(failing()):
            got.append(item)
    assert got == [1, 2]


def test_read_ahead_stopped_early_closes_the_source() -> None:
    closed = []

    def source():
        try:
            yield from range(1000)
        finally:
            closed.append(True)

    reader = stream.read_ahead(source(), depth=1)
    assert next(reader) == 0
    reader.close()  # the consumer gave up (a decode error): the producer stops
    assert closed == [True]


def test_real_trace_in_every_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = SHARED_TRACES / "nccl_parser_config"
    files = sorted(path.glob("*.json*")) if path.exists() else []
    if not files:
        pytest.skip(absent_reason(path))
    opener = gzip.open if files[0].suffix == ".gz" else open
    with opener(files[0], "rt") as fh:
        src = json.load(fh)
    monkeypatch.setattr(stream, "TARGET_CHUNK", 1 << 18)
    want = decode_trace(files[0])
    for layout, p in _layouts(src, tmp_path).items():
        if layout != "kineto":
            assert_same_content(want, decode_trace(p))


def test_a_broken_document_still_falls_back_to_the_whole_document_repairs(
        tmp_path: Path) -> None:
    """A compact file with an unescaped quote in a name is repaired as before."""
    good = json.dumps({"traceEvents": _tricky_events(3)}, separators=(",", ":"))
    bad = good.replace('"plain', '"pl"ain', 1) if '"plain' in good else good
    path = tmp_path / "bad.json"
    path.write_text(bad)
    decoded = decode_trace(path)
    assert len(decoded.columns["ts"]) == 3
