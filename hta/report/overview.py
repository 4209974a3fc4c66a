"""The job at a glance: one row per rank, the top kernels, and the spread across ranks.

Everything here is gathered from the analyses of :mod:`hta.analysis` (whose docstrings
hold the exact definitions); this module only puts their per-rank figures side by side
and picks extremes. Times are µs (integer-ns sums divided by 1000).

**Per rank** (:attr:`JobOverview.ranks`, one row per rank, columns :data:`RANK_COLUMNS`):

* ``events``, ``gpu_events``: complete events and GPU work events (kernels, memcpy,
  memset) of the rank in the selection (:func:`hta.analysis.summary.rank_summary`);
* ``steps``, ``step_time_mean(us)``: number of ``ProfilerStep#N`` spans selected and their
  mean duration (:func:`hta.model.selection.step_table`; NaN without steps);
* ``kernel_time(us)`` (GPU span), ``compute_time(us)``, ``exposed_comm_time(us)``,
  ``exposed_memory_time(us)``, ``idle_time(us)``, ``memory_time(us)`` and the four
  ``*_pctg`` of the span: :func:`hta.analysis.temporal.temporal_breakdown_detail`;
  ``busy_time(us)`` = ``kernel_time(us) - idle_time(us)``;
* ``comp_comm_overlap_pctg`` and ``overlap_note``: :func:`hta.analysis.overlap.comm_comp_overlap`
  (NaN, with the note, on a rank without communication);
* ``host_wait(us)``, ``kernel_wait(us)``, ``other_idle(us)``: the rank's stream idle time
  by cause, summed over its streams (:func:`hta.analysis.idle.idle_time_breakdown`, default
  30 000 ns threshold). Streams run in parallel, so these can exceed ``idle_time(us)``;
* ``queue_length_mean``, ``queue_length_max``: over the rank's streams, the largest
  time-weighted mean and the largest maximum of the launch queue length
  (:func:`hta.analysis.queue.queue_length_summary`; NaN without launches);
* ``memcpy_count``, ``memcpy_bytes``, ``memset_count``: copies of every direction, the
  bytes they moved, and memsets (:func:`hta.analysis.bandwidth.memory_bw_summary`).

**Top kernels** (:attr:`JobOverview.top_kernels`): the ``top`` GPU kernels (memcpy and
memset included) with the largest total duration over the selected ranks. ``total(us)``:
sum of their durations; ``share_pctg``: 100 x ``total(us)`` / the summed durations of all
GPU work of the selection; ``count``; ``mean(us)`` = total / count; ``rank_mean_min(us)``
and ``rank_mean_max(us)``: the smallest and largest per-rank mean duration;
``slowest_rank``: the rank with the largest mean; ``spread_pctg``: 100 x (max - min) / min
of the per-rank means (0 on one rank). Per-rank statistics come from
:func:`hta.analysis.kernels.kernel_breakdown`.

**Spread across ranks** (:attr:`JobOverview.spread`): for each of ``step_time_mean(us)``,
``kernel_time(us)``, ``busy_time(us)``, ``compute_time(us)``, ``exposed_comm_time(us)``
and ``idle_time(us)``: ``min`` and ``max`` over ranks, the ranks holding them (lowest rank
on ties), ``mean``, and ``spread_pctg`` = 100 x (max - min) / min (NaN when min is 0).

**Slowest rank** (``job["slowest_rank"]``): the rank whose GPU computes longest (largest
``compute_time(us)``): in a synchronous job the other ranks wait for it in their
collectives, which shows as their larger exposed communication. Without compute on any
rank, the rank with the longest mean step, else none. This is the one notion of the
slowest rank the summary, the report and the notebooks show
(:func:`hta.report.present.slowest_rank_text`); when the ranks' figures differ by less
than 2 % they say no rank is slower. ``longest_step_rank`` (the rank with the longest
mean step, which in a synchronous job differs from the others by the measurement window
only) is kept in ``--json``; the spread table shows it.

Example: two ranks with compute 8 and 10 ms and mean steps of 12.0 ms each: slowest rank
1, compute spread 25 %, step time spread 0 %.

Selection: :func:`job_overview` takes one :class:`~hta.model.selection.Selection`,
resolves it once against the job, and computes each rank's figures where the rank is
(:func:`hta.model.runner.run`: a worker process or a Dask worker for a distributed
job), so only one row per rank (and its per-kernel totals) travels back. With steps
selected, the temporal, overlap, idle and kernel figures use those analyses' own
``iterations`` selection; event counts, queue length and copies are taken on the rank
restricted to the events of those steps (:func:`hta.model.runner.restrict_rank`, applied
next to the data).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from hta.analysis import bandwidth, idle, kernels, overlap, queue, temporal
from hta.analysis.aggregate import OTHERS
from hta.analysis.summary import event_counts
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.job import Job
from hta.model.runner import RankWork, restrict_rank, run_one
from hta.model.selection import EVERYTHING, Selection, rank_steps, resolve
from hta.model.trace import RankTrace

_KERNEL_STAT_COLUMNS = ["rank", "kernel_type", "name", "sum (us)", "count"]
_DETAILS = ("temporal", "overlap", "idle")
RANK_COLUMNS = [
    "rank", "events", "gpu_events", "steps", "step_time_mean(us)", "kernel_time(us)",
    "busy_time(us)", "compute_time(us)", "exposed_comm_time(us)", "exposed_memory_time(us)",
    "idle_time(us)", "memory_time(us)", "compute_time_pctg", "exposed_comm_time_pctg",
    "exposed_memory_time_pctg", "idle_time_pctg", "comp_comm_overlap_pctg", "overlap_note",
    "host_wait(us)", "kernel_wait(us)", "other_idle(us)", "queue_length_mean",
    "queue_length_max", "memcpy_count", "memcpy_bytes", "memset_count",
]
TOP_KERNEL_COLUMNS = [
    "name", "kernel_type", "total(us)", "share_pctg", "count", "mean(us)",
    "rank_mean_min(us)", "rank_mean_max(us)", "slowest_rank", "spread_pctg",
]
SPREAD_METRICS = ["step_time_mean(us)", "kernel_time(us)", "busy_time(us)",
                  "compute_time(us)", "exposed_comm_time(us)", "idle_time(us)"]
SPREAD_COLUMNS = ["metric", "min", "min_rank", "max", "max_rank", "mean", "spread_pctg"]
_IDLE_COLUMN = {"host_wait": "host_wait(us)", "kernel_wait": "kernel_wait(us)",
                "other": "other_idle(us)"}


#: The job's own figures (:attr:`JobOverview.job`): where and what was selected, and the
#: slowest rank (see the module docstring); the ``slowest_rank_value``,
#: ``fastest_rank*``, ``longest_step_rank`` and ``step_time_mean(us)`` keys are there
#: only when the ranks have the figure.
JobFacts = TypedDict("JobFacts", {
    "trace_dir": str, "ranks": list[int], "world_size": int | None,
    "iterations": list[int] | None, "slowest_rank": int | None,
    "slowest_rank_by": str | None, "slowest_rank_value": float, "fastest_rank": int,
    "fastest_rank_value": float, "longest_step_rank": int, "step_time_mean(us)": float,
}, total=False)


@dataclass
class JobOverview:
    """Result of :func:`job_overview` (definitions in this module's docstring)."""

    ranks: pd.DataFrame
    top_kernels: pd.DataFrame
    spread: pd.DataFrame
    job: JobFacts = field(default_factory=lambda: JobFacts())
    #: the analyses' own per-rank tables the overview was built from (``"temporal"``:
    #: :func:`~hta.analysis.temporal.temporal_breakdown_detail`, ``"overlap"``:
    #: :func:`~hta.analysis.overlap.comm_comp_overlap`, ``"idle"``:
    #: :func:`~hta.analysis.idle.idle_time_breakdown`), kept for the report's sections
    details: dict[str, pd.DataFrame] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready content (NaN stays NaN: :func:`hta.commands.args_and_output.finite`
        nulls it)."""
        return {
            "job": dict(self.job),
            "ranks": self.ranks.to_dict(orient="records"),
            "top_kernels": self.top_kernels.to_dict(orient="records"),
            "spread": self.spread.to_dict(orient="records"),
        }


def job_overview(job: Job, selection: Selection = EVERYTHING, top: int = 10) -> JobOverview:
    """Per-rank figures, top kernels and spread across ranks of the selected ranks and
    iterations (see the module docstring for every column); ``selection`` is resolved
    here if it is not."""
    selection = resolve(selection, job)
    return run_one(job, overview_plan(job, selection, top), selection.every_event())


def overview_plan(job: Job, selection: Selection, top: int = 10) -> RankWork:
    """:func:`job_overview` as a :class:`~hta.model.runner.RankWork` over the (resolved)
    ``selection``'s ranks, to run with other per-rank analyses in one visit of each rank
    (:func:`hta.model.runner.run`)."""
    selected, iters = selection.rank_list or job.get_ranks(), selection.iteration_list

    def finish(per_rank: pd.DataFrame) -> JobOverview:
        table = (per_rank if len(per_rank) else RANK_OVERVIEW.empty())[RANK_COLUMNS
                                                                          ].reset_index(drop=True)
        kernel_stats = (pd.concat(list(per_rank["kernel_stats"]), ignore_index=True)
                        if len(per_rank) else pd.DataFrame(columns=_KERNEL_STAT_COLUMNS))
        top_table = top_kernels_of(kernel_stats, top)
        spread = spread_across_ranks(table)
        details = {k: pd.concat(list(per_rank[k]), ignore_index=True)
                   for k in _DETAILS if len(per_rank)}
        return JobOverview(table, top_table, spread, _job(job, table, selected, iters),
                           details)

    return RANK_OVERVIEW.work(iters).then(finish)


def overview_of_rank(rt: RankTrace, iterations: list[int] | None) -> pd.DataFrame:
    """One rank's row of the overview's table (:data:`RANK_COLUMNS`, plus ``kernel_stats``,
    the rank's per-kernel totals for :func:`top_kernels_of`, and the rank's rows of the
    analyses' tables, :attr:`JobOverview.details`): the runner's per-rank function, next
    to the data, built from the analyses' per-rank functions."""
    restricted = restrict_rank(rt, iterations)
    details: dict[str, pd.DataFrame] = {}
    row = _rank_row(rt, restricted, iterations, details)
    details["kernel_stats"] = kernels.rank_kernel_sums(rt, iterations)
    for key, frame in details.items():
        row[key] = [frame[frame["rank"] == rt.rank].reset_index(drop=True)]
    return row


#: :func:`overview_of_rank`, declared (its steps come first; each rank read whole).
RANK_OVERVIEW = Analysis("Job overview", overview_of_rank,
                         Columns.typed(RANK_COLUMNS, "float64")
                         + Columns.typed([*_DETAILS, "kernel_stats"]),
                         steps=PER_STEP, add_rank=True)


def _rank_row(rt: RankTrace, restricted: RankTrace, iterations: list[int] | None,
              details: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The rank's row of :data:`RANK_COLUMNS`: each figure read as one number from the
    analyses' per-rank tables (a rank missing from a table reads NaN, 0 for counts), and
    the row made once."""
    rank = rt.rank
    events, gpu_events = event_counts(restricted)
    steps = rank_steps(rt)
    if iterations is not None:
        steps = steps[steps["step"].isin(iterations)]
    step_stats = steps.groupby("rank")["dur"].agg(["count", "mean"])
    row: dict[str, Any] = {"rank": rank, "events": events, "gpu_events": gpu_events,
                           "steps": np.int64(step_stats["count"].get(rank, 0)),
                           "step_time_mean(us)": float((step_stats["mean"] / 1e3).get(
                               rank, np.nan))}

    details["temporal"] = temporal.rank_breakdown_detail(rt, iterations)
    detail = details["temporal"].set_index("rank")
    for col in ("kernel_time(us)", "compute_time(us)", "exposed_comm_time(us)",
                "exposed_memory_time(us)", "idle_time(us)", "memory_time(us)",
                "compute_time_pctg", "exposed_comm_time_pctg", "exposed_memory_time_pctg",
                "idle_time_pctg"):
        row[col] = float(detail[col].get(rank, np.nan))
    row["busy_time(us)"] = row["kernel_time(us)"] - row["idle_time(us)"]

    details["overlap"] = overlap.rank_comm_comp_overlap(rt, iterations)
    ov = details["overlap"].set_index("rank")
    row["comp_comm_overlap_pctg"] = float(ov["comp_comm_overlap_pctg"].get(rank, np.nan))
    note = ov["note"].get(rank, None)
    row["overlap_note"] = "" if note is None or pd.isna(note) else str(note)

    gaps = details["idle"] = idle.rank_idle_breakdown(
        rt, iterations, None, idle.DEFAULT_CONSECUTIVE_KERNEL_DELAY_NS, False)[0]
    by_cause = gaps.groupby(["rank", "idle_category"])["idle_time"].sum()
    for category, col in _IDLE_COLUMN.items():
        row[col] = float(by_cause.get((rank, category), 0.0))

    q = queue.rank_queue_summary(restricted)
    mine = q[q["rank"] == rank]
    row["queue_length_mean"] = float(mine["mean"].max()) if len(mine) else np.nan
    row["queue_length_max"] = float(mine["max"].max()) if len(mine) else np.nan

    n_copies, moved, n_sets = bandwidth.copy_totals(restricted)
    row.update({"memcpy_count": np.int64(n_copies), "memcpy_bytes": moved,
                "memset_count": np.int64(n_sets)})
    frame = pd.DataFrame({col: [row[col]] for col in RANK_COLUMNS})
    frame["overlap_note"] = frame["overlap_note"].astype(str)
    return frame




def top_kernels_of(stats: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The ``top`` kernels of per-rank kernel totals (``rank, kernel_type, name, sum (us),
    count``), with their spread across ranks (see the module docstring)."""
    if top < 1 or not len(stats):
        return pd.DataFrame({c: [] for c in TOP_KERNEL_COLUMNS})
    everything = float(stats["sum (us)"].sum())
    named = stats[stats["name"] != OTHERS]
    totals = named.groupby(["kernel_type", "name"], sort=False)["sum (us)"].sum()
    keep = set(totals.sort_values(ascending=False, kind="stable").index[:top])
    named = named[[k in keep for k in zip(named["kernel_type"], named["name"])]]
    if named.empty:
        return pd.DataFrame({c: [] for c in TOP_KERNEL_COLUMNS})
    named = named.assign(**{"mean (us)": named["sum (us)"] / named["count"]})
    rows = []
    for (kind, name), part in named.groupby(["kernel_type", "name"], sort=False):
        total, count = float(part["sum (us)"].sum()), int(part["count"].sum())
        means = part.set_index("rank")["mean (us)"].sort_index()
        lo, hi = float(means.min()), float(means.max())
        rows.append({
            "name": name, "kernel_type": kind, "total(us)": total,
            "share_pctg": 100.0 * total / everything if everything > 0 else math.nan,
            "count": count, "mean(us)": total / count if count else math.nan,
            "rank_mean_min(us)": lo, "rank_mean_max(us)": hi,
            "slowest_rank": int(means.idxmax()),
            "spread_pctg": 100.0 * (hi - lo) / lo if lo > 0 else (0.0 if hi == lo else math.nan),
        })
    out = pd.DataFrame(rows, columns=TOP_KERNEL_COLUMNS)
    out = out.sort_values(["total(us)", "name"], ascending=[False, True], kind="stable")
    return out.head(top).reset_index(drop=True)


def spread_across_ranks(table: pd.DataFrame) -> pd.DataFrame:
    """Min, max (with their ranks), mean and relative spread of :data:`SPREAD_METRICS` over
    the rows of a per-rank table (ranks without a value are left out)."""
    rows = []
    for metric in SPREAD_METRICS:
        values = table.set_index("rank")[metric].astype(float).dropna().sort_index()
        if values.empty:
            continue
        lo, hi = float(values.min()), float(values.max())
        rows.append({
            "metric": metric, "min": lo, "min_rank": int(values.idxmin()), "max": hi,
            "max_rank": int(values.idxmax()), "mean": float(values.mean()),
            "spread_pctg": 100.0 * (hi - lo) / lo if lo > 0 else (0.0 if hi == lo else math.nan),
        })
    return pd.DataFrame(rows, columns=SPREAD_COLUMNS)


def _job(trace: Job, table: pd.DataFrame, ranks: list[int],
         iterations: list[int] | None) -> JobFacts:
    first = trace.meta(ranks[0]) if ranks else {}
    job: JobFacts = {
        "trace_dir": trace.trace_dir,
        "ranks": ranks,
        "world_size": first.get("world_size"),
        "iterations": iterations,
        "slowest_rank": None,
        "slowest_rank_by": None,
    }
    by_metric = [("compute_time(us)", lambda s: s > 0), ("step_time_mean(us)", lambda s: s > 0)]
    for metric, usable in by_metric:
        values = table.set_index("rank")[metric].astype(float).dropna()
        if len(values) and usable(values).any():
            job["slowest_rank"] = int(values.idxmax())
            job["slowest_rank_by"] = metric
            job["slowest_rank_value"] = float(values.max())
            job["fastest_rank"] = int(values.idxmin())
            job["fastest_rank_value"] = float(values.min())
            break
    steps = table.set_index("rank")["step_time_mean(us)"].dropna()
    if len(steps):
        job["longest_step_rank"] = int(steps.idxmax())
        job["step_time_mean(us)"] = float(steps.mean())
    return job


__all__ = ["RANK_OVERVIEW", "JobFacts", "JobOverview", "job_overview", "overview_of_rank",
           "spread_across_ranks", "top_kernels_of"]
