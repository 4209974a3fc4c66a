"""Loaded ranks are immutable: no analysis changes a rank's events, side tables, symbols,
unclassified mask or metadata. Every public ``TraceAnalysis.get_*`` method runs on the
bundled 4-rank sample, and each rank's content (a hash of every column) is the same
afterwards as right after loading."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLE_TRACES

from hta.model.trace import RankTrace
from hta.trace_analysis import TraceAnalysis

pytestmark = pytest.mark.slow  # loads the sample and runs every analysis: about 40 s

#: Arguments the methods that require some are called with.
REQUIRED: dict[str, dict[str, Any]] = {
    "get_critical_path_summary": {"rank": 0},
    "get_gpu_kernels_with_user_annotations": {"rank": 0},
    "get_frequent_cuda_kernel_sequences": {"operator_name": "aten::mm"},
}


def _column_hash(values: pd.Series) -> str:
    hashed = pd.util.hash_pandas_object(values, index=False).to_numpy()
    return hashlib.blake2b(hashed.tobytes(), digest_size=8).hexdigest()


def _frame_state(frame: pd.DataFrame) -> dict[str, Any]:
    return {"columns": list(frame.columns), "dtypes": [str(t) for t in frame.dtypes],
            "index": _column_hash(frame.index.to_series()),
            **{f"column {c}": _column_hash(frame[c]) for c in frame.columns}}


def rank_state(rt: RankTrace) -> dict[str, Any]:
    """What a rank holds, by part, as comparable values (a hash per column)."""
    return {
        "events": _frame_state(rt.events),
        **{f"tables[{name}]": _frame_state(frame) for name, frame in rt.tables.items()},
        "symbols": hashlib.blake2b("\0".join(rt.symbols).encode()).hexdigest(),
        "unclassified": hashlib.blake2b(np.asarray(rt.unclassified).tobytes()).hexdigest(),
        "meta": copy.deepcopy(rt.meta),
    }


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    out = [f"{part} added or removed" for part in before.keys() ^ after.keys()]
    for part in before.keys() & after.keys():
        b, a = before[part], after[part]
        if isinstance(b, dict) and part != "meta":
            out += [f"{part}: {k}" for k in b.keys() | a.keys() if b.get(k) != a.get(k)]
        elif b != a:
            out.append(part)
    return sorted(out)


def _methods() -> list[str]:
    return sorted(m for m in dir(TraceAnalysis)
                  if m.startswith("get_") and callable(getattr(TraceAnalysis, m)))


@pytest.fixture(scope="module")
def sample() -> tuple[TraceAnalysis, dict[int, dict[str, Any]]]:
    analyzer = TraceAnalysis(trace_dir=SAMPLE_TRACES / "synthetic_4rank", cache=False,
                             progress=False, in_memory=True)
    return analyzer, {r: rank_state(analyzer.t.rank(r)) for r in analyzer.t.get_ranks()}


@pytest.mark.parametrize("method", _methods())
def test_no_analysis_changes_a_loaded_rank(sample: tuple[TraceAnalysis, dict[int, Any]],
                                           method: str, tmp_path: Path) -> None:
    analyzer, loaded = sample
    fn = getattr(analyzer, method)
    params = inspect.signature(fn).parameters
    kwargs = dict(REQUIRED.get(method, {}))
    if "output_dir" in params:
        kwargs["output_dir"] = tmp_path
    if method == "get_queue_length_summary_from_time_series":
        kwargs["queue_length_dict"] = analyzer.get_queue_length_time_series()
    missing = [p.name for p in params.values() if p.default is inspect.Parameter.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in kwargs]
    assert not missing, f"add {method}'s required arguments {missing} to REQUIRED"
    # an answer the sample cannot give (no CUPTI counters, ...) must leave the ranks too
    with contextlib.suppress(ValueError, KeyError, LookupError):
        fn(**kwargs)
    for rank, before in loaded.items():
        changed = _changes(before, rank_state(analyzer.t.rank(rank)))
        assert not changed, f"{method} changed rank {rank}: {changed}"


def test_the_check_sees_a_change(sample: tuple[TraceAnalysis, dict[int, Any]]) -> None:
    analyzer, loaded = sample
    rt = copy.deepcopy(analyzer.t.rank(0))
    rt.events.loc[0, "dur"] += 1
    rt.tables["kernel_args"]["grid_x"] = 0
    rt.meta["warnings"] = [*rt.meta.get("warnings", []), "x"]
    assert _changes(loaded[0], rank_state(rt)) == [
        "events: column dur", "meta", "tables[kernel_args]: column grid_x"]
