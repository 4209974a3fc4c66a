"""Why a rank is late at the collectives: slow compute, imbalance, its host, or its link.

:mod:`hta.analysis.stragglers` says which rank the others wait for. This module says why,
collective by collective, from what each rank's trace shows, and whether it recurs.

**The collectives** (:func:`collective_instances`, from
:func:`~hta.analysis.stragglers.match_collectives` on one clock; instances of two ranks
or more; send/recv never count). Per instance and rank, integer ns:

* ``held_ns``: for the rank that alone started last, the time it started after every
  other participant (its start minus the latest of the others' starts): how long each of
  them was held up at least, read from the starts alone (a kernel's duration mixes the
  wait with its own transfer); 0 for the others. An instance where another
  participant's kernel had ended before the last one started holds nobody up (their
  clocks disagree, or the kernels were matched wrongly): 0;
* the *stretch before it*: from the end of the rank's previous collective kernel (in
  start order on that rank; the start of its step when there is none) to its start;
* ``compute_ns``: in that stretch, the union of the rank's computation kernels (GPU work
  of class computation, :mod:`hta.analysis.gpu_work`), measured where the rank is
  (:func:`rank_stretch_measures`);
* ``idle_ns``: in that stretch, the time with no GPU work of the rank running: its GPU
  waiting for its host, less the idle time inside the rank's one-time costs
  (:mod:`hta.analysis.findings.onetime`: a first kernel launch, a compilation, set-up),
  which no recurring cause explains;
* ``transfer_ns``: the previous collective's transfer on the rank: its end minus the
  latest start of that instance (at least 0), without the wait for late peers.

**Late.** Per rank and step (``ProfilerStep``; a rank without them has one span per step
number its events carry, the whole trace usually), ``held_ns`` is summed over the
instances at which it held the others up. A rank is *late* on a step when that sum
exceeds the largest sum of any other rank in the step by at least ``max(noise_floor_ns,
noise_share x the median step length)`` (20 µs and 2 % by default): the job's own jitter
stays below it, and two ranks that hold each other up in turn by about as much are
neither of them the step's straggler.

**Cause.** At each instance where the late rank held the others up, each measure of its
stretch is compared with the median of the other participants'; the excesses (those
above 0) are summed over its instances in the step. The largest names the cause, when it
is at least a quarter of the time by which its held time exceeds any other rank's in the
step; otherwise the cause is ``unexplained`` (the trace does not show why: a wait inside
a CPU op that launches nothing, a clock that drifts). Another measure whose excess is at
least :data:`SHARED` of their sum is a cause too: the step's held time and wait are
shared between the causes in proportion to their excesses (a rank with more computation
*and* more idle time before the same collectives is late for both):

* ``slow_compute``: its GPU computation before the collective took longer, and it is the
  same rank on most steps (at least :data:`RECURRING` of the steps analysed), or no other
  rank was ever late for that reason (a throttled or faulty GPU, or more work every
  step);
* ``imbalance``: its GPU computation took longer on fewer steps, while other ranks were
  late for the same reason on other steps (uneven data, sequence lengths, routing);
* ``host``: its GPU idled longer, waiting for its host (data loading, Python, garbage
  collection ...);
* ``slow_link``: its previous transfer took longer than the others' (it ended later, so
  it started the next stretch later).

**One row per rank and cause** (:data:`CAUSE_COLUMNS`): ``steps`` (the steps it was late
for that cause), ``recurring`` (late on at least :data:`RECURRING` of the steps
analysed, when more than one step is analysed), ``lag(us)`` (mean of its largest
arrival lag per step), ``held(us)`` and ``wait_caused(us)`` (sums over those steps of the
cause's share; the second is :mod:`~hta.analysis.stragglers`' ``wait_caused_ns``), and
the evidence, per step (the
mean over its steps of the sums over its instances), each beside the median other
participant's: ``compute(us)``, ``idle(us)``, ``transfer(us)``. ``cost(us)`` and
``change`` are filled by :meth:`hta.trace_analysis.TraceAnalysis.get_straggler_causes`
from the replay. Sorted by ``held(us)``, largest first.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import COMPUTE, rank_gpu_work
from hta.analysis.intervals import Cover
from hta.analysis.select import rank_numbers
from hta.analysis.stragglers import matched_collectives
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.job import Job
from hta.model.runner import RankWork, remembered, run_one, visit_key
from hta.model.selection import Selection, StepList, rank_steps
from hta.model.trace import RankTrace

PROFILE_COLUMNS = ["rank", "step", "step_start_ns", "step_ns"]
INSTANCE_COLUMNS = ["collective", "rank", "step", "start_ns", "end_ns", "held_ns", "lag_ns",
                    "wait_caused_ns", "prev_end_ns", "transfer_ns"]
MEASURE_COLUMNS = ["rank", "collective", "compute_ns", "idle_ns"]
CAUSE_COLUMNS = ["rank", "cause", "steps", "recurring", "lag(us)", "held(us)",
                 "wait_caused(us)", "cost(us)", "change", "compute(us)",
                 "median_compute(us)", "idle(us)", "median_idle(us)", "transfer(us)",
                 "median_transfer(us)"]
PROFILE = Columns.typed(PROFILE_COLUMNS, "int64")
INSTANCES = Columns.typed(INSTANCE_COLUMNS, "int64")
MEASURES = Columns.typed(MEASURE_COLUMNS, "int64")
#: The schema of :func:`straggler_causes`' table (:data:`CAUSE_COLUMNS`).
CAUSE_TABLE = Columns.of({c: {"rank": "int64", "cause": "object", "steps": "object",
                              "recurring": "bool", "change": "object"}.get(c, "float64")
                          for c in CAUSE_COLUMNS})
CAUSES = ("slow_compute", "imbalance", "host", "slow_link", "unexplained")
NOISE_SHARE = 0.02
NOISE_FLOOR_NS = 20_000
#: The share of the net held time the largest excess must reach to name a cause.
EXPLAINED = 0.25
#: The share of the excesses a second measure must reach to be a cause of its own.
SHARED = 0.25
#: The share of the analysed steps on which a rank must be late to recur.
RECURRING = 2 / 3
_MEASURES = (("compute", "slow_compute"), ("idle", "host"), ("transfer", "slow_link"))
#: The measure whose excess names each cause: its columns are ``{measure}(us)`` (the
#: rank's) and ``median_{measure}(us)`` (the other participants' median).
CAUSE_MEASURE = {**{c: m for m, c in _MEASURES}, "imbalance": "compute"}
NONE = -1


# -- one rank --------------------------------------------------------------------------------
def rank_step_profile(rt: RankTrace, iterations: StepList = None) -> pd.DataFrame:
    """One rank's steps (:data:`PROFILE_COLUMNS`): each ``ProfilerStep`` (of
    ``iterations``, all when None) with its start and length; a rank without them has
    one span per step number its events carry (module docstring)."""
    steps = rank_steps(rt)
    if not len(steps):
        steps = _whole_spans(rt)
    if iterations is not None:
        steps = steps[steps["step"].isin(list(iterations))]
    if not len(steps):
        return PROFILE.empty()
    ts = steps["ts"].to_numpy(np.int64)
    return pd.DataFrame({
        "rank": np.full(len(steps), rt.rank, dtype=np.int64),
        "step": steps["step"].to_numpy(np.int64), "step_start_ns": ts,
        "step_ns": steps["end"].to_numpy(np.int64) - ts}, columns=PROFILE_COLUMNS)


STEP_PROFILE = Analysis("Step profiles", rank_step_profile, PROFILE, steps=PER_STEP)


def _whole_spans(rt: RankTrace) -> pd.DataFrame:
    """One span per ``iteration`` value the rank's events carry, from the first event's
    start to the last one's end (``step``, ``ts``, ``end``)."""
    ev = rt.events
    if not len(ev):
        return pd.DataFrame({"step": [], "ts": [], "end": []}, dtype=np.int64)
    g = pd.DataFrame({"step": ev["iteration"].to_numpy(np.int64), "ts": rt.column("ts"),
                      "end": rt.column("end")}).groupby("step", sort=True)
    return pd.DataFrame({"ts": g["ts"].min(), "end": g["end"].max()}).reset_index()


