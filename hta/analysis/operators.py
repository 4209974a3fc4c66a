"""Operator view: CPU and GPU time per PyTorch operator (the TensorBoard plugin's table).

Per call
--------
A *call* is one event of kind ``cpu_op``. Its *descendants* are the events below it on
its thread's call stack (``parent`` links); its *operator children* the ``cpu_op``
events whose nearest ``cpu_op`` ancestor it is. For one call (integer ns):

* ``cpu_total``: its duration;
* ``cpu_self``: its duration minus the time its direct children (every CPU event whose
  ``parent`` it is: operators, runtime calls, annotations, Python frames) spend inside it
  (each child clipped to the call's interval), never below 0;
* GPU work (kernels, memcpy, memset) *launched under* the call: the GPU events whose
  launch's innermost enclosing operator (``op_index``) is the call or one of its
  descendant operators;
* ``gpu_time``: the GPU time of that work, where every instant of GPU busy time is split
  equally among the GPU events running at that instant (on any stream or device of the
  rank). A GPU event's *share* is the integral over its interval of ``1 / (events running)``;
  ``gpu_time`` is the sum of the shares of the call's GPU work. Overlapping kernels are
  never counted twice, neither within a call nor across calls: the shares of all GPU
  events sum to the rank's GPU busy time (union of all GPU work), so the ``gpu_time`` of
  the top-level calls sums to at most the busy time (less the work launched outside any
  operator). Without overlap, a kernel's share is its duration.
* ``gpu_union_time``: the length of the union of the intervals of the call's GPU work:
  how long the GPU was running something of this call, whatever else ran beside it. Two
  top-level calls whose kernels overlap both count the overlap here.
* ``gpu_self_time``: ``gpu_time`` of the GPU work whose ``op_index`` is the call itself;
* ``kernels`` / ``self_kernels``: how many GPU events each of those two sets holds.

Per operator
------------
:func:`operator_breakdown` sums the calls per rank and operator name (and input shapes,
the ``Input Dims`` text, when ``group_by_input_shape=True``): ``calls`` and the sums of
the per-call values, in µs. A call nested in a call of the same name counts in both.

Example (times in ns): ``aten::linear`` [0, 100) calls ``aten::addmm`` [10, 60), whose
``cudaLaunchKernel`` [20, 30) launches kernel A [70, 90); ``aten::linear`` itself calls
``cudaLaunchKernel`` [65, 75), launching kernel B [80, 120) on another stream. A and B
overlap over [80, 90), each gets 5 of those 10 ns: shares A 15, B 35.
``aten::linear``: cpu total 100, self 100 - 50 - 10 = 40, gpu_time 15 + 35 = 50,
union 50 ([70, 120)), gpu_self_time 35, kernels 2, self_kernels 1. ``aten::addmm``: cpu
total 50, self 40, gpu_time = gpu_self_time 15, union 20, kernels 1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.side_columns import side_slots
from hta.model.declared import WHOLE, Analysis, Columns
from hta.model.links import enclosing_ops
from hta.model.rules import CPU_KINDS, GPU_WORK_KINDS, KIND_CODE, codes_in, kind_codes
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankMapper, RankTrace

CALL_COLUMNS = [
    "rank", "index", "name", "input_shapes", "parent_op", "top_level", "cpu_total(ns)",
    "cpu_self(ns)", "gpu_time(ns)", "gpu_self_time(ns)", "gpu_union_time(ns)", "kernels",
    "self_kernels",
]
BREAKDOWN_COLUMNS = [
    "rank", "name", "input_shapes", "calls", "cpu_total_time(us)", "cpu_self_time(us)",
    "gpu_time(us)", "gpu_self_time(us)", "gpu_union_time(us)", "kernels", "self_kernels",
]
CALLS = Columns.typed(CALL_COLUMNS, "float64")
BREAKDOWN = Columns.typed(BREAKDOWN_COLUMNS, "float64")

_OP_CODE = KIND_CODE["cpu_op"]
_CPU_CODES = kind_codes(CPU_KINDS)
_GPU_WORK_CODES = kind_codes(GPU_WORK_KINDS)


def operator_calls(trace: RankMapper, selection: Selection = EVERYTHING
                   ) -> pd.DataFrame:
    """One row per ``cpu_op`` call with the per-call values of this module's docstring.

    Columns :data:`CALL_COLUMNS`: ``index`` of the call, ``name`` (text), ``input_shapes``
    (``Input Dims`` JSON text, ``""`` when absent), ``parent_op`` (``index`` of the nearest
    enclosing ``cpu_op``, -1 for top-level calls), ``top_level``, times in integer ns.
    Found per rank, where the rank is (one row per call travels).
    """
    return OPERATOR_CALLS.run(trace, selection)


def rank_calls(rank: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`operator_calls`: one per ``cpu_op`` call."""
    frame = _rank_calls(rank)
    return frame if len(frame) else CALLS.empty()


