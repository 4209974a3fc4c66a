"""Clock offsets between ranks, estimated from the collectives.

Kineto stamps each rank's events with its host's clock. Ranks on one host share that
clock; ranks on different hosts do not, and two hosts' clocks can disagree by
milliseconds. Any cross-rank comparison (the merged timeline, arrival lags at the
collectives, stragglers) then mistakes the difference of clocks for a difference of
times.

**What we measure.** A collective's kernels end together on every rank of its group: no
rank can finish before the last one has sent its part, and once it has, all finish within
the link latency (a few µs). So for a collective instance ``i`` (matched across ranks as
:mod:`hta.analysis.stragglers` does) and a rank ``r`` that took part,
``end[r, i] = T[i] + offset[r] + e[r, i]``, with ``T[i]`` the instance's true end,
``offset[r]`` the rank's clock offset and ``e`` a small error. Kernel *starts* would not
do: a late rank starts late for real.

**The estimate** (:func:`clock_offsets`): start from zero offsets and repeat until
nothing moves by 1 ns (at most 20 rounds): ``T[i]`` = the median over its participants of
``end[r, i] - offset[r]``; ``offset[r]`` = the median over its instances of
``end[r, i] - T[i]``. Medians keep one odd collective (a kernel that ended late for a
reason of its own) from pulling the answer. Offsets are then taken per **host** (the
``host_name`` of the traces' settings): a host's offset is the median of its ranks', as
they share one clock; ranks whose trace names no host stand alone. Offsets are relative
to the host of the lowest selected rank (0 for it). Instances with one participant say
nothing and are left out.

**Columns** (:data:`COLUMNS`), one row per selected rank:

* ``rank``; ``host`` (``""`` when the trace names none);
* ``offset(us)``: how far this rank's clock runs ahead of the reference host's (µs,
  exact to the ns); subtract it from the rank's times to put them on the reference clock;
* ``collectives``: instances with two or more participants the estimate used for it;
* ``agreement(us)``: the median, over those instances, of ``|end[r, i] - T[i] -
  offset[r]|``: how closely the rank's collectives agree with its offset (the link
  latency and the noise; a few µs on a healthy job);
* ``worst(us)``: the largest of those residuals;
* ``applied``: whether :func:`applied_offsets` uses the offset: true when the rank is on
  another host than the reference (or names no host) and ``|offset|`` is at least
  :data:`MIN_APPLIED_NS` and at least 3 times the agreement of its host's clock (the
  median residual over every collective of every rank of that host, so the ranks of
  one host are shifted together or not at all). Ranks of the reference host are never
  shifted, so a single-host job is never moved; nor is a job whose collectives end too
  far apart for the offset to stand out of them.

A rank without any shared collective gets offset 0, ``collectives`` 0 and NaN agreement,
and is not shifted.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable, Mapping

import numpy as np
import pandas as pd

from hta.analysis.select import rank_numbers
from hta.analysis.stragglers import COLLECTIVE_KERNELS, match_collectives
from hta.model.declared import WHOLE, Analysis, Columns
from hta.model.job import Job
from hta.model.runner import RankWork, remembered, run_one, visit_key
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankTrace, Trace

logger = logging.getLogger(__name__)

COLUMNS = ["rank", "host", "offset(us)", "collectives", "agreement(us)", "worst(us)",
           "applied"]
#: The columns of :func:`rank_host_row` (and :func:`rank_hosts`).
HOSTS = Columns.typed(("rank", "host"))
#: Offsets smaller than this (ns) are not applied: they are within the link latency that
#: separates the ends of one collective on two ranks.
MIN_APPLIED_NS = 20_000
_MAX_ROUNDS = 20


def rank_host(rt: RankTrace) -> str:
    """The ``host_name`` the rank's trace settings give, ``""`` when none."""
    settings = rt.meta.get("settings") or {}
    host = settings.get("host_name") if isinstance(settings, dict) else None
    return str(host) if host else ""


