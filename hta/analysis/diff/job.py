"""Job-level comparison: every figure per step, so traces of different lengths compare."""


from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.diff.metrics import (
    _idle_metrics,
    _kernel_type_metrics,
    _overlap_metrics,
    _step_metrics,
    _summary_frame,
    _temporal_metrics,
)
from hta.analysis.diff.per_name import _group_texts, summed_by_name
from hta.analysis.diff.scope import (
    _WORK_CODES,
    DEFAULT_THRESHOLD_PCT,
    MIN_DELTA_US,
    NO_OPERATOR,
    Iterations,
)
from hta.analysis.diff.sides import _Side, _side, _steps_rows
from hta.analysis.diff.vendors import device_names, devices_note, pair_frames
from hta.analysis.gpu_work import CLASS_NAMES, work_class
from hta.analysis.names import short_name
from hta.model.declared import PER_STEP, WHOLE, Analysis, Columns
from hta.model.job import Job
from hta.model.rules import codes_in
from hta.model.runner import run
from hta.model.selection import Ranks, Selection
from hta.model.trace import RankTrace


# -- job-level comparison -------------------------------------------------------------------
@dataclass
class JobDiff:
    """Result of :func:`job_diff`. Every time is µs per step (see :func:`job_diff`)."""

    #: One row per (side, rank, iteration): ``side``, ``rank``, ``iteration``,
    #: ``step_time(us)``.
    steps: pd.DataFrame
    #: ``section``, ``metric``, ``control``, ``test``, ``delta`` (test - control),
    #: ``delta_pctg`` (100 * delta / control; NaN for ``*_pctg`` metrics and control 0).
    summary: pd.DataFrame
    #: GPU time per kernel name (see :func:`job_diff`).
    kernels: pd.DataFrame
    #: GPU time per launching operator name.
    operators: pd.DataFrame
    verdict: str
    notes: list[str] = field(default_factory=list)
    threshold_pct: float = DEFAULT_THRESHOLD_PCT

    def regressions(self, by: str = "kernel", top: int | None = 10) -> pd.DataFrame:
        """Names whose GPU time per step grew beyond the thresholds (``status`` ``slower``
        or ``added``), largest absolute growth first."""
        table = self._table(by)
        grew = (table["delta_time(us)"] > 0) & table["status"].isin(["slower", "added"])
        out = table[grew].sort_values(
            ["delta_time(us)", "name"], ascending=[False, True], kind="stable")
        return out.head(top).reset_index(drop=True) if top is not None else out.reset_index(
            drop=True)

    def improvements(self, by: str = "kernel", top: int | None = 10) -> pd.DataFrame:
        """Names whose GPU time per step shrank beyond the thresholds (``status`` ``faster``
        or ``removed``), largest absolute saving first."""
        table = self._table(by)
        shrank = (table["delta_time(us)"] < 0) & table["status"].isin(["faster", "removed"])
        out = table[shrank].sort_values(
            ["delta_time(us)", "name"], ascending=[True, True], kind="stable")
        return out.head(top).reset_index(drop=True) if top is not None else out.reset_index(
            drop=True)

    def metric(self, metric: str, section: str | None = None) -> pd.Series:
        """One row of ``summary`` (``control``, ``test``, ``delta``, ``delta_pctg``)."""
        rows = self.summary[self.summary["metric"] == metric]
        if section is not None:
            rows = rows[rows["section"] == section]
        if len(rows) != 1:
            raise KeyError(f"metric {metric!r} (section {section!r}) matches {len(rows)} rows "
                           "of the summary; see JobDiff.summary for the names.")
        return rows.iloc[0]

    def _table(self, by: str) -> pd.DataFrame:
        if by in ("kernel", "kernels"):
            return self.kernels
        if by in ("op", "ops", "operator", "operators"):
            return self.operators
        raise ValueError(f"by={by!r}: use \"kernel\" or \"operator\".")

    def to_dict(self, top: int | None = 10) -> dict[str, Any]:
        """JSON-ready content (NaN stays NaN: the CLI turns it into null)."""
        def rec(df: pd.DataFrame) -> list[dict[str, Any]]:
            return df.to_dict(orient="records")
        return {
            "verdict": self.verdict,
            "notes": list(self.notes),
            "threshold_pct": self.threshold_pct,
            "summary": rec(self.summary),
            "steps": rec(self.steps),
            "regressions": {"kernels": rec(self.regressions("kernel", top)),
                            "operators": rec(self.regressions("operator", top))},
            "improvements": {"kernels": rec(self.improvements("kernel", top)),
                             "operators": rec(self.improvements("operator", top))},
        }




