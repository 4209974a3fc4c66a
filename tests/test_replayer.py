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


def test_a_replay_without_the_facade() -> None:
    """The analysis layer's object alone, on a trace loaded in memory, gives the facade's
    tables."""
    a = TraceAnalysis(trace_dir=str(JOB), progress=False, cache=False)
    replay = Replay(load_trace(JOB, progress=False, cache=False), a.clock_shifts(), a.rules)
    pd.testing.assert_frame_equal(replay.predict(), a.what_if())
    pd.testing.assert_frame_equal(replay.uncertainty(), a.get_replay_uncertainty())
    pd.testing.assert_frame_equal(replay.step_bound(None, True)[0], a.get_step_bounds())
