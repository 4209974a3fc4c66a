"""Findings about communication: collectives the GPU waits on, and ranks that hold the
others up.

``comm_exposed`` (per rank, one finding per process group)
    The communication kernels of the rank (kind ``communication``) are grouped by the
    ``Process Group Name`` of their collective args, or by stream (``stream S``) when
    they carry none. Kernels are selected as in the comm/compute overlap table
    (:mod:`hta.analysis.overlap`: every GPU work row, or those of the selected steps).
    For a process group, *exposed* time is the length of the union of its kernels minus
    the part of it during which a computation kernel runs (any stream). Overlapping can
    only hide communication under computation, so the saving is
    ``min(exposed time of the group, computation time of the rank that runs with no
    communication kernel of any group)``, an upper bound: it assumes the communication
    could be moved under independent work (gradient buckets under the backward pass,
    prefetched all-gathers under the previous layer). The evidence quotes the rank's
    row of the overlap table (``comm_time``, ``overlap_time``) for cross-checking.

``stragglers`` (job)
    From :func:`hta.analysis.stragglers.collective_arrivals`: for each rank, the sum over
    the collectives at which it alone started last of its ``excess_lag_ns`` (the smallest
    wait it caused any other rank of that collective). Had the rank arrived with the
    others, each of those collectives would have ended that much sooner on every rank, so
    the saving is that sum (the job's step time runs in lock-step). Ranks with no
    excess lag have no finding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from hta.analysis.findings.claims import Claim, claim_outside
from hta.analysis.findings.engine import Finding, FindingRule, analysis_window
from hta.analysis.findings.host import fmt_steps, fmt_time
from hta.analysis.gpu_work import COMM, COMPUTE, gpu_work
from hta.analysis.intervals import Cover, coverage, mask_total
from hta.analysis.select import select_ranks
from hta.analysis.stragglers import collective_arrivals, comm_kernels, straggler_summary
from hta.loading.lazy import map_ranks
from hta.model.trace import RankTrace, Trace

EXPOSED_ADVICE = (
    "Overlap this communication with computation: with DDP, tune bucket_cap_mb so "
    "gradient all-reduces start during the backward pass; with FSDP, enable "
    "forward_prefetch/backward_prefetch and check limit_all_gathers; issue collectives "
    "with async_op=True and wait only where the result is needed. If the kernels are long "
    "because other ranks arrive late, see the stragglers finding first."
)
STRAGGLER_ADVICE = (
    "Find out why this rank starts its collectives late: compare its idle time (host "
    "wait) and kernel launch sections with the other ranks'. Usual causes: slower data "
    "loading on that host, uneven work (sequence lengths, MoE routing, pipeline stage "
    "sizes), a throttled or slower GPU, or a busy host CPU."
)


# -- exposed communication ------------------------------------------------------------------
def exposed_by_group(rt: RankTrace, iterations: Sequence[int] | None = None) -> pd.DataFrame:
    """Per process group of the rank: ``process_group``, ``kernels``, ``comm_ns`` (union
    of its kernels), ``exposed_ns`` (of which no computation runs), ``steps`` (tuple);
    plus the rank-wide ``rank_comm_ns``, ``rank_overlap_ns`` (the overlap table's
    numbers) and ``free_compute_ns`` (computation with no communication running)."""
    w = gpu_work(rt.rank, rt.events, iterations)
    k = comm_kernels(rt, iterations)
    columns = ["process_group", "kernels", "comm_ns", "exposed_ns", "steps", "rank_comm_ns",
               "rank_overlap_ns", "free_compute_ns"]
    if not len(k):
        return pd.DataFrame(columns=columns)
    sel = (w.cls == COMPUTE) | (w.cls == COMM)
    table = coverage(w.ts[sel], w.end[sel], w.cls[sel], 2)
    rank_comm = int(mask_total(table, all_of=1 << COMM)[0])
    rank_overlap = int(mask_total(table, all_of=(1 << COMM) | (1 << COMPUTE))[0])
    free_compute = int(mask_total(table, all_of=1 << COMPUTE, none_of=1 << COMM)[0])
    comp = w.cls == COMPUTE
    groups = sorted(k["process_group"].unique())
    gid = {g: i for i, g in enumerate(groups)}
    n = len(groups)
    # one coverage per group: its kernels (set 1) against all computation (set 0)
    starts = np.concatenate([np.tile(w.ts[comp], n), k["start_ns"].to_numpy(np.int64)])
    ends = np.concatenate([np.tile(w.end[comp], n), k["end_ns"].to_numpy(np.int64)])
    sets = np.concatenate([np.zeros(comp.sum() * n, np.int64), np.ones(len(k), np.int64)])
    grp = np.concatenate([np.repeat(np.arange(n), comp.sum()),
                          k["process_group"].map(gid).to_numpy(np.int64)])
    per = coverage(starts, ends, sets, 2, grp, n)
    comm = mask_total(per, all_of=0b10)
    exposed = mask_total(per, all_of=0b10, none_of=0b01)
    rows = []
    for g in groups:
        part = k[k["process_group"] == g]
        desc = part["process_group_desc"].iloc[0]
        rows.append({
            "process_group": g if not desc or desc == g else f"{g} ({desc})",
            "kernels": len(part), "comm_ns": int(comm[gid[g]]),
            "exposed_ns": int(exposed[gid[g]]),
            "steps": tuple(int(s) for s in sorted(part["iteration"].unique()) if s >= 0),
            "rank_comm_ns": rank_comm, "rank_overlap_ns": rank_overlap,
            "free_compute_ns": free_compute,
        })
    return pd.DataFrame(rows, columns=columns)


def check_exposed(rt: RankTrace, iterations: Sequence[int] | None) -> list[Finding]:
    """``comm_exposed`` on one rank: one finding per process group with exposed time."""
    start, end = analysis_window(rt, iterations)
    window = end - start
    found = []
    claims = _exposed_claims(rt, iterations)
    for row in exposed_by_group(rt, iterations).itertuples(index=False):
        saving = min(int(row.exposed_ns), int(row.free_compute_ns), window)
        if saving <= 0:
            continue
        label = _group_label(str(row.process_group))
        evidence = (
            f"{row.kernels} communication kernels of {label} ran {fmt_time(row.comm_ns)} in "
            f"{fmt_steps(row.steps)}, {fmt_time(row.exposed_ns)} of it with no computation kernel "
            f"running; {fmt_time(row.free_compute_ns)} of computation ran with no communication "
            f"(comm/compute overlap table: comm_time {row.rank_comm_ns / 1e3:,.1f} µs, "
            f"overlap_time {row.rank_overlap_ns / 1e3:,.1f} µs for the rank)."
        )
        found.append(Finding((rt.rank,), tuple(row.steps), evidence, saving, window,
                             subject=label, claim=claims.get(str(row.process_group)),
                             budget=("computation time with no communication",
                                     int(row.free_compute_ns))))
    return found


def _exposed_claims(rt: RankTrace, iterations: Sequence[int] | None) -> dict[str, Claim]:
    """Per process group (labelled as :func:`exposed_by_group` does): the time its
    kernels run with no computation kernel, the time its finding claims."""
    k = comm_kernels(rt, iterations)
    if not len(k):
        return {}
    w = gpu_work(rt.rank, rt.events, iterations)
    compute = Cover(w.ts[w.cls == COMPUTE], w.end[w.cls == COMPUTE])
    group, desc = k["process_group"].astype(str), k["process_group_desc"].fillna("").astype(str)
    label = group.where((desc == "") | (desc == group), group + " (" + desc + ")")
    out = {}
    for name, part in k.groupby(label.to_numpy(), sort=False):
        out[str(name)] = claim_outside(part["start_ns"].to_numpy(np.int64),
                                       part["end_ns"].to_numpy(np.int64), None, compute)
    return out


# -- stragglers ---------------------------------------------------------------------------------
def check_stragglers(trace: Trace, ranks: list[int],
                     iterations: list[int] | None) -> list[Finding]:
    """``stragglers``: one finding per rank that alone arrived last and held others up."""
    if len(ranks) < 2:
        return []
    arrivals = collective_arrivals(trace, ranks, iterations)
    summary = straggler_summary(arrivals)
    if not len(summary):
        return []
    hit = summary[summary["total_excess_lag(us)"] > 0]
    if not len(hit):
        return []
    windows = map_ranks(trace, _windows, [int(r) for r in hit["rank"]], (iterations,),
                        description="Analysis windows").set_index("rank")["window_ns"]
    found = []
    for row in hit.to_dict("records"):
        rank = int(row["rank"])
        mine = arrivals[(arrivals["rank"] == rank) & (arrivals["excess_lag_ns"] > 0)]
        saving = int(mine["excess_lag_ns"].sum())
        window = int(windows.get(rank, 0))
        steps = tuple(int(s) for s in sorted(mine["iteration"].unique()) if s >= 0)
        evidence = (
            f"rank {rank} started last at {int(row['late_count'])} of "
            f"{int(row['collectives'])} collectives (mean lag {row['mean_lag(us)']:,.1f} µs "
            f"behind the first rank); the other ranks waited "
            f"{fmt_time(row['total_wait_caused(us)'] * 1e3)} for it in all, and at "
            f"{len(mine)} collective{'s' if len(mine) != 1 else ''} in {fmt_steps(steps)} "
            f"every one of them waited, "
            f"{fmt_time(saving)} in all "
            f"(stragglers table: late_count, total_wait_caused, total_excess_lag)."
        )
        found.append(Finding((rank,), steps, evidence, min(saving, window) if window else
                             saving, window, subject=f"rank {rank}",
                             rank_claims=_wait_claims(arrivals, rank)))
    return found


def _wait_claims(arrivals: pd.DataFrame, rank: int) -> dict[int, Claim]:
    """Per rank that waited for ``rank``: the waits that would disappear, ``[s - excess,
    s)`` at each collective where ``rank`` alone started last at ``s``."""
    late = arrivals[(arrivals["rank"] == rank) & (arrivals["excess_lag_ns"] > 0)]
    late = late.drop_duplicates("collective").set_index("collective")
    others = arrivals[arrivals["collective"].isin(late.index) & (arrivals["rank"] != rank)]
    end = late["start_ns"].reindex(others["collective"]).to_numpy(np.int64)
    excess = late["excess_lag_ns"].reindex(others["collective"]).to_numpy(np.int64)
    return {int(q): Claim(end[idx] - excess[idx], end[idx])
            for q, idx in others.groupby("rank").indices.items()}


def _windows(trace: Trace, ranks: Iterable[int] | int | None,
             iterations: list[int] | None) -> pd.DataFrame:
    rows = []
    for rt in select_ranks(trace, ranks):
        start, end = analysis_window(rt, iterations)
        rows.append({"rank": rt.rank, "window_ns": end - start})
    return pd.DataFrame(rows, columns=["rank", "window_ns"])


def _group_label(group: str) -> str:
    return group if group.startswith("stream ") else f"process group {group}"


RULES: list[FindingRule] = [
    FindingRule(
        id="comm_exposed",
        title="Communication not overlapped by computation",
        section="overlap",
        advice=EXPOSED_ADVICE,
        saving=("Per process group: the time its communication kernels run with no "
                "computation kernel, at most the rank's computation time that runs with no "
                "communication (what overlapping could hide it under)."),
        check=check_exposed,
        scope="rank",
        tags=("communication",),
    ),
    FindingRule(
        id="stragglers",
        title="A rank arrives late at collectives and the others wait",
        section="stragglers",
        advice=STRAGGLER_ADVICE,
        saving=("Per late rank: the sum, over the collectives it alone started last, of the "
                "smallest wait it caused any other rank (how much sooner each would have "
                "ended everywhere had it arrived with the others)."),
        check=check_stragglers,
        scope="job",
        tags=("communication",),
    ),
]
