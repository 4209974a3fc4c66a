"""Graph-replayed kernels mapped to the operators that captured them (capture merge).

Serving engines (vLLM, SGLang) run their decode steps as CUDA/HIP graphs. In the trace of
the replay, the kernels hang off one ``cudaGraphLaunch``/``hipGraphLaunch`` and have no
operator, so no shapes and no FLOPs. The graphs were captured earlier, and a trace of the
capture (TraceLens's layout: ``capture_traces/`` beside the replay trace) holds the
operators, with their shapes, that launched each kernel into the graph.

**Capture windows.** In a capture trace, a *window* is the time between a
``cudaStreamBeginCapture``/``hipStreamBeginCapture`` call and the next
``...EndCapture`` call on the same thread; its *launches* are the kernel launch calls
(runtime launch kind) on that thread inside it, in time order. Kernels are not run
while capturing, so the launch is what the capture trace has of each graph node.

**Matching.** A *replay* is the GPU work of one graph launch in the replay trace (every
GPU event whose launch is that call), in start order (ties by stream). A replay of ``n``
kernels matches a capture window with exactly ``n`` launches (of every capture trace
given, in file and time order): the first one, or, when windows of that count were
captured for different batch sizes (TraceLens's ``execution_details.json``), the one of
the batch the step's annotation names (:func:`hta.analysis.serving.parse_step_name`),
else the first with a warning. Its ``i``-th kernel is the window's ``i``-th launch.
Graph nodes are recorded in capture order and a decode graph's kernels run in that order
on one stream, so position identifies the node; a replay whose count no window has is
left unmatched (said in :func:`merge_summary`), never matched by guess.

**Per matched kernel** the operator is the innermost ``cpu_op`` around its capture launch
that has a performance model (:mod:`hta.analysis.perf.registry`; a wrapper such as
``aiter::gemm_a16w16`` around ``aten::mm`` yields to ``aten::mm``, so a GEMM is counted
once), else the innermost ``cpu_op``; its ``Input Dims``/``Input type`` give its FLOPs
and bytes per call, counted on the first kernel of that operator call in the replay (an
operator that launched several kernels is counted once per replay).

Columns of :func:`captured_kernels` (:data:`COLUMNS`), one row per replayed GPU event:
``rank``, ``launch`` (row of the graph launch), ``position`` (its index in the replay),
``kernel`` (name), ``dur(us)``, ``matched`` (a window was found), ``op`` (the operator,
``""`` when none), ``category`` (the operator's category, :func:`hta.model.categories.op_category`,
``""`` when none), ``input_dims``, ``flops`` and ``bytes`` (of the operator call, on its
first kernel; 0 on the others and where no model applies), ``op_row`` (the operator's row
in its capture trace, -1), ``input_types``, ``peak_key`` and ``matrix`` (the model's
peak rate, as :mod:`hta.analysis.perf.op_performance` has them), ``row`` (the replayed
event's row in the replay trace).

:func:`capture_table` turns these into the rank's side table of
:mod:`hta.analysis.perf.replayed` (one captured call per replay and operator call of the
capture), through which the operator tables, the category split and the roofline
finding count graph-replayed work with its operators; :func:`captured_op_performance`
gives those calls' rows of the operator table
(:func:`hta.analysis.perf.op_performance.replayed_op_rows`: its columns, ``captured``
true; ``kernel_time(us)`` the call's replayed kernels' time, the roofline columns
against the rank's device; ``index`` and ``iteration`` are the call's first kernel's),
the same rows ``get_op_performance`` holds for them once the capture is merged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hta.analysis.perf.calls import gpu_categories
from hta.analysis.perf.inputs import parse_inputs
from hta.analysis.perf.op_performance import COLUMNS as OP_COLUMNS
from hta.analysis.perf.op_performance import DeviceArg, compact_json, rank_device, replayed_op_rows
from hta.analysis.perf.registry import model_of, work_of
from hta.analysis.perf.replayed import TABLE_COLUMNS, calls_of, empty_table, slots_in
from hta.analysis.serving import parse_step_name
from hta.model.arrays import distinct
from hta.model.categories import op_category
from hta.model.declared import Analysis, Columns
from hta.model.devices import Device
from hta.model.links import GRAPH_LAUNCH
from hta.model.rules import GPU_WORK_KINDS, KIND_CODE, RuleSet, kind_mask
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

COLUMNS = ["rank", "launch", "position", "kernel", "dur(us)", "matched", "op", "category",
           "input_dims", "flops", "bytes", "op_row", "input_types", "peak_key", "matrix",
           "row"]
#: :func:`captured_kernels`' table (object columns when it has no rows).
KERNELS = Columns.typed(COLUMNS)
#: :func:`captured_op_performance`'s table (float64 columns when it has no rows).
OPS = Columns.typed(OP_COLUMNS, "float64")


@dataclass
class Window:
    """One capture window: the capture trace's rank trace and its launch rows, in order."""

    source: str
    trace: RankTrace
    launches: np.ndarray
    #: the batch size the capture was for (TraceLens's ``execution_details.json``), -1
    batch: int = -1


