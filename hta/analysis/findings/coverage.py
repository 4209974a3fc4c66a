"""What the findings explain of each rank's idle and exposed time, and what they leave.

Per rank, inside the analysed window ``W`` (:func:`~hta.analysis.findings.engine.
analysis_window`), from the GPU work (kernels, copies, memsets, any stream, clipped to W):

* *idle*: no GPU work on any stream;
* *exposed communication*: a communication kernel runs and no computation kernel;
* *exposed memory*: a copy or memset runs and no computation or communication kernel;
* *not computing* (the time the findings could explain): the three together, i.e. W minus
  the time a computation kernel runs.

*Explained* is the part of the not-computing time that the findings shown for the rank
hold (their claims after the engine shared them out,
:mod:`hta.analysis.findings.claims`); *unexplained* is the rest. ``idle_explained_pctg``
is the explained share of the idle time. Findings without a claim explain nothing here;
the waits a ``stragglers`` finding holds on the ranks that waited count there. A rank
whose GPU is idle more than :data:`IDLE_FLAG_SHARE` (20%) of its window while the
findings explain less than :data:`EXPLAINED_ENOUGH` (half) of that idle time gets a note
saying so (not a rank with no GPU work at all in its window: a CPU-only trace has nothing
to explain).

**Unexplained pieces.** The unexplained time falls into stretches (each a maximal
interval with no computation kernel, minus what findings hold); the :data:`TOP_PIECES`
longest of each rank are listed with the step they start in, what the GPU did
(``idle`` or the exposed kind holding most of the piece) and what the CPU did meanwhile:

* ``cpu``: the operators and runtime calls (``cpu_op``, ``runtime_*``) with the most
  *exclusive* time inside the piece (their time in it minus that of the operators and
  calls nested in them), any thread; led by ``no operator or runtime call for N% of it``
  when none runs for more than half of the piece (the host was in Python code the
  profiler did not record, or waiting on something else);
* ``annotations``: the ``record_function`` ranges (not ``ProfilerStep#``) overlapping the
  piece most, the innermost first on ties.

**Idle causes** (:func:`idle_causes`): the idle time is attributed from the top down, each
nanosecond to one cause: the rule whose finding (or note, ``warmup``) holds it, else a
host gap no finding holds (under the noise floor), time before the rank's first GPU work
(the GPU may still run work queued before the trace began), time after its last,
a kernel switch (a gap of at most :data:`KERNEL_SWITCH_NS`, 30 µs as the idle
breakdown's kernel wait, before work queued while the GPU was busy: the GPU's own time
from one kernel to the next), longer waits of queued work on what the trace does not
record, work whose launch the trace does not link, or unexplained.
``idle_causes`` lists them, the largest first, in % of the idle time;
``idle_attributed_pctg`` is the idle share with a named cause (all but ``queued``,
``unlinked`` and ``unexplained``). Where queued or unlinked work makes a tenth of the
idle time or more on a rank idle over 20% of its window, the note says what the trace
lacks to explain it (for queued work: whether it holds stream-wait and event-record
calls at all). ``window``
says which window the rank's findings describe and how it was found
(:func:`~hta.analysis.findings.warmup.window_text`: the selected ProfilerSteps, the steady
state after the one-time costs, or the whole trace).

The coverage table also carries the rank's unclassified kernel time
(:mod:`hta.analysis.findings.unclassified`), a gap of the tool's kind rules reported here
as a note, never as a finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.findings import unclassified as unknown_kinds
from hta.analysis.findings.base import link, rank_work, step_table
from hta.analysis.findings.claims import difference
from hta.analysis.findings.hostbound import host_gaps, queued_idle, unlinked_idle
from hta.analysis.findings.rule_tools import fmt_time, name_matches
from hta.analysis.findings.sharing import KeptTime
from hta.analysis.findings.warmup import window_text
from hta.analysis.gpu_work import COMM, COMPUTE, MEMORY
from hta.analysis.idle import DEFAULT_CONSECUTIVE_KERNEL_DELAY_NS
from hta.analysis.intervals import Cover, union_length
from hta.model.rules import KIND_CODE, RUNTIME_KINDS, kind_mask
from hta.model.trace import RankTrace

#: Idle share of the window above which the findings must explain most of the idle time.
IDLE_FLAG_SHARE = 0.20
#: Share of the idle time the findings must explain on such a rank.
EXPLAINED_ENOUGH = 0.5
#: Unexplained pieces listed per rank.
TOP_PIECES = 5
#: CPU names and annotations listed per piece.
TOP_NAMES = 3

COLUMNS = ["rank", "window(us)", "not_computing(us)", "idle(us)", "exposed_comm(us)",
           "exposed_memory(us)", "explained(us)", "unexplained(us)", "explained_pctg",
           "idle_pctg", "idle_explained_pctg", "saving(us)", "unclassified(us)",
           "unclassified_pctg", "note", "unclassified_note", "idle_attributed_pctg",
           "idle_causes", "window"]
#: The classes of idle time no finding holds (:func:`idle_causes`), in order, with their
#: text; ``queued`` and ``unexplained`` are what the trace lacks the information for.
CAUSE_TEXT = {
    "host": "host gaps under the findings' noise floor",
    "start": "before the rank's first GPU work (work queued before the trace began may run)",
    "end": "after the rank's last GPU work",
    "switch": "kernel switches (gaps of 30 µs or less before queued work)",
    "queued": "queued work waiting on something the trace does not show",
    "unlinked": "work whose launch the trace does not link",
    "unexplained": "unexplained",
}
#: Classes that name no cause: not counted in ``idle_attributed_pctg``.
UNNAMED = ("queued", "unlinked", "unexplained")
#: Longest gap before queued work that counts as the GPU's own switch from one kernel to
#: the next (ns): the idle breakdown's kernel-wait threshold
#: (:data:`hta.analysis.idle.DEFAULT_CONSECUTIVE_KERNEL_DELAY_NS`).
KERNEL_SWITCH_NS = DEFAULT_CONSECUTIVE_KERNEL_DELAY_NS
#: Runtime calls that record a dependency between streams or on an event.
DEPENDENCY_CALLS = re.compile(r"(?i)StreamWaitEvent|EventRecord|waitOnEvent")
PIECE_COLUMNS = ["rank", "start_ns", "end_ns", "dur(us)", "step", "gpu", "cpu",
                 "annotations"]

_CPU_KINDS = ("cpu_op", *sorted(RUNTIME_KINDS))
_ANNOTATION = KIND_CODE["user_annotation"]


def rank_coverage(rt: RankTrace, iterations: list[int] | None, window: tuple[int, int],
                  kept: KeptTime) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The coverage row of one rank (ns fields) and its largest unexplained pieces."""
    w = rank_work(rt)
    lo, hi = window
    win = (np.array([lo]), np.array([hi]))

    def cover(sel: np.ndarray) -> Cover:
        return Cover(np.clip(w.ts[sel], lo, hi), np.clip(w.end[sel], lo, hi))

    compute, comm, memory = cover(w.cls == COMPUTE), cover(w.cls == COMM), \
        cover(w.cls == MEMORY)
    busy = cover(w.cls >= 0)
    free_s, free_e, _ = difference(*win, compute)          # not computing
    idle_s, idle_e, _ = difference(*win, busy)
    idle = int((idle_e - idle_s).sum())
    comm_s, comm_e, _ = difference(comm.s, comm.e, compute)
    exposed_comm = int((comm_e - comm_s).sum())
    not_computing = int((free_e - free_s).sum())
    explained = int(kept.cover.within(free_s, free_e).sum())
    idle_explained = int(kept.cover.within(idle_s, idle_e).sum())
    u_s, u_e, _ = difference(free_s, free_e, kept.cover)
    u = unknown_kinds.unclassified_time(rt, iterations, window)
    row = {
        "rank": rt.rank, "window_ns": hi - lo, "not_computing_ns": not_computing,
        "idle_ns": idle, "exposed_comm_ns": exposed_comm,
        "exposed_memory_ns": not_computing - idle - exposed_comm,
        "explained_ns": explained, "idle_explained_ns": idle_explained,
        "unclassified_ns": u.time_ns, "unclassified_share": u.share,
        "unclassified_note": unknown_kinds.note(u),
    }
    causes = idle_causes(rt, idle_s, idle_e, kept)
    row["idle_causes_ns"] = causes
    runtime = np.flatnonzero(kind_mask(rt.kind_codes(), RUNTIME_KINDS))
    row["dependency_calls"] = int(name_matches(rt, runtime, DEPENDENCY_CALLS).sum())
    row["window_text"] = window_text(rt, iterations)
    chosen = np.sort(np.argsort(-(u_e - u_s), kind="stable")[:TOP_PIECES])
    host = _Host.of(rt) if chosen.size else None
    a, b = u_s[chosen], u_e[chosen]  # each cover read once for every piece
    pieces = [_piece(host, int(a[k]), int(b[k]), *within)  # type: ignore[arg-type]
              for k, within in enumerate(zip(busy.within(a, b).tolist(),
                                             comm.within(a, b).tolist(),
                                             memory.within(a, b).tolist(), strict=True))]
    pieces.sort(key=lambda p: -p["dur_ns"])
    row["note"] = _note(row, pieces)
    return row, pieces


