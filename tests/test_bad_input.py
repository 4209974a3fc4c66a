"""Broken and unusual trace files, written into ``tmp_path`` by each test.

Each case either loads (and the repair or oddity is recorded in ``meta['warnings']`` and
logged with the file's name) or fails with a ``TraceError`` whose message names the file
and the problem and says what to do. The decisions are documented in docs/loading.md.
"""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli
from kineto_builder import TraceBuilder

from hta.errors import TraceDiscoveryError, TraceError, TraceLoadError
from hta.kineto import native
from hta.trace_analysis import TraceAnalysis


@pytest.fixture(autouse=True, params=["native", "python"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run each test on the native column builder and on the pure-Python decoder."""
    if request.param == "native" and not native.built():
        pytest.skip("the native scanner (hta.kineto._scan) is not built")
    monkeypatch.setenv("HTA_NATIVE", "1" if request.param == "native" else "0")
    return request.param


def trace_text(events: list[dict[str, Any]], **top: Any) -> str:
    return json.dumps({"schemaVersion": 1, "distributedInfo": {"rank": 0}, **top,
                       "traceEvents": events})


def op(name: str = "aten::mm", ts: Any = 1000.123, dur: Any = 5.5, **extra: Any) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
            "dur": dur, **extra}


def load_file(path: Path, **kwargs: Any) -> TraceAnalysis:
    return TraceAnalysis(trace_files=[path], cache=False, progress=False, **kwargs)


def load_error(path: Path) -> TraceLoadError:
    """The error a strict load of one file raises."""
    with pytest.raises(TraceLoadError) as info:
        load_file(path, strict=True)
    err = info.value
    assert err.path == str(path)
    assert str(err).startswith(f"{path}: ")  # the message names the file first
    assert isinstance(err, TraceError) and err.exit_code == 3  # hta's trace-error status
    return err


def logged(caplog: pytest.LogCaptureFixture, path: Path, text: str) -> bool:
    """Whether a warning naming ``path`` and containing ``text`` was logged."""
    return any(str(path) in r.getMessage() and text in r.getMessage()
               and r.levelno == logging.WARNING for r in caplog.records)


# --------------------------------------------------------------------------------------------
# files that cannot be read
# --------------------------------------------------------------------------------------------


def test_truncated_gzip(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(gzip.compress(trace_text([op()]).encode())[:-20])
    err = load_error(path)
    assert "gzip stream is truncated or corrupt" in err.problem
    assert "collect the trace again" in str(err)


def test_truncated_json(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([op(), op("aten::add")])[:-30])
    err = load_error(path)
    assert "invalid JSON" in err.problem
    assert "looks truncated" in str(err)


def test_unescaped_quote_in_a_name_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    text = json.dumps({"traceEvents": [op("aten::mm")]}, indent=1).replace(
        "aten::mm", 'aten::"mm')
    path.write_text(text)
    quote = text.index('"mm')
    line = text.count("\n", 0, quote) + 1
    column = quote - text.rfind("\n", 0, quote) + 1  # the parser stops just after it
    assert line > 1
    err = load_error(path)
    assert f"invalid JSON at line {line}, column {column}" in err.problem
    assert "unescaped quote" in str(err)


@pytest.mark.parametrize(("content", "shown"), [
    (b"hello world, this is no trace", "'hello world, thi'"),
    (bytes(range(200, 216)), "the bytes c8 c9 ca cb cc cd ce cf"),
], ids=["text", "binary"])
def test_a_file_that_is_not_json_is_called_so_not_truncated(tmp_path: Path, content: bytes,
                                                            shown: str) -> None:
    path = tmp_path / "rank-0.json"
    path.write_bytes(content)
    err = load_error(path)
    assert err.problem == (f"not JSON: the file starts with {shown}, where a Kineto trace "
                           "starts with '{'")
    assert "truncated" not in str(err) and "not a profiler trace" in str(err)


def test_a_gz_name_on_a_file_that_is_not_gzip_is_said(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(b"BZh91AY&SY a bzip2 file, not gzip")
    err = load_error(path)
    assert err.problem == ("the file is named .gz but is not gzip (no gzip header) and not "
                           "JSON either: it starts with 'BZh91AY&SY a bzi'")
    # plain JSON named .gz loads; cut short, the error says both
    path.write_text(trace_text([op(), op("aten::add")])[:-30])
    err = load_error(path)
    assert "invalid JSON" in err.problem and err.problem.endswith(
        "the file is named .gz but is not gzip (it was read as plain text)")
    assert "looks truncated" in str(err)
    path.write_text(trace_text([op()]))
    assert len(load_file(path, strict=True).t.get_trace(0)) == 1


def test_zero_byte_file(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_bytes(b"")
    assert load_error(path).problem == "the file is empty (0 bytes)"


@pytest.mark.parametrize(("text", "problem"), [
    ('{"a": 1}', "the file is JSON but not a Kineto trace: no 'traceEvents' "
                 "(top-level keys: a)"),
    ("[1, 2]", "the file is JSON but not a Kineto trace (its top level is not an object "
               "or 'traceEvents' is not a list)"),
    ('{"traceEvents": {}}', "the file is JSON but not a Kineto trace (its top level is not "
                            "an object or 'traceEvents' is not a list)"),
])
def test_json_that_is_not_a_trace(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(text)
    assert load_error(path).problem == problem


# --------------------------------------------------------------------------------------------
# files that load after a repair, with a warning
# --------------------------------------------------------------------------------------------


def test_control_characters_in_a_name_are_repaired(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([op("aten::mm"), op("aten::add", ts=2000)]).replace(
        "aten::mm", "aten::\x01mm\x1f"))
    with pytest.raises(json.JSONDecodeError):
        json.loads(path.read_text())  # the file really is invalid JSON
    with caplog.at_level(logging.WARNING, logger="hta"):
        rt = load_file(path).t.rank(0)
    assert rt.decoded()["name"].tolist() == ["aten:: mm ", "aten::add"]
    assert "repaired: control characters replaced by spaces" in rt.meta["warnings"]
    assert logged(caplog, path, "control characters")


def test_invalid_utf8_in_a_name_is_repaired(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_bytes(trace_text([op("aten::mmXX")]).encode().replace(b"XX", b"\xff\xfe"))
    rt = load_file(path, strict=True).t.rank(0)
    assert rt.decoded()["name"].tolist() == ["aten::mm\ufffd\ufffd"]
    assert "repaired: invalid UTF-8 replaced by U+FFFD" in rt.meta["warnings"]


def test_invalid_utf8_never_ends_in_a_bare_exception(tmp_path: Path) -> None:
    # Whatever the repair does, a non-strict load of a folder keeps the good ranks.
    path = tmp_path / "rank-1.json"
    path.write_bytes(trace_text([op("aten::mmXX")], distributedInfo={"rank": 1})
                     .encode().replace(b"XX", b"\xff\xfe"))
    TraceBuilder(rank=0).write(tmp_path / "rank-0.json")
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    assert 0 in analyzer.ranks
    assert analyzer.skipped == {} or list(analyzer.skipped) == [str(path)]


def test_numbers_beyond_int64_in_args(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([
        op("record_param_comms", **{"args": {"Comms Id": 2**70, "External id": 2**65,
                                             "Seq": 2**70, "Collective name": "allreduce"}}),
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2000, "dur": 1,
         "args": {"correlation": 2**64, "stream": 7, "device": 0}},
    ]))
    rt = load_file(path, strict=True).t.rank(0)
    ev = rt.decoded()
    assert ev["name"].tolist() == ["record_param_comms", "k"]
    assert ev["external_id"].tolist() == [-1, -1]
    assert ev["correlation"].tolist() == [-1, -1]
    assert rt.tables["collective_args"]["seq"].tolist() == [float(2**70)]
    warnings = " ".join(rt.meta["warnings"])
    assert "'External id' were not integers in int64 range" in warnings
    assert "'correlation' were not integers in int64 range" in warnings


def test_nan_literal_in_dur_and_args_keeps_the_event(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2000,
              "dur": 1, "args": {"stream": 7, "est. achieved occupancy %": "@NAN@"}}
    path.write_text(trace_text([op(dur="@NAN@"), kernel]).replace('"@NAN@"', "NaN"))
    rt = load_file(path, strict=True).t.rank(0)
    ev = rt.decoded()
    assert ev["name"].tolist() == ["aten::mm", "k"]
    assert ev["dur"].tolist() == [0, 1000]
    assert rt.tables["kernel_args"]["est_achieved_occupancy_pct"].isna().all()


def test_fields_of_unexpected_types_keep_their_event(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([
        # Triton ops write args.grid as text
        op("triton_poi_fused_add_0", ts=1, dur=2, args={"grid": "grid(100,)", "stream": 0}),
        op("odd_dur", ts=3, dur=[1]),          # a list where a number belongs
        5,                                     # not an event at all
        op("plain", ts=4, dur=1),
    ]))
    rt = load_file(path, strict=True).t.rank(0)
    ev = rt.decoded()
    assert ev["name"].tolist() == ["triton_poi_fused_add_0", "odd_dur", "plain"]
    assert ev["ts"].tolist() == [1000, 3000, 4000]
    assert ev["dur"].tolist() == [2000, 0, 1000]
    warnings = " ".join(rt.meta["warnings"])
    assert "1 event(s) that are not JSON objects skipped" in warnings
    assert "had a field of an unexpected type; read loosely" in warnings


def test_nan_literal_in_ts_drops_only_that_event(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([op("a", ts="@NAN@"), op("b", ts=5)]).replace('"@NAN@"', "NaN"))
    rt = load_file(path, strict=True).t.rank(0)
    assert rt.decoded()["name"].tolist() == ["b"]
    assert rt.events["ts"].tolist() == [5000]
    assert "repaired: NaN/Infinity literals replaced by null" in rt.meta["warnings"]
    assert "1 complete event(s) had no usable 'ts'; dropped" in rt.meta["warnings"]


def kineto_layout(events: list[dict[str, Any]]) -> str:
    """Text in the layout Kineto writes: one event per line, each after a newline and
    two spaces (large files in this layout are decoded piece by piece)."""
    head = ('{\n  "schemaVersion": 1,\n  "distributedInfo": {"backend": "nccl", "rank": 0, '
            '"world_size": 2},\n  "traceEvents": [')
    body = ",".join("\n  " + json.dumps(e) for e in events)
    return head + body + '\n],\n  "traceName": "built"\n}'


KINETO_EVENTS = [op(f"op{i}", ts=1000 + i, dur=0.5) for i in range(50)]


@pytest.mark.parametrize("gz", [False, True], ids=["json", "gzip"])
def test_kineto_layout_truncated_mid_events(tmp_path: Path, gz: bool) -> None:
    text = kineto_layout(KINETO_EVENTS).encode()
    cut = text[: len(text) // 2]  # ends inside traceEvents, on an event boundary or not
    path = tmp_path / ("rank-0.json.gz" if gz else "rank-0.json")
    path.write_bytes(gzip.compress(cut) if gz else cut)
    err = load_error(path)  # never a silently shortened trace
    assert "invalid JSON" in err.problem and "looks truncated" in str(err)


def test_kineto_layout_repairs_and_errors(tmp_path: Path) -> None:
    text = kineto_layout(KINETO_EVENTS)
    good = tmp_path / "good.json"
    good.write_text(text)
    assert len(load_file(good, strict=True).t.rank(0).events) == 50
    ctrl = tmp_path / "ctrl.json"
    ctrl.write_text(text.replace('"op3"', '"op\x013"'))
    rt = load_file(ctrl, strict=True).t.rank(0)
    assert len(rt.events) == 50 and "op 3" in set(rt.decoded()["name"])
    assert "repaired: control characters replaced by spaces" in rt.meta["warnings"]
    quote = tmp_path / "quote.json"
    quote.write_text(text.replace('"op3"', '"op"3"'))
    err = load_error(quote)
    at = text.index('"op3"') + 4  # where the parser stops: just after the stray quote
    line = text.count("\n", 0, at) + 1
    column = at - text.rfind("\n", 0, at)
    assert f"invalid JSON at line {line}, column {column}" in err.problem


# --------------------------------------------------------------------------------------------
# odd but valid content
# --------------------------------------------------------------------------------------------


def test_empty_trace_events_loads_with_zero_events(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([]))
    analyzer = load_file(path, strict=True)
    rt = analyzer.t.rank(0)
    assert len(rt.events) == 0
    assert all(len(t) == 0 for t in rt.tables.values())
    assert rt.meta["trace_start_ns"] is None and rt.meta["trace_end_ns"] is None
    summary = analyzer.get_rank_summary()
    assert summary[["rank", "events", "gpu_events"]].to_dict(orient="records") == [
        {"rank": 0, "events": 0, "gpu_events": 0}]
    proc = run_cli(["summary", str(tmp_path), "--no-cache", "--json"])
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    rows = payload["rank_summary"] if "rank_summary" in payload else payload["ranks"]
    assert rows[0]["events"] == 0 and rows[0]["gpu_events"] == 0
    assert rows[0]["gpu_idle_pctg"] is None


def test_events_missing_dur(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "rank-0.json"
    event = op("no_dur", ts=7)
    del event["dur"]
    path.write_text(trace_text([event, op("with_dur", ts=8, dur=2)]))
    with caplog.at_level(logging.WARNING, logger="hta"):
        rt = load_file(path, strict=True).t.rank(0)
    assert rt.events["dur"].tolist() == [0, 2000]
    assert "1 complete event(s) had no 'dur'; taken as 0" in rt.meta["warnings"]
    assert logged(caplog, path, "had no 'dur'")


def test_negative_durations_are_clamped(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([op("neg", ts=7, dur=-3), op("pos", ts=8, dur=0.5)]))
    rt = load_file(path, strict=True).t.rank(0)
    assert rt.events["dur"].tolist() == [0, 500]
    assert (rt.events["end"] == rt.events["ts"] + rt.events["dur"]).all()
    assert "1 complete event(s) had a negative 'dur'; clamped to 0" in rt.meta["warnings"]


def test_string_pids_and_tids(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
         "tid": "Traces", "ts": 1, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "quoted", "pid": "12", "tid": "0x10", "ts": 2,
         "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "plain", "pid": 12, "tid": 16, "ts": 3, "dur": 1},
        {"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces",
         "tid": "", "ts": 4},
    ]))
    rt = load_file(path, strict=True).t.rank(0)
    named = rt.meta["named_ids"]
    assert set(named) == {"Spans", "Traces", ""}
    assert all(v < -1 for v in named.values())  # never -1 (absent) nor a real pid
    assert len(set(named.values())) == 3
    ev = rt.decoded()
    assert ev[["name", "pid", "tid"]].values.tolist() == [
        ["PyTorch Profiler (0)", named["Spans"], named["Traces"]],
        ["quoted", 12, 16], ["plain", 12, 16]]
    assert rt.tables["instants"][["pid", "tid"]].values.tolist() == [
        [named["Traces"], named[""]]]
    # the span with a named pid is not on any CPU thread's call stack
    assert ev["depth"].tolist()[0] == -1
    assert ev["parent"].tolist()[2] == -1  # "plain" and "quoted" are siblings, same thread


def test_rocm_hex_strings_and_quoted_numbers(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([
        {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1,
         "ts": 1, "dur": 3, "args": {"correlation": "12", "stream": "0x1", "cid": "0x2a",
                                     "kind": "0x0"}},
        {"ph": "X", "cat": "kernel", "name": "Cijk_Ailk_Bljk", "pid": 0, "tid": 1, "ts": 10,
         "dur": 2, "args": {"correlation": "12", "stream": "0x1", "device": "0",
                            "grid": [16, 1, 1], "block": [256, 1, 1]}},
    ]))
    rt = load_file(path, strict=True).t.rank(0)
    ev = rt.decoded()
    assert ev["correlation"].tolist() == [12, 12]
    assert ev["stream"].tolist() == [1, 1]
    assert ev["device"].tolist() == [-1, 0]
    assert ev["index_correlation"].tolist() == [1, 0]
    assert ev["kind"].astype(str).tolist() == ["runtime_launch", "computation"]
    assert rt.tables["kernel_args"][["grid_x", "block_x"]].values.tolist() == [[16, 256]]
    assert rt.meta["warnings"] == []


def test_one_odd_grid_does_not_wipe_the_other_kernels_grids(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([
        {"ph": "X", "cat": "kernel", "name": "k_plain", "pid": 0, "tid": 7, "ts": 10,
         "dur": 2, "args": {"stream": 7, "grid": [4, 1, 1], "block": [128, 1, 1]}},
        {"ph": "X", "cat": "kernel", "name": "k_hex", "pid": 0, "tid": 7, "ts": 20,
         "dur": 2, "args": {"stream": 7, "grid": ["0x10", 1, 1], "block": [256, 1, 1]}},
    ]))
    rt = load_file(path, strict=True).t.rank(0)
    grids = rt.tables["kernel_args"][["grid_x", "block_x"]].values.tolist()
    assert grids[0] == [4, 128]
    assert grids[1] == [16, 256]


# --------------------------------------------------------------------------------------------
# folders
# --------------------------------------------------------------------------------------------


def write_good(folder: Path, rank: int) -> Path:
    b = TraceBuilder(rank=rank)
    b.cpu_op("aten::mm", ts=1_000, dur=500)
    b.launch_kernel("sgemm", cpu_ts=1_100, cpu_dur=50, gpu_ts=2_000, gpu_dur=300)
    return b.write(folder / f"rank-{rank}.json.gz")


def test_folder_mixing_good_and_bad_files(tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    write_good(tmp_path, 0)
    write_good(tmp_path, 1)
    bad = tmp_path / "rank-2.json.gz"
    bad.write_bytes(gzip.compress(trace_text([op()]).encode())[:-20])
    with caplog.at_level(logging.WARNING, logger="hta"):
        analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    assert analyzer.ranks == [0, 1]
    assert list(analyzer.skipped) == [str(bad)]
    assert "gzip stream is truncated or corrupt" in analyzer.skipped[str(bad)]
    assert logged(caplog, bad, "gzip stream is truncated")
    with pytest.raises(TraceLoadError) as info:
        TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False, strict=True)
    assert info.value.path == str(bad)
    assert "gzip stream is truncated or corrupt" in str(info.value)


def test_folder_of_bad_files_only(tmp_path: Path) -> None:
    (tmp_path / "rank-0.json").write_bytes(b"")
    (tmp_path / "rank-1.json").write_text('{"a": 1}')
    with pytest.raises(TraceDiscoveryError) as info:
        TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    message = str(info.value)
    assert message.startswith("no rank could be loaded (")
    assert "rank-0.json: the file is empty" in message
    assert "rank-1.json: the file is JSON but not a Kineto trace" in message


def test_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(TraceDiscoveryError) as info:
        TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    message = str(info.value)
    assert str(tmp_path) in message
    assert "no trace files (*.json, *.json.gz)" in message and "(the folder is empty)" in message
    assert "point at the folder the profiler wrote, or pass trace_files=" in message


def test_folder_with_other_files_lists_them(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "trace.json.zst").write_bytes(b"x")
    with pytest.raises(TraceDiscoveryError, match=r"\(found: notes\.txt, trace\.json\.zst\)"):
        TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)


def test_missing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_dir"
    with pytest.raises(TraceDiscoveryError) as info:
        TraceAnalysis(trace_dir=missing, cache=False, progress=False)
    assert str(info.value) == f"trace folder not found: {missing}"


def test_missing_file_in_trace_files(tmp_path: Path) -> None:
    with pytest.raises(TraceDiscoveryError, match="trace file not found: .*rank-9.json"):
        TraceAnalysis(trace_dir=tmp_path, trace_files={9: "rank-9.json"}, cache=False,
                      progress=False)


def test_hidden_and_temporary_files_are_not_traces(tmp_path: Path) -> None:
    write_good(tmp_path, 0)
    (tmp_path / ".rank-1.json").write_text("{")          # hidden
    (tmp_path / "rank-1.json.tmp").write_text("{")       # Kineto's file before the rename
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    assert analyzer.ranks == [0] and analyzer.skipped == {}


def test_merged_parts_keep_named_ids_apart_when_their_ids_swap() -> None:
    """Parallel decode: a part that met "B" before "A" numbers them the other way round;
    the merge must not chain the two renumberings into one id."""
    from hta.kineto.decode import _decode_text, _merge

    def ev(pid: str, ts: int) -> dict:
        return {"ph": "X", "cat": "cpu_op", "name": "op", "pid": pid, "tid": 1, "ts": ts,
                "dur": 1}

    first = _decode_text(json.dumps([ev("A", 0)]).encode())
    second = _decode_text(json.dumps([ev("B", 1), ev("A", 2)]).encode())
    merged = _merge([first, second])
    pid = merged.columns["pid"].tolist()
    assert pid[0] == pid[2] != pid[1]
    assert merged.named_ids == {"A": pid[0], "B": pid[1]}


# --------------------------------------------------------------------------------------------
# one bad file never sinks the job; numbers within physical bounds
# --------------------------------------------------------------------------------------------


def test_pid_and_tid_beyond_int64_are_kept_apart_as_names(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([op("a", ts=1, pid=2**70), op("b", ts=2, tid=-(2**70)),
                                op("c", ts=3, pid=2**70)]))
    rt = load_file(path, strict=True).t.rank(0)
    ev = rt.decoded()
    assert ev["name"].tolist() == ["a", "b", "c"]
    pid = ev["pid"].tolist()
    assert pid[0] == pid[2] < -1 and pid[1] == 1  # the same wide pid is one process
    assert "2 pid/tid value(s) beyond int64; each kept apart as a named process or thread" \
        in rt.meta["warnings"]


def test_timestamps_beyond_int64_are_dropped_and_counted(
        tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([op("a", ts=1000), op("huge", ts=1e30), op("b", ts=1001),
                                op("neg", ts=-(2**64))]))
    rt = load_file(path, strict=True).t.rank(0)
    assert rt.decoded()["name"].tolist() == ["a", "b"]
    assert rt.events["ts"].tolist() == [1_000_000, 1_001_000]
    assert "2 complete event(s) had no usable 'ts'; dropped" in rt.meta["warnings"]
    assert any("outside the int64 nanosecond range" in w for w in rt.meta["warnings"])
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_durations_beyond_a_day_are_taken_as_zero(
        tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text([op("a", dur=2), op("b", dur=2**64), op("c", dur=1e30),
                                op("d", dur=86_400e6 + 1)]))
    rt = load_file(path, strict=True).t.rank(0)
    assert rt.events["dur"].tolist() == [2000, 0, 0, 0]
    assert ("3 complete event(s) had a 'dur' over one day or not finite; taken as 0"
            in rt.meta["warnings"])
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_events_a_day_away_from_the_others_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    base = 1_700_000_000_000_000  # µs since 1970
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0,
              "dur": 5, "args": {"stream": 7, "correlation": 3}}
    path.write_text(trace_text([op("a", ts=base), kernel, op("b", ts=base + 10),
                                op("c", ts=base + 20),
                                {"ph": "i", "s": "t", "name": "x", "pid": 1, "tid": 1,
                                 "ts": 5}]))
    rt = load_file(path, strict=True).t.rank(0)
    assert rt.decoded()["name"].tolist() == ["a", "b", "c"]
    assert len(rt.tables["kernel_args"]) == 0 and len(rt.tables["instants"]) == 0
    assert ("2 event(s) lay more than one day from the trace's other events; dropped"
            in rt.meta["warnings"])


@pytest.mark.parametrize("value", [None, -5, "@INF@", 2**64, "missing"])
def test_a_file_without_any_usable_duration_is_skipped(tmp_path: Path, value: Any) -> None:
    write_good(tmp_path, 0)
    events = [op(f"op{i}", ts=1000 + i) for i in range(5)]
    for e in events:
        if value == "missing":
            del e["dur"]
        else:
            e["dur"] = value
    bad = tmp_path / "rank-1.json"
    bad.write_text(trace_text(events, distributedInfo={"rank": 1}).replace(
        '"@INF@"', "Infinity"))
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False, max_workers=1)
    assert analyzer.ranks == [0]
    assert analyzer.skipped[str(bad)].startswith(
        "none of its 5 complete events has a usable 'dur'")
    assert load_error(bad).problem == analyzer.skipped[str(bad)]


def test_deep_nesting_skips_the_file(tmp_path: Path) -> None:
    write_good(tmp_path, 0)
    bad = tmp_path / "rank-1.json"
    bad.write_text(trace_text([op(args={"deep": "@DEEP@"})], distributedInfo={"rank": 1})
                   .replace('"@DEEP@"', "[" * 5000 + "]" * 5000))
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False, max_workers=1)
    assert analyzer.ranks == [0]
    assert "nested deeper than the JSON decoder allows" in analyzer.skipped[str(bad)]


def test_an_unexpected_error_skips_only_that_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import hta.job.rank_load as rank_load

    write_good(tmp_path, 0)
    bad = write_good(tmp_path, 1)
    real = rank_load.build_rank

    def build(decoded: Any, rank: int, rules: Any) -> Any:
        if rank == 1:
            raise ZeroDivisionError("division by zero")
        return real(decoded, rank, rules)

    monkeypatch.setattr(rank_load, "build_rank", build)
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False, max_workers=1)
    assert analyzer.ranks == [0]
    assert analyzer.skipped == {
        str(bad): "unexpected ZeroDivisionError while loading it: division by zero"}
    with pytest.raises(TraceLoadError) as info:
        TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False, max_workers=1,
                      strict=True)
    assert info.value.path == str(bad) and isinstance(info.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize("layout", ["kineto", "compact"])
@pytest.mark.parametrize("extra", ['"traceEvents": []', '"distributedInfo": {"rank": 0}'])
def test_a_duplicate_top_level_key_is_refused(tmp_path: Path, layout: str, extra: str) -> None:
    text = (kineto_layout(KINETO_EVENTS) if layout == "kineto"
            else json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": KINETO_EVENTS}))
    path = tmp_path / "rank-0.json"
    path.write_text(text[:-1] + ", " + extra + "}")
    key = extra.split('"')[1]
    assert load_error(path).problem == (f"the top level holds the key {key!r} more than "
                                        "once; which value is meant cannot be told")
    path.write_text("{" + extra + ", " + text.lstrip()[1:])
    assert key in load_error(path).problem


@pytest.mark.parametrize(("events", "warning"), [
    ([], "no complete ('X') events: the rank shows no activity ('traceEvents' is empty)"),
    ([{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}}],
     "no complete ('X') events: the rank shows no activity (the file has 1 other event(s): "
     "metadata, instants, flows, counters)"),
    ([{k: v for k, v in op(ts=t).items() if k != "cat"} for t in (1, 2)],
     "no complete event has a 'cat': none can be told apart (kernels, operators, copies), "
     "every event counts as other"),
    ([{k: v for k, v in op(ts=t).items() if k != "name"} for t in (1, 2)],
     "none of its 2 complete events has a 'name': tables and figures by operator or kernel "
     "show one unnamed row, and rules that look for a name (steps, syncs, collectives) find "
     "nothing; the file was written by a tool that drops names, or edited"),
], ids=["empty", "metadata-only", "no-cat", "no-name"])
def test_a_file_with_nothing_to_analyse_says_so(tmp_path: Path, events: list[dict],
                                                warning: str) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text(trace_text(events))
    assert warning in load_file(path, strict=True).t.rank(0).meta["warnings"]


@pytest.mark.parametrize(("rank", "world", "loaded_as", "warning"), [
    (-1, 2, 1, "distributedInfo.rank -1 is not a rank (a whole number from 0 to 2**20); "
               "rank 1 taken from the file name"),
    (1.5, 2, 1, "distributedInfo.rank 1.5 is not a rank (a whole number from 0 to 2**20); "
                "rank 1 taken from the file name"),
    ("one", 2, 1, "distributedInfo.rank 'one' is not a rank (a whole number from 0 to "
                  "2**20); rank 1 taken from the file name"),
    (99, 2, 99, "distributedInfo.rank 99 is not below its world_size 2"),
    (1, 1e30, 1, "distributedInfo.world_size 1000000000000000019884624838656 is not a "
                 "world size; ignored"),
], ids=["negative", "fraction", "text", "over-world-size", "huge-world-size"])
def test_odd_ranks_are_said_with_the_file(tmp_path: Path, rank: Any, world: Any,
                                          loaded_as: int, warning: str) -> None:
    write_good(tmp_path, 0)
    path = tmp_path / "rank-1.json"
    path.write_text(trace_text([op()], distributedInfo={"rank": rank, "world_size": world}))
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False, max_workers=1)
    assert analyzer.ranks == sorted({0, loaded_as}) and analyzer.skipped == {}
    assert warning in analyzer.t.rank(loaded_as).meta["warnings"]
    proc = run_cli(["summary", str(tmp_path), "--no-cache"])
    assert proc.returncode == 0, proc.stderr
    assert f"hta: warning: {warning} (rank {loaded_as}: rank-1.json)" in proc.stderr


def test_report_under_a_file_size_limit_leaves_no_partial_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    write_good(tmp_path / "job", 0)
    out = tmp_path / "r.html"
    limit = ("import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096)); "
             "from hta.cli import main; sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", limit, "report", str(tmp_path / "job"),
                           "--no-cache", "-o", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "File too large" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job"]  # no r.html, no r.html.tmp


def test_the_prefilter_knows_every_non_ascii_letter_of_ignorecase() -> None:
    """The prefilter folds exactly the characters ``re.IGNORECASE`` matches with an ASCII
    letter, digit or underscore (found by trying every code point)."""
    import re

    from hta.model.prefilter import IGNORECASE_ASCII

    word = re.compile("[a-z0-9_]", re.IGNORECASE)
    found = {cp: re.sub("[^a-z]", "", c.lower()) or c
             for cp in range(128, 0x110000) if word.fullmatch(c := chr(cp))}
    assert {cp: chr(IGNORECASE_ASCII[cp]) if isinstance(IGNORECASE_ASCII[cp], int)
            else IGNORECASE_ASCII[cp] for cp in found} == {
        0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}
    assert set(IGNORECASE_ASCII) == set(found)


@pytest.mark.parametrize("name", [
    "nccl\u212aernel_AllReduce",            # Kelvin sign for K: still NCCL
    "ncclDevKernel_AllReduce_é" + "漢" * 2000,
    "\u017fm80_xmma_gemm_f16f16",           # long s for s
    "void at::native::élémentwise_kernel",
    "Memcpy HtoD (Pageable -> Device) ✓",
])
def test_non_ascii_names_get_the_kinds_the_rules_give(name: str) -> None:
    """The prefilter applied to non-ASCII names (it used to be skipped for them, running
    every rule's expression on a 10 MB name) never changes a kind."""
    import re

    from hta.model.rules import DEFAULT_RULES, RuleSet

    def unfiltered(cat: str) -> str:
        for rule in DEFAULT_RULES:
            if rule.cat is not None and not re.search(rule.cat, cat):
                continue
            if rule.name is None or re.search(rule.name, name):
                return rule.kind
        return RuleSet().kind_of(cat, "\x00no rule matches this\x00")[0]

    for cat in ("kernel", "gpu_memcpy", "cpu_op", "cuda_runtime"):
        assert RuleSet().kind_of(cat, name)[0] == unfiltered(cat), (cat, name[:40])
