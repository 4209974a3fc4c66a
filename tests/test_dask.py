"""Loading and per-rank analyses on a real Dask cluster (two worker processes).

The cluster's workers load their ranks, keep them, and run the per-rank analyses next
to them; the answers must equal the local executor's exactly. A rank whose worker dies
while loading is reported by name and the others still answer; a worker killed after
loading costs nothing but a reload of its ranks.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from conftest import shared_trace
from dask_cases import local_client
from scale_cases import assert_same_answers, complete_events_in_json, make_job

from hta.job.distributed import DistributedJob
from hta.job.executors import FAULT_ENV, DaskExecutor
from hta.model.trace import Trace
from hta.trace_analysis import TraceAnalysis

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")

#: Files whose name holds this make the worker loading them exit (see hta.job.executors).
CRASH_MARK = "crash-me"


@pytest.fixture(scope="module")
def client() -> Iterator[object]:
    # allowed-failures 0: a task whose worker dies fails at once (the executor then runs
    # it again alone), so the crash test costs two worker restarts, not four.
    with local_client({"distributed.scheduler.allowed-failures": 0},
                      env={FAULT_ENV: CRASH_MARK}) as dask_client:
        yield dask_client


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("job8")
    make_job(folder)
    return folder


@pytest.fixture(scope="module")
def local_job(job: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=job, cache=False, progress=False)


def _on_cluster(folder: Path | str, client: object, **kwargs: object) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False, client=client,
                         **kwargs)


def _workers(client: object) -> set[str]:
    return set(client.scheduler_info()["workers"])  # type: ignore[attr-defined]


def test_trace_filter_on_the_cluster_equals_local(client: object) -> None:
    folder = shared_trace("trace_filter")
    local = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    remote = _on_cluster(folder, client)
    assert isinstance(remote.t, DistributedJob) and isinstance(remote.t.executor, DaskExecutor)
    assert {h.worker for h in remote.t.handles.values()} <= _workers(client)
    assert remote.t.resident_ranks() == []  # nothing brought to the client by loading
    summary = remote.get_rank_summary()
    for path in sorted(folder.glob("*.json.gz")):
        rank = int(path.name.split("-")[1].split(".")[0])
        assert summary.loc[summary["rank"] == rank, "events"].item() == \
            complete_events_in_json(path)
    assert remote.t.resident_ranks() == []  # the summaries were computed on the workers
    assert_same_answers(local, remote)
    remote.close()


def test_generated_job_on_the_cluster_equals_local(client: object, job: Path,
                                                   local_job: TraceAnalysis) -> None:
    remote = _on_cluster(job, client)
    assert remote.ranks == list(range(8))
    assert_same_answers(local_job, remote, ranks=[0, 5])
    # the idle breakdown runs per rank on the workers too, and agrees
    pd.testing.assert_frame_equal(remote.get_idle_time_breakdown(visualize=False)[0],
                                  local_job.get_idle_time_breakdown(visualize=False)[0])
    remote.close()


def test_last_step_dropped_on_the_workers(client: object, job: Path) -> None:
    local = TraceAnalysis(trace_dir=job, cache=False, progress=False,
                          include_last_profiler_step=False)
    remote = _on_cluster(job, client, include_last_profiler_step=False)
    assert_same_answers(local, remote, ranks=[2])
    remote.close()


def test_in_memory_on_the_cluster_gives_a_plain_trace(client: object, job: Path,
                                                      local_job: TraceAnalysis) -> None:
    remote = _on_cluster(job, client, in_memory=True)
    assert type(remote.t) is Trace
    assert_same_answers(local_job, remote, ranks=[7])


def test_file_url_on_the_cluster(client: object, job: Path, local_job: TraceAnalysis) -> None:
    remote = _on_cluster(job.as_uri(), client)
    assert remote.ranks == local_job.ranks
    pd.testing.assert_frame_equal(remote.get_rank_summary(), local_job.get_rank_summary())
    remote.close()


def test_workers_write_and_reuse_the_cache(client: object, job: Path, tmp_path: Path,
                                           local_job: TraceAnalysis) -> None:
    first = TraceAnalysis(trace_dir=job, cache_dir=tmp_path, progress=False, client=client)
    assert len(list(tmp_path.iterdir())) == 8
    assert not any(h.temporary for h in first.t.handles.values())
    first.close()
    again = TraceAnalysis(trace_dir=job, cache_dir=tmp_path, progress=False, client=client)
    assert_same_answers(local_job, again, ranks=[3])
    again.close()


def test_a_worker_dying_while_loading_loses_only_its_rank(
    client: object, job: Path, local_job: TraceAnalysis, tmp_path: Path
) -> None:
    folder = tmp_path / "job"
    shutil.copytree(job, folder)
    crashing = folder / f"rank-5.{CRASH_MARK}.json.gz"
    (folder / "rank-5.json.gz").rename(crashing)
    remote = _on_cluster(folder, client)
    assert remote.ranks == [0, 1, 2, 3, 4, 6, 7]
    [(path, reason)] = remote.skipped.items()
    assert path == str(crashing)
    assert reason.startswith(f"{crashing.name}: the worker process running it died")
    expected = local_job.get_rank_summary()
    pd.testing.assert_frame_equal(remote.get_rank_summary(),
                                  expected[expected["rank"] != 5].reset_index(drop=True))
    pd.testing.assert_frame_equal(
        remote.get_temporal_breakdown(visualize=False),
        local_job.get_temporal_breakdown(ranks=[0, 1, 2, 3, 4, 6, 7], visualize=False))
    remote.close()


def test_a_worker_killed_after_loading_costs_a_reload(client: object, job: Path,
                                                      local_job: TraceAnalysis) -> None:
    remote = _on_cluster(job, client)
    victim = remote.t.handles[0].worker
    pids = client.run(os.getpid)  # type: ignore[attr-defined]
    os.kill(pids[victim], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while victim in _workers(client) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert victim not in _workers(client)
    pd.testing.assert_frame_equal(remote.get_rank_summary(), local_job.get_rank_summary())
    pd.testing.assert_frame_equal(remote.get_comm_comp_overlap(visualize=False),
                                  local_job.get_comm_comp_overlap(visualize=False))
    pd.testing.assert_frame_equal(remote.t.get_trace(0), local_job.t.get_trace(0))
    assert remote.skipped == {}
    remote.close()


def test_a_rank_lost_for_good_is_loaded_again(client: object, job: Path,
                                              local_job: TraceAnalysis) -> None:
    remote = _on_cluster(job, client)
    lost = remote.t.handles[4].ref
    client.cancel([lost])  # type: ignore[attr-defined]  # as after too many worker deaths
    pd.testing.assert_frame_equal(remote.get_rank_summary(), local_job.get_rank_summary())
    assert remote.t.handles[4].ref is not lost and remote.skipped == {}
    client.cancel([remote.t.handles[2].ref])  # type: ignore[attr-defined]
    pd.testing.assert_frame_equal(remote.t.get_trace(2), local_job.t.get_trace(2))
    remote.close()


def test_summary_command_on_the_cluster(client: object, job: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from hta.cli import main
    from hta.commands import cluster as cluster_command

    args = ["summary", str(job), "--json", "--no-cache", "-q"]
    assert main(args) == 0
    local = json.loads(capsys.readouterr().out)
    address = client.scheduler.address  # type: ignore[attr-defined]
    assert main([*args, "--scheduler", address]) == 0
    assert json.loads(capsys.readouterr().out) == local
    # as a user runs it: a process of its own, where no Dask client is the default one
    import subprocess
    import sys

    alone = subprocess.run([sys.executable, "-m", "hta.cli", *args, "--scheduler", address],
                           capture_output=True, text=True, timeout=300)
    assert alone.returncode == 0, alone.stderr
    assert json.loads(alone.stdout) == local
    scheduler_file = tmp_path / "scheduler.json"
    # what `dask scheduler --scheduler-file` writes (Client.write_scheduler_file trips over
    # tuple keys in this Dask's scheduler info)
    scheduler_file.write_text(json.dumps({"type": "Scheduler", "address": address}))
    assert main([*args, "--scheduler-file", str(scheduler_file)]) == 0
    assert json.loads(capsys.readouterr().out) == local
    cluster_command.close_clients()


def test_unreachable_scheduler_is_one_clear_line(job: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from hta.cli import main
    from hta.commands import cluster as cluster_command

    monkeypatch.setattr(cluster_command, "CONNECT_TIMEOUT_S", 1)
    assert main(["summary", str(job), "--scheduler", "tcp://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("hta: error: cannot reach the Dask scheduler at tcp://127.0.0.1:9")
    assert "dask scheduler" in err and "Traceback" not in err


def test_progress_bar_ticks_once_per_rank_on_the_cluster(
    client: object, job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextlib import contextmanager

    import hta.job.executors as parallel_module

    bars: list[tuple[str, int, list[int]]] = []

    class Bar:
        def __init__(self, description: str, total: int) -> None:
            self.ticks: list[int] = []
            bars.append((description, total, self.ticks))

        def update(self, n: int = 1) -> None:
            self.ticks.append(n)

    @contextmanager
    def recording_bar(total: int, description: str = "", *, enabled: bool = True) -> Iterator:
        yield Bar(description, total) if enabled else Bar("(off)", total)

    monkeypatch.setattr(parallel_module, "progress_bar", recording_bar)
    remote = TraceAnalysis(trace_dir=job, cache=False, client=client)
    remote.get_rank_summary()
    assert bars == [("Loading traces", 8, [1] * 8), ("Rank summary", 8, [1] * 8)]
    remote.close()