def job_diff(
    control: Job, test: Job, *, control_ranks: Ranks = None,
    test_ranks: Ranks = None,
    control_iterations: Iterations = None, test_iterations: Iterations = None,
    use_short_name: bool = False, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
) -> JobDiff:
    """Compare two jobs: step time, GPU time breakdowns, GPU time per kernel and operator.

    **Selection.** Each side uses its selected ranks (default all) and ``ProfilerStep``
    iterations (default all its steps). Only events of the selected steps count (events
    outside every step, such as a final synchronize, do not). A trace without
    ``ProfilerStep`` counts as one step holding every event.

    **Per step.** Every time is normalised per step so that traces with different numbers
    of steps compare: for a rank with ``n_r`` selected steps and a total ``x_r`` over them,
    the job's figure is ``mean over ranks of x_r / n_r`` (µs). Percentages are recomputed
    from those per-step times.

    **summary** rows (``section``: metrics):

    * ``steps``: ``ranks``, ``steps_per_rank`` (mean), ``step_time_mean(us)``,
      ``step_time_median(us)``, ``step_time_max(us)``: the mean, median and maximum over
      ranks of each rank's mean ``ProfilerStep`` duration (``step_table``);
    * ``gpu_time``: from :func:`hta.analysis.temporal.temporal_breakdown_detail` (each
      step its own window): ``kernel_time(us)`` (GPU span), ``busy_time(us)``
      (span - idle), ``compute_time(us)``, ``exposed_comm_time(us)``,
      ``exposed_memory_time(us)``, ``idle_time(us)``, ``comm_time(us)``,
      ``memory_time(us)``, and ``compute_time_pctg``, ``exposed_comm_time_pctg``,
      ``exposed_memory_time_pctg``, ``idle_time_pctg`` (100 x part / span);
    * ``kernel_types``: from :func:`hta.analysis.kernels.kernel_type_breakdown` (memory
      included): ``<type>(us)`` and ``<type>_pctg`` (share of GPU busy time) per class
      (``COMPUTATION``, ``COMPUTATION overlapping COMMUNICATION`` ...);
    * ``overlap``: from :func:`hta.analysis.overlap.comm_comp_overlap`:
      ``comm_time(us)``, ``overlap_time(us)``, ``comp_comm_overlap_pctg`` (100 x overlap /
      comm, NaN without communication);

      these two sections take the union of the GPU work of all selected steps together,
      whereas ``gpu_time`` sums per-step windows: when work launched in one step still
      runs while the next step's work does, that moment counts once in the kernel types
      and once per step in ``gpu_time``, so the kernel-type times can add up to less than
      ``busy_time(us)``;
    * ``stream_idle_summed_over_streams``: from
      :func:`hta.analysis.idle.idle_time_breakdown`, each stream's idle gaps summed over
      streams (not ``gpu_time``'s ``idle_time(us)``, when no stream is busy):
      ``host_wait(us)``, ``kernel_wait(us)``, ``other(us)``, ``total(us)`` and each
      category's ``*_pctg`` share of the total.

    ``delta`` = test - control; ``delta_pctg`` = 100 x delta / control (NaN for ``*_pctg``
    rows, whose ``delta`` is in percentage points, and when control is 0).

    **kernels** (GPU work: kernels, memcpy, memset) and **operators** (the same GPU work
    grouped by the innermost ``cpu_op`` around its launch, :data:`NO_OPERATOR` when none),
    one row per name: ``control_count``, ``test_count`` (events per step),
    ``control_time(us)``, ``test_time(us)`` (sum of durations per step),
    ``delta_time(us)``, ``delta_pctg``, and ``status``: ``added`` (control count 0),
    ``removed`` (test count 0), ``slower``/``faster`` (``|delta_pctg| >= threshold_pct``),
    else ``unchanged``. Kernels also carry ``kernel_type``. Sorted by ``delta_time(us)``,
    largest growth first.

    **verdict**: ``"step time 12.3 ms -> 10.1 ms (-17.9%)"`` from ``step_time_mean(us)``;
    without steps on a side, ``"GPU span 272.4 ms -> 195.1 ms (-28.4%) per trace; GPU busy
    time ..."`` from ``kernel_time(us)`` (first GPU work to last: how long the traced work
    took) and ``busy_time(us)`` (the busy time alone where a side has no GPU work). Each
    side's time is in its own unit (``47.2 ms -> 1.21 s``).

    Example: control 2 steps of 10 ms on one rank, kernel ``k`` 4 x 1 ms; test 4 steps of
    8 ms, ``k`` 8 x 1.5 ms: step time 10 ms -> 8 ms (-20.0%); ``k`` 2 per step both sides,
    2000 -> 3000 µs per step, +1000 µs (+50%), ``slower``.
    """
    if threshold_pct < 0 or not math.isfinite(threshold_pct):
        raise ValueError(f"threshold_pct must be a non-negative percentage, got "
                         f"{threshold_pct!r}.")
    c = _side(control, Selection.of(control_ranks, control_iterations))
    t = _side(test, Selection.of(test_ranks, test_iterations))
    notes = _notes(c, t)
    steps = pd.concat([_steps_rows("control", c), _steps_rows("test", t)], ignore_index=True)
    rows: list[tuple[str, str, float, float]] = []
    rows += _step_metrics(c, t)
    rows += _temporal_metrics(c, t)
    rows += _kernel_type_metrics(c, t)
    rows += _overlap_metrics(c, t)
    rows += _idle_metrics(c, t)
    summary = _summary_frame(rows)
    names_c, names_t = _per_name(c, use_short_name), _per_name(t, use_short_name)
    kernels = _name_diff(names_c["kernel"], names_t["kernel"], threshold_pct, True)
    operators = _name_diff(names_c["operator"], names_t["operator"], threshold_pct, False)
    verdict = _verdict(summary, c, t)
    return JobDiff(steps, summary, kernels, operators, verdict, notes, threshold_pct)


