"""TraceDiff on generated job pairs with known injected changes.

Control: ``hta.synthetic`` job, 2 ranks, 3 steps. Test: the same generator and seed with 4
steps (its first 3 steps are event for event those of control), then, in the dicts before
writing:

* one kernel made 2x slower: every ``ampere_sgemm_128x64_tn`` (launched by ``aten::addmm``);
* one op removed: every ``aten::add`` with the launches and kernels it enqueued;
* one op added: per step, ``aten::gelu`` on a new CPU thread launching a new kernel on a
  new stream.

The diff must find exactly those changes: on the matched steps exactly (every other name
identical to the ns), and per step over all steps (the 4th step's jitter moves the other
names by a few %, far below the 20 % threshold used here; the injected changes are 100 %).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

import pytest

from hta import synthetic
from hta.synthetic import Microseconds
from hta.synthetic.catalog import _K_ADD, _K_GEMM_FWD
from hta.trace_analysis import TraceAnalysis
from hta.trace_diff import TraceDiff

RANKS = 2
KERNELS_PER_STEP = 40
SLOW = _K_GEMM_FWD.name
SLOW_OP = "aten::addmm"
REMOVED_OP = "aten::add"
REMOVED_KERNEL = _K_ADD.name
ADDED_OP = "aten::gelu"
ADDED_KERNEL = "void gelu_kernel<float>(float*, int)"
ADDED_STREAM = 40
THRESHOLD = 20.0
GPU_WORK_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _args(event: dict[str, Any]) -> dict[str, Any]:
    return event.get("args") or {}


def inject(trace: dict[str, Any]) -> None:
    """Apply the three changes to one generated rank, in place."""
    events = trace["traceEvents"]
    # 1. one kernel 2x slower
    for e in events:
        if e.get("ph") == "X" and e["name"] == SLOW:
            e["dur"] = Microseconds(2 * e["dur"].ns)
    # 2. one op removed, with the launches inside it and their kernels
    ext = {_args(e)["External id"] for e in events
           if e.get("ph") == "X" and e["name"] == REMOVED_OP}
    corr = {_args(e)["correlation"] for e in events if e.get("cat") == "cuda_runtime"
            and _args(e).get("External id") in ext}
    assert ext and corr

    def removed(e: dict[str, Any]) -> bool:
        if e.get("ph") == "X" and e["name"] == REMOVED_OP:
            return True
        if e.get("cat") == "cuda_runtime" and _args(e).get("correlation") in corr:
            return True
        if e.get("cat") in GPU_WORK_CATS and _args(e).get("correlation") in corr:
            return True
        return e.get("cat") == "ac2g" and e.get("id") in corr

    events[:] = [e for e in events if not removed(e)]
    # 3. one op added in every step, on its own CPU thread and GPU stream
    steps = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
    kernel = next(e for e in events if e.get("cat") == "kernel")
    pid, device = steps[0]["pid"], kernel["pid"]
    for i, step in enumerate(steps):
        s = step["ts"].ns
        c = 90_000_000 + i
        events.append({"ph": "X", "cat": "cpu_op", "name": ADDED_OP, "pid": pid,
                       "tid": pid + 77, "ts": Microseconds(s + 1_000),
                       "dur": Microseconds(20_000), "args": {"External id": c}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                       "pid": pid, "tid": pid + 77, "ts": Microseconds(s + 2_000),
                       "dur": Microseconds(5_000),
                       "args": {"External id": c, "cbid": 211, "correlation": c}})
        events.append({"ph": "X", "cat": "kernel", "name": ADDED_KERNEL, "pid": device,
                       "tid": ADDED_STREAM, "ts": Microseconds(s + 10_000),
                       "dur": Microseconds(30_000),
                       "args": {"External id": c, "correlation": c, "device": device,
                                "stream": ADDED_STREAM}})


@pytest.fixture(scope="module")
def job_pair(tmp_path_factory):
    """(control analyzer, test analyzer, control dicts, test dicts) per rank."""
    root = tmp_path_factory.mktemp("synthetic_diff")
    dicts: dict[str, list[dict[str, Any]]] = {"control": [], "test": []}
    for side, steps in (("control", 3), ("test", 4)):
        folder = root / side
        folder.mkdir()
        for r in range(RANKS):
            trace = synthetic.generate_rank(r, RANKS, steps=steps,
                                            kernels_per_step=KERNELS_PER_STEP, seed=3)
            if side == "test":
                inject(trace)
            (folder / f"rank-{r}.json").write_bytes(synthetic.dumps_trace(trace))
            dicts[side].append(trace)
    load = lambda p: TraceAnalysis(trace_dir=p, cache=False, progress=False)  # noqa: E731
    return load(root / "control"), load(root / "test"), dicts["control"], dicts["test"]


# -- reference from the dicts ------------------------------------------------------------------
def step_spans(trace: dict[str, Any]) -> list[tuple[int, int, int]]:
    return sorted((e["ts"].ns, e["ts"].ns + e["dur"].ns, int(e["name"].split("#")[1]))
                  for e in trace["traceEvents"]
                  if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))


def gpu_time_per_step(trace: dict[str, Any]) -> dict[str, float]:
    """GPU work time (µs) per step by name; a kernel's step is its launch's."""
    spans = step_spans(trace)

    def step_at(ns: int) -> int:
        return next((n for a, b, n in spans if a <= ns < b), -1)

    launch = {_args(e)["correlation"]: step_at(e["ts"].ns) for e in trace["traceEvents"]
              if e.get("cat") == "cuda_runtime" and "correlation" in _args(e)}
    out: defaultdict = defaultdict(float)
    for e in trace["traceEvents"]:
        if e.get("cat") in GPU_WORK_CATS:
            corr = _args(e).get("correlation")
            step = launch[corr] if corr in launch else step_at(e["ts"].ns)
            if step > 0:
                out[e["name"]] += e["dur"].ns / 1e3 / len(spans)
    return out


def mean_over_ranks(per_rank: list[dict[str, float]]) -> dict[str, float]:
    names = set().union(*per_rank)
    return {n: sum(p.get(n, 0.0) for p in per_rank) / len(per_rank) for n in names}


# -- tests -------------------------------------------------------------------------------------
def test_matched_steps_find_exactly_the_changes(job_pair):
    c, t, _, _ = job_pair
    kw = {"control_rank": [0, 1], "test_rank": [0, 1], "control_iteration": [1, 2, 3],
          "test_iteration": [1, 2, 3]}
    df = TraceDiff.compare_traces(c, t, **kw)
    changed = df[(df["diff_counts"] != 0) | (df["diff_duration"] != 0)]
    assert set(changed.index) == {SLOW, REMOVED_OP, REMOVED_KERNEL, ADDED_OP, ADDED_KERNEL,
                                  "cudaLaunchKernel"}
    slow = df.loc[SLOW]
    assert slow["diff_counts"] == 0 and slow["Control_counts"] == 4 * 3 * RANKS
    assert slow["Test_total_duration"] == pytest.approx(2 * slow["Control_total_duration"])
    _, _, extras = synthetic.step_plan(KERNELS_PER_STEP)
    assert df.loc[REMOVED_OP, "Control_counts"] == extras * 3 * RANKS
    assert df.loc[ADDED_KERNEL, "Test_counts"] == 3 * RANKS
    assert df.loc["cudaLaunchKernel", "diff_counts"] == 3 * RANKS * (1 - extras)
    groups = TraceDiff.ops_diff(c, t, **kw)
    assert groups["added"] == [ADDED_OP, ADDED_KERNEL]
    assert groups["deleted"] == sorted([REMOVED_OP, REMOVED_KERNEL])
    assert groups["decreased"] == ["cudaLaunchKernel"] and groups["increased"] == []
    assert SLOW in groups["unchanged"]


def test_short_names_keep_the_removed_kernel_visible_as_fewer(job_pair):
    """The removed add kernel shares its short name with relu/threshold kernels: by short
    name it is one name whose count drops by the removed launches."""
    c, t, _, _ = job_pair
    kw = {"control_rank": [0, 1], "test_rank": [0, 1], "control_iteration": [1, 2, 3],
          "test_iteration": [1, 2, 3], "device_type": "GPU", "use_short_name": True}
    df = TraceDiff.compare_traces(c, t, **kw)
    _, _, extras = synthetic.step_plan(KERNELS_PER_STEP)
    row = df.loc["at::native::vectorized_elementwise_kernel"]
    assert row["diff_counts"] == -extras * 3 * RANKS
    assert df.loc["gelu_kernel", "counts_change_categories"] == "+"


def test_job_per_step_finds_exactly_the_changes(job_pair):
    c, t, _, _ = job_pair
    job = TraceDiff.compare_jobs(c, t, threshold_pct=THRESHOLD)
    k = job.kernels.set_index("name")
    changed = k[k["status"] != "unchanged"]["status"].to_dict()
    assert changed == {SLOW: "slower", REMOVED_KERNEL: "removed", ADDED_KERNEL: "added"}
    assert 1.8 < k.loc[SLOW, "test_time(us)"] / k.loc[SLOW, "control_time(us)"] < 2.2
    assert k.loc[SLOW, ["control_count", "test_count"]].tolist() == [4.0, 4.0]
    assert job.regressions(top=1)["name"].tolist() == [SLOW]
    ops = job.operators.set_index("name")
    assert ops[ops["status"] != "unchanged"]["status"].to_dict() == {
        SLOW_OP: "slower", REMOVED_OP: "removed", ADDED_OP: "added"}
    assert job.metric("steps_per_rank")[["control", "test"]].tolist() == [3.0, 4.0]
    assert "steps per rank differ (3 vs 4): every time is per step" in job.notes


def test_job_values_against_the_dicts(job_pair):
    c, t, cd, td = job_pair
    job = TraceDiff.compare_jobs(c, t, threshold_pct=THRESHOLD)
    k = job.kernels.set_index("name")
    for side, dicts in (("control", cd), ("test", td)):
        expected = mean_over_ranks([gpu_time_per_step(d) for d in dicts])
        got = k[f"{side}_time(us)"]
        assert set(got[got > 0].index) == {n for n, v in expected.items() if v > 0}
        for name, value in expected.items():
            assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-9), name
    means = []
    for dicts in (cd, td):
        per_rank = [statistics.mean(b - a for a, b, _ in step_spans(d)) / 1e3 for d in dicts]
        means.append(statistics.mean(per_rank))
    assert job.metric("step_time_mean(us)")[["control", "test"]].tolist() == pytest.approx(
        means)
    pct = 100 * (means[1] - means[0]) / means[0]
    assert job.verdict.startswith(f"step time {means[0] / 1e3:.1f} ms -> "
                                  f"{means[1] / 1e3:.1f} ms ({pct:+.1f}%); GPU busy time ")


def test_without_injection_nothing_changes(tmp_path):
    """Same generator, 3 vs 4 steps, nothing injected: every kernel is unchanged per step."""
    for side, steps in (("c", 3), ("t", 4)):
        synthetic.generate_job(tmp_path / side, ranks=1, steps=steps,
                               kernels_per_step=KERNELS_PER_STEP, seed=5, gzip=False)
    load = lambda p: TraceAnalysis(trace_dir=p, cache=False, progress=False)  # noqa: E731
    job = TraceDiff.compare_jobs(load(tmp_path / "c"), load(tmp_path / "t"),
                                 threshold_pct=THRESHOLD)
    assert set(job.kernels["status"]) == {"unchanged"}
    assert set(job.operators["status"]) == {"unchanged"}
    assert (job.kernels["control_count"] == job.kernels["test_count"]).all()
    same = TraceDiff.compare_traces(load(tmp_path / "c"), load(tmp_path / "t"),
                                    control_iteration=[1, 2, 3], test_iteration=[1, 2, 3])
    assert (same["diff_counts"] == 0).all() and (same["diff_duration"] == 0).all()