def rank_stretch_measures(rt: RankTrace, stretches: Mapping[int, pd.DataFrame]
                          ) -> pd.DataFrame:
    """One rank's :data:`MEASURE_COLUMNS`: in each of its stretches (``stretches[rank]``:
    ``collective``, ``start_ns``, ``end_ns`` on the rank's own clock), the union of its
    computation kernels and the time with no GPU work (module docstring)."""
    mine = stretches.get(rt.rank)
    if mine is None or not len(mine):
        return MEASURES.empty()
    w = rank_gpu_work(rt)
    comp = w.cls == COMPUTE
    s = mine["start_ns"].to_numpy(np.int64)
    e = np.maximum(mine["end_ns"].to_numpy(np.int64), s)
    gpu = Cover(w.ts, w.end)
    return pd.DataFrame({
        "rank": np.full(len(mine), rt.rank, dtype=np.int64),
        "collective": mine["collective"].to_numpy(np.int64),
        "compute_ns": Cover(w.ts[comp], w.end[comp]).within(s, e),
        "idle_ns": (e - s) - gpu.within(s, e) - _one_time_idle(rt, gpu, s, e)},
        columns=MEASURE_COLUMNS)


STRETCH_MEASURES = Analysis("Stretches before collectives", rank_stretch_measures, MEASURES)