def capture_windows(rt: RankTrace, source: str = "", batch: int = -1) -> list[Window]:
    """The capture windows of a capture trace (module docstring), in time order."""
    ev = rt.events
    if not len(ev):
        return []
    sym = np.asarray(rt.symbols, dtype=object)
    names = sym[rt.column("name")]
    is_begin = np.array([n.endswith("StreamBeginCapture") for n in names], dtype=bool)
    is_end = np.array([n.endswith("StreamEndCapture") for n in names], dtype=bool)
    codes = rt.kind_codes()
    launch = codes == KIND_CODE["runtime_launch"]
    ts = ev["ts"].to_numpy(np.int64)
    tid = ev["tid"].to_numpy(np.int64)
    out = []
    for b in np.flatnonzero(is_begin):
        later = np.flatnonzero(is_end & (tid == tid[b]) & (ts >= ts[b]))
        if not later.size:
            continue
        e = later[0]
        inside = np.flatnonzero(launch & (tid == tid[b]) & (ts >= ts[b]) & (ts <= ts[e]))
        out.append(Window(source, rt, inside[np.argsort(ts[inside], kind="stable")],
                          batch))
    return out


def _op_of(rt: RankTrace, row: int) -> int:
    """The operator row of a capture launch: the innermost enclosing ``cpu_op`` with a
    performance model, else the innermost ``cpu_op`` (-1: none)."""
    ev = rt.events
    op = int(ev["op_index"].iat[row])
    if op < 0:
        return -1
    parent = rt.column("parent")
    codes = rt.kind_codes()
    names = rt.column("name")
    v = op
    while v >= 0:
        if codes[v] == KIND_CODE["cpu_op"] and model_of(rt.symbols[int(names[v])]):
            return v
        v = int(parent[v])
    return op


def _replays(rt: RankTrace) -> list[tuple[int, np.ndarray]]:
    """Per graph launch of the replay trace: its row and its GPU rows in start order."""
    ev = rt.events
    if not len(ev):
        return []
    sym = rt.symbols
    codes = rt.kind_codes()
    gpu = np.flatnonzero(kind_mask(codes, GPU_WORK_KINDS))
    launch_of = rt.column("index_correlation")[gpu]
    names = rt.column("name")
    ok = launch_of >= 0
    gpu, launch_of = gpu[ok], launch_of[ok]
    graph = np.array([bool(GRAPH_LAUNCH.search(sym[int(names[r])])) for r in launch_of],
                     dtype=bool)
    gpu, launch_of = gpu[graph], launch_of[graph]
    ts = ev["ts"].to_numpy(np.int64)
    stream = ev["stream"].to_numpy(np.int64)
    out = []
    for launch in distinct(launch_of):
        rows = gpu[launch_of == launch]
        out.append((int(launch), rows[np.lexsort((stream[rows], ts[rows]))]))
    return out


