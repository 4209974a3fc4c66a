"""CUDA-graph traces: capture-only traces (the ``graph_capture`` note), replayed kernels
attributed to their graph launch, small graph kernels, and a GPU busy for a small part of
the window (the ``gpu_mostly_idle`` note).

Every trace is built here, with its answer known by construction; times in ns.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from kineto_builder import TraceBuilder

from hta.analysis.findings import find
from hta.analysis.findings import graphs as graph_rules
from hta.analysis.findings import kernels as kernel_rules
from hta.analysis.findings import launch_bound as launch_rules
from hta.analysis.findings.engine import default_rules
from hta.analysis.launch import cuda_kernel_launch_stats, launch_pairing_summary
from hta.job.load import load_trace
from hta.model.links import GRAPH_LAUNCH, graph_replayed
from hta.model.trace import Trace

STEP_NS = 33_700_000
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(x)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(x)"
HIP = {"cudaStreamBeginCapture": "hipStreamBeginCapture",
       "cudaStreamEndCapture": "hipStreamEndCapture",
       "cudaGraphInstantiateWithFlags": "hipGraphInstantiateWithFlags",
       "cudaLaunchKernel": "hipLaunchKernel", "cudaGraphLaunch": "hipGraphLaunch"}


def _name(call: str, hip: bool) -> str:
    return HIP[call] if hip else call


def _load(b: TraceBuilder, tmp_path: Path) -> Trace:
    b.write(tmp_path / "rank-0.json")
    return load_trace(tmp_path, progress=False, cache=False)


def capture_only(tmp_path: Path, hip: bool = False, replay_too: bool = False) -> Trace:
    """One step of 33.7 ms, as an inference server's warm-up writes it: two fill kernels
    (5.5 µs each) before the capture, then under ``capture_32_DECODE`` a stream capture in
    which the host makes 40 launch calls that run nothing on the GPU, the end of the
    capture and one instantiation. With ``replay_too`` the graph is then launched once and
    its 40 kernels run."""
    b = TraceBuilder(rank=0)
    with b.step(134, ts=0, dur=STEP_NS):
        for i in range(2):
            b.launch_kernel(FILL, cpu_ts=100_000 + i * 10_000, cpu_dur=4_000,
                            gpu_ts=200_000 + i * 10_000, gpu_dur=5_500,
                            launcher=_name("cudaLaunchKernel", hip))
        b.annotation("capture_32_DECODE", ts=1_000_000, dur=30_000_000)
        b.runtime(_name("cudaStreamBeginCapture", hip), ts=1_100_000, dur=20_000)
        for i in range(40):
            b.cpu_op("aten::add", ts=1_200_000 + i * 50_000, dur=20_000)
            b.runtime(_name("cudaLaunchKernel", hip), ts=1_205_000 + i * 50_000, dur=5_000,
                      correlation=1_000 + i)
        b.runtime(_name("cudaStreamEndCapture", hip), ts=3_500_000, dur=30_000)
        b.runtime(_name("cudaGraphInstantiateWithFlags", hip), ts=3_600_000, dur=900_000)
        if replay_too:
            b.graph_launch([(ADD, 5_000_000 + i * 4_000, 3_000, 7) for i in range(40)],
                           cpu_ts=4_900_000, cpu_dur=200_000,
                           launcher=_name("cudaGraphLaunch", hip))
    return _load(b, tmp_path)


def replay(tmp_path: Path, n: int = 150, gap_ns: int = 2_000, in_op: bool = False,
           graph: bool = True) -> Trace:
    """Two steps; in each, one graph launch (a 1 ms call, as long graph launches are)
    whose ``n`` kernels of 3 µs run ``gap_ns`` apart while the call is still running. The
    launch sits under a ``record_function`` label, inside ``aten::graph_replay`` only with
    ``in_op``. Without ``graph`` the same kernels are launched one by one, each call
    returning 1 µs before its kernel starts (the host is the bottleneck)."""
    b = TraceBuilder(rank=0)
    for k in (1, 2):
        t = (k - 1) * 4_000_000
        with b.step(k, ts=t, dur=4_000_000 - 1_000):
            b.annotation("execute_model", ts=t + 1_000, dur=3_000_000)
            if in_op:
                b.cpu_op("aten::graph_replay", ts=t + 5_000, dur=1_010_000)
            kernels = [(ADD, t + 100_000 + i * (3_000 + gap_ns), 3_000, 7) for i in range(n)]
            if graph:
                b.graph_launch(kernels, cpu_ts=t + 10_000, cpu_dur=1_000_000)
            else:
                for name, ts, dur, stream in kernels:
                    b.launch_kernel(name, cpu_ts=ts - 1_500, cpu_dur=500, gpu_ts=ts,
                                    gpu_dur=dur, stream=stream)
    return _load(b, tmp_path)


def _rows(trace: Trace, rule: str, rules=None):
    out = find(trace, rules=graph_rules.RULES if rules is None else rules)
    return out[out["rule"] == rule]


# -- graph_capture ---------------------------------------------------------------------------
@pytest.mark.parametrize("hip", [False, True])
def test_capture_only_trace_says_so(tmp_path, hip):
    """Before this rule the trace read "compute 100%, no findings"."""
    rows = _rows(capture_only(tmp_path, hip=hip), "graph_capture")
    assert len(rows) == 1
    row = rows.iloc[0]
    assert row["severity"] == "info" and row["est_saving(us)"] == 0.0
    assert row["steps"] == [134]
    evidence = row["evidence"]
    assert evidence.startswith("rank 0: 1 stream capture and 1 graph instantiation, no graph "
                               "launch (step 134): the first capture at 1.100 ms under "
                               "capture_32_DECODE; 40 kernel, copy or memset launch calls")
    assert "the GPU was busy 11.0 µs of the 33.700 ms analysed" in evidence
    assert "torch.profiler.schedule" in row["advice"]


def test_a_trace_that_replays_its_graphs_is_not_capture_only(tmp_path):
    assert _rows(capture_only(tmp_path, replay_too=True), "graph_capture").empty
    assert _rows(replay(tmp_path / "r"), "graph_capture").empty


def test_info_findings_survive_the_noise_floor_and_sort_last(tmp_path):
    trace = capture_only(tmp_path)
    out = find(trace, rules=default_rules())
    assert {"graph_capture", "gpu_mostly_idle"} <= set(out["rule"])
    info = out[out["severity"] == "info"]
    assert (info["est_saving(us)"] == 0).all()
    assert list(out["severity"]).index("info") == len(out) - len(info)


# -- gpu_mostly_idle -------------------------------------------------------------------------
def test_nearly_unused_gpu_is_stated(tmp_path):
    rows = _rows(capture_only(tmp_path), "gpu_mostly_idle")
    assert len(rows) == 1
    evidence = rows.iloc[0]["evidence"]
    assert "GPU busy 11.0 µs of the 33.700 ms analysed (0.03%, step 134)" in evidence
    # the longest stretch: from the second fill kernel's end to the step's end
    assert f"lasted {(STEP_NS - 215_500) / 1e6:.3f} ms from {215_500 / 1e6:.3f} ms" in evidence


def test_busy_gpu_gives_no_note(tmp_path):
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000_000):
        b.launch_kernel(ADD, cpu_ts=1_000, cpu_dur=500, gpu_ts=10_000, gpu_dur=110_000)
    assert _rows(_load(b, tmp_path), "gpu_mostly_idle").empty  # busy 11% of the step


def test_cpu_only_trace_gives_no_note(tmp_path):
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000_000):
        b.cpu_op("aten::add", ts=1_000, dur=500)
    assert _rows(_load(b, tmp_path), "gpu_mostly_idle").empty


# -- replayed kernels belong to their graph launch -------------------------------------------
@pytest.mark.parametrize("in_op", [False, True])
def test_replayed_kernels_are_attributed_to_their_graph_launch(tmp_path, in_op):
    """Kineto writes every kernel of a replay with the graph launch's correlation id and,
    when the launch ran outside any operator (graph.replay() in vLLM/SGLang), no External
    id: each kernel links to the launch, launch statistics count it, and the operator
    around the launch (when there is one) owns it."""
    trace = replay(tmp_path, n=20, in_op=in_op)
    rt = trace.rank(0)
    ev = rt.events
    pos = rt.link("index_correlation")
    names = np.asarray(rt.symbols, dtype=object)[ev["name"].to_numpy()]
    launches = np.flatnonzero(names == "cudaGraphLaunch")
    kernels = np.flatnonzero(names == ADD)
    assert launches.size == 2 and kernels.size == 40
    assert sorted(set(pos[kernels].tolist())) == launches.tolist()
    assert graph_replayed(rt.symbols, ev["name"].to_numpy(), pos)[kernels].all()
    assert not graph_replayed(rt.symbols, ev["name"].to_numpy(), pos)[launches].any()
    stats = cuda_kernel_launch_stats(trace)
    assert (stats["launch_name"] == "cudaGraphLaunch").sum() == 40
    pairing = launch_pairing_summary(trace).iloc[0]
    assert (pairing["paired_launches"], pairing["paired_gpu_events"]) == (2, 40)
    ops = rt.link("op_index")[kernels]
    if in_op:
        assert set(names[ops].tolist()) == {"aten::graph_replay"}
    else:
        assert (ops == -1).all()
    assert set(ev["iteration"].to_numpy()[kernels].tolist()) == {1, 2}


def test_graph_replayed_on_columns():
    """Rows: a graph launch (0) and its two kernels (1, 2), a plain launch (3) and its
    kernel (4), an unlinked kernel (5); the launch's own link names its first kernel."""
    symbols = ["hipGraphLaunch", "k", "hipLaunchKernel", "cudaGraphLaunchish"]
    name = np.array([0, 1, 1, 2, 1, 1])
    launch = np.array([1, 0, 0, 4, 3, -1])
    assert graph_replayed(symbols, name, launch).tolist() == [False, True, True, False, False,
                                                              False]
    assert not graph_replayed(symbols[1:], np.array([0]), np.array([-1])).any()


