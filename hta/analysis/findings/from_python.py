"""Tensors built from Python data inside the step: ``torch.tensor`` or ``torch.as_tensor``
on a list, which ``host_bound`` (:mod:`hta.analysis.findings.hostbound`) names among the
time with no operator recorded.

Such a call records an ``aten::empty`` (the new tensor), then nothing while each element
is converted from its Python object, then ``aten::lift_fresh`` (``aten::to`` when a
device or dtype is given) on the filled tensor.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from hta.analysis.findings.events import link
from hta.analysis.findings.rule_tools import fmt_time, name_matches
from hta.analysis.findings.sync_sites import STEP_LABEL
from hta.analysis.intervals import Cover
from hta.analysis.side_columns import side_slots, side_text
from hta.model.arrays import distinct
from hta.model.derived import derived
from hta.model.rules import KIND_CODE, RUNTIME_KINDS, kind_mask
from hta.model.trace import RankTrace

#: The operator ``torch.tensor`` / ``torch.as_tensor`` on Python data records first: the
#: new tensor's allocation, before its elements are converted one by one (not recorded).
FROM_PYTHON_EMPTY = re.compile(r"^aten::empty$")
#: The operator recorded next, on the filled tensor (``aten::lift_fresh``; ``aten::to``
#: when a device or dtype was given).
FROM_PYTHON_NEXT = re.compile(r"^aten::(to|lift_fresh|_to_copy)$")
#: Least time with nothing recorded between the ``aten::empty`` and the next operator for
#: a tensor built from Python data (ns): converting a scalar or a few elements takes
#: microseconds, and the stretch before it is then the caller's, not the conversion's.
FROM_PYTHON_MIN_FILL_NS = 100_000

_OP = KIND_CODE["cpu_op"]
_RUNTIME = tuple(sorted(RUNTIME_KINDS))


@dataclass(frozen=True)
class FromPython:
    """Tensors built from Python data (:func:`from_python`), one entry a tensor: its
    thread ``tid``, the operator on the filled tensor ``next_row``, and its two stretches
    with nothing recorded, ``[before, made)`` and ``[made_end, next_start)``."""

    tid: np.ndarray
    next_row: np.ndarray
    before: np.ndarray
    made: np.ndarray
    made_end: np.ndarray
    next_start: np.ndarray

    def stretches(self, tid: int) -> Cover:
        """The union of the stretches of the tensors built on thread ``tid``."""
        on = self.tid == tid
        return Cover(np.r_[self.before[on], self.made_end[on]],
                     np.r_[self.made[on], self.next_start[on]])


def from_python(rt: RankTrace) -> FromPython:
    """Where the rank builds tensors from Python data (``torch.tensor`` or
    ``torch.as_tensor`` on a list): an ``aten::empty`` with no operator around it whose
    next operator or runtime call on its thread is ``aten::lift_fresh``, ``aten::to`` or
    ``aten::_to_copy`` (:data:`FROM_PYTHON_NEXT`) after :data:`FROM_PYTHON_MIN_FILL_NS`
    or more with nothing recorded (a scalar's conversion takes microseconds). The
    building's stretches are the time with nothing recorded on that thread just before
    the ``aten::empty`` (the data scanned for its type and shape, or made by the caller)
    and between it and the next operator (each element converted from its Python
    object). Computed once per rank."""
    return derived(rt, "findings.from_python", lambda: _from_python(rt))


def _from_python(rt: RankTrace) -> FromPython:
    none = np.zeros(0, dtype=np.int64)
    codes = rt.kind_codes()
    ops = np.flatnonzero(codes == _OP)
    empties = ops[name_matches(rt, ops, FROM_PYTHON_EMPTY)]
    up = link(rt, "parent")[empties]
    empties = empties[(up < 0) | (codes[np.maximum(up, 0)] != _OP)]
    if empties.size == 0:
        return FromPython(none, none, none, none, none, none)
    rows = np.flatnonzero(kind_mask(codes, ("cpu_op", *_RUNTIME)))
    rows = rows[~name_matches(rt, rows, STEP_LABEL)]
    ts, end, tids = rt.column("ts"), rt.column("end"), rt.column("tid")
    parts: list[tuple[np.ndarray, ...]] = []
    for t in distinct(tids[empties]).tolist():
        mine = rows[tids[rows] == t]  # in start order: the events table is sorted by ts
        k = np.searchsorted(mine, empties[tids[empties] == t])
        k = k[k + 1 < mine.size]
        k = k[name_matches(rt, mine[k + 1], FROM_PYTHON_NEXT)]
        k = k[ts[mine[k + 1]] - end[mine[k]] >= FROM_PYTHON_MIN_FILL_NS]
        if k.size == 0:
            continue
        made, nxt = mine[k], mine[k + 1]
        run_end = np.maximum.accumulate(end[mine])
        before = np.minimum(np.where(k > 0, run_end[np.maximum(k - 1, 0)], ts[made]),
                            ts[made])
        parts.append((np.full(k.size, t, dtype=np.int64), nxt, before, ts[made], end[made],
                      np.maximum(ts[nxt], end[made])))
    if not parts:
        return FromPython(none, none, none, none, none, none)
    return FromPython(*(np.concatenate(col) for col in zip(*parts, strict=True)))


def from_python_text(rt: RankTrace, fp: FromPython, a: np.ndarray, b: np.ndarray,
                      tids: np.ndarray, python_ns: np.ndarray, n_steps: int
                      ) -> tuple[int, str]:
    """The time of the host gaps ``[a, b)`` (launching threads ``tids``; their python
    class ``python_ns``) spent building tensors from Python data, and the evidence's
    sentence about it ("" when none)."""
    if fp.tid.size == 0:
        return 0, ""
    inside = np.zeros(a.size, dtype=np.int64)
    hit = np.zeros(fp.tid.size, dtype=bool)  # the tensors whose stretches the gaps hold
    for t in distinct(tids).tolist():
        on = tids == t
        inside[on] = fp.stretches(int(t)).within(a[on], b[on])
        # the gaps are disjoint and in time order: the first one ending after a tensor's
        # start is the only one that can overlap it first
        ga, gb = a[on], b[on]
        mine = np.flatnonzero(fp.tid == t)
        k = np.searchsorted(gb, fp.before[mine], side="right")
        ok = k < gb.size
        hit[mine[ok]] = ga[k[ok]] < fp.next_start[mine[ok]]
    held = int(np.minimum(inside, python_ns).sum())
    if held <= 0:
        return 0, ""
    nxt = fp.next_row[hit] if hit.any() else fp.next_row
    rate = f" ({nxt.size / n_steps:.3g} a step)" if n_steps > 1 else ""
    first = rt.symbols[int(rt.column("name")[int(nxt[0])])]
    return held, (
        f" {fmt_time(held)} of it builds {nxt.size} tensor(s) from Python data{rate} "
        f"(torch.tensor or torch.as_tensor on a list: aten::empty, then nothing recorded "
        f"while each element is converted, then {first}{_dims_text(rt, nxt)}).")


def _dims_text(rt: RankTrace, rows: np.ndarray) -> str:
    """`` of [1307783] (long int)``: the first recorded input's shape and type of the
    largest of ``rows`` (operators), or ""."""
    table, pos = side_slots(rt, "op_args")
    if not len(table) or "input_dims" not in table:
        return ""
    have = rows[pos[rows] >= 0]
    if have.size == 0:
        return ""
    dims = side_text(rt, "op_args", "input_dims", missing="")[pos[have]]
    types = (side_text(rt, "op_args", "input_type", missing="")[pos[have]]
             if "input_type" in table else np.full(have.size, "", dtype=object))
    shapes = [_first_item(str(d)) for d in dims]
    sizes = [int(np.prod([int(x) for x in sh.strip("[]").split(",") if x.strip().isdigit()]
                         or [0])) for sh in shapes]
    i = int(np.argmax(sizes))
    kind = _first_item(str(types[i])).strip("'\" ")
    return f" of {shapes[i]}" + (f" ({kind})" if kind else "") if shapes[i] else ""


def _first_item(text: str) -> str:
    """``[1307783]`` from ``[[1307783], [], []]``, ``long int`` from
    ``["long int", "", "Scalar"]`` (recorded JSON text); "" when there is none."""
    try:
        values = json.loads(text) if text else []
    except ValueError:
        return ""
    if not isinstance(values, list) or not values:
        return ""
    first = values[0]
    return json.dumps(first) if isinstance(first, list) else str(first)


__all__ = ["FROM_PYTHON_MIN_FILL_NS", "FromPython", "from_python", "from_python_text"]
