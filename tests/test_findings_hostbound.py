"""The ``host_bound`` finding: savings known by construction for each class of host
work, twins where the host runs ahead, and its place after the specific causes."""

from __future__ import annotations

import findings_cases as cases
import pytest
from conftest import shared_trace

from hta.analysis.findings import find
from hta.analysis.findings.hostbound import ADVICE, host_gaps
from hta.analysis.findings.sharing import CLAIM_ORDER
from hta.job.load import load_trace


def _row(out, rule):
    rows = out[out["rule"] == rule]
    return rows.iloc[0] if len(rows) else None


@pytest.mark.parametrize("kind", ["python", "dispatch", "slow_op"])
def test_host_bound_saving_and_class_match_construction(tmp_path, kind):
    trace, expected = cases.host_bound(tmp_path, kind=kind)
    row = _row(find(trace), "host_bound")
    assert row is not None
    assert row["est_saving(us)"] * 1e3 == pytest.approx(expected, abs=1)
    assert row["subject"] == kind
    assert row["advice"] == ADVICE[kind]  # four stretches, none holding half
    assert row["severity"] == "high"
    assert ("records no CPU operator" in row["evidence"]) == (kind == "python")


@pytest.mark.parametrize("kind", ["python", "dispatch", "slow_op"])
def test_host_running_ahead_is_not_host_bound(tmp_path, kind):
    trace, expected = cases.host_bound(tmp_path, kind=kind, bound=False)
    assert expected == 0
    assert _row(find(trace), "host_bound") is None


def test_host_bound_comes_after_the_specific_causes():
    assert CLAIM_ORDER[-1] == "host_bound"
    for rule in ("host_sync", "data_loading", "launch_bound"):
        assert CLAIM_ORDER.index(rule) < CLAIM_ORDER.index("host_bound")


def test_one_time_cost_is_not_host_bound(tmp_path):
    trace, expected = cases.warm_up(tmp_path)
    out = find(trace)
    row = _row(out, "host_bound")
    # only the 4 µs left between the first call's end and its kernel: under the floor
    assert row is None and expected > 0


def test_sync_wait_stays_host_sync(tmp_path):
    trace, expected = cases.host_sync(tmp_path)
    out = find(trace)
    sync = _row(out, "host_sync")
    assert sync is not None and sync["est_saving(us)"] * 1e3 == pytest.approx(expected, abs=1)
    # the idle between the steps (the host idle, nothing recorded) is host-bound; the
    # sync bubble is not counted there twice
    bound = _row(out, "host_bound")
    assert bound is not None and bound["subject"] == "python"
    window = cases.STEPS * cases.STEP_NS
    assert (bound["est_saving(us)"] + sync["est_saving(us)"]) * 1e3 <= window


def test_real_trace_host_gaps_are_idle_and_classified():
    """df_index_resolver: every host gap lies between GPU work, and its classes add up to
    its length."""
    trace = load_trace(shared_trace("df_index_resolver"), progress=False, cache=False)
    for r in trace.get_ranks():
        hg = host_gaps(trace.rank(r))
        total = sum(hg.parts[c] for c in hg.parts)
        assert ((hg.end - hg.start) == total).all()
        assert (hg.end > hg.start).all()


def test_one_long_python_stretch_gets_its_own_advice(tmp_path):
    """One step: the python case's 200 µs of unrecorded host work is one stretch holding
    most of the python time: the advice names host work outside the operators."""
    trace, _ = cases.host_bound(tmp_path, kind="python", steps=1)
    row = _row(find(trace), "host_bound")
    assert row["subject"] == "python"
    assert row["advice"] == ADVICE["python_stretch"]


def test_a_trace_without_cpu_operators_says_so(tmp_path):
    """The dispatch case with its operators left out of the trace (a GPU-only capture
    with runtime calls): the evidence says the trace records no CPU operator."""
    import gzip
    import json

    cases.host_bound(tmp_path, kind="dispatch")
    path = tmp_path / "rank-0.json"
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        data = json.load(f)
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") != "cpu_op"]
    with opener(path, "wt") as f:
        json.dump(data, f)
    from hta.job.load import load_trace as load

    row = _row(find(load(tmp_path, progress=False, cache=False)), "host_bound")
    assert row is not None and "records no CPU operator at all" in row["evidence"]