def idle_causes(rt: RankTrace, idle_s: np.ndarray, idle_e: np.ndarray, kept: KeptTime
                ) -> dict[str, int]:
    """The idle time of the window (``idle_s``, ``idle_e``: disjoint sorted stretches) by
    cause, top-down, each nanosecond once: first the rules whose findings (and notes) hold
    it, then, for the rest, :data:`CAUSE_TEXT`'s classes in order: ``host`` (a host gap of
    :mod:`~hta.analysis.findings.hostbound` no finding holds), ``start`` (before the
    rank's first GPU work: the GPU may still run work queued before the trace began, which
    the trace does not show), ``end`` (after the rank's last GPU work: nothing left to wait
    for), ``switch`` (a gap of at most
    :data:`KERNEL_SWITCH_NS` before work submitted while the GPU was busy: the GPU's own
    switch from one kernel to the next), ``queued`` (a longer such gap: the work waited on a
    stream, an event or another process the trace does not record), ``unlinked`` (the next
    work has no launch call in the trace), ``unexplained``. The largest first."""
    out: dict[str, int] = {}
    for rule, cov in kept.by_rule.items():
        part = int(cov.within(idle_s, idle_e).sum())
        if part > 0:
            out[rule] = part
    s, e, _ = difference(idle_s, idle_e, kept.cover)
    ev = rt.events
    hg = host_gaps(rt)
    w = rank_work(rt)
    last = int(w.end.max()) if len(w) else int(ev["ts"].min()) if len(ev) else 0
    end_cover = Cover(np.array([last]), np.array([max(last, int(e.max()) if e.size else last)]))
    first = int(w.ts.min()) if len(w) else last  # the idle before it starts the window
    start_cover = Cover(np.array([min(int(s.min()), first) if s.size else first]),
                        np.array([first]))
    queued = queued_idle(rt)
    short = (queued.e - queued.s) <= KERNEL_SWITCH_NS
    for name, cover in (("host", Cover(hg.start, hg.end)), ("start", start_cover),
                        ("end", end_cover),
                        ("switch", Cover(queued.s[short], queued.e[short])),
                        ("queued", queued), ("unlinked", unlinked_idle(rt))):
        part = int(cover.within(s, e).sum())
        if part > 0:
            out[name] = part
        s, e, _ = difference(s, e, cover)
    rest = int((e - s).sum())
    if rest > 0:
        out["unexplained"] = rest
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def causes_text(causes: dict[str, int], idle: int) -> str:
    """``host_bound 62%, data_loading 30%, queued work waiting on ... 8%``."""
    if idle <= 0:
        return ""
    return ", ".join(f"{CAUSE_TEXT.get(k, k)} {100 * v / idle:.0f}%" for k, v in causes.items()
                     if v >= 0.005 * idle)


