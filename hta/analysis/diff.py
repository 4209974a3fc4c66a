"""Trace diff: what changed between a control trace and a test trace.

**Per-name comparison** (:func:`compare_traces`, HTA's ``TraceDiff.compare_traces``). The
events of the selected ranks and ``ProfilerStep`` iterations of each trace are grouped by
name (or by :func:`~hta.analysis.names.short_name`); per name:

* ``{label}_counts``: number of complete events with that name;
* ``{label}_total_duration``: sum of their durations, in µs (HTA's unit and column name);
* ``diff_counts`` = test counts - control counts, ``diff_duration`` = test total - control
  total (µs);
* ``counts_change_categories``: ``"+"`` when ``diff_counts > 0``, ``"-"`` when < 0, else
  ``"="``.

Rows are indexed by ``name`` (or ``short_name``), sorted by that text; a name missing on
one side has 0 counts and duration there. ``device_type`` picks the events: ``"GPU"`` the
events on the GPU timeline (kinds in :data:`hta.model.rules.GPU_KINDS`: kernels, copies,
memsets, GPU sync records, GPU annotations), ``"CPU"`` every other event (operators,
annotations including ``ProfilerStep#N``, Python frames, runtime calls), ``"ALL"`` both.
Iterations: an event belongs to the step it starts in; a GPU event belongs to the step of
its launch call (see :mod:`hta.model.build`). ``iteration=None`` takes the first
``ProfilerStep`` of the selected ranks (HTA's default), ``"all"`` every event, a number or a
list those steps. A trace without ``ProfilerStep`` has every event in iteration 0.

Example: control has ``aten::mm`` twice (3 µs, 5 µs), test once (4 µs) plus ``aten::add``
(1 µs): ``aten::add`` 0 -> 1 (``+``, +1 µs), ``aten::mm`` 2 -> 1 (``-``, 8 -> 4 µs, -4 µs).
:func:`ops_diff` sorts the names into ``added`` (0 -> n), ``deleted`` (n -> 0),
``increased``, ``decreased`` and ``unchanged`` (counts on both sides).

**Job-level comparison** (:func:`job_diff`): step time, the GPU time breakdowns and the GPU
time per kernel and per operator, every figure *per step*, so that traces holding different
numbers of steps compare. Definitions in :func:`job_diff`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import CLASS_NAMES, work_class
from hta.analysis.idle import CATEGORIES as IDLE_CATEGORIES
from hta.analysis.idle import idle_time_breakdown
from hta.analysis.kernels import kernel_type_breakdown
from hta.analysis.names import short_name
from hta.analysis.overlap import comm_comp_overlap
from hta.analysis.rowmap import RowMap
from hta.analysis.select import select_ranks
from hta.analysis.temporal import temporal_breakdown_detail
from hta.model import links
from hta.model.rules import GPU_KINDS, GPU_WORK_KINDS, KIND_CODE, KINDS
from hta.model.trace import RankTrace, Trace

logger = logging.getLogger(__name__)

DEVICE_TYPES = ("ALL", "CPU", "GPU")
#: Operator name of GPU work whose launch is not inside any ``cpu_op``.
NO_OPERATOR = "(no operator)"
#: Relative change of GPU time per step (%) below which a name counts as unchanged.
DEFAULT_THRESHOLD_PCT = 5.0
STATUSES = ("added", "removed", "slower", "faster", "unchanged")

_GPU_CODES = np.array([KIND_CODE[k] for k in KINDS if k in GPU_KINDS], dtype=np.int64)
_WORK_CODES = np.array([KIND_CODE[k] for k in KINDS if k in GPU_WORK_KINDS], dtype=np.int64)
_STEP_KINDS = np.array([KIND_CODE["user_annotation"], KIND_CODE["cpu_op"]], dtype=np.int64)

Ranks = Iterable[int] | int | None
Iterations = Iterable[int] | int | str | None


# -- selection ------------------------------------------------------------------------------
def device_type_name(value: Any) -> str:
    """``"ALL"``, ``"CPU"`` or ``"GPU"`` from a string (any case) or an enum member
    (HTA's ``DeviceType.GPU``)."""
    text = getattr(value, "name", value)
    if isinstance(text, str) and text.upper() in DEVICE_TYPES:
        return text.upper()
    raise ValueError(
        f"device_type={value!r} is not one of {', '.join(DEVICE_TYPES)}; pass e.g. "
        "device_type=\"GPU\" to compare GPU kernels only."
    )


def step_table(trace: Trace, ranks: Ranks = None) -> pd.DataFrame:
    """Every ``ProfilerStep#N`` span of the selected ranks.

    Columns: ``rank``, ``iteration`` (N), ``start``, ``end`` (absolute ns) and
    ``step_time(ns)`` (``end - start``, the CPU span of the step annotation). Steps are the
    ``user_annotation`` or ``cpu_op`` events named exactly ``ProfilerStep#N``, the same spans
    that define the ``iteration`` column. Sorted by rank, then start.
    """
    frames = [_rank_steps(rt) for rt in select_ranks(trace, ranks)]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in
                             ("rank", "iteration", "start", "end", "step_time(ns)")})
    return pd.concat(frames, ignore_index=True)


