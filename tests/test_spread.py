"""A visit of an in-memory job spread over forked workers (hta.model.spread) answers what
a visit in this process answers."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pandas as pd
import pytest

from hta.model import spread
from hta.model.runner import RankWork, run
from hta.model.trace import RankTrace, Trace
from hta.model.vocabulary import Selection
from hta.trace_analysis import TraceAnalysis

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "synthetic_4rank"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="spread visits fork (Linux)")


def _job(workers: int | None) -> TraceAnalysis:
    analyzer = TraceAnalysis(trace_dir=str(SAMPLE), cache=False)
    analyzer.t.workers = workers
    return analyzer


def _count_forked_maps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, the number of items of each :func:`spread.forked_map` call."""
    calls: list[int] = []
    real = spread.forked_map

    def counted(fn, items, workers, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(items))
        return real(fn, items, workers, **kwargs)

    monkeypatch.setattr(spread, "forked_map", counted)
    return calls


def rank_pid(rt: RankTrace, tag: str) -> pd.DataFrame:
    """Which process visited the rank (module level: a work)."""
    import os

    return pd.DataFrame({"pid": [os.getpid()], "events": [len(rt.events)], "tag": [tag]})


def test_findings_spread_over_workers_equal_those_of_one_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spread, "MIN_EVENTS", 0)
    here = _job(1).get_findings(replay=False)
    spread_job = _job(2)
    assert spread.workers_for(spread_job.t, spread_job.t.get_ranks()) == 2
    visits: list[int] = []
    real = spread.spread_visit

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        visits.append(args[4])
        return real(*args, **kwargs)

    monkeypatch.setattr(spread, "spread_visit", counted)
    spread_findings = spread_job.get_findings(replay=False)
    assert visits == [2, 2]  # the job rules' per-rank inputs, then the rank rules
    pd.testing.assert_frame_equal(here, spread_findings)
    pd.testing.assert_frame_equal(_job(1).get_findings_coverage(),
                                  spread_job.get_findings_coverage())


def test_the_job_rules_inputs_are_read_in_one_spread_visit_and_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The job rules' per-rank tables come from one visit on the workers, kept for the
    job: each equals the table the rule would read here; a job visited here keeps
    nothing ahead."""
    from hta.analysis.clock import hosts_visit, kernels_visit
    from hta.analysis.findings import engine
    from hta.analysis.findings.collective_bw import inputs_visit
    from hta.model.runner import recalled, run_one

    monkeypatch.setattr(spread, "MIN_EVENTS", 0)
    calls = _count_forked_maps(monkeypatch)
    job = _job(2).t
    ranks = job.get_ranks()
    engine._read_job_inputs(job, Selection.of(ranks), engine.default_rules())
    assert len(calls) == 1
    for key, work in (kernels_visit(ranks, None), hosts_visit(ranks),
                      inputs_visit(ranks, None)):
        kept, here = recalled(job, key), run_one(job, work, Selection.of(ranks))
        if isinstance(here, tuple):
            for a, b in zip(kept, here, strict=True):
                pd.testing.assert_frame_equal(a, b)
        elif isinstance(here, dict):
            assert kept == here
        else:
            pd.testing.assert_frame_equal(kept, here)
    single = _job(1).t
    engine._read_job_inputs(single, Selection.of(ranks), engine.default_rules())
    assert recalled(single, kernels_visit(ranks, None)[0]) is None and len(calls) == 1


def test_a_spread_visit_runs_in_other_processes_in_rank_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setattr(spread, "MIN_EVENTS", 0)
    trace = _job(2).t
    work = RankWork(rank_pid, ("x",), spread=True)
    table = run(trace, [work])[0]
    assert table["rank"].tolist() == trace.get_ranks()
    assert os.getpid() not in set(table["pid"])
    assert table["events"].tolist() == [len(trace.rank(r).events) for r in trace.get_ranks()]
    # a selection of ranks: only those, in order
    part = run(trace, [work], Selection.of([3, 1]))[0]
    assert part["rank"].tolist() == [1, 3]


def test_no_spread_when_small_single_worker_or_not_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    trace = _job(2).t
    work = RankWork(rank_pid, ("x",), spread=True)
    # below MIN_EVENTS (the sample is small): visited here
    assert set(run(trace, [work])[0]["pid"]) == {os.getpid()}
    monkeypatch.setattr(spread, "MIN_EVENTS", 0)
    # one worker (max_workers=1 at load): here
    trace.workers = 1
    assert set(run(trace, [work])[0]["pid"]) == {os.getpid()}
    trace.workers = 2
    # a work that does not ask: here
    plain = RankWork(rank_pid, ("y",))
    assert set(run(trace, [plain])[0]["pid"]) == {os.getpid()}
    # one rank: here
    assert set(run(trace, [work], Selection.of([0]))[0]["pid"]) == {os.getpid()}


def unpicklable(rt: RankTrace) -> pd.DataFrame:
    """An answer that cannot travel back from a worker (a lambda in a cell)."""
    return pd.DataFrame({"f": [lambda: rt.rank]})


def test_a_share_that_cannot_come_back_is_visited_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spread, "MIN_EVENTS", 0)
    trace = _job(2).t
    table = run(trace, [RankWork(unpicklable, spread=True)])[0]
    assert table["rank"].tolist() == trace.get_ranks()
    assert [f() for f in table["f"]] == trace.get_ranks()


def fails_on_rank(rt: RankTrace, rank: int) -> pd.DataFrame:
    """A table of the rank's events, or an error on ``rank`` (module level: a work)."""
    if rt.rank == rank:
        raise ValueError(f"rank {rank}")
    return pd.DataFrame({"events": [len(rt.events)], "half": [len(rt.events) / 2]})