def _note(row: dict[str, Any], pieces: list[dict[str, Any]]) -> str:
    """The rank's note on unexplained idle time (module docstring), or ``""``: what the
    trace lacks first (it is what a reader can act on), then the longest stretch."""
    window, idle = row["window_ns"], row["idle_ns"]
    flagged = idle > 0 and window > 0 and idle > IDLE_FLAG_SHARE * window
    lacks = _lacks(row) if flagged else []
    notes = []
    if flagged and idle < window and row["idle_explained_ns"] < EXPLAINED_ENOUGH * idle:
        text = (f"The GPU is idle {100 * idle / window:.0f}% of the window and the findings "
                f"explain {100 * row['idle_explained_ns'] / idle:.0f}% of that idle time: "
                f"{NO_CAUSE}")
        text += "".join(f" {x}" for x in lacks)
        lacks = []
        if pieces:
            p = pieces[0]
            text += (f" Longest unexplained stretch: {fmt_time(p['dur_ns'])} in "
                     f"{_step_text(p['step'])} ({p['gpu']}); CPU: {p['cpu'] or 'nothing recorded'}"
                     f"{'; under ' + p['annotations'] if p['annotations'] else ''}.")
        notes.append(text)
    return " ".join(notes + lacks)


def _lacks(row: dict[str, Any]) -> list[str]:
    """What the trace lacks to explain the queued and unlinked idle time, when either is a
    tenth of the idle time or more."""
    idle = row["idle_ns"]
    causes = row.get("idle_causes_ns", {})
    out = []
    if causes.get("queued", 0) >= 0.1 * idle:
        has = row.get("dependency_calls", 0)
        out.append(
            f"{100 * causes['queued'] / idle:.0f}% of the idle time the GPU had work queued "
            f"that did not start: it waited on something the trace does not record (a "
            f"stream wait or event, another process, a device-side dependency); "
            + ("the trace holds no stream-wait or event-record call at all (a sampled or "
               "filtered trace?): a full trace, with the profiler's CUDA sync events, "
               "would tell." if not has else
               f"the trace's {has} stream-wait and event-record calls do not cover these "
               f"waits: a trace of the other processes or streams would tell."))
    if causes.get("unlinked", 0) >= 0.1 * idle:
        out.append(
            f"{100 * causes['unlinked'] / idle:.0f}% of the idle time ends at GPU work the "
            f"trace links to no launch call (no correlation id): whether the host or a "
            f"dependency held it cannot be told.")
    return out