def _notes(c: _Side, t: _Side) -> list[str]:
    notes = []
    for label, side in (("control", c), ("test", t)):
        if not side.has_steps:
            notes.append(f"{label} has no ProfilerStep: the whole trace counts as one step")
    if c.has_steps and t.has_steps:
        nc = np.mean(list(c.n_steps.values()))
        nt = np.mean(list(t.n_steps.values()))
        if nc != nt:
            notes.append(f"steps per rank differ ({nc:g} vs {nt:g}): every time is per step")
    if len(c.ranks) != len(t.ranks):
        notes.append(f"ranks differ ({len(c.ranks)} vs {len(t.ranks)}): every time is a "
                     "mean over ranks")
    gpu = {label: _has_gpu_work(side) for label, side in (("control", c), ("test", t))}
    if gpu["control"] != gpu["test"]:
        cpu, other = ("control", "test") if not gpu["control"] else ("test", "control")
        notes.append(f"devices differ: {cpu} has no GPU work (a CPU-only trace), {other} "
                     "has: its GPU times compare with nothing; compare the step times and "
                     "the operators")
        return notes
    devices = devices_note(device_names(c.trace, c.ranks), device_names(t.trace, t.ranks))
    return notes + ([devices] if devices else [])


def _has_gpu_work(side: _Side) -> bool:
    """True when a selected rank of the side has GPU work (kernels, copies, memsets)."""
    return bool(HAS_GPU_WORK.run(side.trace, Selection.of(side.ranks))["gpu_work"].any())


def rank_has_gpu_work(rt: RankTrace) -> pd.DataFrame:
    """One rank's :data:`HAS_GPU_WORK` row: whether it holds GPU work."""
    return pd.DataFrame({"gpu_work": [bool(codes_in(rt.kind_codes(),
                                                   _WORK_CODES).any())]})


#: Per rank: whether it holds GPU work (kernels, copies, memsets).
HAS_GPU_WORK = Analysis("GPU work", rank_has_gpu_work,
                        Columns.of({"rank": "int64", "gpu_work": "bool"}), steps=WHOLE,
                        add_rank=True)




def _per_name(side: _Side, use_short_name: bool) -> dict[str, pd.DataFrame]:
    """Per kernel name (``"kernel"``) and per launching operator (``"operator"``): events
    per step, time (µs) per step and (kernels) the kernel type, from each rank's totals
    (:data:`WORK_NAMES`, both read in one visit of each rank, where it is)."""
    works = [WORK_NAMES.work(side.iterations, by) for by in BY]
    tables = run(side.trace, works, Selection.of(side.ranks), description=WORK_NAMES.name)
    return {by: _named(side, table, by, use_short_name)
            for by, table in zip(BY, tables, strict=True)}


#: The two ways the diff groups GPU work by name.
BY = ("kernel", "operator")