def test_a_share_s_answers_travel_joined_unless_one_failed() -> None:
    """A worker joins its ranks' answers, one table a work, concatenated in rank order as
    the parent would; with a failure among them, the rows go back as they are."""
    from hta.model.runner import _joined_visit, visit

    trace = _job(1).t
    ranks = trace.get_ranks()
    calls = tuple((w.fn, tuple(w.args), dict(w.kwargs), None, True)
                  for w in (RankWork(rank_pid, ("x",)), RankWork(fails_on_rank, (-1,))))
    rows = visit(trace, ranks, calls)
    joined = _joined_visit(trace, ranks, calls)
    assert len(rows) == len(ranks) and [r for r, _ in joined] == [ranks[0]]
    for i in range(len(calls)):
        expected = pd.concat([answers[i] for _, answers in rows], ignore_index=True)
        pd.testing.assert_frame_equal(joined[0][1][i], expected)
    failing = (calls[0], (fails_on_rank, (ranks[1],), {}, None, True))
    kept = _joined_visit(trace, ranks, failing)
    assert [r for r, _ in kept] == ranks
    with pytest.raises(ValueError, match=f"rank {ranks[1]}"):
        run(trace, [RankWork(fails_on_rank, (ranks[1],))])


def test_adopted_values_are_unpickled_when_first_asked_for() -> None:
    """What a worker derived travels pickled: kept so, unpickled on its first use (not
    computed again), and sent on as it came when a later worker sends it back."""
    import pickle

    import numpy as np

    from hta.model import derived as derived_module

    derived_module.forget()
    rt = _job(1).t.rank(0)
    value = pd.DataFrame({"a": [1, 2]})
    blob = pickle.dumps(value)
    derived_module.adopt(rt, {"k": blob, "arr": pickle.dumps(np.arange(3))})
    assert derived_module.small_values(rt) == {"k": blob, "arr": pickle.dumps(np.arange(3))}
    used = derived_module._small()[1][0]
    got = derived_module.derived(rt, "k", lambda: pytest.fail("computed again"))
    pd.testing.assert_frame_equal(got, value)
    arr = derived_module.derived(rt, "arr", lambda: pytest.fail("computed again"))
    assert arr.tolist() == [0, 1, 2] and not arr.flags.writeable
    # the store counts the values' own size now, not their pickles'
    assert derived_module._small()[1][0] == used - len(blob) - len(pickle.dumps(
        np.arange(3))) + 8 * 2 + arr.nbytes
    assert set(derived_module.small_values(rt)) == {"k", "arr"}
    derived_module.forget()