def rank_hosts(trace: Trace, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """Per rank, the ``host_name`` its trace's settings give (``""`` when none): columns
    ``rank``, ``host`` (the rows of :func:`rank_host_row` of the ranks of ``trace``)."""
    return RANK_HOSTS.run(trace, selection).reset_index(drop=True)


def rank_host_row(rt: RankTrace) -> pd.DataFrame:
    """One rank's row ``rank``, ``host`` (its ``host_name``, ``""`` when none)."""
    return pd.DataFrame([{"rank": rt.rank, "host": rank_host(rt)}], columns=["rank", "host"])


def _host_of(hosts: pd.DataFrame) -> dict[int, str]:
    return {int(r): str(h) for r, h in zip(hosts["rank"], hosts["host"])}


#: Rank -> host name, of the selected ranks (:func:`rank_host_row`, combined).
HOST_ROWS = Analysis("Hosts", rank_host_row, HOSTS, finish=_host_of)
#: Per rank, its host name (:func:`rank_hosts`).
RANK_HOSTS = Analysis("Hosts", rank_host_row, HOSTS, steps=WHOLE)


def estimate_offsets(ends: pd.DataFrame) -> dict[int, float]:
    """The per-rank offsets (ns, before grouping by host; the median-of-medians rounds of
    the module docstring) from ``ends``: columns ``collective``, ``rank``, ``end_ns``, one
    row per rank of an instance with two or more participants."""
    if not len(ends):
        return {}
    inst = pd.factorize(ends["collective"])[0]
    rank_codes, rank_values = pd.factorize(ends["rank"])
    end = ends["end_ns"].to_numpy(np.float64)
    # centre on a common origin so the medians work on small numbers
    end = end - np.median(end)
    offset = np.zeros(len(rank_values))
    frame = pd.DataFrame({"inst": inst, "rank": rank_codes})
    for _ in range(_MAX_ROUNDS):
        frame["v"] = end - offset[rank_codes]
        t = frame.groupby("inst")["v"].median().to_numpy()
        frame["w"] = end - t[inst]
        new = frame.groupby("rank")["w"].median().reindex(range(len(rank_values))).to_numpy()
        moved = np.nanmax(np.abs(new - offset)) if len(new) else 0.0
        offset = np.nan_to_num(new)
        if moved < 1.0:
            break
    return {int(r): float(o) for r, o in zip(rank_values, offset)}


def clock_offsets(trace: Job, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """Each rank's clock offset from the ends of its collectives: :data:`COLUMNS` (the
    module docstring defines them), in rank order."""
    selected = rank_numbers(trace, selection)
    iters = selection.iteration_list
    # kept for the job: the straggler rule and the replay's shifts ask for the same ones
    return remembered(trace, visit_key("clock_offsets", selected, iters), lambda: (
        offsets_from_kernels(_kernels(trace, selected, iters), _hosts(trace, selected),
                             selected)))


def kernels_visit(selected: list[int], iters: list[int] | None
                  ) -> tuple[Hashable, RankWork]:
    """The key and the work of the communication kernels of the ``selected`` ranks
    (the clock offsets and the straggler rule read them)."""
    return visit_key("kernels", selected, iters), COLLECTIVE_KERNELS.work(iters)


def hosts_visit(selected: list[int]) -> tuple[Hashable, RankWork]:
    """The key and the work of the ``selected`` ranks' hosts (rank -> host name)."""
    return visit_key("hosts", selected), HOST_ROWS.work()


def _kernels(trace: Job, selected: list[int], iters: list[int] | None) -> pd.DataFrame:
    """The communication kernels of the ``selected`` ranks (one visit per job, ranks and
    steps: :func:`hta.model.runner.remembered`)."""
    key, work = kernels_visit(selected, iters)
    return remembered(trace, key, lambda: run_one(trace, work, Selection.of(selected)))


def _hosts(trace: Job, selected: list[int]) -> dict[int, str]:
    key, work = hosts_visit(selected)
    return remembered(trace, key, lambda: run_one(trace, work, Selection.of(selected)))


def offsets_from_kernels(kernels: pd.DataFrame, host_of: Mapping[int, str],
                         selected: list[int]) -> pd.DataFrame:
    """:func:`clock_offsets` from a table of communication kernels
    (:func:`hta.analysis.stragglers.rank_collective_kernels`) and each rank's host."""
    arrivals = match_collectives(kernels)
    shared = arrivals[arrivals["participants"] >= 2] if len(arrivals) else arrivals
    raw = estimate_offsets(shared) if len(shared) else {}
    # one clock per host: the median of its ranks' offsets
    per_host: dict[str, list[float]] = {}
    for r, o in raw.items():
        if host_of.get(r):
            per_host.setdefault(host_of[r], []).append(o)
    host_offset = {h: float(np.median(v)) for h, v in per_host.items()}
    offset = {r: (host_offset[host_of[r]] if host_of.get(r) else raw[r]) if r in raw
              else 0.0 for r in selected}
    ref_host = host_of.get(selected[0], "") if selected else ""
    if selected:
        ref = offset[selected[0]]
        offset = {r: o - ref for r, o in offset.items()}
    # residuals against the final (per-host) offsets
    resid = _residuals(shared, offset) if len(shared) else None
    # the agreement a shift is judged by: over every row of the rank's host (its clock)
    errs = _per_rank(resid, selected)
    clock_err: dict[str, list[np.ndarray]] = {}
    for r in selected:
        clock_err.setdefault(host_of.get(r) or f"rank {r}", []).append(errs[r])
    clock_agreement = {k: float(np.median(np.concatenate(v))) if sum(x.size for x in v)
                       else float("nan") for k, v in clock_err.items()}
    rows = []
    for r in selected:
        off_ns = int(round(offset[r]))
        err = errs[r]
        if err.size:
            agreement, worst, n = float(np.median(err)), float(err.max()), int(err.size)
        else:
            agreement, worst, n = float("nan"), float("nan"), 0
        other_host = not host_of.get(r) or host_of.get(r) != ref_host
        judged = clock_agreement[host_of.get(r) or f"rank {r}"]
        applied = bool(n and other_host and abs(off_ns) >= MIN_APPLIED_NS
                       and abs(off_ns) >= 3 * judged)
        rows.append({"rank": r, "host": host_of.get(r, ""), "offset(us)": off_ns / 1e3,
                     "collectives": n, "agreement(us)": agreement / 1e3,
                     "worst(us)": worst / 1e3, "applied": applied})
    out = pd.DataFrame(rows, columns=COLUMNS)
    logger.debug("clock offsets: %s", out.to_dict("records"))
    return out


def _per_rank(resid: pd.DataFrame | None, selected: list[int]) -> dict[int, np.ndarray]:
    """Per selected rank, the absolute residuals of its rows, in their order (one sort of
    the rows by rank, not a pass over them per rank)."""
    if resid is None:
        return {r: np.zeros(0) for r in selected}
    rank = resid["rank"].to_numpy()
    order = np.argsort(rank, kind="stable")
    rank, err = rank[order], np.abs(resid["residual_ns"].to_numpy(np.float64))[order]
    lo = np.searchsorted(rank, selected, side="left")
    hi = np.searchsorted(rank, selected, side="right")
    return {r: err[a:b] for r, a, b in zip(selected, lo.tolist(), hi.tolist(), strict=True)}


def _residuals(ends: pd.DataFrame, offset: Mapping[int, float]) -> pd.DataFrame:
    """``ends`` with ``residual_ns = end - T - offset`` per row, ``T`` the instance's
    median of ``end - offset`` over its participants."""
    off = ends["rank"].map(lambda r: offset.get(int(r), 0.0)).to_numpy(np.float64)
    end = ends["end_ns"].to_numpy(np.float64)
    origin = np.median(end)
    v = pd.Series(end - origin - off)
    t = v.groupby(ends["collective"].to_numpy()).transform("median").to_numpy()
    return pd.DataFrame({"rank": ends["rank"].to_numpy(),
                         "residual_ns": end - origin - t - off})


def applied_offsets(offsets: pd.DataFrame) -> dict[int, int]:
    """Rank -> the ns to subtract from its times, for the ranks whose offset is applied
    (``applied`` in :func:`clock_offsets`'s table); other ranks are absent."""
    if not len(offsets):
        return {}
    keep = offsets[offsets["applied"].astype(bool)]
    return {int(r): int(round(float(o) * 1e3))
            for r, o in zip(keep["rank"], keep["offset(us)"])}


def shift_times(frame: pd.DataFrame, offsets: Mapping[int, int],
                columns: Iterable[str] = ("start_ns", "end_ns"),
                rank_column: str = "rank") -> pd.DataFrame:
    """A copy of ``frame`` with each row's time ``columns`` moved onto the reference
    clock: minus its rank's offset (ranks absent from ``offsets`` stay)."""
    if not offsets or not len(frame):
        return frame
    out = frame.copy()
    shift = out[rank_column].map(lambda r: offsets.get(int(r), 0)).to_numpy(np.int64)
    for col in columns:
        if col in out:
            out[col] = out[col].to_numpy(np.int64) - shift
    return out


def shift_rank(rt: RankTrace, offset_ns: int) -> RankTrace:
    """A copy of ``rt`` whose events' ``ts`` and ``end`` are on the reference clock
    (minus ``offset_ns``); ``rt`` itself when there is nothing to move. Side tables are
    shared, unshifted: for analyses that read the events' times only (the what-if job
    graph)."""
    if not offset_ns:
        return rt
    import dataclasses

    events = rt.events.copy()
    for col in ("ts", "end"):
        events[col] = events[col].to_numpy(np.int64) - np.int64(offset_ns)
    return dataclasses.replace(rt, events=events)


def aligned_arrivals(trace: Job, selection: Selection = EVERYTHING,
                     offsets: Mapping[int, int] | None = None) -> pd.DataFrame:
    """:func:`hta.analysis.stragglers.collective_arrivals` with each rank's kernel times
    first moved onto the reference clock, so lags, waits and stragglers compare true
    times. ``offsets``: rank -> ns to subtract (:func:`applied_offsets`); None estimates
    them from the same kernels (the selected ranks and steps), ``{}`` keeps raw clocks."""
    selected = rank_numbers(trace, selection)
    kernels = _kernels(trace, selected, selection.iteration_list)
    if offsets is None:
        offsets = (applied_offsets(offsets_from_kernels(kernels, _hosts(trace, selected),
                                                        selected))
                   if len(selected) > 1 and len(kernels) else {})
    return match_collectives(shift_times(kernels, offsets))


__all__ = ["COLUMNS", "HOSTS", "HOST_ROWS", "MIN_APPLIED_NS", "aligned_arrivals",
           "applied_offsets", "clock_offsets", "estimate_offsets", "hosts_visit", "kernels_visit",
           "offsets_from_kernels", "rank_host", "rank_host_row", "rank_hosts", "shift_rank",
           "shift_times"]
