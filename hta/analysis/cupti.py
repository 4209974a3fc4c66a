"""CUPTI range-profiler counters per kernel, with the operators that launched the kernel.

When the PyTorch profiler runs in CUPTI profiler mode (``experimental_config=
_ExperimentalConfig(profiler_metrics=[...], profiler_measure_per_kernel=True)``), Kineto
writes one complete event of category ``cuda_profiler_range`` per kernel, named after the
kernel, whose ``args`` are the requested metrics (e.g.
``smsp__sass_thread_inst_executed_op_ffma_pred_on.sum``). These events carry no
correlation id and their timestamps are synthetic (one fixed-length slot per kernel), so
they are matched to the launches by order, as HTA does: the i-th range (by start time) is
the kernel of the i-th kernel launch (by start time).

*Kernel launches* are the events of kind ``runtime_launch`` minus the memory ones: calls
whose name says memcpy or memset (:data:`MEMORY_LAUNCH`, applied to the distinct names the
rule table calls launches) enqueue copies, which the range profiler does not measure.

Columns: ``rank``, ``index`` (the range event), ``name`` (kernel name), ``launch_index``,
``launch_name``, ``op_stack`` (names of the ``cpu_op`` events around the launch,
outermost first), ``top_level_op`` and ``bottom_level_op`` (first and last of the stack,
``""`` when empty), then one float column per metric, in the order the trace first names
them (NaN where a range lacks a metric).

The metric values are the rank's ``cupti_metrics`` side table (one row per range and
metric, kept by the loader: see :mod:`hta.model.schema`), so the trace file is never read
again and a job loaded from any storage answers alike.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from hta.model.arrays import distinct
from hta.model.declared import WHOLE, Analysis, Columns, check_whole_ranks
from hta.model.job import Job
from hta.model.rules import KIND_CODE
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

PROFILER_CATEGORY = "cuda_profiler_range"
#: Launch calls that enqueue copies or memsets rather than kernels.
MEMORY_LAUNCH = re.compile(r"(?i)mem(cpy|set)")
BASE_COLUMNS = ["rank", "index", "name", "launch_index", "launch_name", "op_stack",
                "top_level_op", "bottom_level_op"]
BASE = Columns.typed(BASE_COLUMNS)
NO_COUNTERS = (
    "no CUPTI range-profiler events (category 'cuda_profiler_range') in the trace of "
    "rank(s) {ranks}; collect the trace with the PyTorch profiler's CUPTI profiler mode "
    "(torch.profiler._ExperimentalConfig(profiler_metrics=[...], "
    "profiler_measure_per_kernel=True)) to get per-kernel counters"
)


def cupti_counter_data_with_operators(trace: Job,
                                      selection: Selection = EVERYTHING
                                      ) -> pd.DataFrame:
    """Counters per kernel with the operator stack of its launch (see module docstring).

    Ranks without range-profiler events are skipped with a warning; ``ValueError`` when no
    selected rank has any, or when a rank's ranges and kernel launches do not pair up.
    Each rank's counters are read and paired where the rank is; only the rows travel.
    """
    check_whole_ranks(selection, CUPTI_COUNTERS.name)
    selected = trace.selected_ranks(selection.rank_list)
    counters = CUPTI_COUNTERS.run(trace, Selection.of(selected))
    frames = [counters] if len(counters) else []
    found = {int(r) for f in frames for r in pd.unique(f["rank"])}
    missing = [r for r in selected if r not in found]
    if not frames:
        raise ValueError(NO_COUNTERS.format(ranks=", ".join(map(str, missing))))
    if missing:
        logger.warning(NO_COUNTERS.format(ranks=", ".join(map(str, missing))))
    return pd.concat(frames, ignore_index=True)


def rank_cupti_counters(rt: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`cupti_counter_data_with_operators`: counters per kernel
    with its launch's operator stack (no rows when it has no range-profiler events)."""
    return _rank_counters(rt) if _range_rows(rt).size else BASE.empty()


CUPTI_COUNTERS = Analysis("CUPTI counters", rank_cupti_counters, BASE, steps=WHOLE)