def _rank_steps(rt: RankTrace) -> pd.DataFrame:
    ev = rt.events
    candidates = np.isin(ev["kind"].cat.codes.to_numpy(), _STEP_KINDS)
    starts, ends, numbers = links.step_spans(
        rt.symbols, ev["name"].to_numpy(), candidates, ev["ts"].to_numpy(), ev["end"].to_numpy())
    return pd.DataFrame({"rank": np.full(starts.size, rt.rank, dtype=np.int64),
                         "iteration": numbers, "start": starts, "end": ends,
                         "step_time(ns)": ends - starts})


def resolve_iterations(trace: Trace, ranks: Ranks, iteration: Iterations) -> list[int] | None:
    """The step numbers to compare: ``None`` means every event.

    ``iteration=None``: the first ``ProfilerStep`` of the selected ranks (HTA's default), or
    every event when the trace has no steps; ``"all"``: every event; a number or list: those
    steps, which must exist on at least one selected rank.
    """
    steps = step_table(trace, ranks)
    available = sorted(set(steps["iteration"].tolist()))
    if isinstance(iteration, str):
        if iteration.lower() != "all":
            raise ValueError(f"iteration={iteration!r}: pass a step number, a list of them, "
                             "None (the first step) or \"all\" (every event).")
        return None
    if iteration is None:
        if not available:
            logger.info("no ProfilerStep in the selected ranks: comparing every event")
            return None
        return available[:1]
    wanted = [int(iteration)] if isinstance(iteration, (int, np.integer)) else [
        int(i) for i in iteration]
    missing = [i for i in wanted if i not in available]
    if missing:
        raise ValueError(
            f"iteration(s) {missing} not found; the selected ranks hold ProfilerStep "
            f"{_brief(available) or 'none'}. Pass one of those, or \"all\" for every event."
        )
    return wanted


def _brief(values: list[int]) -> str:
    return ", ".join(map(str, values[:20])) + (" ..." if len(values) > 20 else "")


def _first_rank(trace: Trace, rank: Ranks) -> list[int]:
    if rank is None:
        loaded = trace.get_ranks()
        if not loaded:
            raise ValueError("the trace holds no rank; load a folder with trace files.")
        return loaded[:1]
    return [rt.rank for rt in select_ranks(trace, rank)]


