"""Operator performance: FLOPs, bytes and % of the roofline per operator call.

One row per operator call that launched GPU work, at the *innermost* operator around the
launch (the model's ``op_index``: ``aten::linear`` → ``aten::addmm`` → kernel is one row,
for ``aten::addmm``), so no kernel counts twice. Per row:

* ``kernels`` and ``kernel_time(us)``: how many GPU events (kernels, copies, memsets) the
  call launched and the sum of their durations;
* ``category``: the operator's category (:mod:`hta.model.categories`), else the category
  of the kernels that took most of its time;
* ``flops``, ``bytes``: the performance model of the operator
  (:mod:`hta.analysis.perf.models`) on its recorded ``Input Dims``/``Input type``/
  ``Concrete Inputs``; NaN when the trace has no shapes or no model applies;
* the roofline columns of :mod:`hta.analysis.perf.roofline` against the rank's device
  (matched from ``deviceProperties``, or the one the caller names), at the peak of the
  math the call's kernels ran (:mod:`hta.analysis.perf.kernel_math`: a SIMT fp32 GEMM
  against the fp32 vector peak, not the TF32 tensor-core one);
* ``captured``: false for these calls; true for a graph-replayed operator call found in
  the capture traces (:mod:`hta.analysis.perf.replayed`, where the rank holds a capture
  merge): its operator, shapes and FLOPs are the capture's, its kernels and time the
  replay's, ``index`` its first kernel's; those kernels leave the call around the graph
  launch, so each counts once.

Definitions and derivations: ``docs/analyses/performance.md``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.perf.calls import Calls, attach_shapes, op_calls, op_calls_of
from hta.analysis.perf.inputs import parse_inputs
from hta.analysis.perf.kernel_math import PEAK_OF, call_math, row_math
from hta.analysis.perf.registry import work_of
from hta.analysis.perf.replayed import TABLE, calls_of, first_rows, has_capture_merge
from hta.analysis.perf.roofline import roofline_columns
from hta.model.declared import WHOLE, Analysis, Columns
from hta.model.derived import derived
from hta.model.devices import Device, device_by_name, match_device
from hta.model.rules import RuleSet
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankTrace, Trace

COLUMNS = [
    "rank", "index", "iteration", "op", "category", "input_dims", "input_types", "kernels",
    "kernel_time(us)", "flops", "bytes", "tflops_per_s", "tb_per_s", "flops_per_byte",
    "peak_key", "matrix", "roof_tflops_per_s", "bound", "pct_of_peak", "device",
    "captured",
]

DeviceArg = Device | str | None


def rank_device(rt: RankTrace, device: DeviceArg = None) -> Device | None:
    """The device a rank's calls are judged against: the caller's (a :class:`Device` or
    a table name), else the first ``deviceProperties`` record the table matches."""
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        return device_by_name(device)
    for props in rt.meta.get("device_properties") or []:
        found = match_device(props)
        if found is not None:
            return found
    return None


def _models(calls: Calls) -> Calls:
    """flops, bytes, peak key, matrix per call, and the shapes and types as compact JSON
    text: one parse and model evaluation per distinct (operator, shapes, types, concrete
    inputs). Calls that copied over a host or peer link get no model (their roof is the
    link, not device memory)."""
    key_cols = ["name", "input_dims", "input_types", "concrete_inputs"]
    codes = np.zeros(len(calls["op"]), dtype=np.int64)
    for col in key_cols:  # one dense integer key from the four columns' codes
        c, u = pd.factorize(calls[col])
        codes = pd.factorize(codes * (len(u) + 1) + c)[0].astype(np.int64)
    first = np.unique(codes, return_index=True)[1]
    uniq = list(zip(*(calls[c][first] for c in key_cols)))
    out = np.empty((len(uniq), 6), dtype=object)
    for i, (name, dims, types, conc) in enumerate(uniq):
        work = work_of(name, parse_inputs(dims, types, conc)) if dims else None
        out[i] = ((np.nan, np.nan, "", False) if work is None else (
            work.flops, work.bytes, work.peak_key, work.matrix)) + (
            compact_json(dims), compact_json(types))
    per = out[codes] if len(uniq) else np.empty((0, 6), dtype=object)
    link = calls["link_copy"]
    return {"flops": np.where(link, np.nan, per[:, 0].astype(np.float64)),
            "bytes": np.where(link, np.nan, per[:, 1].astype(np.float64)),
            "peak_key": np.where(link, "", per[:, 2]).astype(object),
            "matrix": per[:, 3].astype(bool) & ~link,
            "input_dims": per[:, 4], "input_types": per[:, 5]}


def _kernel_peaks(rt: RankTrace, calls: Calls, work: pd.DataFrame | Calls,
                  model: Calls) -> Calls:
    """``model`` with the peak key and matrix flag of the math the calls' kernels ran
    where it differs from the model's (:mod:`hta.analysis.perf.kernel_math`): matrix ops
    on fp32 inputs whose GEMM time went mostly to SIMT fp32 or AMD fp32 matrix-core
    kernels. Only the GPU rows of such calls are looked at."""
    fp32_matrix = model["matrix"] & np.isin(model["peak_key"], ("tf32", "fp32"))
    if not fp32_matrix.any():
        return model
    owner = np.asarray(work["owner"])
    wanted = np.zeros(len(rt.events) + 1, dtype=bool)  # the last slot: owner -1
    wanted[calls["op"][fp32_matrix]] = True
    sel = np.flatnonzero(wanted[owner])
    rows = np.asarray(work["row"])[sel]
    category = np.asarray(work["kernel_category"], dtype=object)[sel]
    math = row_math(rt.symbols, rt.column("name")[rows], category)
    slot = np.searchsorted(calls["op"], owner[sel])
    per_call = call_math(slot, np.asarray(work["dur"])[sel].astype(np.float64), math,
                         len(calls["op"]))
    key, matrix = model["peak_key"].copy(), model["matrix"].copy()
    for cls, (k, m) in PEAK_OF.items():
        hit = fp32_matrix & (per_call == cls)
        if hit.any():
            key[hit], matrix[hit] = k, m
    return {**model, "peak_key": key, "matrix": matrix}


def compact_json(text: str) -> str:
    """A recorded JSON text on one line (``[[16, 559], []]``); unparsable text as is."""
    if not text or "\n" not in text:
        return text
    try:
        return json.dumps(json.loads(text))
    except ValueError:
        return text


def rank_op_performance(rt: RankTrace, device: DeviceArg = None,
                        rules: RuleSet | None = None) -> pd.DataFrame:
    """The rows of one rank (:data:`COLUMNS`), in the calls' start order (computed once
    per rank, device and rules: the roofline finding and the operator summary share it,
    :func:`hta.model.derived.derived`)."""
    rules = rules or RuleSet()
    return derived(rt, _key("op_performance", device, rules),
                   lambda: _rank_op_performance(rt, device, rules))


def rank_op_columns(rt: RankTrace, indices: np.ndarray, device: DeviceArg = None,
                    rules: RuleSet | None = None) -> dict[str, np.ndarray]:
    """The rows of :func:`rank_op_performance` whose event ``index`` is in ``indices``, as
    one array per column of :data:`COLUMNS` (the same values, in its row order;
    :func:`op_frame` makes them its table). On a rank without a capture merge only these
    calls are modelled (each call's row depends on the call alone), so a caller that
    needs a few calls does not pay for all; else they are read from the table."""
    rules = rules or RuleSet()
    if has_capture_merge(rt):
        table = rank_op_performance(rt, device, rules)
        mine = np.isin(table["index"].to_numpy(), indices)
        return {c: table[c].to_numpy()[mine] for c in COLUMNS}
    calls, gpu_work = op_calls_of(rt, rules, indices)
    if not calls or not len(calls["op"]):
        return {c: np.zeros(0, dtype=object if c in _TEXT else np.float64) for c in COLUMNS}
    columns = _trace_columns(rt, _trace_parts(rt, calls, gpu_work, device))
    size = len(calls["op"])
    return {c: np.full(size, columns[c]) if np.ndim(columns[c]) == 0 else
            np.asarray(columns[c]) for c in COLUMNS}


def op_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """The operator table (:data:`COLUMNS`) of its columns (arrays, or scalars for a
    column of one value); text columns stay object arrays (no conversion of long
    strings), and it is built in the table's column order (selecting the columns
    afterwards would copy them all)."""
    columns = dict(columns)
    for name in _TEXT:
        columns[name] = pd.Series(columns[name], dtype=object, copy=False)
    return pd.DataFrame({c: columns[c] for c in COLUMNS})


def _key(name: str, device: DeviceArg, rules: RuleSet) -> tuple[object, ...]:
    return (name, device if isinstance(device, (str, type(None))) else repr(device),
            rules.fingerprint())


def _rank_op_performance(rt: RankTrace, device: DeviceArg, rules: RuleSet) -> pd.DataFrame:
    calls, gpu_work = op_calls(rt, rules)
    if "replayed" not in gpu_work:  # no capture merge on this rank
        return _trace_table(rt, _trace_parts(rt, calls, gpu_work, device))
    slots = gpu_work["replayed"].to_numpy()
    hit = slots >= 0
    replayed = replayed_op_rows(rt, gpu_work["row"].to_numpy()[hit], slots[hit],
                                calls_of(rt.tables[TABLE]), rank_device(rt, device),
                                gpu_work["kernel_category"].to_numpy(dtype=object)[hit],
                                gpu_work["dur"].to_numpy()[hit])
    trace_calls = _trace_table(rt, _trace_parts(rt, calls, gpu_work, device))
    out = pd.concat([f for f in (trace_calls, replayed) if len(f)] or [replayed],
                    ignore_index=True)
    return out.sort_values("index", kind="stable", ignore_index=True)[COLUMNS]


def replayed_op_rows(rt: RankTrace, rows: np.ndarray, slots: np.ndarray,
                     calls: pd.DataFrame, device: Device | None,
                     kernel_category: np.ndarray, dur: np.ndarray) -> pd.DataFrame:
    """The rows (:data:`COLUMNS`, ``captured`` true) of the graph-replayed operator calls
    (:mod:`hta.analysis.perf.replayed`): per captured call among ``slots`` (the call of
    each replayed GPU event at the positions ``rows``, with its kernel category and
    duration in ns), its events' count and summed time, the call's FLOPs and bytes and the
    roofline columns against ``device``; ``index`` and ``iteration`` are its first event's,
    ``category`` the operator's, else that of the kernels with most of its time."""
    if not len(rows):
        return pd.DataFrame({c: [] for c in COLUMNS})
    n = len(calls)
    kernels = np.bincount(slots, minlength=n)
    present = np.flatnonzero(kernels > 0)
    time_ns = np.bincount(slots, weights=dur, minlength=n).astype(np.int64)[present]
    first = first_rows(rows, slots, n)[present]
    by_cat = pd.DataFrame({"call": slots, "cat": kernel_category, "dur": dur}).groupby(
        ["call", "cat"], sort=False)["dur"].sum().reset_index()
    top = by_cat.sort_values(["call", "dur"], ascending=[True, False]).drop_duplicates(
        "call").set_index("call")["cat"].reindex(present).to_numpy(dtype=object)
    c = calls.iloc[present]
    named = c["category"].to_numpy(dtype=object)
    modelled = c["peak_key"].to_numpy(dtype=object) != ""
    flops = np.where(modelled, c["flops"].to_numpy(np.float64), np.nan)
    nbytes = np.where(modelled, c["bytes"].to_numpy(np.float64), np.nan)
    key, matrix = c["peak_key"].to_numpy(dtype=object), c["matrix"].to_numpy(bool)
    roof = roofline_columns(flops, nbytes, time_ns, key, matrix, device)
    ev = rt.events
    text = {"op": c["op"].to_numpy(dtype=object),
            "category": np.where(named != "", named, top).astype(object),
            "input_dims": c["input_dims"].to_numpy(dtype=object),
            "input_types": c["input_types"].to_numpy(dtype=object), "peak_key": key,
            "bound": np.asarray(roof["bound"], dtype=object),
            "device": np.full(len(present), device.name if device is not None else "",
                              dtype=object)}
    out = pd.DataFrame({
        "rank": np.int64(rt.rank), "index": rt.column("index")[first],
        "iteration": rt.column("iteration")[first] if "iteration" in ev else -1,
        **{k: pd.Series(v, dtype=object, copy=False) for k, v in text.items()},
        "kernels": kernels[present].astype(np.int64), "kernel_time(us)": time_ns / 1e3,
        "flops": flops, "bytes": nbytes,
        **{k: roof[k] for k in ("tflops_per_s", "tb_per_s", "flops_per_byte",
                                "roof_tflops_per_s", "pct_of_peak")},
        "matrix": matrix, "captured": True,
    })
    return out[COLUMNS]