def _one_time_idle(rt: RankTrace, gpu: Cover, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per stretch ``[s, e)``: the GPU idle time inside the rank's one-time costs
    (:func:`hta.analysis.findings.onetime.one_time_costs`: a first kernel launch, a
    compilation, set-up), which no recurring cause explains."""
    from hta.analysis.findings.onetime import one_time_costs

    ot = one_time_costs(rt)
    out = np.zeros(s.shape[0], dtype=np.int64)
    spans = Cover(ot.start, ot.end)
    for a, b in zip(spans.s.tolist(), spans.e.tolist(), strict=True):
        lo, hi = np.maximum(s, a), np.minimum(e, b)
        span = np.maximum(hi - lo, 0)
        out += span - np.where(span > 0, gpu.within(lo, np.maximum(hi, lo)), 0)
    return out


# -- the collectives --------------------------------------------------------------------------
def collective_instances(arrivals: pd.DataFrame) -> pd.DataFrame:
    """:data:`INSTANCE_COLUMNS` from :func:`~hta.analysis.stragglers.match_collectives`'s
    table (module docstring): instances of two ranks or more, send/recv left out, by rank
    then start; ``prev_end_ns`` -1 for a rank's first."""
    a = matched_collectives(arrivals)
    a = a.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)
    if not len(a):
        return INSTANCES.empty()
    grp = a.groupby("collective")
    latest = grp["start_ns"].transform("max").to_numpy(np.int64)
    start, end = a["start_ns"].to_numpy(np.int64), a["end_ns"].to_numpy(np.int64)
    last = a["last"].to_numpy(bool)
    second = a.assign(_s=np.where(last, np.iinfo(np.int64).min, start)).groupby(
        "collective")["_s"].transform("max").to_numpy(np.int64)
    alone = last & (grp["last"].transform("sum").to_numpy() == 1)
    ended_before = a.assign(_b=end < latest).groupby("collective")["_b"].transform("any")
    alone &= ~ended_before.to_numpy(bool)
    rank = a["rank"].to_numpy(np.int64)
    first = np.r_[True, rank[1:] != rank[:-1]]
    transfer = np.clip(end - latest, 0, None)
    return pd.DataFrame({
        "collective": a["collective"].to_numpy(np.int64), "rank": rank,
        "step": a["iteration"].to_numpy(np.int64), "start_ns": start, "end_ns": end,
        "held_ns": np.where(alone, latest - second, 0),
        "lag_ns": np.where(last, a["arrival_lag_ns"].to_numpy(np.int64), 0),
        "wait_caused_ns": np.where(last, a["wait_caused_ns"].to_numpy(np.int64), 0),
        "prev_end_ns": np.where(first, NONE, np.r_[np.int64(NONE), end[:-1]]),
        "transfer_ns": np.where(first, 0, np.r_[np.int64(0), transfer[:-1]]),
    }, columns=INSTANCE_COLUMNS)


def stretches(instances: pd.DataFrame, profile: pd.DataFrame,
              offsets: Mapping[int, int] | None = None) -> dict[int, pd.DataFrame]:
    """Per rank, the stretches to measure (``collective``, ``start_ns``, ``end_ns`` on the
    rank's own clock): those before every instance at which some rank held the others
    up, for every participant. ``instances`` are on one clock; ``offsets``: rank -> the
    ns subtracted from its times to put them there."""
    held = instances.loc[instances["held_ns"] > 0, "collective"].unique()
    part = instances[instances["collective"].isin(held)]
    if not len(part):
        return {}
    shift = part["rank"].map(lambda r: (offsets or {}).get(int(r), 0)).to_numpy(np.int64)
    begin = part["prev_end_ns"].to_numpy(np.int64)
    starts = profile.set_index(["rank", "step"])["step_start_ns"]
    step_start = starts.reindex(pd.MultiIndex.from_arrays(
        [part["rank"], part["step"]])).to_numpy(dtype=float)
    own_start = part["start_ns"].to_numpy(np.int64) + shift
    fallback = np.where(np.isnan(step_start), own_start, np.nan_to_num(step_start))
    raw_begin = np.where(begin >= 0, begin + shift, fallback.astype(np.int64))
    frame = pd.DataFrame({"rank": part["rank"].to_numpy(np.int64),
                          "collective": part["collective"].to_numpy(np.int64),
                          "start_ns": np.minimum(raw_begin, own_start), "end_ns": own_start})
    return {int(r): f.drop(columns="rank").reset_index(drop=True)
            for r, f in frame.groupby("rank", sort=True)}


