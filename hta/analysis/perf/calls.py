"""The operator calls that launched GPU work, at the innermost operator, with their
kernels' time, their recorded shapes and their category."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.perf.replayed import replayed_slots
from hta.analysis.side_columns import side_slots, side_text_of
from hta.model.categories import op_category
from hta.model.derived import derived
from hta.model.rules import GPU_WORK_KINDS, RuleSet, categories, kind_mask
from hta.model.trace import RankTrace

#: Copies whose speed is set by a host or peer link, not by device memory.
LINK_COPY_KINDS = frozenset({"memcpy_htod", "memcpy_dtoh", "memcpy_ptop", "memcpy_other"})


def gpu_rows(rt: RankTrace) -> np.ndarray:
    """Positions of the rank's GPU work (kernels, copies, memsets)."""
    return np.flatnonzero(kind_mask(rt.kind_codes(), GPU_WORK_KINDS))


def gpu_categories(rt: RankTrace, rows: np.ndarray, rules: RuleSet) -> np.ndarray:
    """Category of each GPU work row from its kernel name (kernels that carry collective
    args are ``communication``)."""
    cats = categories(rt.symbols, rt.column("cat")[rows], rt.column("name")[rows],
                      rules)
    coll, args_row = side_slots(rt, "collective_args")
    if len(coll):
        hit = (args_row[rows] >= 0) & (cats != "copy/memset")
        cats[hit] = "communication"
    return cats


Calls = dict[str, np.ndarray]


def op_calls(rt: RankTrace, rules: RuleSet) -> tuple[Calls, pd.DataFrame]:
    """(calls, work): columns (equal-length arrays) of the operator calls that launched
    GPU work: ``op`` the position of the innermost ``cpu_op`` around the launch (the
    model's ``op_index``), ``kernels``, ``time_ns``, ``name``, ``category``,
    ``link_copy`` (the call copied to or from the host or a peer); and one row
    per GPU work event with its owner position (-1: launched outside any operator),
    duration and kernel category; with a capture merge on the rank
    (:mod:`hta.analysis.perf.replayed`), also ``replayed``: the event's captured call
    (-1: none), and such an event has no owner here. Computed once per rank and rules (the operator
    performance and the category split share it: :func:`hta.model.derived.derived`)."""
    return derived(rt, ("op_calls", rules.fingerprint()),
                   lambda: _op_calls(rt, rules, gpu_rows(rt)))


def op_calls_of(rt: RankTrace, rules: RuleSet, indices: np.ndarray
                ) -> tuple[Calls, Calls]:
    """:func:`op_calls` of the calls whose event ``index`` is in ``indices`` alone, on a
    rank without a capture merge (:func:`~hta.analysis.perf.replayed.has_capture_merge`
    false): the rows of those calls, in the same order with the same values (a call's
    columns read its own GPU work only), and the GPU work they launched, as arrays (the
    frame's columns: a frame would cost more than the few calls asked for); not kept."""
    rows = gpu_rows(rt)
    owner = rt.link("op_index")[rows]
    mine = owner >= 0
    mine[mine] = np.isin(rt.column("index")[owner[mine]], indices)
    return _op_calls(rt, rules, rows[mine], frame=False)


def _op_calls(rt: RankTrace, rules: RuleSet, rows: np.ndarray, frame: bool = True
              ) -> tuple[Calls, pd.DataFrame | Calls]:
    owner = rt.link("op_index")[rows]
    dur = rt.column("dur")[rows]
    kcat = gpu_categories(rt, rows, rules)
    slots = replayed_slots(rt, rows)  # None (nothing done) without a capture merge
    if slots is not None:  # a replayed kernel counts with its captured call, not here
        owner = np.where(slots >= 0, -1, owner)
    columns: Calls = {"row": rows, "owner": owner, "dur": dur,
                      "kernel_category": np.asarray(kcat, dtype=object),
                      **({"replayed": slots} if slots is not None else {})}
    work: pd.DataFrame | Calls = columns
    if frame:
        work = pd.DataFrame({**columns, "kernel_category": pd.Series(
            kcat, dtype=object, copy=False)})
    is_linked = owner >= 0
    if not is_linked.any():
        return {}, work
    owners = owner[is_linked]
    linked_dur = dur[is_linked]
    op, slot, kernels = np.unique(owners, return_inverse=True, return_counts=True)
    link = kind_mask(rt.kind_codes()[rows[is_linked]], LINK_COPY_KINDS)
    calls: Calls = {"op": op, "kernels": kernels.astype(np.int64),
                    "time_ns": np.bincount(slot, weights=linked_dur).astype(np.int64),
                    "link_copy": np.bincount(slot, weights=link, minlength=len(op)) > 0}
    symbols = rt.symbols
    names = np.array([symbols[i] for i in rt.column("name")[op].tolist()], dtype=object)
    calls["name"] = names
    code, uniq = pd.factorize(names)
    named = np.array([op_category(n) or "" for n in uniq], dtype=object)[code]
    # the kernels' category only for the calls whose operator names none
    need = named == ""
    fallback = np.full(len(op), np.nan, dtype=object)
    if need.any():
        mine = need[slot]
        fallback[need] = top_category((np.cumsum(need) - 1)[slot[mine]], int(need.sum()),
                                      kcat[is_linked][mine], linked_dur[mine])
    calls["category"] = np.where(need, fallback, named).astype(object)
    return calls, work


def top_category(slot: np.ndarray, n: int, category: np.ndarray, dur: np.ndarray
                 ) -> np.ndarray:
    """Per call ``0..n-1`` (``slot``: the call of each kernel), the kernel category with
    the most of its kernels' time; of categories with equal time, the one whose first
    kernel comes first. NaN for a call none of whose kernels has a category."""
    code, uniq = pd.factorize(category)
    out = np.full(n, np.nan, dtype=object)
    known = code >= 0
    if not known.any():
        return out
    width = np.int64(len(uniq))
    pair = slot[known].astype(np.int64) * width + code[known]
    pairs, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    total = np.bincount(inverse, weights=dur[known].astype(np.float64))
    call = pairs // width
    order = np.lexsort((first, -total, call))  # per call: most time, then first seen
    lead = order[np.r_[True, call[order][1:] != call[order][:-1]]]
    out[call[lead]] = np.asarray(uniq, dtype=object)[pairs[lead] % width]
    return out


def attach_shapes(rt: RankTrace, calls: Calls) -> Calls:
    """Add ``input_dims``, ``input_types``, ``concrete_inputs`` (JSON text, ``""`` where
    the trace recorded none) to the calls, from the ``op_args`` side table."""
    n = len(calls["op"])
    cols = {c: np.full(n, "", dtype=object) for c in ("input_dims", "input_type",
                                                      "concrete_inputs")}
    table, slot = side_slots(rt, "op_args")
    if len(table) and n:
        where = slot[calls["op"]]
        has = where >= 0
        for c in cols:
            if c in table:  # convert only the rows of these calls
                cols[c][has] = side_text_of(rt, "op_args", c, where[has], missing="")
    return {**calls, "input_dims": cols["input_dims"], "input_types": cols["input_type"],
            "concrete_inputs": cols["concrete_inputs"]}
