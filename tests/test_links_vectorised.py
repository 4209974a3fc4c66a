"""The call-stack walk (``hta.model.links.call_stacks``), compiled (``hta.model._stack``,
when built) and over whole columns (NumPy), against the per-event stack walk it replaced,
kept here as the reference. Every test runs both ways (``HTA_NATIVE=0`` selects NumPy).

The reference is the loop the project used before: events of a thread sorted by (start,
longer first), each pushed after popping every event that ended at or before its start,
the event left on top being its parent. Its answer is compared, array for array, on
random columns (crossing events, ties, zero durations, several threads), on hand-built
traces whose answers are known by construction, on the sample traces and on every real
trace in ``../shared/traces/hta``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_TRACES, shared_trace
from kineto_builder import TraceBuilder

from hta.model import links
from hta.model.rules import CPU_KINDS, GPU_KINDS
from hta.trace_analysis import TraceAnalysis

T0 = 1_000_000
SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


@pytest.fixture(autouse=True, params=["numpy", "native"])
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with the whole-column walk, then with the compiled one."""
    if request.param == "native":
        if links._stack is None:
            pytest.skip("the compiled stack walk (hta.model._stack) is not built")
        monkeypatch.setenv("HTA_NATIVE", "1")
        assert links.native_walk_available()
    else:
        monkeypatch.setenv("HTA_NATIVE", "0")
        assert not links.native_walk_available()
    return request.param


