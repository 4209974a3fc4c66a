"""TraceDiff on the shared real traces, checked against the JSON read with the standard
library (a plain-Python reference written apart from the library) and, for the small
``trace_compare`` pair, against values worked out by hand."""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from conftest import shared_trace

from hta.analysis.diff.metrics import IDLE_SECTION
from hta.analysis.diff.scope import MIN_DELTA_US
from hta.trace_analysis import TraceAnalysis
from hta.trace_diff import TraceDiff

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "gpu_user_annotation"}
WORK_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
STEP = re.compile(r"^ProfilerStep#(\d+)$")
ADD_INT = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<int>, "
           "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<int>, "
           "at::detail::Array<char*, 3>)")
ADD_FLOAT = ADD_INT.replace("CUDAFunctor_add<int>", "CUDAFunctor_add<float>")
FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1>)")


# -- the reference ----------------------------------------------------------------------------
class Reference:
    """One trace file read with ``json``: complete events and the step of each.

    An event's step is the ``ProfilerStep#N`` whose ``[ts, ts + dur)`` holds its start; a
    GPU event whose correlation matches a runtime call takes that call's step. Times in µs.
    """

    def __init__(self, path: Path) -> None:
        with gzip.open(path, "rt") as fh:
            events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
        self.events = events
        self.steps = sorted((e["ts"], e["ts"] + e["dur"], int(STEP.match(e["name"])[1]))
                            for e in events if e.get("cat") == "user_annotation"
                            and STEP.match(e["name"]))
        runtime_step = {}
        for e in events:
            corr = (e.get("args") or {}).get("correlation")
            if e.get("cat") in RUNTIME_CATS and corr is not None:
                runtime_step[corr] = self._step_at(e["ts"])
        self.step_of = []
        for e in events:
            corr = (e.get("args") or {}).get("correlation")
            if e.get("cat") in GPU_CATS and corr in runtime_step:
                self.step_of.append(runtime_step[corr])
            else:
                self.step_of.append(self._step_at(e["ts"]))

    def _step_at(self, ts: float) -> int:
        for start, end, n in self.steps:
            if start <= ts < end:
                return n
        return -1

    def totals(self, steps: set[int] | None, device: str = "ALL") -> dict[str, tuple[int, float]]:
        counts: Counter = Counter()
        durs: defaultdict = defaultdict(float)
        for e, s in zip(self.events, self.step_of):
            if steps is not None and s not in steps:
                continue
            on_gpu = e.get("cat") in GPU_CATS
            if device == "GPU" and not on_gpu or device == "CPU" and on_gpu:
                continue
            counts[e["name"]] += 1
            durs[e["name"]] += e["dur"]
        return {n: (counts[n], durs[n]) for n in counts}

    def work_per_step(self) -> dict[str, float]:
        """GPU work (kernels, memcpy, memset) time per step, by name, over every step."""
        steps = {n for _, _, n in self.steps}
        out: defaultdict = defaultdict(float)
        for e, s in zip(self.events, self.step_of):
            if e.get("cat") in WORK_CATS and s in steps:
                out[e["name"]] += e["dur"] / len(steps)
        return dict(out)


def check_table(df, control: dict, test: dict) -> None:
    """The compare_traces table equals the reference totals, row by row."""
    assert sorted(df.index) == sorted(set(control) | set(test))
    for name, row in df.iterrows():
        cc, cd = control.get(name, (0, 0.0))
        tc, td = test.get(name, (0, 0.0))
        assert (row["Control_counts"], row["Test_counts"]) == (cc, tc), name
        assert row["Control_total_duration"] == pytest.approx(cd, abs=1e-6), name
        assert row["Test_total_duration"] == pytest.approx(td, abs=1e-6), name
        assert row["diff_counts"] == tc - cc
        assert row["diff_duration"] == pytest.approx(td - cd, abs=1e-6)
        assert row["counts_change_categories"] == ("+" if tc > cc else "-" if tc < cc else "=")


def load(path: Path) -> TraceAnalysis:
    return TraceAnalysis(trace_dir=path, cache=False, progress=False)


@pytest.fixture(scope="module")
def compare_pair():
    root = shared_trace("trace_compare")
    return (load(root / "base"), load(root / "test"), Reference(root / "base/base.json.gz"),
            Reference(root / "test/test.json.gz"))


@pytest.fixture(scope="module")
def diff_pair():
    root = shared_trace("trace_diff")
    return (load(root / "control"), load(root / "test"),
            Reference(root / "control/control.json.gz"), Reference(root / "test/test.json.gz"))


