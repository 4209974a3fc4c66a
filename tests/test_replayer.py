"""The job's one :class:`~hta.analysis.whatif.replayer.Replay`: made once by the facade,
usable without it, and answering as the facade's what-if methods do."""

from __future__ import annotations

import pandas as pd
from conftest import SAMPLE_TRACES

from hta.analysis.whatif.replayer import Replay
from hta.job.load import load_trace
from hta.trace_analysis import TraceAnalysis

JOB = SAMPLE_TRACES / "synthetic_4rank"


def test_the_facade_keeps_one_replay_and_asks_it() -> None:
    a = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False)
    replay = a.replay()
    assert a.replay() is replay and not replay.remote
    assert replay.shifts == a.clock_shifts()
    pd.testing.assert_frame_equal(a.what_if("no-stragglers"), replay.predict("no-stragglers"))
    pd.testing.assert_frame_equal(a.get_job_critical_path(), replay.critical_path())
    assert replay.graph() is replay.graph()  # built once
    a.close()
    assert "_replay" not in a.__dict__


def test_a_dropped_graph_is_built_again_with_the_same_answers() -> None:
    a = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False)
    replay = a.replay()
    before, graph = replay.predict("no-stragglers"), replay.graph()
    uncertainty = replay.uncertainty()
    replay.drop_graph()
    assert replay._graph is None
    pd.testing.assert_frame_equal(replay.uncertainty(), uncertainty)
    pd.testing.assert_frame_equal(replay.predict("no-stragglers"), before)
    again = replay.graph()
    assert again is not graph and again[0].num_nodes == graph[0].num_nodes
    assert (again[1].t == graph[1].t).all()


def test_a_replay_without_the_facade() -> None:
    """The analysis layer's object alone, on a trace loaded in memory, gives the facade's
    tables."""
    a = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False)
    replay = Replay(load_trace(JOB, progress=False, cache=False), a.clock_shifts(), a.rules)
    pd.testing.assert_frame_equal(replay.predict(), a.what_if())
    pd.testing.assert_frame_equal(replay.uncertainty(), a.get_replay_uncertainty())
    pd.testing.assert_frame_equal(replay.step_bound(None, True)[0], a.get_step_bounds())


def _with_logger(tmp_path, logger_ms: int):
    """No ProfilerStep: a main thread launching five kernels of 1 ms over about 5 ms, and
    (``logger_ms`` > 0) a logger thread blocked in ``_recv`` for ``logger_ms``."""
    from kineto_builder import TraceBuilder

    b = TraceBuilder(rank=0)
    for k in range(5):
        t = 10_000 + k * 1_000_000
        b.cpu_op("aten::mm", ts=t, dur=20_000)
        b.launch_kernel("ampere_sgemm_128x64_tn", cpu_ts=t + 1_000, cpu_dur=5_000,
                        gpu_ts=t + 30_000, gpu_dur=900_000)
    if logger_ms:
        b.complete("multiprocessing/connection.py(379): _recv", "python_function", ts=0,
                   dur=logger_ms * 1_000_000, tid=99)
    b.write(tmp_path / "rank-0.json")
    return TraceAnalysis(trace_dir=str(tmp_path), progress=False, cache=False)


def test_a_background_thread_neither_starts_nor_ends_a_pass(tmp_path):
    """A logger blocked for 100 ms around a 5 ms pass: the replay measures the pass, as
    its twin without the logger does, and the critical path names no logger."""
    quiet = _with_logger(tmp_path / "quiet", 0).what_if()
    noisy = _with_logger(tmp_path / "noisy", 100)
    table = noisy.what_if()
    assert table["measured(us)"].tolist() == quiet["measured(us)"].tolist()
    assert float(table["measured(us)"].iloc[0]) < 6_000
    assert not noisy.get_job_critical_path(-1)["name"].str.contains("_recv").any()


def test_a_single_rank_graph_built_ahead_equals_the_one_built_here(monkeypatch) -> None:
    """One rank, several workers: the rules run here while the replay graph is built on a
    forked process (``build_ahead``); the graph, the savings and the findings are those
    built here. A job of several ranks, or of one worker, builds nothing ahead."""
    import importlib
    import sys

    import pytest

    from hta.model import spread

    replay_module = importlib.import_module("hta.analysis.whatif.replay")  # not the function

    if sys.platform != "linux":
        pytest.skip("building ahead forks (Linux)")
    folder = str(SAMPLE_TRACES / "cuda_h100" / "host_bound_steps")
    here = TraceAnalysis(trace_dir=folder, progress=False, cache=False, max_workers=1)
    want = here.get_findings()
    monkeypatch.setattr(replay_module, "PARALLEL_MIN_EVENTS", 0)
    assert not here.replay().build_ahead()  # one worker
    started: list[object] = []
    real = spread.Ahead

    def counted(fn):  # type: ignore[no-untyped-def]
        started.append(fn)
        return real(fn)

    monkeypatch.setattr(spread, "Ahead", counted)
    ahead = TraceAnalysis(trace_dir=folder, progress=False, cache=False, max_workers=2)
    got = ahead.get_findings()
    assert len(started) == 1 and ahead.replay()._ahead_graphs is None  # taken
    pd.testing.assert_frame_equal(got, want)
    _graphs_equal(here.replay().graph()[0], ahead.replay().graph()[0])
    assert not ahead.replay().build_ahead()  # built already
    several = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False, max_workers=2)
    assert several.replay().build_ahead() and len(started) == 1  # left to this process
    several.replay().graph()  # taken back