def reference_call_stacks(
    ts: np.ndarray, end: np.ndarray, pid: np.ndarray, tid: np.ndarray, cpu: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """The per-event walk: parent row, depth and count of events outliving their parent."""
    n = ts.shape[0]
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.full(n, -1, dtype=np.int32)
    threads: dict[tuple[int, int], list[int]] = {}
    for r in np.flatnonzero(cpu).tolist():
        threads.setdefault((int(pid[r]), int(tid[r])), []).append(r)
    partial = 0
    for rows in threads.values():
        rows.sort(key=lambda r: (int(ts[r]), -int(end[r]), r))
        stack: list[int] = []
        for r in rows:
            while stack and end[stack[-1]] <= ts[r]:
                stack.pop()
            depth[r] = len(stack)
            if stack:
                parent[r] = stack[-1]
                partial += int(end[stack[-1]] < end[r])
            stack.append(r)
    return parent, depth, partial


def assert_same(args: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray, int]:
    got = links.call_stacks(*args)
    want = reference_call_stacks(*args)
    assert np.array_equal(got[0], want[0])
    assert np.array_equal(got[1], want[1])
    assert got[2] == want[2]
    return got


def random_columns(rng: np.random.Generator, n: int, sort: bool) -> tuple[np.ndarray, ...]:
    ts = rng.integers(0, max(2, n), n).astype(np.int64)
    dur = (rng.integers(0, max(2, n // 2), n) * (rng.random(n) < 0.85)).astype(np.int64)
    pid = rng.integers(0, 2, n).astype(np.int64)
    tid = rng.integers(0, 3, n).astype(np.int64) * 1000 + 7
    cpu = rng.random(n) < 0.9
    if sort:
        order = np.argsort(ts, kind="stable")
        ts, dur, pid, tid, cpu = ts[order], dur[order], pid[order], tid[order], cpu[order]
    return ts, ts + dur, pid, tid, cpu


@pytest.mark.parametrize("sort", [True, False])
def test_random_columns_match_the_per_event_walk(sort: bool) -> None:
    rng = np.random.default_rng(11)
    crossings = 0
    for _ in range(400):
        args = random_columns(rng, int(rng.integers(0, 80)), sort)
        crossings += assert_same(args)[2]
    assert crossings > 100  # the random columns really overlap without nesting


def test_large_random_columns_match() -> None:
    rng = np.random.default_rng(3)
    args = random_columns(rng, 20_000, True)
    assert assert_same(args)[2] > 0


def test_chain_of_crossings_needs_several_rounds_and_matches() -> None:
    # Each event starts inside the previous one and outlives it: every event is its
    # predecessor's child, and the stack only empties after the last one ends.
    n = 50
    ts = np.arange(n, dtype=np.int64) * 10
    end = ts + 15
    args = (ts, end, np.zeros(n, np.int64), np.zeros(n, np.int64), np.ones(n, bool))
    parent, depth, partial = assert_same(args)
    assert parent.tolist() == [-1] + list(range(n - 1))
    assert depth.tolist() == list(range(n))
    assert partial == n - 1


def test_a_long_chain_of_crossings_settles_to_the_per_event_walk(walk: str) -> None:
    n = 30
    ts = np.arange(n, dtype=np.int64) * 10
    args = (ts, ts + 15, np.zeros(n, np.int64), np.zeros(n, np.int64), np.ones(n, bool))
    parent, depth, _ = assert_same(args)
    assert depth.max() == n - 1


def test_empty_and_non_cpu_rows() -> None:
    empty = np.zeros(0, dtype=np.int64)
    parent, depth, partial = links.call_stacks(empty, empty, empty, empty, empty.astype(bool))
    assert parent.size == 0 and depth.size == 0 and partial == 0
    ts = np.array([0, 1, 2], dtype=np.int64)
    args = (ts, ts + 10, np.zeros(3, np.int64), np.zeros(3, np.int64),
            np.array([True, False, True]))
    parent, depth, _ = assert_same(args)
    assert parent.tolist() == [-1, -1, 0] and depth.tolist() == [0, -1, 1]


def test_huge_time_span_with_many_threads_searches_thread_by_thread() -> None:
    # ts near the int64 limit with many threads: the combined search key would overflow.
    base = 2**62
    ts = np.array([base, base + 5, 10, 12, base, base + 1], dtype=np.int64)
    end = np.array([base + 10, base + 6, 20, 13, base + 3, base + 2], dtype=np.int64)
    tid = np.array([1, 1, 2, 2, 3, 3], dtype=np.int64)
    args = (ts, end, np.zeros(6, np.int64), tid, np.ones(6, bool))
    parent, depth, _ = assert_same(args)
    assert parent.tolist() == [-1, 0, -1, 2, -1, 4]


# --------------------------------------------------------------------------------------------
# hand-built traces: answers known by construction
# --------------------------------------------------------------------------------------------


def loaded(tmp_path: Path, b: TraceBuilder) -> tuple[pd.DataFrame, dict[str, int]]:
    b.write(tmp_path / "rank-0.json")
    a = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    ev = a.get_events()
    return a.t.rank(0).events, {n: int(i) for n, i in zip(ev["name"], ev["index"])}


def check_against_reference(ev: pd.DataFrame) -> None:
    kinds = ev["kind"].astype(str).to_numpy()
    cpu = (np.isin(kinds, list(CPU_KINDS | {"other"})) & ~np.isin(kinds, list(GPU_KINDS))
           & (ev["pid"].to_numpy() >= 0))
    parent, depth, _ = reference_call_stacks(ev["ts"].to_numpy(), ev["end"].to_numpy(),
                                             ev["pid"].to_numpy(), ev["tid"].to_numpy(), cpu)
    assert np.array_equal(ev["parent"].to_numpy(), parent)
    assert np.array_equal(ev["depth"].to_numpy(), depth)


def test_built_trace_nesting_ties_zero_durations_crossings_threads(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0)
    b.cpu_op("A", ts=T0, dur=1_000)                   # root
    b.cpu_op("B", ts=T0 + 100, dur=300)               # in A
    b.cpu_op("B0", ts=T0 + 100, dur=0)                # same start as B, zero length: B's
    b.cpu_op("C", ts=T0 + 100, dur=100)               # same start as B, shorter: B's child
    b.cpu_op("Z", ts=T0 + 400, dur=0)                 # at B's end: A's child
    b.cpu_op("X", ts=T0 + 900, dur=200)               # outlives A by 100 ns: still A's child
    b.cpu_op("Y", ts=T0 + 1_050, dur=10)              # after A ended, inside X: X's child
    b.cpu_op("W", ts=T0 + 1_100, dur=5)               # when X ends: a root
    b.cpu_op("T1", ts=T0 + 50, dur=500, tid=7)        # other thread, same times as A's kids
    b.cpu_op("T2", ts=T0 + 100, dur=300, tid=7)
    b.cpu_op("Q", ts=T0 + 100, dur=300, pid=5, tid=1)  # other process, same tid numbers
    b.kernel("k", ts=T0 + 150, dur=100)
    ev, idx = loaded(tmp_path, b)
    check_against_reference(ev)
    expected = {
        "A": (None, 0), "B": ("A", 1), "C": ("B", 2), "B0": ("C", 3), "Z": ("A", 1),
        "X": ("A", 1), "Y": ("X", 2), "W": (None, 0), "T1": (None, 0), "T2": ("T1", 1),
        "Q": (None, 0), "k": (None, -1),
    }
    for name, (par, dep) in expected.items():
        row = ev.loc[idx[name]]
        assert int(row["parent"]) == (-1 if par is None else idx[par]), name
        assert int(row["depth"]) == dep, name


# --------------------------------------------------------------------------------------------
# sample and real traces
# --------------------------------------------------------------------------------------------


def _trace_dirs() -> list[Path]:
    dirs = sorted({p.parent for p in SAMPLES.rglob("*.json*")})
    if SHARED_TRACES.exists():
        dirs += sorted({p.parent for p in SHARED_TRACES.rglob("*.json*")
                        if p.stat().st_size < 80_000_000 and ".hta_cache" not in p.parts})
    return dirs


def _ids(path: Path) -> str:
    for root in (SAMPLES, SHARED_TRACES):
        if path.is_relative_to(root):
            return f"{root.name}/{path.relative_to(root)}"
    return str(path)


@pytest.mark.parametrize("folder", _trace_dirs(), ids=_ids)
def test_real_and_sample_traces_match_the_per_event_walk(folder: Path) -> None:
    for path in sorted(folder.glob("*.json*")):
        try:
            a = TraceAnalysis(trace_files={0: str(path)}, cache=False, progress=False)
        except Exception:  # noqa: BLE001 - files that are not traces (or bad ones by design)
            continue
        for rt in a.t:
            check_against_reference(rt.events)


def test_df_index_resolver_has_call_stacks() -> None:
    path = shared_trace("df_index_resolver")
    a = TraceAnalysis(trace_dir=path, cache=False, progress=False)
    ev = a.t.rank(a.t.get_ranks()[0]).events
    check_against_reference(ev)
    assert (ev["depth"] > 2).sum() > 1_000
