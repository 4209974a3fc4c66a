"""Why a rank is late at the collectives: slow compute, imbalance, its host, or its link.

:mod:`hta.analysis.stragglers` says which rank the others wait for. This module says why,
step by step, from what each rank's trace shows, and whether it recurs.

**Per rank and step** (:func:`rank_step_profile`, one rank at a time, next to the data;
integer ns; a step is a ``ProfilerStep``):

* ``compute_ns``: the union of the rank's computation kernels launched in the step (GPU
  work of class computation, :mod:`hta.analysis.gpu_work`), by the step its launch
  belongs to;
* ``idle_ns``: the time inside the step's span on the host (``ProfilerStep#N``) when no
  GPU work of the rank runs: the GPU waiting for its host;
* ``step_ns`` and ``step_start_ns``: the span's length and start.

A rank without ``ProfilerStep`` spans has one span per step number its events carry (the
whole trace, usually), from its first event's start to its last event's end.

**From the matched collectives** (:func:`~hta.analysis.stragglers.match_collectives`, on
one clock; send/recv never count):

* ``transfer_ns``: per rank and step, the sum over its collective kernels of the time
  after the last participant started (``end - latest start``, at least 0): the transfer
  itself, without the wait for late peers;
* ``held_ns``: per rank and step, the sum over the collectives at which it alone started
  last of the time it started after every other participant (its start minus the latest
  of the others' starts): how long each of them was held up at least, read from the
  starts alone (a kernel's duration mixes the wait with its own transfer);
* ``wait_caused_ns``: the sum of :mod:`~hta.analysis.stragglers`' ``wait_caused_ns``;
* ``lag_ns``: its largest arrival lag at those collectives.

**Late.** A rank is *late* on a step when its ``held_ns`` there exceeds the largest
``held_ns`` of any other rank in that step by at least ``max(noise_floor_ns, noise_share x
the median step length)`` (20 µs and 2 % by default): the job's own jitter stays below it,
and two ranks that hold each other up in turn by about as much (uneven work that changes
from one collective to the next) are neither of them the step's straggler.

**Cause.** For a late rank and step, each measure is compared with the median over the
ranks in that step: ``compute_ns`` (excess: GPU work slower), ``idle_ns`` (excess: its
host fed the GPU late) and ``transfer_ns`` (excess: its transfers slower). The largest
excess names the cause, when it is at least a quarter of the time by which its
``held_ns`` exceeds any other rank's in the step; otherwise the cause is ``unexplained`` (the trace does not show why, e.g. a wait outside the step spans):

* ``host``: the GPU idled, waiting for the host (data loading, Python, garbage
  collection ...), while its GPU work took the usual time;
* ``slow_link``: its transfers took longer than the others';
* ``slow_compute``: its GPU work was slower, and it is the same rank on most steps (at
  least :data:`RECURRING` of the steps analysed), or no other rank was ever late for
  that reason (a throttled or faulty GPU, or a rank with more work every step);
* ``imbalance``: its GPU work was slower on fewer steps, while other ranks were late for
  the same reason on other steps (uneven data, sequence lengths, routing).

**One row per rank and cause** (:data:`CAUSE_COLUMNS`): ``steps`` (the steps it was late
for that cause), ``recurring`` (late on at least :data:`RECURRING` of the steps
analysed), ``lag(us)`` (mean of ``lag_ns``), ``held(us)`` and ``wait_caused(us)`` (sums
over those steps), and the evidence as means over those steps, each beside the median
rank's: ``compute(us)``, ``idle(us)``, ``transfer(us)``. ``cost(us)`` and ``change`` are
filled by :meth:`hta.trace_analysis.TraceAnalysis.get_straggler_causes` from the replay.
Sorted by ``held(us)``, largest first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import COMPUTE, rank_gpu_work
from hta.analysis.intervals import Cover, union_length
from hta.model.selection import StepList, rank_steps
from hta.model.trace import RankTrace

PROFILE_COLUMNS = ["rank", "step", "step_start_ns", "step_ns", "compute_ns", "idle_ns"]
CAUSE_COLUMNS = ["rank", "cause", "steps", "recurring", "lag(us)", "held(us)",
                 "wait_caused(us)", "cost(us)", "change", "compute(us)",
                 "median_compute(us)", "idle(us)", "median_idle(us)", "transfer(us)",
                 "median_transfer(us)"]
CAUSES = ("slow_compute", "imbalance", "host", "slow_link", "unexplained")
NOISE_SHARE = 0.02
NOISE_FLOOR_NS = 20_000
#: The share of ``held_ns`` the largest excess must reach to name a cause.
EXPLAINED = 0.25
#: The share of the analysed steps on which a rank must be late to recur.
RECURRING = 2 / 3
_MEASURES = (("compute_ns", "slow_compute"), ("idle_ns", "host"),
             ("transfer_ns", "slow_link"))


# -- one rank --------------------------------------------------------------------------------
def rank_step_profile(rt: RankTrace, iterations: StepList = None) -> pd.DataFrame:
    """One rank's :data:`PROFILE_COLUMNS`, one row per ``ProfilerStep`` (of
    ``iterations``, all when None): module docstring."""
    steps = rank_steps(rt)
    if not len(steps):
        steps = _whole_spans(rt)
    if iterations is not None:
        steps = steps[steps["step"].isin(list(iterations))]
    if not len(steps):
        return no_profile()
    w = rank_gpu_work(rt)
    busy = Cover(w.ts, w.end)
    ts = steps["ts"].to_numpy(np.int64)
    end = steps["end"].to_numpy(np.int64)
    comp = w.cls == COMPUTE
    it, s, e = w.iteration[comp], w.ts[comp], w.end[comp]
    compute = [union_length(s[it == n], e[it == n]) for n in steps["step"].to_numpy()]
    return pd.DataFrame({
        "rank": np.full(len(steps), rt.rank, dtype=np.int64),
        "step": steps["step"].to_numpy(np.int64), "step_start_ns": ts,
        "step_ns": end - ts, "compute_ns": np.asarray(compute, dtype=np.int64),
        "idle_ns": (end - ts) - busy.within(ts, end),
    }, columns=PROFILE_COLUMNS)


def _whole_spans(rt: RankTrace) -> pd.DataFrame:
    """A rank without ``ProfilerStep``: one span per ``iteration`` value its events carry,
    from the first event's start to the last one's end (``step``, ``ts``, ``end``)."""
    ev = rt.events
    if not len(ev):
        return pd.DataFrame({"step": [], "ts": [], "end": []}, dtype=np.int64)
    g = pd.DataFrame({"step": ev["iteration"].to_numpy(np.int64), "ts": ev["ts"].to_numpy(),
                      "end": ev["end"].to_numpy()}).groupby("step", sort=True)
    return pd.DataFrame({"ts": g["ts"].min(), "end": g["end"].max()}).reset_index()


def no_profile() -> pd.DataFrame:
    """:func:`rank_step_profile` of no rank (no rows)."""
    return pd.DataFrame({c: np.zeros(0, np.int64) for c in PROFILE_COLUMNS})


# -- the collectives --------------------------------------------------------------------------
def step_collectives(arrivals: pd.DataFrame) -> pd.DataFrame:
    """Per rank and step, from :func:`~hta.analysis.stragglers.match_collectives`'s
    table: ``transfer_ns``, ``held_ns``, ``wait_caused_ns`` and ``lag_ns`` (module
    docstring); collectives of two participants or more, send/recv left out."""
    cols = ["rank", "step", "transfer_ns", "held_ns", "wait_caused_ns", "lag_ns"]
    if not len(arrivals):
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in cols})
    a = arrivals[(arrivals["participants"] >= 2) & (arrivals["matched_by"] != "p2p")]
    if not len(a):
        return pd.DataFrame({c: np.zeros(0, np.int64) for c in cols})
    grp = a.groupby("collective")
    latest = grp["start_ns"].transform("max").to_numpy(np.int64)
    start = a["start_ns"].to_numpy(np.int64)
    last = a["last"].to_numpy(bool)
    # the latest start among the others: the second-latest start of the instance
    second = a.assign(_s=np.where(last, np.iinfo(np.int64).min, start)).groupby(
        "collective")["_s"].transform("max").to_numpy(np.int64)
    alone = last & (grp["last"].transform("sum").to_numpy() == 1)
    caused = a["wait_caused_ns"].to_numpy(np.int64)
    frame = pd.DataFrame({
        "rank": a["rank"].to_numpy(np.int64), "step": a["iteration"].to_numpy(np.int64),
        "transfer_ns": np.clip(a["end_ns"].to_numpy(np.int64) - latest, 0, None),
        "held_ns": np.where(alone, latest - second, 0),
        "wait_caused_ns": np.where(last, caused, 0),
        "lag_ns": np.where(last, a["arrival_lag_ns"].to_numpy(np.int64), 0),
    })
    g = frame.groupby(["rank", "step"], sort=True)
    out = g[["transfer_ns", "held_ns", "wait_caused_ns"]].sum()
    out["lag_ns"] = g["lag_ns"].max()
    return out.reset_index()[cols]


# -- the causes ---------------------------------------------------------------------------------
def straggler_causes(profile: pd.DataFrame, arrivals: pd.DataFrame, *,
                     noise_share: float = NOISE_SHARE,
                     noise_floor_ns: int = NOISE_FLOOR_NS) -> pd.DataFrame:
    """:data:`CAUSE_COLUMNS` from every rank's :func:`rank_step_profile` and the matched
    collectives (module docstring); ``cost(us)`` NaN and ``change`` empty (the facade
    fills them from the replay)."""
    per = step_evidence(profile, arrivals, noise_share=noise_share,
                        noise_floor_ns=noise_floor_ns)
    late = per[per["late"]]
    if not len(late):
        return no_causes()
    n_steps = int(per["step"].nunique())
    late = late.assign(cause=_name_causes(late, n_steps))
    rows = []
    for (rank, cause), part in late.groupby(["rank", "cause"], sort=True):
        rows.append({
            "rank": int(rank), "cause": str(cause),
            "steps": tuple(int(s) for s in part["step"]),
            "recurring": len(part) >= RECURRING * n_steps and n_steps > 1,
            "lag(us)": part["lag_ns"].mean() / 1e3,
            "held(us)": part["held_ns"].sum() / 1e3,
            "wait_caused(us)": part["wait_caused_ns"].sum() / 1e3,
            "cost(us)": np.nan, "change": "",
            **{f"{m}(us)": part[f"{m}_ns"].mean() / 1e3 for m in ("compute", "idle",
                                                                  "transfer")},
            **{f"median_{m}(us)": part[f"median_{m}_ns"].mean() / 1e3
               for m in ("compute", "idle", "transfer")},
        })
    out = pd.DataFrame(rows)
    out = out.sort_values(["held(us)", "rank"], ascending=[False, True], kind="stable")
    return out.reset_index(drop=True)[CAUSE_COLUMNS]


def step_evidence(profile: pd.DataFrame, arrivals: pd.DataFrame, *,
                  noise_share: float = NOISE_SHARE,
                  noise_floor_ns: int = NOISE_FLOOR_NS) -> pd.DataFrame:
    """Per rank and step: the profile, the collectives' numbers, the medians over the
    ranks of the step (``median_*_ns``) and ``late`` (module docstring)."""
    coll = step_collectives(arrivals)
    per = profile.merge(coll, on=["rank", "step"], how="left")
    for c in ("transfer_ns", "held_ns", "wait_caused_ns", "lag_ns"):
        per[c] = per[c].fillna(0).astype(np.int64)
    g = per.groupby("step")
    for m in ("compute", "idle", "transfer", "step"):
        per[f"median_{m}_ns"] = g[f"{m}_ns"].transform("median")
    ranks = g["rank"].transform("size")
    noise = np.maximum(noise_floor_ns, noise_share * per["median_step_ns"].to_numpy())
    per["net_held_ns"] = per["held_ns"].to_numpy(np.int64) - _most_held_by_another(per)
    per["late"] = (per["net_held_ns"].to_numpy() >= noise) & (ranks.to_numpy() >= 2)
    return per


def _most_held_by_another(per: pd.DataFrame) -> np.ndarray:
    """Per row: the largest ``held_ns`` of another rank in the same step."""
    held = per["held_ns"].to_numpy(np.int64)
    g = per.assign(_h=held).groupby("step")["_h"]
    top = g.transform("max").to_numpy(np.int64)
    is_top = held == top
    # the second largest, for the rank(s) holding the largest
    second = per.assign(_h=np.where(is_top, -1, held)).groupby("step")["_h"].transform(
        "max").to_numpy(np.int64)
    ties = per.assign(_t=is_top).groupby("step")["_t"].transform("sum").to_numpy() > 1
    return np.where(is_top & ~ties, np.maximum(second, 0), top)


def _name_causes(late: pd.DataFrame, n_steps: int) -> np.ndarray:
    """The cause of each late (rank, step) row (module docstring)."""
    excess = np.column_stack([
        late[m].to_numpy(float) - late[f"median_{m}"].to_numpy(float)
        for m, _ in _MEASURES])
    best = np.argmax(excess, axis=1)
    largest = excess[np.arange(len(late)), best]
    names = np.array([c for _, c in _MEASURES], dtype=object)[best]
    explained = largest >= EXPLAINED * late["net_held_ns"].to_numpy(float)
    names = np.where(explained, names, "unexplained")
    compute = names == "slow_compute"
    ranks = late["rank"].to_numpy()
    compute_ranks = set(ranks[compute].tolist())
    if len(compute_ranks) > 1:
        counts = pd.Series(ranks[compute]).value_counts()
        rare = np.array([counts.get(r, 0) < RECURRING * n_steps for r in ranks])
        names = np.where(compute & rare, "imbalance", names)
    return names


def no_causes() -> pd.DataFrame:
    """:func:`straggler_causes` with no late rank (no rows)."""
    dtypes = {"rank": "int64", "cause": "object", "steps": "object", "recurring": "bool",
              "change": "object"}
    return pd.DataFrame({c: pd.Series([], dtype=dtypes.get(c, "float64"))
                         for c in CAUSE_COLUMNS})
