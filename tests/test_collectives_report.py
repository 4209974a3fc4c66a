"""The collective-bandwidth figure and report part, on generated jobs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_collectives import collective_job

from hta.model.selection import Selection, resolve
from hta.plots.collectives import collective_bandwidth_figure
from hta.report.context import Context, Section
from hta.report.sections_collectives import collective_bandwidth
from hta.trace_analysis import TraceAnalysis


def analyzer(folder: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=folder, cache=False, progress=False)


def test_figure_plots_every_sized_call(tmp_path: Path) -> None:
    perf = analyzer(collective_job(tmp_path, "all-to-all")).get_collective_performance()
    fig = collective_bandwidth_figure(perf, 450.0, "NVLink 4")
    (trace,) = fig.data
    assert trace.name == "all-to-all" and len(trace.x) == 8
    assert np.allclose(trace.y, 75.0) and np.allclose(trace.x, 1e8)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert any("450" in a.text for a in fig.layout.annotations)


def test_figure_says_what_it_left_out(tmp_path: Path) -> None:
    perf = analyzer(collective_job(tmp_path, "all-reduce")).get_collective_performance()
    perf.loc[perf.index[:3], "msg_bytes"] = np.nan
    perf.loc[perf.index[:3], "busbw(GB/s)"] = np.nan
    fig = collective_bandwidth_figure(perf)
    assert len(fig.data[0].x) == 5 and "3 calls without a message size" in fig.layout.title.text


def test_report_part(tmp_path: Path) -> None:
    a = analyzer(collective_job(tmp_path, "all-reduce", transfer_ns=4_000_000))
    s = Section("collectives", "Collectives")
    collective_bandwidth(Context(a, resolve(Selection.of(a.ranks), a.t), None), s)
    assert len(s.figures) == 1 and "NVLink 4" in s.notes[0]
    summary, slow = s.tables
    assert summary.rows[0][summary.headers.index("calls")] == "8"
    assert len(slow.rows) == 8 and not s.error
    assert s.source == "hta.analysis.collectives.collective_performance"


def test_report_part_without_sizes(tmp_path: Path) -> None:
    from kineto_builder import TraceBuilder

    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000_000):
        b.kernel("ncclDevKernel_AllReduce_<script>x</script>", 10_000, 1_000, stream=20)
    b.write(tmp_path / "rank-0.json")
    a = analyzer(tmp_path)
    s = Section("collectives", "Collectives")
    collective_bandwidth(Context(a, resolve(Selection.of(a.ranks), a.t), None), s)
    assert not s.figures and "message size" in s.notes[0]
    (summary,) = s.tables
    assert summary.rows[0][summary.headers.index("collective")] == "all-reduce"


def test_kernel_names_stay_text_in_the_report(tmp_path: Path) -> None:
    """A collective kernel whose name holds markup, slow enough to be listed: the
    report's HTML shows it as text."""
    from kineto_builder import TraceBuilder
    from test_collectives import COMM_STREAM, H100, comm_args

    from hta.report.builder import build_report

    evil = "ncclDevKernel_AllReduce<img src=x onerror=alert(1)>(int*)"
    for rank in range(2):
        b = TraceBuilder(rank=rank, world_size=2, extra_top_level=dict(H100))
        with b.step(1, ts=0, dur=10_000_000):
            b.launch_kernel(evil, cpu_ts=1_000, cpu_dur=100, gpu_ts=10_000,
                            gpu_dur=4_000_000, stream=COMM_STREAM,
                            **comm_args("allreduce", 2))
        b.write(tmp_path / f"rank-{rank}.json")
    a = analyzer(tmp_path)
    assert (a.get_findings()["rule"] == "collective_bw").any()
    html = build_report(a)
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