def _trace_parts(rt: RankTrace, calls: Calls, gpu_work: pd.DataFrame | Calls,
                 device: DeviceArg
                 ) -> dict[str, Any]:
    """The columns of the operator calls the trace itself links to their GPU work, before
    they make a table (:func:`_trace_table`): the calls, their models and roofline
    columns, and the device (empty without calls)."""
    if not calls:
        return {}
    calls = attach_shapes(rt, calls)
    work = _kernel_peaks(rt, calls, gpu_work, _models(calls))
    dev = rank_device(rt, device)
    roof = roofline_columns(work["flops"], work["bytes"], calls["time_ns"],
                            work["peak_key"], work["matrix"], dev)
    return {"calls": calls, "work": work, "roof": roof, "device": dev}


def _trace_table(rt: RankTrace, parts: dict[str, Any]) -> pd.DataFrame:
    """The rows (:data:`COLUMNS`) of :func:`_trace_parts`' calls."""
    if not parts:
        return pd.DataFrame({c: [] for c in COLUMNS})
    return op_frame(_trace_columns(rt, parts))


#: The text columns of :data:`COLUMNS`.
_TEXT = ("op", "category", "input_dims", "input_types", "peak_key", "bound", "device")


def _trace_columns(rt: RankTrace, parts: dict[str, Any]) -> dict[str, Any]:
    """:data:`COLUMNS` of :func:`_trace_parts`' calls (arrays, and scalars for columns
    of one value)."""
    calls, work, roof, dev = parts["calls"], parts["work"], parts["roof"], parts["device"]
    op = calls["op"]
    return {
        "rank": np.int64(rt.rank), "index": rt.column("index")[op],
        "iteration": rt.column("iteration")[op] if "iteration" in rt.events else -1,
        "op": calls["name"], "category": calls["category"],
        "input_dims": work["input_dims"], "input_types": work["input_types"],
        "peak_key": work["peak_key"], "bound": np.asarray(roof["bound"], dtype=object),
        "device": np.full(len(op), dev.name if dev is not None else "", dtype=object),
        "kernels": calls["kernels"], "kernel_time(us)": calls["time_ns"] / 1e3,
        "flops": work["flops"], "bytes": work["bytes"],
        **{k: roof[k] for k in ("tflops_per_s", "tb_per_s", "flops_per_byte",
                                "roof_tflops_per_s", "pct_of_peak")},
        "matrix": work["matrix"], "captured": False,
    }


def op_performance(trace: Trace, selection: Selection = EVERYTHING,
                   device: DeviceArg = None, rules: RuleSet | None = None) -> pd.DataFrame:
    """One row per operator call with GPU work, on the selected ranks (module docstring;
    columns :data:`COLUMNS`)."""
    return OP_PERFORMANCE.run(trace, selection, device, rules)


#: :func:`op_performance`, declared: one rank's calls, where the rank is.
OP_PERFORMANCE = Analysis("Operator performance", rank_op_performance,
                          Columns.typed(COLUMNS, "float64"), steps=WHOLE, add_rank=True)