# -- the causes ---------------------------------------------------------------------------------
def profile_visit(selected: list[int], iters: StepList
                  ) -> tuple[Hashable, RankWork]:
    """The key and the work of the ``selected`` ranks' step profiles
    (:func:`rank_step_profile`)."""
    return visit_key("step_profile", selected, iters), STEP_PROFILE.work(iters)


def job_straggler_causes(trace: Job, selection: Selection, arrivals: pd.DataFrame,
                         offsets: Mapping[int, int] | None = None) -> pd.DataFrame:
    """:func:`straggler_causes` of the selected ranks: ``arrivals`` the matched
    collectives on one clock (``offsets``: rank -> ns subtracted to put a rank's times
    there); each rank's steps and stretches are read where the rank is
    (:func:`~hta.model.runner.run_one`); only small tables come back."""
    ranks = rank_numbers(trace, selection)
    if len(ranks) < 2:
        return CAUSE_TABLE.empty()
    key, work = profile_visit(ranks, selection.iteration_list)
    profile = remembered(trace, key, lambda: run_one(trace, work, Selection.of(ranks)))
    instances = collective_instances(arrivals)
    bounds = stretches(instances, profile, offsets)
    measures = (STRETCH_MEASURES.run(trace, Selection.of(sorted(bounds)), bounds) if bounds
                else MEASURES.empty())
    return straggler_causes(profile, instances, measures)


def straggler_causes(profile: pd.DataFrame, instances: pd.DataFrame,
                     measures: pd.DataFrame, *, noise_share: float = NOISE_SHARE,
                     noise_floor_ns: int = NOISE_FLOOR_NS) -> pd.DataFrame:
    """:data:`CAUSE_COLUMNS` from every rank's :func:`rank_step_profile`, the
    :func:`collective_instances` and every rank's :func:`rank_stretch_measures` (module
    docstring); ``cost(us)`` NaN and ``change`` empty (the facade fills them from the
    replay)."""
    per = step_evidence(profile, instances, measures, noise_share=noise_share,
                        noise_floor_ns=noise_floor_ns)
    late = per[per["late"]]
    if not len(late):
        return CAUSE_TABLE.empty()
    n_steps = int(per["step"].nunique())
    late = _cause_parts(late.reset_index(drop=True), n_steps)
    rows = []
    for (rank, cause), part in late.groupby(["rank", "cause"], sort=True):
        rows.append({
            "rank": int(rank), "cause": str(cause),
            "steps": tuple(int(s) for s in part["step"]),
            "recurring": len(part) >= RECURRING * n_steps and n_steps > 1,
            "lag(us)": part["lag_ns"].mean() / 1e3,
            "held(us)": (part["held_ns"] * part["share"]).sum() / 1e3,
            "wait_caused(us)": (part["wait_caused_ns"] * part["share"]).sum() / 1e3,
            "cost(us)": np.nan, "change": "",
            **{f"{m}(us)": part[f"{m}_ns"].mean() / 1e3 for m, _ in _MEASURES},
            **{f"median_{m}(us)": part[f"median_{m}_ns"].mean() / 1e3 for m, _ in _MEASURES},
        })
    out = pd.DataFrame(rows)
    out = out.sort_values(["held(us)", "rank"], ascending=[False, True], kind="stable")
    return out.reset_index(drop=True)[CAUSE_COLUMNS]