def captured_kernels(replay: RankTrace, windows: list[Window]) -> pd.DataFrame:
    """Each replayed GPU event of ``replay`` with the operator that captured it
    (:data:`COLUMNS`; the module docstring defines the matching)."""
    ev = replay.events
    sym = replay.symbols
    rows_out = []
    dur = (ev["end"] - ev["ts"]).to_numpy(np.int64)
    names = replay.column("name")
    for launch, rows in _replays(replay):
        window = pick_window(replay, launch, rows.size, windows)
        seen_ops: set[tuple[int, int]] = set()
        for i, r in enumerate(rows.tolist()):
            row = {"rank": replay.rank, "launch": launch, "position": i, "row": r,
                   "kernel": sym[int(names[r])], "dur(us)": dur[r] / 1e3,
                   "matched": window is not None, "op": "", "category": "",
                   "input_dims": "", "flops": 0.0, "bytes": 0.0, "op_row": -1,
                   "input_types": "", "peak_key": "", "matrix": False}
            if window is not None:
                crt = window.trace
                op = _op_of(crt, int(window.launches[i]))
                if op >= 0:
                    name = crt.symbols[int(crt.events["name"].iat[op])]
                    row["op"] = name
                    row["op_row"] = op
                    row["category"] = op_category(name) or ""
                    args = _op_args(crt, op)
                    row["input_dims"], row["input_types"] = args[0], args[1]
                    key = (id(crt), op)
                    work = work_of(name, parse_inputs(*args))
                    if work is not None:
                        row["peak_key"], row["matrix"] = work.peak_key, bool(work.matrix)
                        if key not in seen_ops:
                            row["flops"], row["bytes"] = float(work.flops), float(work.bytes)
                    seen_ops.add(key)
            rows_out.append(row)
    return pd.DataFrame(rows_out, columns=COLUMNS)


def _step_batch(rt: RankTrace, row: int) -> int:
    """The batch of the engine step (:func:`hta.analysis.serving.parse_step_name`) whose
    annotation holds the call at ``row``; -1 when none says."""
    ev = rt.events
    t = int(ev["ts"].iat[row])
    codes = rt.kind_codes()
    ann = np.flatnonzero((codes == KIND_CODE["user_annotation"])
                         & (rt.column("ts") <= t) & (rt.column("end") >= t))
    for a in ann.tolist():
        parsed = parse_step_name(rt.symbols[int(ev["name"].iat[a])])
        if parsed is not None and parsed[1] > 0:
            return parsed[1]
    return -1


def pick_window(replay: RankTrace, launch: int, n: int, windows: list[Window]
                ) -> Window | None:
    """The capture window of a replay of ``n`` kernels: those with ``n`` launches; among
    several captured for different batch sizes, the one of the step's batch (its
    annotation) when known, else the first, with a warning that the choice is
    ambiguous."""
    same = [w for w in windows if w.launches.size == n]
    if len({w.batch for w in same}) <= 1:
        return same[0] if same else None
    batch = _step_batch(replay, launch)
    mine = [w for w in same if w.batch == batch]
    if mine:
        return mine[0]
    logger.warning("graph launch at row %d: %d captures of %d kernels for batch sizes %s "
                   "and the step names no batch; took the first (%s)", launch, len(same),
                   n, sorted({w.batch for w in same}), same[0].source)
    return same[0]


def _op_args(rt: RankTrace, op: int) -> tuple[str, str, str]:
    args = rt.tables.get("op_args")
    if args is None or not len(args):
        return "", "", ""
    idx = args["index"].to_numpy()
    pos = np.searchsorted(idx, op)
    if pos >= idx.size or idx[pos] != op:
        return "", "", ""
    a = args.iloc[int(pos)]
    return (str(a["input_dims"] or ""), str(a["input_type"] or ""),
            str(a["concrete_inputs"] or ""))


def capture_table(kernels: pd.DataFrame, replay: RankTrace) -> pd.DataFrame:
    """The side table of :mod:`hta.analysis.perf.replayed` for one rank: its replayed
    kernels that found their operator (``op_row >= 0``), keyed by start and stream (an
    event whose key another replayed event shares is left out: it stays as it was), one
    ``call`` per replay and captured operator call, numbered in replay order."""
    k = kernels[(kernels["rank"] == replay.rank) & (kernels["op_row"] >= 0)]
    if not len(k):
        return empty_table()
    rows = k["row"].to_numpy(np.int64)
    ts = replay.events["ts"].to_numpy(np.int64)[rows]
    stream = replay.events["stream"].to_numpy(np.int64)[rows]
    unique = ~pd.MultiIndex.from_arrays([ts, stream]).duplicated(keep=False)
    # one call per (replay, captured operator call); FLOPs and bytes per call (they are
    # on its first kernel), NaN where no model applies
    call = pd.MultiIndex.from_arrays([k["launch"].to_numpy(), k["op_row"].to_numpy()])
    codes = pd.factorize(call)[0].astype(np.int64)
    modelled = k["peak_key"].to_numpy(dtype=object) != ""
    flops = np.bincount(codes, weights=k["flops"].to_numpy(np.float64))[codes]
    nbytes = np.bincount(codes, weights=k["bytes"].to_numpy(np.float64))[codes]
    table = pd.DataFrame({
        "ts": ts, "stream": stream, "call": codes, "op": k["op"].to_numpy(dtype=object),
        "category": k["category"].to_numpy(dtype=object),
        "input_dims": [compact_json(str(d)) for d in k["input_dims"]],
        "input_types": [compact_json(str(t)) for t in k["input_types"]],
        "flops": np.where(modelled, flops, np.nan),
        "bytes": np.where(modelled, nbytes, np.nan),
        "peak_key": k["peak_key"].to_numpy(dtype=object),
        "matrix": k["matrix"].to_numpy(bool)})
    return table[unique].reset_index(drop=True)[TABLE_COLUMNS]


