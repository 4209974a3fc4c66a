"""The critical path of the whole job for one step: the chain of binding edges of the replay.

In the replay (:mod:`hta.analysis.whatif`) every node is scheduled by its *binding*
edge, the dependency it waited for last. Walking those edges back from the end of the
step on the rank whose step ends last (in the replay, the slowest rank decides the job's
step) until the start of that rank's step gives a path through the job graph: it may
cross to another rank through a collective (the rank that arrived last holds the others
up). Each edge on it is one segment:

===========  ==================================================================
kind         edge
===========  ==================================================================
``cpu``      host work between two points of a thread (``cpu`` edge), a hand-off
             between threads (``thread``)
``launch``   from a launch call to the start of its GPU work
``gpu``      execution of GPU work that is not communication
``comm``     a communication kernel, or a collective's transfer after the last rank arrived
``wait``     a GPU stream waiting for the previous work or an event, the host returning
             from a synchronization or held by the launch queue, a collective waiting
             for the last rank
===========  ==================================================================

Columns: ``rank`` (the rank of the segment's end), ``kind``, ``name``, ``start(us)``
(relative to the step's start in the replay), ``dur(us)``. The ``name`` says what the time
is: for host time (a ``cpu`` edge) the innermost CPU event of the thread that spans the
segment (an operator, a runtime call, an annotation; ``no CPU event (Python or framework
code)`` when none but the step does), so a long wait inside a dispatch is named by the
dispatch, not by the short operator that ends it; for a wait, what it waited for (``host
waits for GPU: KERNEL``, ``stream waits for: KERNEL``, ``launch queue full``, ``waits for
the last rank: KERNEL``); else the event whose point ends the segment (``collective`` for
the barrier). The first segment is cut at the step's start,
so the durations add up to the step's replayed duration exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import COMM, rank_work_class
from hta.analysis.whatif.graph import EDGE, JobGraph, driving_nodes, step_completion
from hta.analysis.whatif.schedule import Schedule
from hta.model.rules import RuleSet

PATH_COLUMNS = ["rank", "kind", "name", "start(us)", "dur(us)"]


def job_critical_path(jg: JobGraph, sched: Schedule, step: int | None = None,
                      binding: tuple[np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """The job's critical path for ``step`` (None: the first step; traces without
    ``ProfilerStep``: the whole trace), :data:`PATH_COLUMNS` (module docstring).
    ``binding``: :func:`binding_edges` of ``sched`` when already computed."""
    end_node, start_t = _step_bounds(jg, sched, step)
    binding = binding if binding is not None else binding_edges(jg, sched)
    path, _ = walk_back(jg, sched.t, binding, int(end_node), start_t)
    return pd.DataFrame({"rank": path["rank"], "kind": path["kind"], "name": path["name"],
                         "start(us)": (path["start_ns"] - start_t) / 1e3,
                         "dur(us)": path["dur_ns"] / 1e3}, columns=PATH_COLUMNS)


def walk_back(jg: JobGraph, t: np.ndarray, binding: tuple[np.ndarray, np.ndarray], v: int,
              stop_t: int) -> tuple[pd.DataFrame, int]:
    """The binding edges from node ``v`` back to the first node at or before ``stop_t``
    (or a node without one), as segments in path order: ``rank``, ``kind``, ``name``
    (:func:`describe`), ``start_ns`` (cut at ``stop_t``), ``dur_ns`` (segments of no time
    left out); and the node the walk stopped at. ``binding``: :func:`binding_edges`."""
    src_of, typ_of = binding
    us, vs = [], []
    while src_of[v] >= 0 and t[v] > stop_t:
        u = int(src_of[v])
        us.append(u)
        vs.append(v)
        v = u
    u_arr = np.asarray(us[::-1], dtype=np.int64)
    v_arr = np.asarray(vs[::-1], dtype=np.int64)
    start = np.maximum(t[u_arr], stop_t)
    dur = t[v_arr] - start
    keep = dur > 0
    u_arr, v_arr, start, dur = u_arr[keep], v_arr[keep], start[keep], dur[keep]
    ranks, kinds, names = describe(jg, u_arr, v_arr, typ_of[v_arr])
    return pd.DataFrame({"rank": ranks, "kind": kinds, "name": names, "start_ns": start,
                         "dur_ns": dur}), v


def binding_edges(jg: JobGraph, sched: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Per node, the source and the type of its binding edge in ``sched`` (-1: none)."""
    src_of = np.full(jg.num_nodes, -1, dtype=np.int64)
    typ_of = np.full(jg.num_nodes, -1, dtype=np.int64)
    if sched.via is None:
        raise ValueError("binding_edges: the schedule was made without its binding edges")
    has = sched.via >= 0
    # via indexes the edges the schedule saw; the unchanged replay uses the job's edges
    src_of[has] = jg.src[sched.via[has]]
    typ_of[has] = jg.type[sched.via[has]]
    return src_of, typ_of