#: The note's claim that nothing explains the idle time, replaced when a note (an info
#: finding) of the rank does.
NO_CAUSE = "no rule names the cause of the rest."
CAPTURE_CAUSE = ("the graph_capture note says why: the trace captures CUDA/HIP graphs and "
                 "replays none, so this is warm-up time, not a step's.")


def with_notes(note: str, info_rules: list[str]) -> str:
    """The coverage note of a rank, told which info findings (notes) the rank has: on a
    capture-only rank the idle time is explained by the ``graph_capture`` note."""
    if note and "graph_capture" in info_rules:
        return note.replace(NO_CAUSE, CAPTURE_CAUSE)
    return note


def _step_text(step: int) -> str:
    return f"step {step}" if step >= 0 else "no ProfilerStep"


@dataclass
class _Host:
    """The rank's CPU events the pieces are described with, gathered once: operators and
    runtime calls (``cpu``), user annotations but ``ProfilerStep#`` (``ann``)."""

    rt: RankTrace
    #: the steps (:func:`~hta.analysis.findings.events.step_table`) as arrays: number,
    #: start and end (ns)
    steps: tuple[np.ndarray, np.ndarray, np.ndarray]
    parent: np.ndarray
    slot: np.ndarray
    cpu: np.ndarray
    ann: np.ndarray
    #: per list of rows (by id): their starts and running maximum of ends (None when
    #: the starts are not ascending)
    _order: dict[int, tuple[np.ndarray, np.ndarray | None]] = field(default_factory=dict)

    @classmethod
    def of(cls, rt: RankTrace) -> _Host:
        ev = rt.events
        codes = rt.kind_codes()
        ann = np.flatnonzero(codes == _ANNOTATION)
        names = rt.column("name")[ann]
        uniq, inv = np.unique(names, return_inverse=True)
        step = np.array([rt.symbols[i].startswith("ProfilerStep#") for i in uniq.tolist()],
                        dtype=bool)
        steps = step_table(rt)
        return cls(rt, (steps["step"].to_numpy(), steps["start_ns"].to_numpy(),
                        steps["end_ns"].to_numpy()), link(rt, "parent"),
                   np.full(len(ev), -1, dtype=np.int64),
                   np.flatnonzero(kind_mask(codes, _CPU_KINDS)),
                   ann[~step[inv.reshape(-1)]] if ann.size else ann)

    def overlapping(self, rows: np.ndarray, a: int, b: int) -> np.ndarray:
        """The ones of ``rows`` (``cpu`` or ``ann``) that overlap ``[a, b)``, in their
        order. Rows in start order (the events table is sorted by start) are tested only
        over the stretch that can overlap: from the first whose running maximum of ends
        passes ``a`` to the last starting before ``b``."""
        ts, end = self.rt.column("ts"), self.rt.column("end")
        key = id(rows)
        if key not in self._order:
            starts = ts[rows]
            ordered = not (starts.size > 1 and (starts[1:] < starts[:-1]).any())
            self._order[key] = (starts, np.maximum.accumulate(end[rows]) if ordered
                                else None)
        starts, reach = self._order[key]
        if reach is None:
            return rows[(starts < b) & (end[rows] > a)]
        hi = int(np.searchsorted(starts, b, side="left"))
        lo = int(np.searchsorted(reach[:hi], a, side="right"))
        part = rows[lo:hi]
        return part[end[part] > a]