def test_the_loader_passes_max_workers_to_the_trace() -> None:
    analyzer = TraceAnalysis(trace_dir=str(SAMPLE), cache=False, max_workers=1,
                             progress=False)
    assert isinstance(analyzer.t, Trace) and analyzer.t.workers == 1
    assert analyzer.t.progress is False  # a spread visit shows a bar only when loading did
    assert spread.workers_for(analyzer.t, analyzer.t.get_ranks()) == 1


def test_workers_for_counts_events_of_the_selected_ranks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _job(4).t
    events = sum(len(trace.rank(r).events) for r in trace.get_ranks())
    monkeypatch.setattr(spread, "MIN_EVENTS", events)
    assert spread.workers_for(trace, trace.get_ranks()) == 4
    assert spread.workers_for(trace, trace.get_ranks()[:2]) == 1  # fewer events
    monkeypatch.setattr(spread, "MIN_EVENTS", 0)
    assert spread.workers_for(trace, trace.get_ranks()[:3]) == 3  # no more than the ranks
    assert spread.workers_for(trace, []) == 1


def test_replayed_savings_predicted_ahead_on_workers_equal_those_predicted_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the findings' changes replayed on forked workers (the job graph inherited): the
    # same table, the same savings, as one after the other here
    from hta.analysis.whatif import replayer

    here = _job(1).get_findings()
    monkeypatch.setattr(replayer, "PARALLEL_MIN_NODES", 0)
    calls = _count_forked_maps(monkeypatch)
    ahead = _job(2).get_findings()
    assert calls and calls[0] >= 2
    pd.testing.assert_frame_equal(here, ahead)
    assert (ahead["saving_source"] == "replay").any()


def test_forked_map_calls_a_closure_with_inherited_state() -> None:
    import os

    parent = os.getpid()
    state = {"base": 10}
    out = spread.forked_map(lambda x: (x + state["base"], os.getpid()), [1, 2, 3], 2)
    assert [o.value[0] for o in out] == [11, 12, 13]
    assert all(o.value[1] != parent for o in out)


def test_rank_graphs_built_on_workers_equal_those_built_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # each rank's replay graph built on a forked worker comes back without its trace and
    # is given this process's: the same arrays, the same job graph, the same savings
    import importlib

    import numpy as np

    from hta.analysis.whatif.graph import job_graph

    replay = importlib.import_module("hta.analysis.whatif.replay")  # not the function

    job = _job(2)
    traces = [job.t.rank(r) for r in job.t.get_ranks()]
    here = replay.rank_graphs(traces, 1)
    monkeypatch.setattr(replay, "PARALLEL_MIN_EVENTS", 0)
    pids = _count_forked_maps(monkeypatch)
    there = replay.rank_graphs(traces, 2)
    assert pids and pids[0] >= 2
    for a, b, rt in zip(here, there, traces, strict=True):
        assert b.trace is rt
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if isinstance(x, np.ndarray):
                assert np.array_equal(x, y), f.name
            elif isinstance(x, int):
                assert x == y, f.name
    ja, jb = job_graph(here), job_graph(there)
    assert np.array_equal(ja.src, jb.src) and np.array_equal(ja.delay, jb.delay)
    pd.testing.assert_frame_equal(_job(1).get_findings(), _job(2).get_findings())