# -- per-name comparison (HTA's compare_traces) ----------------------------------------------
def name_totals(trace: Trace, ranks: Ranks = None, iterations: Iterable[int] | None = None,
                device_type: Any = "ALL", use_short_name: bool = False) -> pd.DataFrame:
    """Per name (or short name): ``counts`` and ``total_duration(ns)`` over the selected
    ranks, iterations (``None``: every event) and device type. Sorted by name."""
    device = device_type_name(device_type)
    n_sym = len(trace.symbols)
    counts = np.zeros(n_sym, dtype=np.int64)
    total = np.zeros(n_sym, dtype=np.int64)
    for rt in select_ranks(trace, ranks):
        ev = rt.events
        keep = np.ones(len(ev), dtype=bool)
        if device != "ALL":
            on_gpu = np.isin(ev["kind"].cat.codes.to_numpy(), _GPU_CODES)
            keep &= on_gpu if device == "GPU" else ~on_gpu
        if iterations is not None:
            keep &= np.isin(ev["iteration"].to_numpy(), list(iterations))
        names = ev["name"].to_numpy()[keep]
        counts += np.bincount(names, minlength=n_sym)
        total += np.bincount(names, weights=ev["dur"].to_numpy()[keep],
                             minlength=n_sym).astype(np.int64)
    ids = np.flatnonzero(counts)
    return _group_names(trace.symbols, ids, {"counts": counts[ids],
                                             "total_duration(ns)": total[ids]}, use_short_name)


def _group_names(symbols: list[str], ids: np.ndarray, values: dict[str, np.ndarray],
                 use_short_name: bool, extra_names: dict[int, str] | None = None
                 ) -> pd.DataFrame:
    """Sum ``values`` (one entry per id) by the name text of the ids (or its short form)."""
    text = [_text(symbols, i, extra_names) for i in ids.tolist()]
    if use_short_name:
        text = [short_name(t) for t in text]
    frame = pd.DataFrame({"name": pd.Series(text, dtype=object), **values})
    frame = frame.groupby("name", sort=True).sum().reset_index()
    return frame


def _text(symbols: list[str], sid: int, extra: dict[int, str] | None) -> str:
    if extra and sid in extra:
        return extra[sid]
    return symbols[sid]


def compare_name_totals(control: pd.DataFrame, test: pd.DataFrame,
                        control_label: str = "Control", test_label: str = "Test",
                        key: str = "name") -> pd.DataFrame:
    """HTA's comparison table from two :func:`name_totals` tables (see the module docstring).

    Counts are int64; durations are µs (float).
    """
    if control_label == test_label:
        raise ValueError(f"control and test labels are both {control_label!r}; the "
                         "columns would clash. Give them different labels.")
    c = control.set_index("name")
    t = test.set_index("name")
    names = sorted(set(c.index) | set(t.index))
    c = c.reindex(names, fill_value=0)
    t = t.reindex(names, fill_value=0)
    out = pd.DataFrame(index=pd.Index(names, name=key, dtype=object))
    out[f"{control_label}_counts"] = c["counts"].to_numpy(dtype=np.int64)
    out[f"{control_label}_total_duration"] = c["total_duration(ns)"].to_numpy() / 1e3
    out[f"{test_label}_counts"] = t["counts"].to_numpy(dtype=np.int64)
    out[f"{test_label}_total_duration"] = t["total_duration(ns)"].to_numpy() / 1e3
    diff_ns = t["total_duration(ns)"].to_numpy() - c["total_duration(ns)"].to_numpy()
    out["diff_counts"] = out[f"{test_label}_counts"] - out[f"{control_label}_counts"]
    out["diff_duration"] = diff_ns / 1e3
    out["counts_change_categories"] = np.where(
        out["diff_counts"] > 0, "+", np.where(out["diff_counts"] < 0, "-", "="))
    out["counts_change_categories"] = out["counts_change_categories"].astype(object)
    return out


def compare_traces(
    control: Trace, test: Trace, control_rank: Ranks = None, test_rank: Ranks = None,
    control_iteration: Iterations = None, test_iteration: Iterations = None,
    device_type: Any = "ALL", use_short_name: bool = False,
    control_label: str = "Control", test_label: str = "Test",
) -> pd.DataFrame:
    """Counts and total durations per name in two traces, and their differences.

    ``control_rank``/``test_rank``: a rank or a list (their events are pooled); ``None`` is
    the first loaded rank. Iterations, device types and the columns are defined in the module
    docstring; the index is ``name``, or ``short_name`` with ``use_short_name``.
    """
    sides = []
    for trace, rank, iteration in ((control, control_rank, control_iteration),
                                   (test, test_rank, test_iteration)):
        ranks = _first_rank(trace, rank)
        iterations = resolve_iterations(trace, ranks, iteration)
        sides.append(name_totals(trace, ranks, iterations, device_type, use_short_name))
    return compare_name_totals(sides[0], sides[1], control_label, test_label,
                               "short_name" if use_short_name else "name")