def _step_bounds(jg: JobGraph, sched: Schedule, step: int | None) -> tuple[int, int]:
    """Completion node of the step on the rank whose step is longest (the first on
    ties), and when that rank's step begins (:func:`step_end`)."""
    best = None
    for i in range(len(jg.ranks)):
        found = step_end(jg, i, sched.t, step)
        if found is not None and (best is None or found[0] > best[0]):
            best = found
    if best is None:
        raise ValueError(f"no rank has step {step}")
    return best[1], best[2]


def step_end(jg: JobGraph, i: int, t: np.ndarray, step: int | None
             ) -> tuple[int, int, int] | None:
    """Rank position ``i``'s step ``step`` (None: its first; -1 or None on a rank without
    steps: its whole trace) under node times ``t``: ``(duration, completion node,
    begin)`` (:func:`~.graph.step_completion`: a step runs to its completion, as
    ``what_if`` measures it); None when the rank has no such step."""
    g = jg.ranks[i]
    if len(g.steps):
        steps = g.steps["step"].to_numpy()
        want = int(steps[0]) if step is None else int(step)
        pos = np.flatnonzero(steps == want)
        if not pos.size:
            return None
        begin, done_node = step_completion(jg, i, t)
        e = int(done_node[pos[0]])
        return int(t[e] - begin[pos[0]]), e, int(begin[pos[0]])
    if step is not None and step != -1:
        return None
    mine = driving_nodes(jg, i, jg.nodes_of(i))
    if not mine.size:
        return None
    s = int(mine[np.argmin(t[mine])])
    e = int(mine[np.argmax(t[mine])])
    return int(t[e] - t[s]), e, int(t[s])


