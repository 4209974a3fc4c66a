"""The pipeline's bubbles, waits and transfers per stage, step and micro-batch, from every
stage's runs of computation (:func:`hta.analysis.pipeline.rank_pipeline_compute`) and
the matched send/recv kernels. Definitions: :mod:`hta.analysis.pipeline`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from hta.analysis.clock import shift_times
from hta.analysis.p2p import RECV, SEND
from hta.analysis.pipeline import (
    BACKWARD,
    COLUMNS,
    FLUSH,
    FORWARD,
    STEP_COLUMNS,
    is_ring,
    stage_order,
)
from hta.model.declared import Columns

_KEY = ["pipeline", "stage", "rank", "step", "micro_batch", "phase"]
_NS = ["compute_ns", "bubble_ns", "wait_ns", "transfer_ns"]
_NEVER = np.iinfo(np.int64).max
#: :func:`pipeline_bubbles`' table (:data:`~hta.analysis.pipeline.COLUMNS`).
BUBBLES = Columns.of({c: "object" if c == "phase" else "float64" if "(us)" in c else "int64"
                      for c in COLUMNS})


def pipeline_bubbles(runs: pd.DataFrame, arrivals: pd.DataFrame,
                     offsets: Mapping[int, int] | None = None) -> pd.DataFrame:
    """:data:`~hta.analysis.pipeline.COLUMNS`: one row per stage, step, micro-batch and
    phase, by pipeline, stage, step and start. ``runs``: every rank's
    :func:`~hta.analysis.pipeline.rank_pipeline_compute`; ``arrivals``: the matched
    kernels on one clock; ``offsets``: rank -> ns to subtract from ``runs``' times to put
    them on that clock."""
    return pipeline_tables(runs, arrivals, offsets)[0]


def pipeline_tables(runs: pd.DataFrame, arrivals: pd.DataFrame,
                    offsets: Mapping[int, int] | None = None
                    ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """:func:`pipeline_bubbles`' table, :func:`pipeline_steps`' (with each pipeline's
    schedule and model chunks) and :func:`pipeline_timeline`'s, from one layout of the
    stages (:func:`_layout`)."""
    layout = _layout(runs, arrivals, offsets)
    if layout is None:
        return BUBBLES.empty(), pipeline_steps(BUBBLES.empty()), TIMELINE.empty()
    bubbles = _bubbles(*layout)
    stages = stage_order(arrivals)
    rings = {p: is_ring(arrivals, stages, p) for p in {v[0] for v in stages.values()}}
    chunks = model_chunks(runs)
    steps = pipeline_steps(bubbles, schedules=schedule_of(bubbles, rings, chunks),
                           chunks=chunks)
    return bubbles, steps, _timeline(*layout)


def _layout(runs: pd.DataFrame, arrivals: pd.DataFrame, offsets: Mapping[int, int] | None
            ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame] | None:
    """The stages' runs on one clock, labelled, sorted by rank, step and start, with the
    window's end (``_w_end``) and the latest end of the stage's earlier runs in the step
    (``_prev``, the window's start for the first); the flush of each stage and step
    (``start_ns``: its last end, ``end_ns``: the window's end); and the transfers
    (:func:`_transfers`). None without a pipeline."""
    stages = stage_order(arrivals)
    if not stages or not len(runs):
        return None
    runs = shift_times(runs[runs["rank"].isin(list(stages))], offsets or {})
    r = _with_stages(runs, stages, arrivals).sort_values(
        ["rank", "step", "start_ns"], kind="stable").reset_index(drop=True)
    window = r.groupby(["pipeline", "step"])
    w_start = window["start_ns"].transform("min").to_numpy(np.int64)
    r = r.assign(_prev=_running_end(r, w_start),
                 _w_end=window["end_ns"].transform("max").to_numpy(np.int64))
    tail = r.groupby(["pipeline", "stage", "rank", "step"], as_index=False).agg(
        start_ns=("end_ns", "max"), end_ns=("_w_end", "max")).assign(
        micro_batch=-1, phase=FLUSH)
    return r, tail, _transfers(arrivals, stages)


def _bubbles(r: pd.DataFrame, tail: pd.DataFrame, p2p: pd.DataFrame) -> pd.DataFrame:
    """:func:`pipeline_bubbles`' table from :func:`_layout`."""
    start, end = r["start_ns"].to_numpy(np.int64), r["end_ns"].to_numpy(np.int64)
    prev = r["_prev"].to_numpy(np.int64)
    rows = r.assign(compute_ns=np.maximum(end - np.maximum(start, prev), 0),
                    bubble_ns=np.maximum(start - prev, 0), wait_ns=0, transfer_ns=0,
                    _first=start, _any=start)
    flush = tail.assign(compute_ns=0, wait_ns=0, transfer_ns=0,
                        bubble_ns=tail["end_ns"] - tail["start_ns"],
                        _first=tail["start_ns"], _any=tail["start_ns"])
    cols = _KEY + _NS + ["_first", "_any"]
    table = pd.concat([rows[cols], flush[cols], p2p[cols]], ignore_index=True)
    table = table.groupby(_KEY, sort=False, as_index=False)[_NS + ["_first", "_any"]].agg(
        {**{c: "sum" for c in _NS}, "_first": "min", "_any": "min"})
    # in the order the stage computed them (a row without computation: its first transfer)
    table["_first"] = np.where(table["_first"] < _NEVER, table["_first"], table["_any"])
    table = table.sort_values(["pipeline", "stage", "step", "_first"], kind="stable")
    out = table.reset_index(drop=True)
    for c in _NS:
        out[c.replace("_ns", "(us)")] = out[c].to_numpy(float) / 1e3
    return out[COLUMNS]


def _with_stages(runs: pd.DataFrame, stages: Mapping[int, tuple[int, int, int]],
                 arrivals: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with ``pipeline`` and ``stage``, and the phase of the runs labelled by a
    transfer (:mod:`hta.analysis.pipeline`)."""
    rank = runs["rank"].to_numpy(np.int64)
    runs = runs.assign(pipeline=[stages[int(r)][0] for r in rank],
                       stage=[stages[int(r)][1] for r in rank])
    phase = _transfer_phase(runs["direction"].to_numpy(dtype=object),
                            runs["stage"].to_numpy(np.int64),
                            runs["peer"].to_numpy(np.int64), runs["pipeline"].to_numpy(),
                            stages, arrivals)
    given = runs["phase"].to_numpy(dtype=object)
    return runs.assign(phase=np.where(given != "", given, phase))


def _transfer_phase(direction: np.ndarray, stage: np.ndarray, peer: np.ndarray,
                    pipeline: np.ndarray, stages: Mapping[int, tuple[int, int, int]],
                    arrivals: pd.DataFrame) -> np.ndarray:
    """``forward`` for a receive from the previous stage or a send to the next (around
    the ring in an interleaved pipeline), ``backward`` the other way, ``""`` without a
    transfer or a known peer."""
    peer_stage = np.array([stages.get(int(q), (-1, -1, 0))[1] for q in peer], dtype=np.int64)
    size = np.array([stages.get(int(q), (-1, -1, 1))[2] for q in peer], dtype=np.int64)
    rings = {int(p) for p in set(pipeline.tolist()) if is_ring(arrivals, stages, int(p))}
    ring = np.array([int(p) in rings for p in pipeline], dtype=bool)
    step = np.where(ring, (peer_stage - stage) % np.maximum(size, 1), peer_stage - stage)
    before = np.where(ring, step == size - 1, step < 0)
    after = np.where(ring, step == 1, step > 0)
    forward = ((direction == RECV) & before) | ((direction == SEND) & after)
    known = (direction != "") & (peer_stage >= 0)
    return np.where(known, np.where(forward, FORWARD, BACKWARD), "")


def _running_end(r: pd.DataFrame, w_start: np.ndarray) -> np.ndarray:
    """Per run (sorted by rank, step and start): the latest end of the stage's earlier
    runs in the step, or the window's start for its first (integer ns throughout)."""
    most = r.groupby(["rank", "step"], sort=False)["end_ns"].cummax().to_numpy(np.int64)
    rank, step = r["rank"].to_numpy(), r["step"].to_numpy()
    same = np.r_[False, (rank[1:] == rank[:-1]) & (step[1:] == step[:-1])]
    return np.where(same, np.r_[np.int64(0), most[:-1]], w_start).astype(np.int64)


def _transfers(arrivals: pd.DataFrame, stages: Mapping[int, tuple[int, int, int]]
               ) -> pd.DataFrame:
    """Per send/recv kernel of a stage: its wait and transfer, with its phase and
    micro-batch (the ``k``-th with that peer and direction in its step)."""
    # transfers with a peer outside the pipeline (not selected) have no known wait: left out
    p = arrivals[(arrivals["matched_by"] == "p2p") & arrivals["rank"].isin(list(stages))
                 & arrivals["peer"].isin(list(stages))]
    p = p[p["iteration"] >= 0].sort_values(["rank", "start_ns"], kind="stable")
    if not len(p):
        return pd.DataFrame(columns=_KEY + _NS + ["_first", "_any"])
    rank = p["rank"].to_numpy(np.int64)
    pipe = np.array([stages[int(x)][0] for x in rank], dtype=np.int64)
    stage = np.array([stages[int(x)][1] for x in rank], dtype=np.int64)
    phase = _transfer_phase(p["direction"].to_numpy(dtype=object), stage,
                            p["peer"].to_numpy(np.int64), pipe, stages, arrivals)
    number = p.groupby(["rank", "iteration", "direction", "peer"], sort=False).cumcount()
    dur = p["end_ns"].to_numpy(np.int64) - p["start_ns"].to_numpy(np.int64)
    wait = np.clip(p["waited_ns"].to_numpy(np.int64), 0, dur)
    return pd.DataFrame({
        "pipeline": pipe, "stage": stage, "rank": rank,
        "step": p["iteration"].to_numpy(np.int64),
        "micro_batch": number.to_numpy(np.int64), "phase": phase,
        "compute_ns": 0, "bubble_ns": 0, "wait_ns": wait, "transfer_ns": dur - wait,
        "_first": _NEVER, "_any": p["start_ns"].to_numpy(np.int64)})


def model_chunks(runs: pd.DataFrame) -> dict[int, int]:
    """rank -> the model chunks it runs: the distinct stage numbers of the ``PP:``
    annotations its computation was launched in (1 without them)."""
    known = runs[runs["chunk"] >= 0] if len(runs) else runs
    counts = known.groupby("rank")["chunk"].nunique() if len(known) else pd.Series()
    return {int(r): max(int(counts.get(r, 1)), 1) for r in pd.unique(runs["rank"])}


def pipeline_steps(bubbles: pd.DataFrame, *,
                   schedules: Mapping[int, str] | None = None,
                   chunks: Mapping[int, int] | None = None) -> pd.DataFrame:
    """:data:`~hta.analysis.pipeline.STEP_COLUMNS` from :func:`pipeline_bubbles`' table:
    per stage and step, the sums, the forward micro-batches, the window, the schedule
    (``schedules``: pipeline -> name), the model chunks (``chunks``: rank -> v,
    :func:`model_chunks`; 1 when absent) and the theoretical bubble."""
    if not len(bubbles):
        return pd.DataFrame({c: pd.Series([], dtype="object" if c == "schedule" else
                                          "float64" if "(us)" in c else "int64")
                             for c in STEP_COLUMNS})
    key = ["pipeline", "stage", "rank", "step"]
    g = bubbles.groupby(key, sort=True)
    out = g[["compute(us)", "bubble(us)", "wait(us)", "transfer(us)"]].sum().reset_index()
    fwd = bubbles[(bubbles["phase"] == FORWARD) & (bubbles["micro_batch"] >= 0)]
    counts = fwd.groupby(key)["micro_batch"].nunique()
    out["micro_batches"] = [int(counts.get(tuple(k), 0)) for k in
                            out[key].itertuples(index=False, name=None)]
    out["window(us)"] = out["compute(us)"] + out["bubble(us)"]
    size = out.groupby(["pipeline", "step"])["stage"].transform("nunique").to_numpy()
    v = np.array([(chunks or {}).get(int(r), 1) for r in out["rank"]], dtype=float)
    out["chunks"] = v.astype(np.int64)
    per_mb = out["compute(us)"] / np.maximum(out["micro_batches"].to_numpy(), 1)
    out["bubble_theory(us)"] = (size - 1) / v * per_mb
    names = schedules or {}
    out["schedule"] = [names.get(int(p), "unknown") for p in out["pipeline"]]
    return out[STEP_COLUMNS]


#: Columns of :func:`stage_means`.
STAGE_COLUMNS = ["pipeline", "stage", "rank", "schedule", "steps", "micro_batches",
                 "chunks", "window(us)", "compute(us)", "bubble(us)", "bubble_theory(us)",
                 "wait(us)", "transfer(us)", "bubble_pctg"]


def stage_means(steps: pd.DataFrame) -> pd.DataFrame:
    """Per stage, the means over the steps of :func:`pipeline_steps`' table
    (:data:`STAGE_COLUMNS`; ``bubble_pctg``: the bubble's share of the window)."""
    if not len(steps):
        return pd.DataFrame({c: pd.Series([], dtype="object" if c == "schedule" else
                                          "int64" if c in ("pipeline", "stage", "rank",
                                                           "steps", "micro_batches", "chunks")
                                          else "float64") for c in STAGE_COLUMNS})
    key = ["pipeline", "stage", "rank", "schedule"]
    g = steps.groupby(key, sort=True)
    out = g[["window(us)", "compute(us)", "bubble(us)", "bubble_theory(us)", "wait(us)",
             "transfer(us)"]].mean().reset_index()
    out["steps"] = g.size().to_numpy()
    out["micro_batches"] = g["micro_batches"].max().to_numpy()
    out["chunks"] = g["chunks"].max().to_numpy()
    out["bubble_pctg"] = 100.0 * out["bubble(us)"] / out["window(us)"].where(
        out["window(us)"] > 0)
    return out[STAGE_COLUMNS]


def schedule_of(bubbles: pd.DataFrame, ring: Mapping[int, bool],
                chunks: Mapping[int, int] | None = None) -> dict[int, str]:
    """pipeline -> ``gpipe``, ``1f1b``, ``interleaved`` or ``unknown`` (module docstring
    of :mod:`hta.analysis.pipeline`), from the order of each stage's forward and backward
    computation in each step."""
    out: dict[int, str] = {}
    ops = bubbles[bubbles["phase"].isin([FORWARD, BACKWARD]) & (bubbles["compute(us)"] > 0)]
    several = {int(r) for r, v in (chunks or {}).items() if v > 1}
    for pipe, part in ops.groupby("pipeline"):
        if ring.get(int(pipe)) or several & set(part["rank"].tolist()):
            out[int(pipe)] = "interleaved"
            continue
        size = int(part["stage"].nunique())
        gpipe, one_f = True, True
        for (stage, _step), seq in part.groupby(["stage", "step"]):
            phases = seq["phase"].tolist()
            if FORWARD not in phases or BACKWARD not in phases:
                continue  # an end stage whose ops were counted together tells nothing
            m = int(seq.loc[seq["phase"] == FORWARD, "micro_batch"].nunique())
            first_b = phases.index(BACKWARD)
            gpipe &= FORWARD not in phases[first_b:]
            one_f &= first_b == min(size - int(stage), m)
        out[int(pipe)] = "gpipe" if gpipe else "1f1b" if one_f else "unknown"
    return out


#: Columns of :func:`pipeline_timeline`.
TIMELINE_COLUMNS = ["pipeline", "stage", "rank", "step", "kind", "start_ns", "end_ns",
                    "micro_batch", "phase"]
TIMELINE = Columns.of({c: "object" if c in ("kind", "phase") else "int64"
                       for c in TIMELINE_COLUMNS})


def pipeline_timeline(runs: pd.DataFrame, arrivals: pd.DataFrame,
                      offsets: Mapping[int, int] | None = None) -> pd.DataFrame:
    """The intervals behind :func:`pipeline_bubbles`, for a stages x time figure
    (:data:`TIMELINE_COLUMNS`, on one clock): ``kind`` ``compute`` (the runs),
    ``bubble`` (the gaps in each step's window, the flush included), ``wait`` and
    ``transfer`` (each send/recv kernel cut where its peer started)."""
    return pipeline_tables(runs, arrivals, offsets)[2]


def _timeline(r: pd.DataFrame, tail: pd.DataFrame, p2p: pd.DataFrame) -> pd.DataFrame:
    """:func:`pipeline_timeline`'s table from :func:`_layout`."""
    start, prev = r["start_ns"].to_numpy(np.int64), r["_prev"].to_numpy(np.int64)
    base = r[_KEY]
    frames = [base.assign(kind="compute", start_ns=start, end_ns=r["end_ns"].to_numpy()),
              base.assign(kind="bubble", start_ns=prev, end_ns=start)[start > prev],
              tail.assign(kind="bubble")[tail["end_ns"] > tail["start_ns"]]]
    if len(p2p):
        begin = p2p["_any"].to_numpy(np.int64)
        cut = begin + p2p["wait_ns"].to_numpy(np.int64)
        stop = cut + p2p["transfer_ns"].to_numpy(np.int64)
        frames.append(p2p[_KEY].assign(kind="wait", start_ns=begin, end_ns=cut)[cut > begin])
        frames.append(p2p[_KEY].assign(kind="transfer", start_ns=cut, end_ns=stop))
    out = pd.concat([f[TIMELINE_COLUMNS] for f in frames], ignore_index=True)
    return out.sort_values(["pipeline", "stage", "start_ns"], kind="stable",
                           ignore_index=True)