def test_the_coupling_reads_the_collectives_carried_by_the_rank_graphs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # each rank's graph carries its communication kernels with their nodes (built where
    # the rank is, on a worker): assembling the job graph reads no rank again, and gives
    # the graph the ranks' own tables give
    import importlib

    import numpy as np

    graph = importlib.import_module("hta.analysis.whatif.graph")
    replay = importlib.import_module("hta.analysis.whatif.replay")

    job = _job(2)
    traces = [job.t.rank(r) for r in job.t.get_ranks()]
    monkeypatch.setattr(replay, "PARALLEL_MIN_EVENTS", 0)
    carried = replay.rank_graphs(traces, 2)
    assert all(g.comm is not None and len(g.comm) for g in carried)
    for g in carried:
        pd.testing.assert_frame_equal(
            g.comm, graph._comm_slots(g.trace, g.start_node, g.end_node))
    read_again = graph.job_graph([dataclasses.replace(g, comm=None) for g in carried])

    def no_rank_read(*_: object, **__: object) -> None:
        raise AssertionError("the coupling read a rank's collectives again")

    monkeypatch.setattr(graph, "comm_kernels", no_rank_read)
    jg = graph.job_graph(carried)
    assert len(jg.collectives) and jg.collectives["_pos"].nunique() == len(carried)
    for name in ("src", "dst", "delay", "base"):
        assert np.array_equal(getattr(jg, name), getattr(read_again, name)), name
    pd.testing.assert_frame_equal(jg.collectives, read_again.collectives)


def derive_pid(rt: RankTrace, key: str) -> pd.DataFrame:
    """Derive a small value for the rank under ``key`` (the pid that computed it), and an
    unpicklable one beside it (module level: a work)."""
    import os

    from hta.model.derived import derived

    derived(rt, (key, "pid"), lambda: os.getpid())
    derived(rt, (key, "lambda"), lambda: (lambda: 1))
    return pd.DataFrame({"pid": [os.getpid()]})


