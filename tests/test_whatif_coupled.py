"""The what-if replay as per-rank replays coupled through the collectives' times alone.

:mod:`hta.analysis.whatif.coupled` must give the job graph's table exactly (the fixed
point of the release times is the job's schedule, not an approximation), in a few rounds
even where hundreds of collectives follow one another, and on a Dask cluster without
reading a rank into the client.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import shared_trace
from test_whatif import GPU_BOUND, simulate

from hta.analysis.whatif import predict
from hta.analysis.whatif.coupled import Coupling, coupled_predict, coupled_ranks
from hta.synthetic import generate_job
from hta.trace_analysis import TraceAnalysis

CHANGES = [None, "kernels:gemm*0.5", "kernels:nccl*2", "no-stragglers", "no-stragglers:1",
           "overlap-comm", "no-host-sync", "no-launch-overhead", "no-data-loader",
           ["kernels:gemm*0.5", "no-stragglers"]]


def _both(a: TraceAnalysis, change: object) -> tuple[pd.DataFrame, pd.DataFrame, Coupling]:
    jg, base = a.replay().graph()
    kept, coupling = coupled_ranks(a.t, a.clock_shifts())
    return (predict(jg, change, a.rules, base=base),
            coupled_predict(kept, coupling, change, a.rules), coupling)


def test_schedule_roots_follow_the_binding_edges_on_random_dags() -> None:
    from hta.analysis.whatif.schedule import schedule

    rng = np.random.default_rng(11)
    for _ in range(30):
        n = int(rng.integers(2, 80))
        pairs = {(int(a), int(b)) for a, b in rng.integers(0, n, size=(2 * n, 2)) if a < b}
        pairs |= {(i, i + 1) for i in range(n - 1) if rng.random() < 0.7}
        if not pairs:
            continue
        src, dst = (np.array(x, dtype=np.int64) for x in zip(*sorted(pairs, key=lambda p:
                                                                         (p[1], p[0]))))
        s = schedule(n, src, dst, rng.integers(0, 9, size=src.size), rng.integers(0, 20, n),
                     rng.permutation(n), roots=True)
        expected = []
        for v in range(n):  # follow the binding edges back, node by node
            while s.via[v] >= 0:
                v = int(src[s.via[v]])
            expected.append(v)
        assert s.root is not None and s.root.tolist() == expected


@pytest.fixture(scope="module")
def many_collectives(tmp_path_factory: pytest.TempPathFactory) -> TraceAnalysis:
    """Four ranks, six steps, six collectives per step one after the other."""
    folder = tmp_path_factory.mktemp("coupled")
    generate_job(folder, ranks=4, steps=6, kernels_per_step=120)
    return TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)


@pytest.mark.parametrize("change", CHANGES, ids=str)
def test_coupled_replay_equals_the_job_graph(many_collectives: TraceAnalysis,
                                             change: object) -> None:
    ref, got, coupling = _both(many_collectives, change)
    pd.testing.assert_frame_equal(got, ref)
    k = coupling.measured.size
    assert k >= 30  # a long chain of collectives
    # policy iteration settles in a few rounds where plain iteration needs one per
    # collective on the chain
    assert max(coupling.rounds.values()) <= 8 < k


def test_coupled_replay_moves_a_straggler(tmp_path: Path) -> None:
    slow = replace(GPU_BOUND, ranks=3, slow_rank=2, slow_factor=1.5)
    a = TraceAnalysis(trace_dir=str(simulate(slow, tmp_path)), cache=False, progress=False)
    for change in ("no-stragglers", "no-stragglers:2", "kernels:gemm*0.5"):
        ref, got, _ = _both(a, change)
        pd.testing.assert_frame_equal(got, ref)
    assert (got["predicted(us)"] < got["replayed(us)"]).any()


@pytest.mark.parametrize("name", ["trace_filter", "synthetic_4rank"])
def test_coupled_replay_on_real_and_bundled_jobs(name: str) -> None:
    folder = (Path(__file__).parent.parent / "sample_traces" / name
              if name == "synthetic_4rank" else shared_trace(name))
    a = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)
    for change in (None, "kernels:gemm*0.5", "no-stragglers", "overlap-comm"):
        ref, got, coupling = _both(a, change)
        pd.testing.assert_frame_equal(got, ref)
        assert coupling.rounds["base"] == 1  # the measured times are the replay's


def test_release_times_settle_at_the_job_graphs_barriers(
        many_collectives: TraceAnalysis) -> None:
    from hta.analysis.whatif import replay
    from hta.analysis.whatif.changes import Change, apply

    a = many_collectives
    jg, _ = a.replay().graph()
    kept, coupling = coupled_ranks(a.t, a.clock_shifts())
    coupled_predict(kept, coupling, "kernels:gemm*0.5", a.rules, modelled=False)
    changed = replay(jg, apply(jg, [Change.parse("kernels:gemm*0.5")], a.rules))
    coll = jg.collectives.drop_duplicates("inst").sort_values("inst")
    barrier_t = changed.t[jg.order_of[coll["barrier"].to_numpy()]]
    assert np.array_equal(coupling.release["changed"][coll["inst"].to_numpy()], barrier_t)


def _every_path(a: TraceAnalysis) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    from hta.analysis.whatif.coupled import coupled_critical_path
    from hta.analysis.whatif.jobpath import job_critical_path

    jg, base = a.replay().graph()
    kept, coupling = coupled_ranks(a.t, a.clock_shifts())
    steps = [None, *sorted({int(s) for g in jg.ranks for s in g.steps["step"]})]
    return ([job_critical_path(jg, base, s) for s in steps],
            [coupled_critical_path(kept, coupling, s) for s in steps])


def test_coupled_critical_path_equals_the_job_graphs(many_collectives: TraceAnalysis,
                                                     tmp_path: Path) -> None:
    slow = replace(GPU_BOUND, ranks=3, slow_rank=2, slow_factor=1.5)
    straggler = TraceAnalysis(trace_dir=str(simulate(slow, tmp_path)), cache=False,
                              progress=False)
    crossed = 0
    for a in (many_collectives, straggler):
        for ref, got in zip(*_every_path(a), strict=True):
            pd.testing.assert_frame_equal(got, ref)
            crossed += got["rank"].nunique() > 1
    assert crossed  # some paths go from rank to rank through a collective


def test_coupled_replay_on_dask_reads_no_rank_into_the_client(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("distributed")
    import json
    import re

    from dask_cases import local_client

    from hta.cli import main
    from hta.commands import cluster as cluster_command

    generate_job(tmp_path, ranks=4, steps=3, kernels_per_step=60)
    local = TraceAnalysis(trace_dir=str(tmp_path), cache=False, progress=False)
    with local_client() as client:
        remote = TraceAnalysis(trace_dir=str(tmp_path), cache=False, progress=False,
                               client=client)
        assert remote.t.keeps_remotely
        for change in (None, "kernels:gemm*0.5", "no-stragglers"):
            pd.testing.assert_frame_equal(remote.what_if(change), local.what_if(change))
        for step in (None, 1):
            pd.testing.assert_frame_equal(remote.get_job_critical_path(step),
                                          local.get_job_critical_path(step))
        pd.testing.assert_frame_equal(remote.get_step_bounds(), local.get_step_bounds())
        assert remote.get_job_step_bound() == local.get_job_step_bound()
        assert remote.t.resident_ranks() == []  # every replay ran on the workers
        kept, _ = remote.replay().coupled()
        assert set(kept.refs) == set(remote.t.get_ranks())
        remote.close()
        # the command on the cluster prints what it prints locally
        args = ["whatif", str(tmp_path), "kernels:gemm*0.5", "--json", "--no-cache", "-q"]
        assert main(args) == 0
        here = json.loads(capsys.readouterr().out)
        assert main([*args, "--scheduler", client.scheduler.address]) == 0
        assert json.loads(capsys.readouterr().out) == here
        # and the report, whose "What bounds the step" replays the job there
        pages = []
        for where, extra in (("here", []), ("there", ["--scheduler",
                                                      client.scheduler.address])):
            out = tmp_path / f"report-{where}.html"
            assert main(["report", str(tmp_path), "-o", str(out), "--no-cache", "-q",
                         *extra]) == 0
            pages.append(re.sub(r"\d{4}-\d\d-\d\d[ T][\d:]+", "", out.read_text()))
        assert "What bounds the step" in pages[1] and pages[0] == pages[1]
        cluster_command.close_clients()


def test_a_change_matching_no_work_is_refused_on_dask_too(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    from dask_cases import local_client

    from hta.errors import ChangeMatchesNothingError

    generate_job(tmp_path, ranks=2, steps=2, kernels_per_step=30)
    with local_client() as client:
        remote = TraceAnalysis(trace_dir=str(tmp_path), cache=False, progress=False,
                               client=client)
        with pytest.raises(ChangeMatchesNothingError, match="kernels:nomatch"):
            remote.what_if("kernels:nomatch*0.5")
        assert len(remote.what_if("kernels:gemm*0.5"))
        remote.close()