def instance_evidence(instances: pd.DataFrame, measures: pd.DataFrame) -> pd.DataFrame:
    """Per instance at which a rank held the others up: that rank's ``collective``,
    ``rank``, ``step``, ``held_ns``, and its stretch's ``compute_ns``, ``idle_ns`` and
    ``transfer_ns`` beside the median of the other participants' (``median_*_ns``)."""
    m = instances.merge(measures, on=["rank", "collective"], how="left")
    for c in ("compute_ns", "idle_ns"):
        m[c] = m[c].fillna(0).astype(np.int64)
    late = m[m["held_ns"] > 0]
    others = m[m["collective"].isin(late["collective"]) & (m["held_ns"] == 0)]
    medians = others.groupby("collective")[["compute_ns", "idle_ns", "transfer_ns"]].median()
    medians.columns = [f"median_{c}" for c in medians.columns]
    return late.join(medians, on="collective")


def step_evidence(profile: pd.DataFrame, instances: pd.DataFrame, measures: pd.DataFrame,
                  *, noise_share: float = NOISE_SHARE,
                  noise_floor_ns: int = NOISE_FLOOR_NS) -> pd.DataFrame:
    """Per rank and step of the profile: the held time, wait caused and largest lag, the
    sums of the evidence over the instances at which it held the others up, the net
    held time and ``late`` (module docstring)."""
    ev = instance_evidence(instances, measures)
    sums = [f"{p}{m}_ns" for m, _ in _MEASURES for p in ("", "median_")]
    by = ev.groupby(["rank", "step"])[["held_ns"] + sums].sum()
    g = instances.groupby(["rank", "step"])
    by = by.join(pd.DataFrame({"wait_caused_ns": g["wait_caused_ns"].sum(),
                               "lag_ns": g["lag_ns"].max()}), how="outer")
    per = profile.join(by, on=["rank", "step"])
    for c in ["held_ns", "wait_caused_ns", "lag_ns"] + sums:
        per[c] = per[c].fillna(0)
    steps = per.groupby("step")
    noise = np.maximum(noise_floor_ns,
                       noise_share * steps["step_ns"].transform("median").to_numpy())
    per["net_held_ns"] = per["held_ns"].to_numpy(float) - _most_held_by_another(per)
    per["late"] = ((per["net_held_ns"].to_numpy() >= noise)
                   & (steps["rank"].transform("size").to_numpy() >= 2))
    return per


def _most_held_by_another(per: pd.DataFrame) -> np.ndarray:
    """Per row: the largest ``held_ns`` of another rank in the same step."""
    held = per["held_ns"].to_numpy(float)
    top = per.assign(_h=held).groupby("step")["_h"].transform("max").to_numpy(float)
    is_top = held == top
    # the second largest, for the rank(s) holding the largest
    second = per.assign(_h=np.where(is_top, -1.0, held)).groupby("step")["_h"].transform(
        "max").to_numpy(float)
    ties = per.assign(_t=is_top).groupby("step")["_t"].transform("sum").to_numpy() > 1
    return np.where(is_top & ~ties, np.maximum(second, 0.0), top)


def _cause_parts(late: pd.DataFrame, n_steps: int) -> pd.DataFrame:
    """Each late (rank, step) row once per cause it is late for, with the cause's
    ``share`` of its held time (module docstring)."""
    excess = np.clip(np.column_stack([
        late[f"{m}_ns"].to_numpy(float) - late[f"median_{m}_ns"].to_numpy(float)
        for m, _ in _MEASURES]), 0, None)
    largest = excess.max(axis=1)
    explained = (largest > 0) & (largest >= EXPLAINED * late["net_held_ns"].to_numpy(float))
    share = excess / np.where(largest > 0, excess.sum(axis=1), 1.0)[:, None]
    keep = (share >= SHARED) | (excess == largest[:, None])
    share = np.where(keep, share, 0.0)
    share /= np.where(share.sum(axis=1) > 0, share.sum(axis=1), 1.0)[:, None]
    parts = []
    for j, (_, cause) in enumerate(_MEASURES):
        mine = explained & (share[:, j] > 0)
        parts.append(late[mine].assign(cause=cause, share=share[mine, j]))
    parts.append(late[~explained].assign(cause="unexplained", share=1.0))
    out = pd.concat(parts, ignore_index=True)
    compute = (out["cause"] == "slow_compute").to_numpy()
    ranks = out["rank"].to_numpy()
    if len(set(ranks[compute].tolist())) > 1:
        counts = pd.Series(ranks[compute]).value_counts()
        rare = np.array([counts.get(r, 0) < RECURRING * n_steps for r in ranks])
        out.loc[compute & rare, "cause"] = "imbalance"
    return out.sort_values(["rank", "step"], kind="stable")