OPERATOR_CALLS = Analysis("Operator calls", rank_calls, CALLS, steps=WHOLE)


def _rank_calls(rt: RankTrace) -> pd.DataFrame:
    ev = rt.events
    codes = rt.kind_codes()
    ops = np.flatnonzero(codes == _OP_CODE)
    if ops.size == 0:
        return pd.DataFrame(columns=CALL_COLUMNS)
    parent = rt.link("parent")
    ts = rt.column("ts")
    end = rt.column("end")
    n = len(ev)
    is_op = codes == _OP_CODE
    op_parent = np.full(n, -1, dtype=np.int64)
    op_parent[ops] = enclosing_ops(parent, is_op, ops)
    cpu_self = _self_time(codes, parent, ts, end, n)
    # GPU work and the operator it was launched under, then every enclosing operator
    all_work = np.flatnonzero(codes_in(codes, _GPU_WORK_CODES))
    gpu = all_work
    owner = rt.link("op_index")[gpu]
    has = owner >= 0
    gpu, owner = gpu[has], owner[has]
    share = np.zeros(n, dtype=np.float64)
    share[all_work] = gpu_shares(ts[all_work], end[all_work])
    gpu_self = np.bincount(owner, weights=share[gpu], minlength=n)
    self_kernels = np.bincount(owner, minlength=n).astype(np.int64)
    pair_op, pair_gpu = [owner], [gpu]
    cur = op_parent[owner]
    live = cur >= 0
    while live.any():
        pair_op.append(cur[live])
        pair_gpu.append(gpu[live])
        gpu, cur = gpu[live], op_parent[cur[live]]
        live = cur >= 0
    all_op = np.concatenate(pair_op)
    all_gpu = np.concatenate(pair_gpu)
    gpu_time = np.bincount(all_op, weights=share[all_gpu], minlength=n)
    union, kernels = _union_per_owner(all_op, ts[all_gpu], end[all_gpu], n)
    index = rt.column("index")
    parent_op = op_parent[ops]
    return pd.DataFrame({
        "rank": rt.rank,
        "index": index[ops],
        "name": np.asarray(rt.symbols, dtype=object)[rt.column("name")[ops]],
        "input_shapes": _input_shapes(rt, ops),
        "parent_op": np.where(parent_op >= 0, index[np.clip(parent_op, 0, None)], -1),
        "top_level": parent_op < 0,
        "cpu_total(ns)": rt.column("dur")[ops],
        "cpu_self(ns)": cpu_self[ops],
        "gpu_time(ns)": gpu_time[ops],
        "gpu_self_time(ns)": gpu_self[ops],
        "gpu_union_time(ns)": union[ops],
        "kernels": kernels[ops],
        "self_kernels": self_kernels[ops],
    }, columns=CALL_COLUMNS)