def _named(side: _Side, per_rank: pd.DataFrame, by: str, use_short_name: bool
           ) -> pd.DataFrame:
    """One grouping's table from the ranks' totals: each rank's weighted by its number of
    steps, then the mean over the ranks."""
    if len(per_rank):
        weight = per_rank["rank"].map({r: 1.0 / side.n_steps[r] for r in side.ranks})
        per_rank = per_rank.assign(count=per_rank["count"] * weight.to_numpy(),
                                   time=per_rank["time"] * weight.to_numpy())
    names, (count, time) = summed_by_name(per_rank, ["count", "time"])
    # in symbol order, as the names of one short name add up
    order = np.argsort(per_rank.groupby("name")["sid"].min().reindex(names).to_numpy(),
                       kind="stable") if names else np.zeros(0, dtype=np.int64)
    n = len(side.ranks)
    values: dict[str, np.ndarray] = {"count": np.asarray(count, dtype=float)[order] / n,
                                     "time(us)": np.asarray(time, dtype=float)[order] / n / 1e3}
    frame = _group_texts([names[i] for i in order.tolist()], values, use_short_name)
    if by == "kernel":
        labels = np.asarray(CLASS_NAMES + ("",), dtype=object)
        ordered = per_rank.sort_values("rank", kind="stable")
        # a name's type: the first rank's that has one (in rank order), each rank's from
        # its name's last event; listed in symbol order, as the first type of a short name
        kinds = ordered[ordered["kind"] >= 0].drop_duplicates("name")
        first_sid = ordered.groupby("name")["sid"].min()
        types = pd.DataFrame({"name": first_sid.index.to_numpy(dtype=object),
                              "sid": first_sid.to_numpy()})
        types["kernel_type"] = labels[types["name"].map(
            kinds.set_index("name")["kind"]).fillna(-1).astype(np.int64).to_numpy()]
        types = types.sort_values("sid", kind="stable")
        if use_short_name:
            types["name"] = [short_name(x) for x in types["name"]]
        first = types.groupby("name", sort=True)["kernel_type"].first()
        frame["kernel_type"] = frame["name"].map(first).to_numpy()
    return frame


def rank_work_names(rt: RankTrace, steps: list[int] | None, by: str) -> pd.DataFrame:
    """One rank's :data:`WORK_NAMES` rows: per kernel name (``by="kernel"``) or per name of
    the operator that launched the GPU work (``by="operator"``; :data:`NO_OPERATOR` for
    work launched outside any), over its GPU work of ``steps`` (``None``: every event):
    how many, their summed duration (ns), the symbol id (``sid``) and, for kernels, the
    work class of the name's last event (``kind``, -1 for operators)."""
    ev = rt.events
    keep = codes_in(rt.kind_codes(), _WORK_CODES)
    if steps is not None:
        keep &= np.isin(rt.column("iteration"), steps)
    rows = np.flatnonzero(keep)
    no_op = len(rt.symbols)  # id standing for NO_OPERATOR
    if by == "kernel":
        ids = rt.column("name")[rows].astype(np.int64)
    else:
        op = rt.link("op_index")[rows]
        names = rt.column("name")
        ids = np.where(op >= 0, names[np.clip(op, 0, None)] if len(ev) else 0, no_op)
        ids = ids.astype(np.int64)
    size = no_op + 1
    count = np.bincount(ids, minlength=size)
    time = np.bincount(ids, weights=rt.column("dur")[rows], minlength=size)
    kind = np.full(size, -1, dtype=np.int64)
    if by == "kernel" and rows.size:
        kind[ids] = work_class(ev["kind"].iloc[rows])
    sid = np.flatnonzero(count)
    return pd.DataFrame({
        "name": pd.Series([NO_OPERATOR if i == no_op else rt.symbols[i] for i in sid.tolist()],
                          dtype=object),
        "count": count[sid].astype(np.int64), "time": time[sid].astype(np.float64),
        "sid": sid.astype(np.int64), "kind": kind[sid]})


#: Per rank and kernel (or launching operator) name: GPU events and their summed time.
WORK_NAMES = Analysis("Kernels and operators per name", rank_work_names, Columns.of(
    {"rank": "int64", "name": "object", "count": "int64", "time": "float64", "sid": "int64",
     "kind": "int64"}), steps=PER_STEP, add_rank=True)