def _piece(host: _Host, a: int, b: int, in_busy: int, in_comm: int, in_mem: int
           ) -> dict[str, Any]:
    """One unexplained piece ``[a, b)``: its step, what the GPU and the CPU did (the GPU
    busy ``in_busy`` ns of it, communicating ``in_comm`` and copying ``in_mem``)."""
    length = b - a
    idle = length - int(in_busy)
    in_comm, in_mem = int(in_comm), int(in_mem)
    gpu = "idle" if idle * 2 >= length else (
        "exposed communication" if in_comm >= in_mem else "exposed memory")
    step, start, end = host.steps
    at = step[(start <= a) & (end > a)]
    return {"rank": host.rt.rank, "start_ns": a, "end_ns": b, "dur_ns": length,
            "step": int(at[0]) if len(at) else -1, "gpu": gpu,
            "cpu": _cpu_activity(host, a, b), "annotations": _annotations(host, a, b)}


def _cpu_activity(host: _Host, a: int, b: int) -> str:
    """``aten::to 62% (1.2 ms), ...``: exclusive time of CPU ops and runtime calls in
    ``[a, b)``, the largest first; led by ``no operator or runtime call for N% of it``
    when none runs for more than half of the piece."""
    ts, end = host.rt.column("ts"), host.rt.column("end")
    rows = host.overlapping(host.cpu, a, b)
    if rows.size == 0:
        return ""
    overlap = (np.minimum(end[rows], b) - np.maximum(ts[rows], a)).astype(np.int64)
    parent, slot = host.parent, host.slot
    slot[rows] = np.arange(rows.size)
    up = parent[rows]
    for _ in range(256):  # the nearest ancestor that is also a listed row
        climb = (up >= 0) & (slot[np.maximum(up, 0)] < 0)
        if not climb.any():
            break
        up = np.where(climb, parent[np.maximum(up, 0)], up)
    owner = np.where(up >= 0, slot[np.maximum(up, 0)], -1)
    slot[rows] = -1
    nested = np.zeros(rows.size, dtype=np.int64)
    np.add.at(nested, owner[owner >= 0], overlap[owner >= 0])
    own = np.maximum(overlap - nested, 0)
    top = _top(host.rt, host.rt.column("name")[rows], own, b - a)
    quiet = (b - a) - union_length(np.maximum(ts[rows], a), np.minimum(end[rows], b))
    if quiet * 2 > b - a:
        return f"no operator or runtime call for {100 * quiet / (b - a):.0f}% of it" + (
            f"; {top}" if top else "")
    return top


