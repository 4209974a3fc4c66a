"""A seeded mutation fuzzer of rank files, with the loading contract as its assertion.

Each case takes one rank file of a small 3-rank job (every side table filled) and
mutates it the way a careless user, a crashed writer or a hostile file would:
truncation, flipped bytes, missing fields, values of the wrong type, numbers beyond
int64 or beyond physics, nesting thousands deep, duplicate top-level keys, empty or
metadata-only event lists, events without ``cat``, odd ranks, huge non-ASCII names,
gzip. The contract, on both decoders (native and pure Python):

* the command exits 0 (or 3, with one line naming the file), never with a traceback
  or a raw numpy ``RuntimeWarning`` on stderr;
* a file that is not loaded is listed as skipped with its reason (``--json``'s
  ``skipped``; the text output's ``hta: warning: skipped FILE: reason`` line is
  tested in test_cli.py);
* the other ranks load;
* no figure of a loaded rank is outside physical bounds (percentages within 0-100,
  times and counts not negative, no time over a day, every number finite).

The quick run takes two seeded cases of every class through the Python API (the job,
and the file alone with ``strict=True``), and one skipped and one loaded case through
the command; the run marked ``slow`` takes ``HTA_FUZZ_CASES`` (200) random cases, every
tenth through the command too.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli
from kineto_builder import TraceBuilder

from hta.errors import TraceLoadError
from hta.kineto import native
from hta.trace_analysis import TraceAnalysis

WORLD = 3
BAD_RANK = 1
#: No profiled activity, span or wait lasts a day.
DAY_US = 86_400e6


def rank_trace(rank: int) -> dict[str, Any]:
    """One rank of the base job: two steps of operators, kernels, a copy, a collective,
    memory instants, flows and metadata."""
    b = TraceBuilder(rank=rank, world_size=WORLD, base_time_ns=1_700_000_000_000_000_000)
    for step in (1, 2):
        t0 = (step - 1) * 100_000
        with b.step(step, ts=t0, dur=90_000):
            b.cpu_op("aten::mm", ts=t0 + 100, dur=2_000, **{"Input Dims": [[2, 3], [3, 4]]})
            b.launch_kernel("sm80_xmma_gemm_f16", cpu_ts=t0 + 200, cpu_dur=300,
                            gpu_ts=t0 + 5_000, gpu_dur=20_000 + 1_000 * rank,
                            grid=[4, 1, 1], block=[128, 1, 1])
            b.memcpy("HtoD (Pinned -> Device)", cpu_ts=t0 + 600, cpu_dur=100,
                     gpu_ts=t0 + 26_000, gpu_dur=2_000, nbytes=1 << 20)
            b.cpu_op("record_param_comms", ts=t0 + 800, dur=100, **{
                "Collective name": "allreduce", "Group size": WORLD, "In msg nelems": 1024})
            b.launch_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", cpu_ts=t0 + 900,
                            cpu_dur=50, gpu_ts=t0 + 30_000, gpu_dur=15_000, stream=20)
            b.instant("[memory]", ts=t0 + 150, **{"Addr": 1234, "Bytes": 4096,
                                                 "Total Allocated": 4096})
    b.events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": 7,
                     "args": {"name": "stream 7"}})
    return b.to_dict()


BASE = {r: rank_trace(r) for r in range(WORLD)}

# -- mutations: each returns the bytes of the mutated file ---------------------------------
Mutation = Callable[[random.Random, dict[str, Any]], bytes]
FIELDS = ("ph", "ts", "dur", "name", "cat", "pid", "tid", "args")
ODD_VALUES: list[Any] = [[], {}, "x", True, None, "12", 1.5, [1, 2], "0x1f", -1]
HUGE = ["1e30", "-1e30", str(2**64), str(-(2**70)), "1e15", "Infinity", "-Infinity", "NaN",
        "1e308", "-5", "0"]


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def _events(rng: random.Random, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Some of the events (all of them one time in three)."""
    events = doc["traceEvents"]
    if rng.random() < 1 / 3:
        return events
    return rng.sample(events, k=max(1, len(events) // rng.choice((2, 5, 20))))


def truncate(rng: random.Random, doc: dict[str, Any]) -> bytes:
    data = _dumps(doc)
    return data[:rng.randrange(len(data))]


def flip_bytes(rng: random.Random, doc: dict[str, Any]) -> bytes:
    data = bytearray(_dumps(doc))
    for _ in range(rng.choice((1, 3, 8, 30))):
        data[rng.randrange(len(data))] ^= rng.choice((0x01, 0x20, 0x80, 0xFF))
    return bytes(data)


def missing_field(rng: random.Random, doc: dict[str, Any]) -> bytes:
    field = rng.choice(FIELDS)
    for event in _events(rng, doc):
        event.pop(field, None)
    return _dumps(doc)


def wrong_type(rng: random.Random, doc: dict[str, Any]) -> bytes:
    field = rng.choice(FIELDS + ("args.correlation", "args.stream", "args.grid"))
    value = rng.choice(ODD_VALUES)
    for event in _events(rng, doc):
        if field.startswith("args."):
            args = event.setdefault("args", {})
            if isinstance(args, dict):
                args[field[5:]] = value
        else:
            event[field] = value
    return _dumps(doc)


def huge_number(rng: random.Random, doc: dict[str, Any]) -> bytes:
    field = rng.choice(("ts", "dur", "pid", "tid", "args.correlation", "args.External id",
                        "args.bytes", "args.Bytes", "args.stream", "args.device"))
    value = rng.choice(HUGE)
    for event in _events(rng, doc):
        if field.startswith("args."):
            event.setdefault("args", {})[field[5:]] = "@HUGE@"
        else:
            event[field] = "@HUGE@"
    return _dumps(doc).replace(b'"@HUGE@"', value.encode())


def deep_nesting(rng: random.Random, doc: dict[str, Any]) -> bytes:
    depth = rng.choice((200, 3_000, 6_000))
    open_, close = rng.choice(((b'{"a": ', b"}"), (b"[", b"]")))
    rng.choice(doc["traceEvents"]).setdefault("args", {})["deep"] = "@DEEP@"
    return _dumps(doc).replace(b'"@DEEP@"', open_ * depth + b"1" + close * depth)


def duplicate_key(rng: random.Random, doc: dict[str, Any]) -> bytes:
    data = _dumps(doc)
    extra = rng.choice((b'"traceEvents": []', b'"distributedInfo": {"rank": 0}',
                        b'"traceEvents": [{"ph": "X", "name": "x", "ts": 1, "dur": 1}]'))
    if rng.random() < 0.5:
        return data[:-1] + b", " + extra + b"}"
    return b"{" + extra + b", " + data[1:]


def empty_events(rng: random.Random, doc: dict[str, Any]) -> bytes:
    how = rng.choice(("empty", "metadata", "no cat", "no X"))
    events = doc["traceEvents"]
    if how == "empty":
        doc["traceEvents"] = []
    elif how == "metadata":
        doc["traceEvents"] = [e for e in events if e.get("ph") == "M"]
    elif how == "no X":
        doc["traceEvents"] = [e for e in events if e.get("ph") != "X"]
    else:
        for event in events:
            event.pop("cat", None)
    return _dumps(doc)


def odd_rank(rng: random.Random, doc: dict[str, Any]) -> bytes:
    doc["distributedInfo"]["rank"] = rng.choice(
        [-1, 1.5, 99, "one", True, None, 1e30, [1], {"r": 1}, str(BAD_RANK), 2**70])
    if rng.random() < 0.3:
        doc["distributedInfo"]["world_size"] = rng.choice([0, -3, 2, "x", 1e30])
    return _dumps(doc)


def long_name(rng: random.Random, doc: dict[str, Any]) -> bytes:
    char = rng.choice(("é", "漢", "\U0001F600", "a", "\\u00e9"))
    event = rng.choice([e for e in doc["traceEvents"] if e.get("ph") == "X"])
    event["name"] = "@NAME@"
    return _dumps(doc).replace(b"@NAME@", char.encode() * rng.choice((1_000, 50_000)))


def gzipped(rng: random.Random, doc: dict[str, Any]) -> bytes:
    inner = rng.choice(MUTATIONS[:-1])
    data = gzip.compress(inner(rng, doc))
    return data[:rng.randrange(10, len(data))] if rng.random() < 0.3 else data


MUTATIONS: list[Mutation] = [truncate, flip_bytes, missing_field, wrong_type, huge_number,
                             deep_nesting, duplicate_key, empty_events, odd_rank, long_name,
                             gzipped]


def mutated_job(folder: Path, seed: int, mutation: Mutation | None = None) -> tuple[Path, str]:
    """The base job in ``folder`` with rank 1's file mutated; (that file, what was done)."""
    rng = random.Random(seed)
    mutation = mutation or rng.choice(MUTATIONS)
    folder.mkdir(parents=True)
    for rank in range(WORLD):
        if rank != BAD_RANK:
            (folder / f"rank-{rank}.json").write_bytes(_dumps(BASE[rank]))
    data = mutation(rng, json.loads(json.dumps(BASE[BAD_RANK])))
    bad = folder / (f"rank-{BAD_RANK}.json.gz" if data[:2] == b"\x1f\x8b"
                    else f"rank-{BAD_RANK}.json")
    bad.write_bytes(data)
    return bad, f"seed {seed}: {mutation.__name__}"


# -- the contract ---------------------------------------------------------------------------
def out_of_bounds(row: dict[str, Any]) -> list[str]:
    """The figures of one rank summary row outside physical bounds."""
    return [f"{key}={value}" for key, value in row.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            and not _physical(key, value)]


def _physical(key: str, value: float) -> bool:
    if not math.isfinite(value):
        return False
    if key.endswith("pctg"):
        return -1e-6 <= value <= 100 + 1e-6
    if key.endswith("(us)") and value > DAY_US:
        return False
    return key == "rank" or value >= 0


def check_cli(folder: Path, bad: Path, what: str, decoder: str) -> dict[str, Any] | None:
    """``hta summary --json`` on the job keeps the contract (see the module doc)."""
    proc = run_cli(["summary", str(folder), "--no-cache", "--json"],
                   env={"HTA_NATIVE": "1" if decoder == "native" else "0"})
    where = f"{what} ({decoder}): rc {proc.returncode}\n{proc.stderr[-3000:]}"
    assert proc.returncode in (0, 3), where
    assert "Traceback" not in proc.stderr and "RuntimeWarning" not in proc.stderr, where
    if proc.returncode == 3:  # the job cannot be analysed: one line, naming the file
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("hta: error: "), where
        assert bad.name in lines[0], where
        return None
    payload = json.loads(proc.stdout)
    loaded = {row["rank"] for row in payload["ranks"]}
    assert {r for r in range(WORLD) if r != BAD_RANK} <= loaded, where
    if str(bad) in payload["skipped"]:
        assert payload["skipped"][str(bad)].strip(), where
        assert len(loaded) == WORLD - 1, where
    else:
        assert payload["skipped"] == {} and len(loaded) == WORLD, where
    for row in payload["ranks"]:
        assert not out_of_bounds(row), (out_of_bounds(row), where)
    return payload


def check_api(bad: Path, what: str) -> None:
    """A strict load of the file alone loads or raises :class:`TraceLoadError` naming it;
    what loads has every time and duration within int64 and within physics."""
    try:
        analyzer = TraceAnalysis(trace_files=[bad], cache=False, progress=False, strict=True)
    except TraceLoadError as err:
        assert err.path == str(bad) and err.problem.strip(), what
        return
    events = analyzer.t.rank(analyzer.ranks[0]).events
    if len(events):
        dur = events["dur"].to_numpy()
        assert dur.min() >= 0 and dur.max() <= DAY_US * 1000, what
        span = int(events["end"].max()) - int(events["ts"].min())
        assert 0 <= span <= 3 * DAY_US * 1000, (span, what)


def check_job(folder: Path, bad: Path, what: str) -> None:
    """The job loads through the Python API (non-strict) keeping the contract: the other
    ranks load, the file is loaded or skipped with its reason, the per-rank figures are
    within bounds, and numpy says nothing on the way."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        analyzer = TraceAnalysis(trace_dir=folder, cache=False, progress=False,
                                 max_workers=1)
        loaded = set(analyzer.ranks)
        assert {r for r in range(WORLD) if r != BAD_RANK} <= loaded, what
        if str(bad) in analyzer.skipped:
            assert analyzer.skipped[str(bad)].strip() and len(loaded) == WORLD - 1, what
        else:
            assert analyzer.skipped == {} and len(loaded) == WORLD, what
        rows = analyzer.get_rank_summary().to_dict(orient="records")
        rows += analyzer.get_temporal_breakdown(visualize=False).to_dict(orient="records")
    numpy_said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not numpy_said, (numpy_said, what)
    for row in rows:
        clean = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                 for k, v in row.items()}
        assert not out_of_bounds(clean), (out_of_bounds(clean), what)


@pytest.fixture(params=["native", "python"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each case on the native column builder and on the pure-Python decoder."""
    if request.param == "native" and not native.built():
        pytest.skip("the native scanner (hta.kineto._scan) is not built")
    monkeypatch.setenv("HTA_NATIVE", "1" if request.param == "native" else "0")
    return request.param


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.__name__)
def test_every_class_of_mutation_keeps_the_contract(
        tmp_path: Path, mutation: Mutation, decoder: str) -> None:
    for seed in range(2):
        folder = tmp_path / f"job{seed}"
        bad, what = mutated_job(folder, 1000 * MUTATIONS.index(mutation) + seed, mutation)
        check_api(bad, f"{what} ({decoder})")
        check_job(folder, bad, f"{what} ({decoder})")


@pytest.mark.parametrize(("mutation", "decoder", "skipped"), [
    (deep_nesting, "native", True), (huge_number, "python", False)],
    ids=["skipped-native", "loaded-python"])
def test_the_command_keeps_the_contract(tmp_path: Path, mutation: Mutation, decoder: str,
                                        skipped: bool) -> None:
    if decoder == "native" and not native.built():
        pytest.skip("the native scanner (hta.kineto._scan) is not built")
    bad, what = mutated_job(tmp_path / "job", 6 if skipped else 0, mutation)
    payload = check_cli(tmp_path / "job", bad, what, decoder)
    assert payload is not None and (str(bad) in payload["skipped"]) is skipped


@pytest.mark.slow
def test_many_seeded_mutations_keep_the_contract(tmp_path: Path, decoder: str) -> None:
    cases = int(os.environ.get("HTA_FUZZ_CASES", "200"))
    for seed in range(cases):
        folder = tmp_path / f"job{seed}"
        bad, what = mutated_job(folder, 10_000 + seed)
        check_api(bad, what)
        check_job(folder, bad, what)
        if seed % 10 == 0:
            check_cli(folder, bad, what, decoder)