def gpu_shares(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each interval's share of the union: its time, split equally with concurrent ones.

    ``share[i]`` is the integral over ``[start[i], end[i])`` of ``1 / k(t)``, ``k(t)`` the
    number of intervals running at ``t``; the shares sum to the union's length. Example:
    ``[0, 10)`` and ``[5, 15)`` get 7.5 each (5 alone + 5 / 2). Float ns, exact integers
    when nothing overlaps.
    """
    m = start.shape[0]
    if m == 0:
        return np.zeros(0, dtype=np.float64)
    times = np.concatenate([start, np.maximum(end, start)])
    step = np.concatenate([np.ones(m, np.int64), -np.ones(m, np.int64)])
    order = np.argsort(times, kind="stable")
    t, running = times[order], np.cumsum(step[order])
    piece = np.diff(t).astype(np.float64)
    weight = np.where(running[:-1] > 0, piece / np.maximum(running[:-1], 1), 0.0)
    cumulative = np.r_[0.0, np.cumsum(weight)]
    at = np.empty(2 * m, dtype=np.float64)
    at[order] = cumulative
    return at[m:] - at[:m]


def _self_time(codes: np.ndarray, parent: np.ndarray, ts: np.ndarray, end: np.ndarray,
               n: int) -> np.ndarray:
    """Duration minus the direct children's time inside it, per row (ns, >= 0)."""
    child = np.flatnonzero(np.isin(codes, _CPU_CODES) & (parent >= 0))
    par = parent[child]
    inside = np.minimum(end[child], end[par]) - np.maximum(ts[child], ts[par])
    covered = np.zeros(n, dtype=np.int64)
    np.add.at(covered, par, np.clip(inside, 0, None))
    return np.clip(end - ts - covered, 0, None)


def _union_per_owner(owner: np.ndarray, start: np.ndarray, end: np.ndarray, n: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Per owner row (``n`` rows): union length of its intervals (ns) and their count."""
    total = np.zeros(n, dtype=np.int64)
    count = np.bincount(owner, minlength=n).astype(np.int64)
    if owner.size == 0:
        return total, count
    order = np.lexsort((start, owner))
    o, s, e = owner[order], start[order], end[order]
    running = pd.Series(e).groupby(o, sort=False).cummax().to_numpy()
    first = np.r_[True, o[1:] != o[:-1]]
    prev = np.r_[s[0], running[:-1]]
    prev[first] = s[first]
    gain = np.clip(running - np.maximum(s, prev), 0, None)
    np.add.at(total, o, gain)
    return total, count


def _input_shapes(rt: RankTrace, ops: np.ndarray) -> np.ndarray:
    out = np.full(ops.size, "", dtype=object)
    table, slot = side_slots(rt, "op_args")
    if len(table) == 0 or "input_dims" not in table:
        return out
    where = slot[ops]
    has = where >= 0
    dims = table["input_dims"].to_numpy(dtype=object)[where[has]]
    out[has] = [d if isinstance(d, str) else "" for d in dims]
    return out


def operator_breakdown(trace: RankMapper, selection: Selection = EVERYTHING,
                       group_by_input_shape: bool = False) -> pd.DataFrame:
    """Per rank and operator name (and input shapes): :data:`BREAKDOWN_COLUMNS`.

    Sums of :func:`operator_calls` over the calls of each group, times in µs; definitions
    in this module's docstring. ``input_shapes`` is ``""`` unless
    ``group_by_input_shape``. Sorted by rank, then GPU time, CPU total time (both
    descending), name and input shapes. Computed per rank, where the rank is (only the
    groups travel), each rank first restricted to the selection's ``ProfilerStep``
    numbers (every event when it names none).
    """
    return OPERATOR_BREAKDOWN.run(trace, selection, group_by_input_shape)


def rank_breakdown(rank: RankTrace, group_by_input_shape: bool = False) -> pd.DataFrame:
    """One rank's rows of :func:`operator_breakdown`: one per operator name (and shapes)."""
    return _breakdown(rank_calls(rank), group_by_input_shape)


OPERATOR_BREAKDOWN = Analysis("Operator breakdown", rank_breakdown, BREAKDOWN)


def _breakdown(calls: pd.DataFrame, group_by_input_shape: bool) -> pd.DataFrame:
    if len(calls) == 0:
        return BREAKDOWN.empty()
    if not group_by_input_shape:
        calls = calls.assign(input_shapes="")
    grouped = calls.groupby(["rank", "name", "input_shapes"], sort=False).agg(
        calls=("index", "size"),
        cpu_total=("cpu_total(ns)", "sum"),
        cpu_self=("cpu_self(ns)", "sum"),
        gpu_time=("gpu_time(ns)", "sum"),
        gpu_self=("gpu_self_time(ns)", "sum"),
        gpu_union=("gpu_union_time(ns)", "sum"),
        kernels=("kernels", "sum"),
        self_kernels=("self_kernels", "sum"),
    ).reset_index()
    out = pd.DataFrame({
        "rank": grouped["rank"],
        "name": grouped["name"],
        "input_shapes": grouped["input_shapes"],
        "calls": grouped["calls"].astype(np.int64),
        "cpu_total_time(us)": grouped["cpu_total"] / 1e3,
        "cpu_self_time(us)": grouped["cpu_self"] / 1e3,
        "gpu_time(us)": grouped["gpu_time"] / 1e3,
        "gpu_self_time(us)": grouped["gpu_self"] / 1e3,
        "gpu_union_time(us)": grouped["gpu_union"] / 1e3,
        "kernels": grouped["kernels"].astype(np.int64),
        "self_kernels": grouped["self_kernels"].astype(np.int64),
    })
    out = out.sort_values(["rank", "gpu_time(us)", "cpu_total_time(us)", "name",
                           "input_shapes"], ascending=[True, False, False, True, True],
                          kind="stable", ignore_index=True)
    return out[BREAKDOWN_COLUMNS]
