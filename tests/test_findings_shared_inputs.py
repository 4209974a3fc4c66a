"""The findings rules' shared inputs, computed once per rank, equal what each rule
computed for itself (the GPU work, name tests, the sync bubbles), and the roofline's
grouping by one key code equals a groupby on the key columns."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from conftest import shared_trace

from hta.analysis.findings import roofline
from hta.analysis.findings.base import rank_work
from hta.analysis.findings.rule_tools import fmt_steps, name_matches
from hta.analysis.findings.sync import _sync_bubbles, sync_bubbles
from hta.analysis.gpu_work import gpu_work
from hta.job.load import load_trace
from hta.model.derived import forget


@pytest.fixture(scope="module")
def rank():
    trace = load_trace(shared_trace("df_index_resolver"), progress=False, cache=False)
    return trace.rank(trace.get_ranks()[0])


def test_rank_work_is_gpu_work_kept_read_only(rank):
    forget()
    for iterations in (None, [int(rank.events["iteration"].max())]):
        kept = rank_work(rank, iterations)
        fresh = gpu_work(rank.rank, rank.events, iterations)
        for name in ("ts", "end", "cls", "name", "stream", "iteration", "launch_ts",
                     "launch_end"):
            np.testing.assert_array_equal(getattr(kept, name), getattr(fresh, name))
        assert rank_work(rank, iterations) is kept
        with pytest.raises(ValueError):
            kept.ts[:1] = 0


def test_name_tests_kept_per_pattern_match_a_fresh_test(rank):
    forget()
    names = rank.events["name"].to_numpy()
    for pattern in (re.compile(r"^aten::"), re.compile(r"(?i)memcpy"), re.compile("x^")):
        half = np.arange(0, len(names), 2)
        want = np.array([pattern.search(rank.symbols[i]) is not None for i in names])
        np.testing.assert_array_equal(name_matches(rank, half, pattern), want[half])
        everything = np.arange(len(names))
        np.testing.assert_array_equal(name_matches(rank, everything, pattern), want)
    assert name_matches(rank, np.zeros(0, np.int64), re.compile("a")).size == 0


def test_a_name_is_tested_once_per_process_across_ranks(rank):
    """Two ranks (two events tables, each numbering names its own way) share the
    verdicts: a predicate sees each distinct name once."""
    from hta.model.trace import RankTrace

    forget()
    seen: list[str] = []

    def is_aten(name: str) -> bool:
        seen.append(name)
        return name.startswith("aten::")

    rows = np.arange(len(rank.events))
    first = name_matches(rank, rows, is_aten)
    other = RankTrace(rank.rank + 1, rank.events.copy(), list(rank.symbols), rank.tables,
                      rank.meta)
    np.testing.assert_array_equal(name_matches(other, rows, is_aten), first)
    assert len(seen) == len(set(seen))
    want = [rank.symbols[i].startswith("aten::") for i in rank.events["name"].to_numpy()]
    np.testing.assert_array_equal(first, want)


def test_kept_sync_bubbles_equal_a_fresh_run(rank):
    forget()
    kept, fresh = sync_bubbles(rank), _sync_bubbles(rank, None, None)
    for name in ("rows", "start", "end", "group", "saving", "bubble_start", "bubble_end",
                 "queued_idle"):
        np.testing.assert_array_equal(getattr(kept, name), getattr(fresh, name))
    assert sync_bubbles(rank) is kept


def test_fmt_steps_on_lists_and_arrays():
    assert fmt_steps([]) == "outside any ProfilerStep"
    assert fmt_steps(np.array([-1, -1])) == "outside any ProfilerStep"
    assert fmt_steps([4]) == "step 4"
    assert fmt_steps(np.array([5, 3, 4, 3, -1])) == "steps 3-5"
    assert fmt_steps([9, 3, 5]) == "steps 3, 5, 9"
    assert fmt_steps(list(range(0, 20, 2))) == "steps 0, 2, 4, 6, 8, 10, ..."


def _calls(missing: str) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 400
    ops = np.array(["aten::mm", "aten::add", "aten::bmm", "aten::copy_"], dtype=object)
    dims = np.array(["[[8, 8]]", "[[16, 4], [4]]", "[]"], dtype=object)
    calls = pd.DataFrame({
        "index": np.arange(n, dtype=np.int32),
        "op": ops[rng.integers(0, ops.size, n)],
        "input_dims": dims[rng.integers(0, dims.size, n)],
        "input_types": np.array(['["float"]'] * n, dtype=object),
        "category": np.array(["GEMM"] * n, dtype=object),
        "kernels": rng.integers(1, 4, n).astype(np.int64),
        "kernel_time(us)": rng.uniform(1, 500, n),
        "flops": rng.uniform(0, 1e9, n),
        "bytes": rng.uniform(0, 1e7, n),
        "peak_key": np.array(["tf32"] * n, dtype=object),
        "roof_tflops_per_s": rng.uniform(10, 900, n),
        "bound": np.array(["compute", "memory"] * (n // 2), dtype=object),
        "pct_of_peak": rng.uniform(0.1, 20, n),
        "device": np.array(["H100"] * n, dtype=object),
    })
    if missing in ("keys", "all"):  # left out of the groups, as a groupby does
        calls.loc[::11, "op"] = None
        calls.loc[::5, "flops"] = np.nan
    if missing == "all":  # a first value missing: the groupby's ``first`` skips it
        calls.loc[::7, "bound"] = None
    return calls


@pytest.mark.parametrize("missing", ["none", "keys", "all"])
def test_roofline_groups_equal_a_groupby_on_the_keys(missing):
    calls = _calls(missing)
    t = calls["kernel_time(us)"].to_numpy() * 1e3
    pct = calls["pct_of_peak"].to_numpy()
    target = np.maximum(t * pct / (100 * roofline.ATTAINABLE),
                        calls["kernels"].to_numpy() * float(roofline.SMALL_NS))
    by_keys = roofline._groups_by_pandas(calls.assign(
        t_ns=t, saving=np.clip(t - target, 0, None), w=t * pct))
    assert len(by_keys)
    pd.testing.assert_frame_equal(roofline._groups(calls), by_keys, check_exact=True)


@pytest.mark.parametrize("seed", range(12))
def test_top_category_equals_a_groupby_of_the_calls_kernels(seed):
    """Per call, the kernel category with the most time, ties to the category seen
    first: what a groupby on (call, category), a stable sort and a first row give."""
    from hta.analysis.perf.calls import top_category

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    calls = int(rng.integers(1, 40))
    slot = np.sort(rng.integers(0, calls, n))
    slot = np.unique(slot, return_inverse=True)[1]  # every call has a kernel
    category = rng.choice(np.array(["GEMM", "elementwise", "copy/memset", None],
                                   dtype=object), n)
    dur = rng.integers(1, 4, n) * 1000  # few values: many ties
    order = rng.permutation(n)
    slot, category, dur = slot[order], category[order], dur[order]
    linked = pd.DataFrame({"owner": slot, "kernel_category": category, "dur": dur})
    by_cat = linked.groupby(["owner", "kernel_category"], sort=False)["dur"].sum()
    top = by_cat.reset_index().sort_values(["owner", "dur"], ascending=[True, False])
    top = top.drop_duplicates("owner").set_index("owner")["kernel_category"]
    want = top.reindex(np.arange(slot.max() + 1)).to_numpy(dtype=object)
    got = top_category(slot, int(slot.max()) + 1, category, dur)
    assert [None if isinstance(x, float) else x for x in got] == \
        [None if isinstance(x, float) else x for x in want]