def _annotations(host: _Host, a: int, b: int) -> str:
    """The user annotations overlapping ``[a, b)`` most (innermost first on ties)."""
    ts, end = host.rt.column("ts"), host.rt.column("end")
    rows = host.overlapping(host.ann, a, b)
    if rows.size == 0:
        return ""
    names = host.rt.column("name")[rows]
    overlap = np.minimum(end[rows], b) - np.maximum(ts[rows], a)
    order = np.lexsort(((end - ts)[rows], -overlap))
    seen: list[str] = []
    for i in order.tolist():
        name = host.rt.symbols[names[i]]
        if name not in seen:
            seen.append(name)
        if len(seen) == TOP_NAMES:
            break
    return ", ".join(seen)


def _top(rt: RankTrace, ids: np.ndarray, weight: np.ndarray, length: int) -> str:
    # per name (ascending ids), the largest total first, ties in id order
    uniq, inverse = np.unique(ids, return_inverse=True)
    total = np.zeros(uniq.size, dtype=np.asarray(weight).dtype)
    np.add.at(total, inverse.reshape(-1), weight)
    order = np.argsort(-total, kind="stable")[:TOP_NAMES]
    parts = [f"{rt.symbols[int(uniq[j])]} {100 * total[j] / length:.0f}% "
             f"({fmt_time(total[j])})"
             for k, j in enumerate(order.tolist())
             if total[j] > 0 and (k == 0 or total[j] >= 0.01 * length)]
    return ", ".join(parts)


# -- the tables -----------------------------------------------------------------------------
def coverage_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The coverage rows of :func:`rank_coverage` (with ``saving_ns``) as :data:`COLUMNS`,
    ranks ascending."""
    out = []
    for r in sorted(rows, key=lambda r: int(r["rank"])):
        nc, idle, window = r["not_computing_ns"], r["idle_ns"], r["window_ns"]
        out.append({
            "rank": int(r["rank"]), "window(us)": window / 1e3,
            "not_computing(us)": nc / 1e3, "idle(us)": idle / 1e3,
            "exposed_comm(us)": r["exposed_comm_ns"] / 1e3,
            "exposed_memory(us)": r["exposed_memory_ns"] / 1e3,
            "explained(us)": r["explained_ns"] / 1e3,
            "unexplained(us)": (nc - r["explained_ns"]) / 1e3,
            "explained_pctg": _pct(r["explained_ns"], nc),
            "idle_pctg": _pct(idle, window),
            "idle_explained_pctg": _pct(r["idle_explained_ns"], idle),
            "saving(us)": int(r.get("saving_ns", 0)) / 1e3,
            "unclassified(us)": r["unclassified_ns"] / 1e3,
            "unclassified_pctg": round(100.0 * r["unclassified_share"], 2),
            "note": r["note"], "unclassified_note": r["unclassified_note"],
            "idle_attributed_pctg": _pct(idle - sum(
                v for k, v in r.get("idle_causes_ns", {}).items() if k in UNNAMED), idle),
            "idle_causes": causes_text(r.get("idle_causes_ns", {}), idle),
            "window": r.get("window_text", ""),
        })
    return pd.DataFrame(out, columns=COLUMNS)


def piece_table(pieces: list[dict[str, Any]]) -> pd.DataFrame:
    """The unexplained pieces as :data:`PIECE_COLUMNS`, per rank the longest first."""
    rows = [{**{k: p[k] for k in PIECE_COLUMNS if k in p}, "dur(us)": p["dur_ns"] / 1e3}
            for p in pieces]
    return pd.DataFrame(rows, columns=PIECE_COLUMNS)


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole > 0 else float("nan")


__all__ = ["CAUSE_TEXT", "COLUMNS", "EXPLAINED_ENOUGH", "IDLE_FLAG_SHARE", "PIECE_COLUMNS",
           "TOP_PIECES", "UNNAMED", "causes_text", "coverage_table", "idle_causes",
           "piece_table", "rank_coverage"]