def test_launch_calls_are_their_own_class(tmp_path):
    """The python case with each launch call taking 150 µs of the 200 µs of host work:
    the launch calls, not Python, hold the GPU."""
    from kineto_builder import TraceBuilder

    from hta.job.load import load_trace as load

    b = TraceBuilder(rank=0)
    t = 0
    for k in range(1, 5):
        with b.step(k, ts=t, dur=300_000):
            b.launch_kernel("kernel_a", cpu_ts=t + 1_000, cpu_dur=5_000, gpu_ts=t + 10_000,
                            gpu_dur=20_000)
            b.launch_kernel("kernel_b", cpu_ts=t + 50_000, cpu_dur=150_000,
                            gpu_ts=t + 205_000, gpu_dur=20_000)
        t += 300_000
    b.write(tmp_path / "rank-0.json")
    row = _row(find(load(tmp_path, progress=False, cache=False)), "host_bound")
    assert row["subject"] == "launch" and row["advice"] == ADVICE["launch"]


def test_python_frames_name_the_code(tmp_path):
    """with_stack frames in the host gaps: the evidence names them by their own time (the
    parent frame less its child), and the advice no longer asks for with_stack."""
    trace, _ = cases.host_bound(tmp_path, "python", frames=True)
    row = find(trace).set_index("rule").loc["host_bound"]
    half = cases.HOST_STEP_GAP_NS["python"] // 2
    ev = row["evidence"]
    assert "Python code with the most time of its own in them (with_stack frames): " in ev
    assert "train.py(10): log_metrics" in ev and "<built-in function sum>" in ev
    from hta.analysis.findings.rule_tools import fmt_time
    assert f"<built-in function sum> {fmt_time(half * cases.STEPS)}" in ev
    assert "with_stack=True" not in row["advice"]


def test_without_frames_the_advice_asks_for_them(tmp_path):
    trace, _ = cases.host_bound(tmp_path, "python")
    row = find(trace).set_index("rule").loc["host_bound"]
    assert "with_stack frames" not in row["evidence"]
    assert "with_stack=True" in row["advice"]


def test_graph_advice_waits_for_the_syncs_that_block_capture(tmp_path):
    """Dispatch-bound steps that read a value on the host (aten::is_nonzero and its
    synchronize) each step: the CUDA-graph advice first says to remove those; the twin
    without them keeps the plain advice."""
    from kineto_builder import TraceBuilder

    from hta.analysis.findings.hostbound import capture_blockers

    for syncs in (True, False):
        b = TraceBuilder(rank=0)
        for k in range(3):
            t = k * 2_000_000
            with b.step(k + 1, ts=t, dur=1_900_000):
                for j in range(40):
                    c = t + 1_000 + j * 40_000
                    b.cpu_op("aten::add", ts=c, dur=30_000)
                    b.launch_kernel("vectorized_elementwise_kernel", cpu_ts=c + 25_000,
                                    cpu_dur=2_000, gpu_ts=c + 28_000, gpu_dur=3_000)
                if syncs:
                    c = t + 1_700_000
                    b.cpu_op("aten::is_nonzero", ts=c, dur=60_000)
                    b.runtime("cudaStreamSynchronize", ts=c + 10_000, dur=40_000)
        folder = tmp_path / str(syncs)
        b.write(folder / "rank-0.json")
        rt = load_trace(folder, progress=False, cache=False).rank(0)
        plain = "Fuse them, capture the step in a CUDA graph."
        advice = capture_blockers(rt, (0, 6_000_000), plain)
        if syncs:
            assert advice.startswith("A CUDA graph cannot be captured across a host "
                                     "synchronisation, and this code synchronises 3 times")
            assert "aten::is_nonzero ×3" in advice and advice.endswith(plain)
        else:
            assert advice == plain


def test_a_cpu_tensors_item_does_not_block_capture(tmp_path):
    """``aten::item`` on a CPU tensor (an optimizer's step count) holds no runtime call
    and waits on nothing: in a trace with runtime calls it gets no capture warning."""
    from kineto_builder import TraceBuilder

    from hta.analysis.findings.hostbound import capture_blockers

    b = TraceBuilder(rank=0)
    for k in range(3):
        t = k * 2_000_000
        with b.step(k + 1, ts=t, dur=1_900_000):
            b.cpu_op("aten::add", ts=t + 1_000, dur=30_000)
            b.launch_kernel("vectorized_elementwise_kernel", cpu_ts=t + 20_000,
                            cpu_dur=2_000, gpu_ts=t + 28_000, gpu_dur=3_000)
            b.cpu_op("aten::item", ts=t + 1_700_000, dur=5_000)
    b.write(tmp_path / "rank-0.json")
    rt = load_trace(tmp_path, progress=False, cache=False).rank(0)
    plain = "Fuse them, capture the step in a CUDA graph."
    assert capture_blockers(rt, (0, 6_000_000), plain) == plain