def _name_diff(c: pd.DataFrame, t: pd.DataFrame, threshold_pct: float,
               with_type: bool) -> pd.DataFrame:
    cols = ["count", "time(us)"]
    c, t = pair_frames(c, t)
    merged = pd.merge(c, t, on="name", how="outer", suffixes=("_c", "_t"), sort=True)
    for col in cols:
        merged[[f"{col}_c", f"{col}_t"]] = merged[[f"{col}_c", f"{col}_t"]].fillna(0.0)
    out = pd.DataFrame({
        "name": merged["name"].astype(object),
        "control_count": merged["count_c"].to_numpy(dtype=float),
        "test_count": merged["count_t"].to_numpy(dtype=float),
        "control_time(us)": merged["time(us)_c"].to_numpy(dtype=float),
        "test_time(us)": merged["time(us)_t"].to_numpy(dtype=float),
    })
    if with_type:
        kt = merged["kernel_type_c"].where(merged["kernel_type_c"].notna(),
                                           merged["kernel_type_t"]) if len(merged) else []
        out.insert(1, "kernel_type", pd.Series(kt, dtype=object).fillna("").to_numpy())
    out["delta_time(us)"] = out["test_time(us)"] - out["control_time(us)"]
    ctrl = out["control_time(us)"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        out["delta_pctg"] = np.where(ctrl > 0, 100.0 * out["delta_time(us)"] / ctrl, np.nan)
    out["status"] = _status(out, threshold_pct)
    out = out.sort_values(["delta_time(us)", "name"], ascending=[False, True], kind="stable")
    return out.reset_index(drop=True)


def _status(out: pd.DataFrame, threshold_pct: float) -> np.ndarray:
    cc, tc = out["control_count"].to_numpy(), out["test_count"].to_numpy()
    pct = out["delta_pctg"].to_numpy()
    big = np.abs(out["delta_time(us)"].to_numpy()) >= MIN_DELTA_US
    with np.errstate(invalid="ignore"):
        slower = np.isfinite(pct) & (pct > 0) & (pct >= threshold_pct) & big
        faster = np.isfinite(pct) & (pct < 0) & (-pct >= threshold_pct) & big
    return np.select([(cc == 0) & (tc > 0), (cc > 0) & (tc == 0), slower, faster],
                     ["added", "removed", "slower", "faster"], "unchanged").astype(object)


def format_time_pair(control_us: float, test_us: float) -> tuple[str, str]:
    """Two µs values, each in its own unit (:func:`format_time`), so that neither reads
    ``0.0 s`` beside the other's seconds; with more decimals (up to three more) when the
    usual ones would print two different values alike (``1.9 ms -> 1.9 ms``)."""
    for extra in range(4):
        a, b = format_time(control_us, extra), format_time(test_us, extra)
        if a != b or control_us == test_us:
            break
    return a, b


def format_time(us: float, extra_decimals: int = 0) -> str:
    """A µs value in the unit that suits it: ``1.23 s``, ``47.2 ms``, ``812.0 µs``
    (``extra_decimals`` more digits after the point)."""
    size = abs(us)
    if size >= 1e6:
        return f"{us / 1e6:,.{2 + extra_decimals}f} s"
    if size >= 1e3:
        return f"{us / 1e3:,.{1 + extra_decimals}f} ms"
    return f"{us:,.{1 + extra_decimals}f} µs"


def _verdict(summary: pd.DataFrame, c: _Side, t: _Side) -> str:
    """The headline: the step time where both sides have steps; else the GPU span (first
    GPU work to last: how long the traced work took), then the GPU busy time."""
    def row(metric: str) -> pd.Series:
        return summary[summary["metric"] == metric].iloc[0]

    def change(metric: str) -> str:
        r = row(metric)
        a, b = format_time_pair(float(r["control"]), float(r["test"]))
        pct = r["delta_pctg"]
        return f"{a} -> {b} ({f'{pct:+.1f}%' if pd.notna(pct) else 'n/a'})"

    busy = row("busy_time(us)")
    gpu_line = (f"; GPU busy time {change('busy_time(us)')} per step"
                if float(busy["control"]) > 0 and float(busy["test"]) > 0 else "")
    if c.has_steps and t.has_steps:
        return f"step time {change('step_time_mean(us)')}{gpu_line}"
    tail = " per trace" if not (c.has_steps or t.has_steps) else \
        " per step (a trace without steps counts as one)"
    span = row("kernel_time(us)")
    if float(span["control"]) > 0 and float(span["test"]) > 0:
        return (f"GPU span {change('kernel_time(us)')}{tail}; GPU busy time "
                f"{change('busy_time(us)')}")
    return f"GPU busy time {change('busy_time(us)')}{tail}"