# -- trace_compare: small, by hand ------------------------------------------------------------
def test_compare_first_step_gpu_by_hand(compare_pair):
    """ProfilerStep#1009 of base spans [..265087, ..365385) µs. GPU work starting in it:
    DtoD 9; add<float> 5; memsets 11 + 5 + 2 = 18; HtoD 3 (stream 7) + 476 (stream 16) =
    479; add<int> 4 at ..304363, plus 4 at ..422491 launched by cudaLaunchKernel at
    ..365315 (in step 1009) = 8; fill 208. The test file holds the same events in 1009."""
    c, t, _, _ = compare_pair
    df = TraceDiff.compare_traces(c, t, device_type="GPU")
    expected = {
        "Memcpy DtoD (Device -> Device)": (1, 9.0), "Memcpy HtoD (Pinned -> Device)": (2, 479.0),
        "Memset (Device)": (3, 18.0), ADD_FLOAT: (1, 5.0), ADD_INT: (2, 8.0), FILL: (1, 208.0),
    }
    check_table(df, expected, expected)
    assert TraceDiff.ops_diff(c, t, device_type="GPU")["unchanged"] == sorted(expected)


def test_compare_second_step_by_hand(compare_pair):
    """Step 1010 of base holds add<int> at ..539619 (launched at ..487511, in 1010); the test
    file lacks that kernel: one fewer, 4 µs less. Test's 1010 adds three CPU ops
    (All2All_Pooled_Req 311, CatBackward0 11, AddmmBackward0 207) and base's second
    nccl:all_reduce (67) is gone."""
    c, t, _, _ = compare_pair
    df = TraceDiff.compare_traces(c, t, control_iteration=1010, test_iteration=1010)
    assert df.loc[ADD_INT, ["Control_counts", "Test_counts", "diff_duration"]].tolist() == [
        1, 0, -4.0]
    groups = TraceDiff.ops_diff(c, t, control_iteration=1010, test_iteration=1010)
    assert groups["added"] == ["AddmmBackward0", "All2All_Pooled_Req", "CatBackward0"]
    assert groups["deleted"] == ["nccl:all_reduce", ADD_INT]
    assert df.loc["nccl:all_reduce", "Control_total_duration"] == 67.0


@pytest.mark.parametrize("device", ["ALL", "CPU", "GPU"])
@pytest.mark.parametrize("iterations", [[1009], [1010], [1009, 1010], None])
def test_compare_against_reference(compare_pair, device, iterations):
    c, t, rc, rt = compare_pair
    it = "all" if iterations is None else iterations
    df = TraceDiff.compare_traces(c, t, control_iteration=it, test_iteration=it,
                                  device_type=device)
    steps = None if iterations is None else set(iterations)
    check_table(df, rc.totals(steps, device), rt.totals(steps, device))


def test_compare_jobs_by_hand(compare_pair):
    """Steps 100298 and 122149 µs on both sides: mean 111223.5. add<int>: 3 in 2 steps (12 µs)
    in base, 2 (8 µs) in test: 6 -> 4 µs per step, -33.3 %. GPU busy per step: step 1009
    9+5+11+5+3+4+208+2+4+476 = 727, step 1010 4+3+740+207+1+4 = 959 (the memset and HtoD
    after the step's end count nowhere): (727+959)/2 = 843 in base, (727+955)/2 = 841 in
    test."""
    c, t, _, _ = compare_pair
    job = TraceDiff.compare_jobs(c, t)
    assert job.verdict == ("step time 111.2 ms -> 111.2 ms (+0.0%); "
        "GPU busy time 843.0 µs -> 841.0 µs (-0.2%) per step")
    assert job.metric("step_time_mean(us)")[["control", "test"]].tolist() == [111223.5] * 2
    assert job.metric("busy_time(us)")[["control", "test"]].tolist() == [843.0, 841.0]
    k = job.kernels.set_index("name")
    assert k.loc[ADD_INT, ["control_count", "test_count", "control_time(us)", "test_time(us)",
                           "status"]].tolist() == [1.5, 1.0, 6.0, 4.0, "faster"]
    assert set(k.drop(ADD_INT)["status"]) == {"unchanged"}
    assert (k.drop(ADD_INT)["delta_time(us)"] == 0).all()
    assert job.improvements()["name"].tolist() == [ADD_INT] and job.regressions().empty


# -- trace_diff: unrelated jobs, invariants and independent values -----------------------------
def test_diff_tables_against_reference(diff_pair):
    c, t, rc, rt = diff_pair
    for device in ("ALL", "GPU"):
        df = TraceDiff.compare_traces(c, t, device_type=device)  # first steps: 1009
        check_table(df, rc.totals({1009}, device), rt.totals({1009}, device))
    df = TraceDiff.compare_traces(c, t, control_iteration=[1010, 1011], test_iteration="all")
    check_table(df, rc.totals({1010, 1011}), rt.totals(None))