def describe(jg: JobGraph, u: np.ndarray, v: np.ndarray, ty: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per segment ``u -> v`` (binding edge type ``ty``): its rank (of ``v``, else of
    ``u`` for a barrier), kind and name (of the event whose point is ``v``, else ``u``;
    ``collective`` for a barrier between two barriers)."""
    node = np.where(jg.node_pos[v] >= 0, v, u)
    pos = jg.node_pos[node]
    rank_of = np.asarray([g.rank for g in jg.ranks] + [-1], dtype=np.int64)
    ranks = rank_of[pos]
    names = np.full(node.size, "collective", dtype=object)
    v_comm = jg.node_pos[v] < 0  # a barrier's edge into a kernel end is communication
    for i, g in enumerate(jg.ranks):
        here = pos == i
        if here.any():
            rows = jg.node_row[node[here]]
            sym = np.asarray(g.trace.symbols, dtype=object)
            names[here] = sym[g.trace.column("name")[rows]]
        mine = jg.node_pos[v] == i
        if mine.any():
            cls = rank_work_class(g.trace)[jg.node_row[v[mine]]]
            v_comm[mine] = cls == COMM
    _host_names(jg, u, v, ty, names)
    _wait_names(jg, u, v, ty, names)
    kinds = np.full(node.size, "wait", dtype=object)
    kinds[np.isin(ty, [EDGE["cpu"], EDGE["thread"]])] = "cpu"
    kinds[ty == EDGE["launch"]] = "launch"
    gpu = ty == EDGE["gpu"]
    kinds[gpu] = np.where(v_comm[gpu], "comm", "gpu")
    coll = ty == EDGE["collective"]
    kinds[coll] = np.where(jg.node_pos[v[coll]] < 0, "wait", "comm")
    return ranks, kinds, names


#: The name of host time inside no traced CPU event.
UNTRACED = "no CPU event (Python or framework code)"
_STEP = "ProfilerStep#"


def _host_names(jg: JobGraph, u: np.ndarray, v: np.ndarray, ty: np.ndarray,
                names: np.ndarray) -> None:
    """Name each ``cpu`` segment ``u -> v`` by the innermost CPU event of its thread that
    spans it (measured times: starts at or before ``u``, ends at or after ``v``): the
    event ending at ``v`` or one of its ancestors; :data:`UNTRACED` when only the
    ``ProfilerStep`` span (or nothing) does."""
    from hta.analysis.findings.base import link

    seg = np.flatnonzero((ty == EDGE["cpu"]) & (jg.node_pos[v] >= 0)
                         & (jg.node_pos[u] == jg.node_pos[v]))
    for i, g in enumerate(jg.ranks):
        mine = seg[jg.node_pos[v[seg]] == i]
        if not mine.size:
            continue
        ts, end = g.trace.column("ts"), g.trace.column("end")
        parent = link(g.trace, "parent")
        t0, t1 = jg.node_ts[u[mine]], jg.node_ts[v[mine]]
        cur = jg.node_row[v[mine]].astype(np.int64)
        found = np.full(mine.size, -1, dtype=np.int64)
        for _ in range(4096):
            live = (found < 0) & (cur >= 0)
            if not live.any():
                break
            at = np.where(live, cur, 0)
            hit = live & (ts[at] <= t0) & (end[at] >= t1)
            found[hit] = at[hit]
            cur = np.where(live & ~hit, parent[at], -1)
        sym = g.trace.symbols
        name_ids = g.trace.column("name")
        names[mine] = [UNTRACED if f < 0 or sym[name_ids[f]].startswith(_STEP)
                       else sym[name_ids[f]] for f in found.tolist()]


def _wait_names(jg: JobGraph, u: np.ndarray, v: np.ndarray, ty: np.ndarray,
                names: np.ndarray) -> None:
    """Name each waiting segment by what it waited for: ``host waits for GPU: X`` (a
    synchronization returning after X ended), ``stream waits for: X`` (the work before
    it, or an event's), ``launch queue full``, ``waits for the last rank: collective``."""
    own = names.copy()
    src_names = np.full(u.size, "", dtype=object)
    for i, g in enumerate(jg.ranks):
        here = jg.node_pos[u] == i
        if here.any():
            sym = np.asarray(g.trace.symbols, dtype=object)
            src_names[here] = sym[g.trace.events["name"].to_numpy()[jg.node_row[u[here]]]]
    sync = ty == EDGE["sync"]
    names[sync] = ["host waits for GPU: " + str(n) for n in src_names[sync]]
    stream = np.isin(ty, [EDGE["stream"], EDGE["event_wait"]])
    names[stream] = ["stream waits for: " + str(n) for n in src_names[stream]]
    names[ty == EDGE["queue"]] = "launch queue full"
    barrier = (ty == EDGE["collective"]) & (jg.node_pos[v] < 0)
    names[barrier] = ["waits for the last rank: " + str(n) for n in own[barrier]]


#: Columns of :func:`step_bounds`.
BOUND_COLUMNS = ["step", "rank", "step(us)", "bound_by", "bound_share_pctg", "top_work",
                 "top_work(us)", "at_median(us)", "saving_at_median(us)", "work_shares",
                 "measured(us)", "replayed(us)", "replay_error_pctg", "modelled_error_pctg"]

#: A kind of work is named in ``work_shares`` from this share (%) of the path on.
SHARE_SHOWN_PCTG = 0.5


def step_bounds(jg: JobGraph, sched: Schedule, rules: RuleSet | None = None,
                steps: list[int] | None = None) -> pd.DataFrame:
    """Per step (``steps``: those only; None: every step, or -1 for a trace without
    ``ProfilerStep``), what bounds the job: :data:`BOUND_COLUMNS`, the first table of
    :func:`job_step_bound` (its docstring)."""
    return job_step_bound(jg, sched, rules, steps)[0]


def job_step_bound(jg: JobGraph, sched: Schedule, rules: RuleSet | None = None,
                   steps: list[int] | None = None, each_step: bool = True
                   ) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """What bounds the job's step, per step and over the steps (``each_step`` False: the
    table's ``at_median(us)`` only for the steps the dict's rank bounds, NaN elsewhere,
    which saves a replay per other bounding rank).

    Per step (the table, :data:`BOUND_COLUMNS`): the rank holding the most time of the
    job's critical path (``rank``; ``step(us)``: the path's length, the step of the rank
    whose step is longest in the replay, to the step's completion as
    :func:`hta.analysis.whatif.what_if` measures it), the kind of work with the most
    time on the path (``bound_by``, its share ``bound_share_pctg``; ``work_shares``: every
    kind's share, e.g. ``gpu 62%, cpu 20%``),
    the single piece of work with the most time on it (``top_work``: kind and name,
    ``top_work(us)``), the job's step if that rank's GPU work between collectives took at most the
    median across ranks (``at_median(us)``: ``no-stragglers:RANK``, the slowest rank's
    predicted step; ``saving_at_median(us)`` = ``replayed(us)`` - that; a step can still
    lengthen when the one before it shrinks), the job's step as
    :func:`hta.analysis.whatif.what_if` measures it (to the step's completion, the slowest
    rank's): ``measured(us)`` in the trace,
    ``replayed(us)`` in the replay without change, and the replay's honesty figures:
    ``replay_error_pctg`` = 100 * (replayed - measured) / measured, and
    ``modelled_error_pctg``, the same for the modelled replay (the slowest rank's step
    there). ``step(us)`` equals ``replayed(us)``.

    Over the steps (the dict; None without a step): ``steps``; ``rank``, the rank bounding
    the most steps (ties: the most time on the paths) and ``rank_steps``, how many;
    ``other_ranks``, the ranks bounding the other steps; ``work_shares``, ``bound_by``,
    ``bound_share_pctg`` and ``top_work`` over all the steps' paths; ``top_work(us)``,
    ``measured(us)``, ``replayed(us)`` (the job's step, replayed), ``at_median(us)`` (the
    job's step with ``no-stragglers:RANK`` on that one rank) and ``saving_at_median(us)``
    as means per step; ``change`` (``no-stragglers:RANK``); and the honesty figures per
    rank and step as ``hta whatif`` prints them: ``replay_error_median_pctg``,
    ``replay_error_worst_pctg``, ``modelled_error_median_pctg``,
    ``modelled_error_worst_pctg`` (absolute values).
    """
    from hta.analysis.whatif.replay import predict

    # each step's path finds its binding edges afresh (two arrays of the graph's size,
    # cheap next to a replay): kept, they would be held through every replay after it
    return step_bound_of(
        lambda change, modelled: predict(jg, change, rules, base=sched, modelled=modelled,
                                         check=False),
        lambda step: job_critical_path(jg, sched, step), steps, each_step)


def step_bound_of(predict_with: Callable[[str | None, bool], pd.DataFrame],
                  path_of: Callable[[int], pd.DataFrame], steps: list[int] | None = None,
                  each_step: bool = True) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """:func:`job_step_bound` from a replay however it is run: ``predict_with(change,
    modelled)``, the what-if table (:func:`hta.analysis.whatif.predict` on the job
    graph, or the coupled per-rank replays), and ``path_of(step)``, the job's critical
    path of a step."""
    unchanged = predict_with(None, True)
    every = sorted({int(s) for s in unchanged["step"].tolist() if s >= 0}) or [-1]
    wanted = every if steps is None else [s for s in every if s in set(steps)]
    unchanged = unchanged[unchanged["step"].isin(wanted)]
    cache: dict[int, pd.Series] = {}

    def at_median(rank: int) -> pd.Series:
        """The job's predicted step per step with ``no-stragglers:rank``."""
        if rank not in cache:
            table = predict_with(f"no-stragglers:{rank}", False)
            cache[rank] = table.groupby("step")["job_predicted(us)"].max()
        return cache[rank]

    rows, paths = [], []
    job = _job_figures(unchanged)
    for step in wanted:
        path = path_of(step)
        if not len(path):
            continue
        paths.append(path)
        total = float(path["dur(us)"].sum())
        by_kind = path.groupby("kind")["dur(us)"].sum().sort_values(ascending=False)
        by_work = path.groupby(["kind", "name"])["dur(us)"].sum().sort_values(ascending=False)
        end_rank = int(path.groupby("rank")["dur(us)"].sum().idxmax())
        kind, name = by_work.index[0]
        measured, replayed, modelled = job.get(step, (float("nan"), total, float("nan")))
        rows.append((step, end_rank, total, by_kind.index[0],
                     _pct(float(by_kind.iloc[0]), total), f"{kind}: {name}",
                     float(by_work.iloc[0]), float("nan"), float("nan"),
                     _shares(by_kind, total), measured, replayed, _err(replayed, measured),
                     _err(modelled, measured)))
    table = pd.DataFrame(rows, columns=BOUND_COLUMNS)
    if not len(table):
        return table, None
    top = _top_rank(table)
    for i, (step, rank, replayed) in enumerate(zip(table["step"].tolist(),
                                                   table["rank"].tolist(),
                                                   table["replayed(us)"].tolist(),
                                                   strict=True)):
        if each_step or rank == top:
            med = float(at_median(rank).get(step, replayed))
            table.loc[i, ["at_median(us)", "saving_at_median(us)"]] = [med, replayed - med]
    return table, _over_steps(table, pd.concat(paths, ignore_index=True), unchanged,
                              at_median(top), top)


def _top_rank(table: pd.DataFrame) -> int:
    """The rank bounding the most steps (ties: the most time on the paths)."""
    per_rank = table.groupby("rank").agg(n=("step", "size"), t=("step(us)", "sum"))
    return int(per_rank.sort_values(["n", "t"], ascending=False, kind="stable").index[0])


def _job_figures(unchanged: pd.DataFrame) -> dict[int, tuple[float, float, float]]:
    """Per step: the job's measured step, its replayed step and its step in the stricter
    replay (each the slowest rank's)."""
    m = unchanged["measured(us)"]
    strict = m * (1 + unchanged["modelled_error_pctg"] / 100)
    by = pd.DataFrame({"step": unchanged["step"], "m": m, "r": unchanged["replayed(us)"],
                       "s": strict}).groupby("step").max()
    return {int(k): (float(r["m"]), float(r["r"]), float(r["s"])) for k, r in by.iterrows()}


def _over_steps(table: pd.DataFrame, path: pd.DataFrame, unchanged: pd.DataFrame,
                at_median: pd.Series, rank: int) -> dict[str, Any]:
    """The dict of :func:`job_step_bound` from its table, the steps' paths and the job's
    predicted step per step with ``no-stragglers:rank``."""
    bounding = table["rank"].to_numpy()
    total = float(path["dur(us)"].sum())
    by_kind = path.groupby("kind")["dur(us)"].sum().sort_values(ascending=False)
    by_work = path.groupby(["kind", "name"])["dur(us)"].sum().sort_values(ascending=False)
    kind, name = by_work.index[0]
    n = len(table)
    med = at_median.reindex(table["step"].to_numpy())
    med = med.fillna(table.set_index("step")["replayed(us)"])
    replayed = float(table["replayed(us)"].mean())
    rep = unchanged["replay_error_pctg"].abs()
    mod = unchanged["modelled_error_pctg"].abs()
    return {
        "steps": [int(s) for s in table["step"]], "rank": rank,
        "rank_steps": int((bounding == rank).sum()),
        "other_ranks": sorted({int(r) for r in bounding if r != rank}),
        "work_shares": _shares(by_kind, total), "bound_by": str(by_kind.index[0]),
        "bound_share_pctg": _pct(float(by_kind.iloc[0]), total),
        "top_work": f"{kind}: {name}", "top_work(us)": float(by_work.iloc[0]) / n,
        "measured(us)": float(table["measured(us)"].mean()), "replayed(us)": replayed,
        "at_median(us)": float(med.mean()), "saving_at_median(us)": replayed - float(med.mean()),
        "change": f"no-stragglers:{rank}",
        "replay_error_median_pctg": float(rep.median()) if len(rep) else float("nan"),
        "replay_error_worst_pctg": float(rep.max()) if len(rep) else float("nan"),
        "modelled_error_median_pctg": float(mod.median()) if len(mod) else float("nan"),
        "modelled_error_worst_pctg": float(mod.max()) if len(mod) else float("nan"),
    }


def _pct(part: float, total: float) -> float:
    return 100.0 * part / total if total else 0.0


def _err(value: float, measured: float) -> float:
    """``100 * (value - measured) / measured``; float noise (under 1e-9 %) is 0."""
    if not measured > 0:
        return float("nan")
    err = 100.0 * (value - measured) / measured
    return 0.0 if abs(err) < 1e-9 else err


def _shares(by_kind: pd.Series, total: float) -> str:
    """``gpu 62%, cpu 20%, ...``: each kind's share of the path, largest first."""
    return ", ".join(f"{k} {_pct(float(v), total):.0f}%" for k, v in by_kind.items()
                     if _pct(float(v), total) >= SHARE_SHOWN_PCTG)