@pytest.mark.parametrize("name", ["cudaGraphLaunch", "cudaGraphLaunch_v10000",
                                  "cuGraphLaunch", "cuGraphLaunch_ptsz", "hipGraphLaunch"])
def test_graph_launch_names(name):
    assert GRAPH_LAUNCH.match(name)


# -- small kernels replayed from a graph -----------------------------------------------------
def test_small_graph_kernels_count_their_gaps_and_get_no_graph_advice(tmp_path):
    """150 kernels of 3 µs, 2 µs apart, replayed while the 1 ms graph launch call still
    runs: every gap is the GPU's own (the kernels were enqueued together), 149 pairs a
    step of 2 µs gap + 1 µs overhead. Before, the gaps were left to launch_bound because
    the launch call had not returned, and the advice was to use CUDA graphs."""
    trace = replay(tmp_path)
    rows = _rows(trace, "small_kernels", kernel_rules.RULES)
    assert round(rows.iloc[0]["est_saving(us)"] * 1e3) == 2 * 149 * 3_000
    assert "300 of the 300 replayed from CUDA/HIP graphs" in rows.iloc[0]["evidence"]
    assert rows.iloc[0]["advice"] == kernel_rules.GRAPHED_SMALL_ADVICE


def test_graph_replays_are_not_launch_bound(tmp_path):
    """The same replay: the gaps between graph kernels while the graph launch call still
    runs are not the host's (before, launch_bound claimed them, 596 µs, and advised CUDA
    graphs); the twin launched one by one by a slow host is launch-bound."""
    assert _rows(replay(tmp_path), "launch_bound", launch_rules.RULES).empty
    rows = _rows(replay(tmp_path / "eager", graph=False), "launch_bound", launch_rules.RULES)
    assert round(rows.iloc[0]["est_saving(us)"] * 1e3) == 2 * 149 * 2_000


