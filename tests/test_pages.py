"""hta.model.pages: the job graph's arrays, written once, are made without NumPy's huge
page hint, which is as it was afterwards."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import SAMPLE_TRACES

from hta.model import pages
from hta.model.pages import small_pages

get_hint = getattr(pages._multiarray, "_get_madvise_hugepage", None)
needs_hint = pytest.mark.skipif(pages._SET_HINT is None or get_hint is None,
                                reason="this NumPy has no huge page hint to switch")


@needs_hint
@pytest.mark.parametrize("before", [True, False])
def test_the_hint_is_off_inside_and_as_it_was_after(before: bool) -> None:
    was = pages._SET_HINT(before)
    try:
        with small_pages():
            assert get_hint() is False
            with small_pages():  # nested
                assert get_hint() is False
            assert get_hint() is False
        assert get_hint() is before
        with pytest.raises(RuntimeError), small_pages():
            raise RuntimeError("a failing block")
        assert get_hint() is before
    finally:
        pages._SET_HINT(was)


@needs_hint
def test_blocks_in_two_threads_leave_the_hint_as_it_was() -> None:
    # the first block to start saves the hint and the last to end restores it, whatever
    # the order in which they end
    import threading

    was = pages._SET_HINT(True)
    try:
        first_in, second_in, first_may_end = (threading.Event() for _ in range(3))
        inside: list[bool] = []

        def first() -> None:
            with small_pages():
                first_in.set()
                second_in.wait(5)
                first_may_end.wait(5)
            inside.append(get_hint())  # the second block still runs

        thread = threading.Thread(target=first)
        thread.start()
        first_in.wait(5)
        with small_pages():
            second_in.set()
            first_may_end.set()
            thread.join(5)
            assert inside == [False]
        assert get_hint() is True
    finally:
        pages._SET_HINT(was)


@needs_hint
def test_the_replay_builds_its_job_graph_on_small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    from hta.trace_analysis import TraceAnalysis

    replay_module = importlib.import_module("hta.analysis.whatif.replay")
    seen = []
    job_graph = replay_module.job_graph

    def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(get_hint())
        return job_graph(*args, **kwargs)

    monkeypatch.setattr(replay_module, "job_graph", watched)
    before = get_hint()
    a = TraceAnalysis(trace_dir=str(SAMPLE_TRACES / "synthetic_4rank"), progress=False,
                      cache=False)
    jg, schedule = a.replay().graph()
    assert seen == [False] and get_hint() is before
    assert jg.num_nodes == schedule.t.size > 0 and np.isfinite(schedule.t).all()