def test_diff_invariants(diff_pair):
    c, t, _, _ = diff_pair
    full = TraceDiff.compare_traces(c, t, control_iteration="all", test_iteration="all")
    short = TraceDiff.compare_traces(c, t, control_iteration="all", test_iteration="all",
                                     use_short_name=True)
    assert len(short) < len(full)
    for col in ("Control_counts", "Test_counts"):
        assert short[col].sum() == full[col].sum()
    for col in ("Control_total_duration", "Test_total_duration"):
        assert short[col].sum() == pytest.approx(full[col].sum())
    parts = [TraceDiff.compare_traces(c, t, control_iteration="all", test_iteration="all",
                                      device_type=d) for d in ("CPU", "GPU")]
    assert sum(p["Control_counts"].sum() for p in parts) == full["Control_counts"].sum()
    groups = TraceDiff.ops_diff(c, t, control_iteration="all", test_iteration="all")
    flat = sum(groups.values(), [])
    assert sorted(flat) == sorted(full.index) and len(flat) == len(set(flat))
    added = full.loc[groups["added"]]
    assert (added["Control_counts"] == 0).all() and (added["Test_counts"] > 0).all()


def test_diff_job_against_reference(diff_pair):
    c, t, rc, rt = diff_pair
    job = TraceDiff.compare_jobs(c, t, threshold_pct=5.0)
    means = []
    for ref in (rc, rt):
        durations = [end - start for start, end, _ in ref.steps]
        means.append(statistics.mean(durations))
    assert job.metric("step_time_mean(us)")[["control", "test"]].tolist() == pytest.approx(
        means)
    pct = 100 * (means[1] - means[0]) / means[0]
    assert job.verdict.startswith(f"step time {means[0] / 1e3:,.1f} ms -> "
                                  f"{means[1] / 1e3:,.1f} ms ({pct:+.1f}%); GPU busy time ")
    assert job.metric("steps_per_rank")[["control", "test"]].tolist() == [6.0, 6.0]
    # GPU time per kernel and per step, against the JSON
    for side, ref in (("control", rc), ("test", rt)):
        expected = ref.work_per_step()
        got = job.kernels.set_index("name")[f"{side}_time(us)"]
        got = got[got > 0]
        assert set(got.index) == {n for n, v in expected.items() if v > 0}
        for name, value in expected.items():
            if value > 0:
                assert got[name] == pytest.approx(value, rel=1e-9), name
    # operators share out the same GPU time
    ops, ker = job.operators, job.kernels
    for col in ("control_time(us)", "test_time(us)"):
        assert ops[col].sum() == pytest.approx(ker[col].sum())
    # statuses follow the definitions
    k = job.kernels
    for row in k.to_dict("records"):
        if row["control_count"] == 0:
            assert row["status"] == "added"
        elif row["test_count"] == 0:
            assert row["status"] == "removed"
        elif (math.isfinite(row["delta_pctg"]) and abs(row["delta_pctg"]) >= 5.0
              and abs(row["delta_time(us)"]) >= MIN_DELTA_US):
            assert row["status"] == ("slower" if row["delta_pctg"] > 0 else "faster")
        else:
            assert row["status"] == "unchanged"
    reg = job.regressions(top=None)["delta_time(us)"].tolist()
    assert reg == sorted(reg, reverse=True) and all(d > 0 for d in reg)
    # every row is a regression, an improvement or unchanged (below the thresholds)
    assert len(reg) + len(job.improvements(top=None)) + int((k["status"] == "unchanged").sum()) \
        == len(k)


def test_diff_job_shares_add_up(diff_pair):
    c, t, _, _ = diff_pair
    job = TraceDiff.compare_jobs(c, t)
    s = job.summary
    for side in ("control", "test"):
        def val(metric: str, section: str, side: str = side) -> float:
            return float(job.metric(metric, section)[side])
        gpu = sum(val(f"{k}_pctg", "gpu_time") for k in
                  ("compute_time", "exposed_comm_time", "exposed_memory_time", "idle_time"))
        assert gpu == pytest.approx(100.0)
        kt = s[(s["section"] == "kernel_types") & s["metric"].str.endswith("_pctg")][side]
        assert kt.sum() == pytest.approx(100.0)
        idle = sum(val(f"{k}_pctg", IDLE_SECTION) for k in ("host_wait", "kernel_wait", "other"))
        assert idle == pytest.approx(100.0)
        assert val("busy_time(us)", "gpu_time") == pytest.approx(
            val("kernel_time(us)", "gpu_time") - val("idle_time(us)", "gpu_time"))
        # kernel types: the union over all selected steps; gpu_time: per-step windows summed,
        # so GPU work of two steps running at once counts once there, once per step here
        busy_types = s[(s["section"] == "kernel_types") & s["metric"].str.endswith("(us)")]
        assert busy_types[side].sum() <= val("busy_time(us)", "gpu_time") + 1e-6
        assert busy_types[side].sum() == pytest.approx(float(
            job.metric("busy_time(us)", "gpu_time")[side]), rel=0.1)
        assert val("comm_time(us)", "overlap") == pytest.approx(val("comm_time(us)",
                                                                    "gpu_time"))