def test_a_carrying_visit_brings_back_what_the_workers_derived(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``carry``, the small values the workers derived from their ranks are kept
    here as if derived here (the process that computed them says so); a value that does
    not pickle stays behind and is computed here when asked. Without it, nothing comes
    back."""
    import os

    from hta.model.derived import derived, forget

    monkeypatch.setattr(spread, "MIN_EVENTS", 0)
    trace = _job(2).t
    forget()
    work = RankWork(derive_pid, ("carried",), spread=True)
    pids = set(run(trace, [work], carry=True)[0]["pid"])
    assert os.getpid() not in pids
    for r in trace.get_ranks():
        rt = trace.rank(r)
        assert derived(rt, ("carried", "pid"), lambda: -1) in pids
        assert derived(rt, ("carried", "lambda"), lambda: "here") == "here"
    run(trace, [RankWork(derive_pid, ("left",), spread=True)])
    assert all(derived(trace.rank(r), ("left", "pid"), lambda: -1) == -1
               for r in trace.get_ranks())
    forget()


def test_workers_are_forked_with_this_process_s_objects_frozen_and_nothing_stays_frozen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    assert gc.get_freeze_count() == 0
    got = spread.forked_map(lambda _: gc.get_freeze_count(), [0, 1], 2)
    assert all(f.ok and f.value > 0 for f in got)  # the workers' collector skips them
    assert gc.get_freeze_count() == 0  # here, collected as before
    gc.freeze()  # an application's own freeze is left as it is
    try:
        calls: list[str] = []
        monkeypatch.setattr(spread.gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr(spread.gc, "unfreeze", lambda: calls.append("unfreeze"))
        with spread.gc_frozen():
            pass
        assert calls == []
    finally:
        monkeypatch.undo()
        gc.unfreeze()


def test_a_worker_forked_inside_the_block_neither_counts_nor_freezes_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a worker the objects are frozen already (the flag is inherited): its own
    blocks (a visit of its share) do not walk them to count them, nor freeze again."""
    import gc

    def inside_worker(_: object) -> tuple[bool, list[str], int]:
        calls: list[str] = []
        monkeypatch.setattr(spread.gc, "get_freeze_count", lambda: calls.append("count") or 1)
        monkeypatch.setattr(spread.gc, "freeze", lambda: calls.append("freeze"))
        with spread.gc_frozen():
            pass
        monkeypatch.undo()
        return spread._FROZEN, calls, gc.get_freeze_count()

    got = spread.forked_map(inside_worker, [0], 1)
    assert got[0].ok, got[0].error
    flag, calls, frozen = got[0].value
    assert flag and calls == [] and frozen > 0
    assert not spread._FROZEN and gc.get_freeze_count() == 0  # here, as before


def test_a_visit_here_runs_with_the_objects_it_found_frozen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from hta.model import runner

    seen: list[int] = []
    monkeypatch.setattr(runner, "_visit", lambda *a: seen.append(gc.get_freeze_count()) or [])
    assert gc.get_freeze_count() == 0
    assert runner.visit(None, None, ()) == []  # type: ignore[arg-type]
    assert seen and seen[0] > 0              # the collector skips what the visit found
    assert gc.get_freeze_count() == 0        # and collects it again afterwards


class _Left:
    """Work left to this process (:func:`spread.meanwhile`): ``pieces`` pieces, one per
    call of ``busy()`` that says the workers still run; ``fail`` raises instead."""

    def __init__(self, pieces: int, fail: bool = False) -> None:
        self.pieces, self.fail = pieces, fail
        self.done: list[tuple[int, bool]] = []  # (pid, whether it might fork)

    def task(self, busy) -> bool:  # type: ignore[no-untyped-def]
        import os

        if self.fail:
            raise RuntimeError("broken")
        while len(self.done) < self.pieces and busy():
            self.done.append((os.getpid(), spread.can_fork()))
        return len(self.done) == self.pieces


def test_work_left_to_this_process_runs_while_the_workers_of_a_visit_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A task left with :func:`spread.meanwhile` runs here, during a hosting visit, never
    forking; finished, it is dropped; taken back, or its owner gone, it never runs. A
    carrying visit hosts nothing; a task that raises is dropped, the visit answers."""
    import os
    import time

    monkeypatch.setattr(spread, "MIN_EVENTS", 0)
    trace = _job(2).t
    left = _Left(pieces=10**9)  # more than any visit lasts
    spread.meanwhile(left.task)
    slow = RankWork(sleep_then_pid, (0.2,), spread=True)
    run(trace, [slow], carry=True)
    assert left.done == [] and len(spread._MEANWHILE) == 1  # a carrying visit: not hosted
    t = time.perf_counter()
    pids = set(run(trace, [slow])[0]["pid"])
    assert time.perf_counter() - t < 30  # it stopped when the workers were done
    assert left.done and {d[0] for d in left.done} == {os.getpid()} and os.getpid() not in pids
    assert not any(d[1] for d in left.done)  # nothing forked meanwhile
    assert len(spread._MEANWHILE) == 1  # not finished: kept for the next visit
    spread.take_back(left.task)
    assert spread._MEANWHILE == []

    few = _Left(pieces=1)
    broken = _Left(pieces=1, fail=True)
    spread.meanwhile(few.task)
    spread.meanwhile(broken.task)
    gone = _Left(pieces=1)
    spread.meanwhile(gone.task)
    del gone  # its owner went away: nothing keeps it
    assert len(run(trace, [slow])[0]) == len(trace.get_ranks())
    assert len(few.done) == 1 and spread._MEANWHILE == []


def sleep_then_pid(rt: RankTrace, seconds: float) -> pd.DataFrame:
    """Which process visited the rank, after ``seconds`` (module level: a work)."""
    import os
    import time

    time.sleep(seconds)
    return pd.DataFrame({"pid": [os.getpid()]})