def _graphs_equal(a, b) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    for name in ("src", "dst", "delay", "node_ts", "base"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_a_job_graph_built_meanwhile_equals_the_one_built_here(monkeypatch) -> None:
    """Several ranks, several workers: the rank graphs, then the job graph, are built in
    this process while the rank rules' workers run (``build_ahead``). Whole, or a part of
    it with the rest built when asked: the graph, the savings and the findings are those
    built here."""
    import importlib
    import sys

    import pytest

    from hta.analysis.whatif.replayer import Replay
    from hta.model import spread

    if sys.platform != "linux":
        pytest.skip("spread visits fork (Linux)")
    replay_module = importlib.import_module("hta.analysis.whatif.replay")
    here = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False, max_workers=1)
    want = here.get_findings()
    monkeypatch.setattr(replay_module, "PARALLEL_MIN_EVENTS", 0)
    monkeypatch.setattr(spread, "MIN_EVENTS", 0)
    calls: list[int] = []
    real = Replay._build_meanwhile

    def counted(self, busy):  # type: ignore[no-untyped-def]
        calls.append(len(self._meanwhile))
        return real(self, busy)

    monkeypatch.setattr(Replay, "_build_meanwhile", counted)
    whole = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False, max_workers=2)
    got = whole.get_findings()
    assert calls and calls[0] == 0  # it ran, from the first rank
    pd.testing.assert_frame_equal(got, want)
    _graphs_equal(here.replay().graph()[0], whole.replay().graph()[0])
    assert whole.replay()._meanwhile is None and not spread._MEANWHILE

    # the workers finish after two rank graphs: the other two are built when asked
    part = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False, max_workers=2)
    answers = iter([True, True, False])
    assert part.replay().build_ahead()
    assert not part.replay()._build_meanwhile(lambda: next(answers, False))
    assert len(part.replay()._meanwhile) == 2 and part.replay()._graph is None
    _graphs_equal(here.replay().graph()[0], part.replay().graph()[0])
    assert not spread._MEANWHILE and part.replay()._meanwhile is None
    pd.testing.assert_frame_equal(part.get_findings(), want)

    # findings that fail take the work back: no later visit builds that graph
    failing = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False, max_workers=2)

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("broken rules")

    monkeypatch.setattr(failing, "_findings", broken)
    with pytest.raises(RuntimeError, match="broken rules"):
        failing.get_findings()
    assert not spread._MEANWHILE and failing.replay()._meanwhile is None


def test_the_summary_s_answers_build_a_single_rank_graph_ahead(monkeypatch) -> None:
    """``hta summary`` and the report read the findings from their shared visit
    (:func:`hta.report.answers.job_answers`): one rank's graph is built ahead there too,
    and the replayed findings are those of a graph built here; not when the job is not
    replayed."""
    import importlib
    import sys

    import pytest

    from hta.model import spread
    from hta.model.selection import Selection
    from hta.report.answers import job_answers

    if sys.platform != "linux":
        pytest.skip("building ahead forks (Linux)")
    replay_module = importlib.import_module("hta.analysis.whatif.replay")
    folder = str(SAMPLE_TRACES / "cuda_h100" / "sync_steps")
    want = job_answers(TraceAnalysis(trace_dir=folder, progress=False, cache=False,
                                     max_workers=1), Selection.of(None, None)).findings
    monkeypatch.setattr(replay_module, "PARALLEL_MIN_EVENTS", 0)
    started: list[object] = []
    real = spread.Ahead
    monkeypatch.setattr(spread, "Ahead", lambda fn: started.append(fn) or real(fn))
    analyzer = TraceAnalysis(trace_dir=folder, progress=False, cache=False, max_workers=2)
    got = job_answers(analyzer, Selection.of(None, None)).findings
    assert len(started) == 1 and analyzer.replay()._ahead_graphs is None
    pd.testing.assert_frame_equal(got.findings, want.findings)
    pd.testing.assert_frame_equal(got.coverage, want.coverage)
    plain = TraceAnalysis(trace_dir=folder, progress=False, cache=False, max_workers=2)
    job_answers(plain, Selection.of(None, None), replay=False)
    assert len(started) == 1


def test_step_bounds_of_a_large_graph_come_from_a_forked_worker(monkeypatch) -> None:
    """On a large job graph the step bounds' replays run on one forked worker (this
    process does not grow by a replay); the answers are those computed here, and this
    process replays nothing."""
    import sys

    import pytest

    from hta.analysis.whatif import jobpath, replayer

    if sys.platform != "linux":
        pytest.skip("forked workers need Linux")
    here = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False)
    want_table, want_bound = here.get_step_bounds(), here.get_job_step_bound()
    monkeypatch.setattr(replayer, "PARALLEL_MIN_NODES", 0)
    there = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False)
    there.replay().graph()  # built here: the worker inherits it
    calls: list[object] = []
    real = jobpath.job_step_bound

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(jobpath, "job_step_bound", counted)
    pd.testing.assert_frame_equal(there.get_step_bounds(), want_table)
    assert there.get_job_step_bound() == want_bound
    assert calls == []  # counted in the worker only: its calls do not come back