def test_small_kernels_launched_one_by_one_keep_the_graph_advice(tmp_path):
    """The twin: the same kernels launched one by one by a host that is the bottleneck
    (each call returns after the previous kernel ended): the gaps are the host's, only
    the per-kernel overhead counts, and CUDA graphs are advised."""
    trace = replay(tmp_path, graph=False)
    rows = _rows(trace, "small_kernels", kernel_rules.RULES)
    assert round(rows.iloc[0]["est_saving(us)"] * 1e3) == 2 * 149 * 1_000
    assert rows.iloc[0]["advice"] == kernel_rules.SMALL_ADVICE


def test_info_findings_print_as_notes_not_as_zero_savings(tmp_path):
    """``hta summary`` and the report show an info finding as a note with no saving (before:
    "0.000" ms and "~0.0 µs (0.0%)"); a finding with a saving keeps its number."""
    import io
    from types import SimpleNamespace

    from hta.commands.args_and_output import Printer
    from hta.commands.summary import print_findings
    from hta.report.context import Section, table_of
    from hta.report.sections_findings import _finding_items

    out = find(capture_only(tmp_path), rules=default_rules())
    buf = io.StringIO()
    print_findings(Printer(buf, rich=False), out)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.startswith("info")]
    assert len(lines) == len(out[out["severity"] == "info"]) >= 2
    assert all(ln.split()[1:4] == ["note", "-", "note"] for ln in lines)  # saving, range, %
    section = Section("findings", "Findings")
    _finding_items(SimpleNamespace(section_titles={}, table=table_of), section, out)
    savings = {f.severity: f.saving for f in section.findings}
    assert savings["info"] == "note (no saving)"
    # the twin: a finding with a saving prints it
    twin = out.iloc[:1].copy()
    twin["severity"], twin["est_saving(us)"], twin["share_pctg"] = "low", 1234.5, 3.7
    buf = io.StringIO()
    print_findings(Printer(buf, rich=False), twin)
    assert "1.234" in buf.getvalue() or "1.235" in buf.getvalue()
    section = Section("findings", "Findings")
    _finding_items(SimpleNamespace(section_titles={}, table=table_of), section, twin)
    assert section.findings[0].saving != "note (no saving)"


def test_capture_only_coverage_note_points_at_the_capture(tmp_path):
    """The coverage note of a capture-only rank says the graph_capture note explains its
    idle time (before: "no rule names the cause of the rest" beside that note); a rank with
    idle time and no capture keeps the plain note (the twin, in test_findings_coverage)."""
    from hta.analysis.findings.coverage import CAPTURE_CAUSE, NO_CAUSE, with_notes
    from hta.trace_analysis import TraceAnalysis

    capture_only(tmp_path)
    (row,) = TraceAnalysis(tmp_path, cache=False, progress=False) \
        .get_findings_coverage().to_dict("records")
    assert CAPTURE_CAUSE in row["note"] and NO_CAUSE not in row["note"]
    assert with_notes(f"idle: {NO_CAUSE}", ["gpu_mostly_idle"]) == f"idle: {NO_CAUSE}"