def labels_of(table: pd.DataFrame) -> tuple[str, str]:
    """(control label, test label) of a :func:`compare_traces` table, from its columns."""
    labels = [c[: -len("_total_duration")] for c in table.columns
              if str(c).endswith("_total_duration")]
    if len(labels) != 2:
        raise ValueError("expected the table of TraceDiff.compare_traces (two "
                         "'<label>_total_duration' columns); got columns "
                         f"{list(table.columns)}.")
    return labels[0], labels[1]


def ops_diff(table: pd.DataFrame) -> dict[str, list[str]]:
    """Names of a :func:`compare_traces` table sorted into HTA's five groups:

    ``added`` (control 0, test > 0), ``deleted`` (control > 0, test 0), ``increased`` and
    ``decreased`` (both > 0, more or fewer in test), ``unchanged`` (both > 0, equal counts).
    """
    cl, tl = labels_of(table)
    c = table[f"{cl}_counts"].to_numpy()
    t = table[f"{tl}_counts"].to_numpy()
    names = np.asarray(table.index, dtype=object)
    groups = {
        "added": (c == 0) & (t > 0),
        "deleted": (c > 0) & (t == 0),
        "increased": (c > 0) & (t > c),
        "decreased": (t > 0) & (t < c),
        "unchanged": (c > 0) & (t == c),
    }
    return {k: names[mask].tolist() for k, mask in groups.items()}


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
        """Names whose GPU time per step grew, largest absolute growth first."""
        table = self._table(by)
        out = table[table["delta_time(us)"] > 0].sort_values(
            ["delta_time(us)", "name"], ascending=[False, True], kind="stable")
        return out.head(top).reset_index(drop=True) if top is not None else out.reset_index(
            drop=True)

    def improvements(self, by: str = "kernel", top: int | None = 10) -> pd.DataFrame:
        """Names whose GPU time per step shrank, largest absolute saving first."""
        table = self._table(by)
        out = table[table["delta_time(us)"] < 0].sort_values(
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


@dataclass
class _Side:
    """One trace's selection: ranks, steps per rank, the iterations to analyse."""

    trace: Trace
    ranks: list[int]
    steps: pd.DataFrame  # selected step spans
    n_steps: dict[int, int]  # per rank; 1 when the trace has no steps
    iterations: list[int] | None
    has_steps: bool

    def per_step(self, frame: pd.DataFrame, value: str) -> float:
        """Mean over the selected ranks of (rank's sum of ``value``) / (rank's steps)."""
        if not self.ranks:
            return math.nan
        sums = frame.groupby("rank")[value].sum() if len(frame) else pd.Series(dtype=float)
        return float(sum(float(sums.get(r, 0.0)) / self.n_steps[r] for r in self.ranks)
                     / len(self.ranks))


def _side(trace: Trace, ranks: Ranks, iterations: Iterations) -> _Side:
    selected = [rt.rank for rt in select_ranks(trace, ranks)]
    if not selected:
        raise ValueError("no rank selected; check the ranks argument against the loaded "
                         f"ranks {trace.get_ranks()}.")
    steps = step_table(trace, selected)
    has_steps = len(steps) > 0
    if has_steps:
        if iterations is None or (isinstance(iterations, str) and iterations.lower() == "all"):
            wanted = sorted(set(steps["iteration"].tolist()))
        else:
            wanted = resolve_iterations(trace, selected, iterations) or []
        steps = steps[steps["iteration"].isin(wanted)].reset_index(drop=True)
        counts = steps.groupby("rank")["iteration"].nunique()
        n_steps = {r: int(counts.get(r, 0)) for r in selected}
        empty = [r for r, n in n_steps.items() if n == 0]
        if empty:
            raise ValueError(f"rank(s) {empty} hold none of the selected steps {wanted}; "
                             "select other ranks or iterations.")
        return _Side(trace, selected, steps, n_steps, wanted, True)
    if iterations is not None and not (isinstance(iterations, str)
                                       and iterations.lower() == "all"):
        raise ValueError("iterations were given but the trace has no ProfilerStep; "
                         "leave them out to compare whole traces.")
    return _Side(trace, selected, steps, dict.fromkeys(selected, 1), None, False)


def job_diff(
    control: Trace, test: Trace, *, control_ranks: Ranks = None, test_ranks: Ranks = None,
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
    * ``idle``: from :func:`hta.analysis.idle.idle_time_breakdown`, summed over streams:
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
    without steps on a side, ``"GPU busy time ... per trace"`` from ``busy_time(us)``.

    Example: control 2 steps of 10 ms on one rank, kernel ``k`` 4 x 1 ms; test 4 steps of
    8 ms, ``k`` 8 x 1.5 ms: step time 10 ms -> 8 ms (-20.0%); ``k`` 2 per step both sides,
    2000 -> 3000 µs per step, +1000 µs (+50%), ``slower``.
    """
    if threshold_pct < 0 or not math.isfinite(threshold_pct):
        raise ValueError(f"threshold_pct must be a non-negative percentage, got "
                         f"{threshold_pct!r}.")
    c = _side(control, control_ranks, control_iterations)
    t = _side(test, test_ranks, test_iterations)
    notes = _notes(c, t)
    steps = pd.concat([_steps_rows("control", c), _steps_rows("test", t)], ignore_index=True)
    rows: list[tuple[str, str, float, float]] = []
    rows += _step_metrics(c, t)
    rows += _temporal_metrics(c, t)
    rows += _kernel_type_metrics(c, t)
    rows += _overlap_metrics(c, t)
    rows += _idle_metrics(c, t)
    summary = _summary_frame(rows)
    kernels = _name_diff(_per_name(c, "kernel", use_short_name),
                         _per_name(t, "kernel", use_short_name), threshold_pct, True)
    operators = _name_diff(_per_name(c, "operator", use_short_name),
                           _per_name(t, "operator", use_short_name), threshold_pct, False)
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
    return notes


def _steps_rows(label: str, side: _Side) -> pd.DataFrame:
    s = side.steps
    return pd.DataFrame({"side": label, "rank": s["rank"].to_numpy(dtype=np.int64),
                         "iteration": s["iteration"].to_numpy(dtype=np.int64),
                         "step_time(us)": s["step_time(ns)"].to_numpy() / 1e3})


def _rank_mean_steps(side: _Side) -> np.ndarray:
    if not side.has_steps:
        return np.zeros(0)
    per_rank = side.steps.groupby("rank")["step_time(ns)"].mean() / 1e3
    return per_rank.to_numpy(dtype=float)


def _step_metrics(c: _Side, t: _Side) -> list[tuple[str, str, float, float]]:
    mc, mt = _rank_mean_steps(c), _rank_mean_steps(t)

    def agg(values: np.ndarray, fn: Any) -> float:
        return float(fn(values)) if values.size else math.nan

    return [
        ("steps", "ranks", float(len(c.ranks)), float(len(t.ranks))),
        ("steps", "steps_per_rank", float(np.mean(list(c.n_steps.values()))) if c.has_steps
         else math.nan, float(np.mean(list(t.n_steps.values()))) if t.has_steps else math.nan),
        ("steps", "step_time_mean(us)", agg(mc, np.mean), agg(mt, np.mean)),
        ("steps", "step_time_median(us)", agg(mc, np.median), agg(mt, np.median)),
        ("steps", "step_time_max(us)", agg(mc, np.max), agg(mt, np.max)),
    ]


_TEMPORAL_TIMES = ("kernel_time", "busy_time", "compute_time", "exposed_comm_time",
                   "exposed_memory_time", "idle_time", "comm_time", "memory_time")
_TEMPORAL_PCTG = ("compute_time", "exposed_comm_time", "exposed_memory_time", "idle_time")


def _temporal_metrics(c: _Side, t: _Side) -> list[tuple[str, str, float, float]]:
    values = []
    for side in (c, t):
        df = temporal_breakdown_detail(side.trace, side.ranks, side.iterations).copy()
        df["busy_time(us)"] = df["kernel_time(us)"] - df["idle_time(us)"]
        values.append({k: side.per_step(df, f"{k}(us)") for k in _TEMPORAL_TIMES})
    rows = [("gpu_time", f"{k}(us)", values[0][k], values[1][k]) for k in _TEMPORAL_TIMES]
    rows += [("gpu_time", f"{k}_pctg", _pct(values[0][k], values[0]["kernel_time"]),
              _pct(values[1][k], values[1]["kernel_time"])) for k in _TEMPORAL_PCTG]
    return rows


def _kernel_type_metrics(c: _Side, t: _Side) -> list[tuple[str, str, float, float]]:
    per_type: list[dict[str, float]] = []
    for side in (c, t):
        df = kernel_type_breakdown(side.trace, side.ranks, side.iterations,
                                   include_memory_kernels=True, by_rank=True)
        per_type.append({k: side.per_step(df[df["kernel_type"] == k], "sum")
                         for k in df["kernel_type"].unique().tolist()} if len(df) else {})
    kinds = sorted(set(per_type[0]) | set(per_type[1]),
                   key=lambda k: -(per_type[0].get(k, 0.0) + per_type[1].get(k, 0.0)))
    totals = [sum(p.values()) for p in per_type]
    rows = [("kernel_types", f"{k}(us)", per_type[0].get(k, 0.0), per_type[1].get(k, 0.0))
            for k in kinds]
    rows += [("kernel_types", f"{k}_pctg", _pct(per_type[0].get(k, 0.0), totals[0]),
              _pct(per_type[1].get(k, 0.0), totals[1])) for k in kinds]
    return rows


def _overlap_metrics(c: _Side, t: _Side) -> list[tuple[str, str, float, float]]:
    vals = []
    for side in (c, t):
        df = comm_comp_overlap(side.trace, side.ranks, side.iterations)
        vals.append((side.per_step(df, "comm_time(us)"), side.per_step(df, "overlap_time(us)")))
    return [
        ("overlap", "comm_time(us)", vals[0][0], vals[1][0]),
        ("overlap", "overlap_time(us)", vals[0][1], vals[1][1]),
        ("overlap", "comp_comm_overlap_pctg", _pct(vals[0][1], vals[0][0]),
         _pct(vals[1][1], vals[1][0])),
    ]


def _idle_metrics(c: _Side, t: _Side) -> list[tuple[str, str, float, float]]:
    vals = []
    for side in (c, t):
        df = idle_time_breakdown(side.trace, side.ranks, iterations=side.iterations)
        vals.append({k: side.per_step(df[df["idle_category"] == k], "idle_time")
                     for k in IDLE_CATEGORIES})
    rows = [("idle", f"{k}(us)", vals[0][k], vals[1][k]) for k in IDLE_CATEGORIES]
    totals = [sum(v.values()) for v in vals]
    rows.append(("idle", "total(us)", totals[0], totals[1]))
    rows += [("idle", f"{k}_pctg", _pct(vals[0][k], totals[0]), _pct(vals[1][k], totals[1]))
             for k in IDLE_CATEGORIES]
    return rows


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole and math.isfinite(whole) else math.nan


def _summary_frame(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["section", "metric", "control", "test"])
    frame["delta"] = frame["test"] - frame["control"]
    control = frame["control"].to_numpy(dtype=float)
    relative = ~frame["metric"].str.endswith("_pctg").to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = 100.0 * frame["delta"].to_numpy(dtype=float) / control
    frame["delta_pctg"] = np.where(relative & (control != 0) & np.isfinite(control), pct,
                                   np.nan)
    return frame


def _per_name(side: _Side, by: str, use_short_name: bool) -> pd.DataFrame:
    """Per name: events per step, time (µs) per step and (kernels) the kernel type."""
    n_sym = len(side.trace.symbols)
    no_op = n_sym  # id standing for NO_OPERATOR
    size = n_sym + 1
    count = np.zeros(size, dtype=float)
    time = np.zeros(size, dtype=float)
    kind = np.full(size, -1, dtype=np.int64)
    for rank in side.ranks:
        ev = side.trace.rank(rank).events
        keep = np.isin(ev["kind"].cat.codes.to_numpy(), _WORK_CODES)
        if side.iterations is not None:
            keep &= np.isin(ev["iteration"].to_numpy(), side.iterations)
        rows = np.flatnonzero(keep)
        if by == "kernel":
            ids = ev["name"].to_numpy()[rows].astype(np.int64)
            cls = work_class(ev["kind"].iloc[rows])
            kind[ids] = np.where(kind[ids] >= 0, kind[ids], cls)
        else:
            op = RowMap(ev).column(ev, "op_index")[rows]
            names = ev["name"].to_numpy()
            ids = np.where(op >= 0, names[np.clip(op, 0, None)] if len(ev) else 0, no_op)
            ids = ids.astype(np.int64)
        weight = 1.0 / side.n_steps[rank]
        count += np.bincount(ids, minlength=size) * weight
        time += np.bincount(ids, weights=ev["dur"].to_numpy()[rows], minlength=size) * weight
    n = len(side.ranks)
    ids = np.flatnonzero(count)
    values: dict[str, np.ndarray] = {"count": count[ids] / n, "time(us)": time[ids] / n / 1e3}
    frame = _group_names(side.trace.symbols, ids, values, use_short_name, {no_op: NO_OPERATOR})
    if by == "kernel":
        labels = np.asarray(CLASS_NAMES + ("",), dtype=object)
        types = pd.DataFrame({"name": [_text(side.trace.symbols, i, None) for i in ids],
                              "kernel_type": labels[kind[ids]]})
        if use_short_name:
            types["name"] = [short_name(x) for x in types["name"]]
        first = types.groupby("name", sort=True)["kernel_type"].first()
        frame["kernel_type"] = frame["name"].map(first).to_numpy()
    return frame


def _name_diff(c: pd.DataFrame, t: pd.DataFrame, threshold_pct: float,
               with_type: bool) -> pd.DataFrame:
    cols = ["count", "time(us)"]
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
    with np.errstate(invalid="ignore"):
        slower = np.isfinite(pct) & (pct > 0) & (pct >= threshold_pct)
        faster = np.isfinite(pct) & (pct < 0) & (-pct >= threshold_pct)
    return np.select([(cc == 0) & (tc > 0), (cc > 0) & (tc == 0), slower, faster],
                     ["added", "removed", "slower", "faster"], "unchanged").astype(object)


def format_time_pair(control_us: float, test_us: float) -> tuple[str, str]:
    """Two µs values in one unit (µs, ms or s, by the larger), one decimal."""
    biggest = max(abs(control_us), abs(test_us))
    scale, unit = (1e6, "s") if biggest >= 1e6 else (1e3, "ms") if biggest >= 1e3 else (
        1.0, "µs")
    return f"{control_us / scale:,.1f} {unit}", f"{test_us / scale:,.1f} {unit}"


def _verdict(summary: pd.DataFrame, c: _Side, t: _Side) -> str:
    def row(metric: str) -> pd.Series:
        return summary[summary["metric"] == metric].iloc[0]

    if c.has_steps and t.has_steps:
        r, what, tail = row("step_time_mean(us)"), "step time", ""
    else:
        r, what, tail = row("busy_time(us)"), "GPU busy time", " per trace" if not (
            c.has_steps or t.has_steps) else " per step (a trace without steps counts as one)"
    a, b = format_time_pair(float(r["control"]), float(r["test"]))
    pct = r["delta_pctg"]
    change = f"{pct:+.1f}%" if pd.notna(pct) else "n/a"
    return f"{what} {a} -> {b} ({change}){tail}"
