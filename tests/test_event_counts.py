"""Events per kind (hta.analysis.event_counts, get_event_counts): the worked example of
adding an analysis (docs/architecture.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from conftest import SAMPLE_TRACES

import hta
from hta.analysis.event_counts import COLUMNS
from hta.trace_analysis import TraceAnalysis

SYNTHETIC = SAMPLE_TRACES / "synthetic_4rank"


def _analyzer(in_memory: bool) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=str(SYNTHETIC), cache=False, progress=False,
                         in_memory=in_memory)


def test_counts_and_times_per_rank_and_kind() -> None:
    analyzer = _analyzer(True)
    got = analyzer.get_event_counts()
    assert list(got.columns) == COLUMNS
    assert got["rank"].unique().tolist() == analyzer.t.get_ranks()
    for rank in analyzer.t.get_ranks():
        ev = analyzer.t.rank(rank).events
        mine = got[got["rank"] == rank].set_index("kind")
        want = ev.groupby("kind", observed=True).size()
        assert mine["count"].to_dict() == {str(k): int(v) for k, v in want.items()}
        kernels = ev[ev["kind"] == "computation"]
        assert np.isclose(mine.loc["computation", "time(us)"],
                          (kernels["end"] - kernels["ts"]).sum() / 1e3)
    assert analyzer.get_event_counts(ranks=[]).empty


def test_steps_narrow_the_counts() -> None:
    analyzer = _analyzer(True)
    whole = analyzer.get_event_counts(ranks=0)
    first = analyzer.get_event_counts(ranks=0, iterations=hta.FIRST)
    step = int(analyzer.get_profiler_steps()[0])
    ev = analyzer.t.rank(0).events
    assert int(first["count"].sum()) == int((ev["iteration"] == step).sum())
    assert int(first["count"].sum()) < int(whole["count"].sum())


def test_the_same_answer_with_the_ranks_kept_out_of_memory() -> None:
    eager, lazy = _analyzer(True), _analyzer(False)
    for kwargs in ({}, {"ranks": [1, 3], "iterations": [1, 2]}):
        pd.testing.assert_frame_equal(lazy.get_event_counts(**kwargs),
                                      eager.get_event_counts(**kwargs))
    lazy.t.close()