def captured_op_performance(kernels: pd.DataFrame, replay: RankTrace,
                            device: Device | None, rules: RuleSet | None = None
                            ) -> pd.DataFrame:
    """The operator calls of the matched replayed kernels of one rank, in the columns of
    :data:`hta.analysis.perf.op_performance.COLUMNS` (module docstring): the rows that
    ``get_op_performance`` holds for them once the capture is merged."""
    table = capture_table(kernels, replay)
    if not len(table):
        return OPS.empty()
    rows = np.sort(kernels.loc[kernels["rank"] == replay.rank, "row"].to_numpy(np.int64))
    slots = slots_in(table, replay.column("ts")[rows], replay.column("stream")[rows])
    hit = slots >= 0
    rows = rows[hit]
    return replayed_op_rows(replay, rows, slots[hit], calls_of(table), device,
                            gpu_categories(replay, rows, rules or RuleSet()),
                            replay.column("dur")[rows])


def rank_captured_kernels(replay: RankTrace, windows: list[tuple[int, Window]]
                          ) -> pd.DataFrame:
    """Per-rank work (:mod:`hta.model.runner`): :func:`captured_kernels` of one rank with
    the capture windows of ``(rank, window)`` pairs that are its own, else all of them."""
    mine = [w for r, w in windows if r == replay.rank] or [w for _, w in windows]
    return captured_kernels(replay, mine)


CAPTURED_KERNELS = Analysis("Captured kernels", rank_captured_kernels, KERNELS, add_rank=True)


def rank_captured_op_performance(replay: RankTrace, kernels: pd.DataFrame,
                                 device: DeviceArg = None, rules: RuleSet | None = None
                                 ) -> pd.DataFrame:
    """Per-rank work (:mod:`hta.model.runner`): :func:`captured_op_performance` of one
    rank against its device (``device`` overrides it, as :func:`rank_device` says)."""
    return captured_op_performance(kernels, replay, rank_device(replay, device), rules)


CAPTURED_OP_PERFORMANCE = Analysis("Captured operators", rank_captured_op_performance, OPS,
                                   add_rank=True)


def merge_summary(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per rank: ``replays`` (graph launches), ``matched_replays``, ``kernels``,
    ``replay_time(us)`` (GPU time of the replayed kernels), ``with_op_time(us)`` (of those
    that found their operator), ``with_op_pctg`` and ``gemm_gflop`` (GEMM-category
    operators' FLOPs / 1e9)."""
    cols = ["rank", "replays", "matched_replays", "kernels", "replay_time(us)",
            "with_op_time(us)", "with_op_pctg", "gemm_gflop"]
    if not len(kernels):
        return pd.DataFrame(columns=cols)
    rows = []
    for rank, k in kernels.groupby("rank", sort=True):
        total = float(k["dur(us)"].sum())
        with_op = float(k.loc[k["op"] != "", "dur(us)"].sum())
        per_launch = k.groupby("launch")["matched"].first()
        rows.append({"rank": int(rank), "replays": int(per_launch.size),
                     "matched_replays": int(per_launch.sum()), "kernels": len(k),
                     "replay_time(us)": total, "with_op_time(us)": with_op,
                     "with_op_pctg": 100.0 * with_op / total if total else 0.0,
                     "gemm_gflop": float(k.loc[k["category"] == "GEMM", "flops"].sum()) / 1e9})
    return pd.DataFrame(rows, columns=cols)


__all__ = ["CAPTURED_KERNELS", "CAPTURED_OP_PERFORMANCE", "COLUMNS", "KERNELS", "OPS", "Window",
           "capture_table", "capture_windows", "captured_kernels", "captured_op_performance",
           "merge_summary", "pick_window", "rank_captured_kernels",
           "rank_captured_op_performance"]