def _range_rows(rt: RankTrace) -> np.ndarray:
    try:
        cat_id = rt.symbols.index(PROFILER_CATEGORY)
    except ValueError:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(rt.column("cat") == cat_id)


def kernel_launch_rows(rt: RankTrace) -> np.ndarray:
    """Positions of the kernel launches of a rank (``runtime_launch`` minus memory)."""
    codes = rt.kind_codes()
    launch = codes == KIND_CODE["runtime_launch"]
    names = rt.column("name")
    launch_names = distinct(names[launch])
    memory = [n for n in launch_names.tolist() if MEMORY_LAUNCH.search(rt.symbols[n])]
    return np.flatnonzero(launch & ~np.isin(names, memory))


def _rank_counters(rt: RankTrace) -> pd.DataFrame:
    ranges = _range_rows(rt)
    ts = rt.column("ts")
    ranges = ranges[np.argsort(ts[ranges], kind="stable")]
    launches = kernel_launch_rows(rt)
    launches = launches[np.argsort(ts[launches], kind="stable")]
    if launches.size != ranges.size:
        raise ValueError(
            f"rank {rt.rank}: {ranges.size} CUPTI range(s) but {launches.size} kernel "
            "launch(es); they pair by order only when every launched kernel was measured. "
            "Profile a window without kernels that the range profiler skips, or check "
            "that the trace is complete")
    metrics = _read_metrics(rt, ranges)
    symbols = np.asarray(rt.symbols, dtype=object)
    names = rt.column("name")
    stacks = _op_stacks(rt, launches)
    index = rt.column("index")
    frame = pd.DataFrame({
        "rank": rt.rank,
        "index": index[ranges],
        "name": symbols[names[ranges]],
        "launch_index": index[launches],
        "launch_name": symbols[names[launches]],
        "op_stack": stacks,
        "top_level_op": [s[0] if s else "" for s in stacks],
        "bottom_level_op": [s[-1] if s else "" for s in stacks],
    }, columns=BASE_COLUMNS)
    return pd.concat([frame, metrics], axis=1)


def _op_stacks(rt: RankTrace, launches: np.ndarray) -> list[list[str]]:
    """Names of the cpu_op ancestors of each launch, outermost first."""
    parent = rt.link("parent")
    is_op = rt.kind_codes() == KIND_CODE["cpu_op"]
    names = rt.column("name")
    levels: list[np.ndarray] = []
    cur = parent[launches]
    while (cur >= 0).any():
        levels.append(np.where(cur >= 0, cur, -1))
        cur = np.where(cur >= 0, parent[np.clip(cur, 0, None)], -1)
    symbols = rt.symbols
    stacks: list[list[str]] = [[] for _ in range(launches.size)]
    for level in reversed(levels):  # outermost ancestors are found last
        for i in np.flatnonzero((level >= 0) & is_op[np.clip(level, 0, None)]).tolist():
            stacks[i].append(symbols[names[level[i]]])
    return stacks


def _read_metrics(rt: RankTrace, ranges: np.ndarray) -> pd.DataFrame:
    """Metric values of the rank's ranges, in the order of ``ranges`` (sorted by start),
    from the ``cupti_metrics`` side table; metrics in the order the ranges first name
    them."""
    table = rt.tables.get("cupti_metrics")
    if table is None or not len(table):
        raise ValueError(f"rank {rt.rank}: its CUPTI ranges carry no metrics in the loaded "
                         "trace (an entry of an older cache? load with cache=False)")
    position = pd.Series(np.arange(ranges.size), index=rt.column("index")[ranges])
    at = position.reindex(table["index"].to_numpy()).to_numpy()
    keep = ~np.isnan(at)
    metric = table["metric"].to_numpy()[keep]
    names = list(pd.unique(metric))
    col_of = pd.Series(np.arange(len(names)), index=names)
    values = np.full((ranges.size, len(names)), np.nan)
    values[at[keep].astype(np.int64), col_of.reindex(metric).to_numpy()] = (
        table["value"].to_numpy(dtype=np.float64)[keep])
    return pd.DataFrame(values, columns=names, index=pd.RangeIndex(ranges.size))
