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

Columns: ``rank`` (the rank of the segment's end), ``kind``, ``name`` (the event whose
point ends the segment; ``collective`` for the barrier), ``start(us)`` (relative to the
step's start in the replay), ``dur(us)``. The first segment is cut at the step's start,
so the durations add up to the step's replayed duration exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import COMM, work_class
from hta.analysis.whatif.graph import EDGE, JobGraph
from hta.analysis.whatif.schedule import Schedule

PATH_COLUMNS = ["rank", "kind", "name", "start(us)", "dur(us)"]


def job_critical_path(jg: JobGraph, sched: Schedule, step: int | None = None
                      ) -> pd.DataFrame:
    """The job's critical path for ``step`` (None: the first step; traces without
    ``ProfilerStep``: the whole trace), :data:`PATH_COLUMNS` (module docstring)."""
    end_node, start_t = _step_bounds(jg, sched, step)
    src_of = np.full(jg.num_nodes, -1, dtype=np.int64)
    typ_of = np.full(jg.num_nodes, -1, dtype=np.int64)
    has = sched.via >= 0
    # via indexes the edges the schedule saw; the unchanged replay uses the job's edges
    src_of[has] = jg.src[sched.via[has]]
    typ_of[has] = jg.type[sched.via[has]]
    segs = []
    v = int(end_node)
    t = sched.t
    while src_of[v] >= 0 and t[v] > start_t:
        u = int(src_of[v])
        segs.append((u, v, int(typ_of[v])))
        v = u
    segs.reverse()
    rows = []
    for u, v, ty in segs:
        s = max(int(t[u]), start_t)
        dur = int(t[v]) - s
        if dur <= 0:
            continue
        rows.append((_rank(jg, v, u), _kind(jg, u, v, ty), _name(jg, v, u), (s - start_t) / 1e3,
                     dur / 1e3))
    return pd.DataFrame(rows, columns=PATH_COLUMNS)


def _step_bounds(jg: JobGraph, sched: Schedule, step: int | None) -> tuple[int, int]:
    """End node of the step on the rank that ends it last, and that rank's step start."""
    best = None
    for i, g in enumerate(jg.ranks):
        if len(g.steps):
            steps = g.steps
            want = int(steps["step"].iloc[0]) if step is None else int(step)
            row = steps[steps["step"] == want]
            if not len(row):
                continue
            s = int(jg.global_node(i, row["start_node"].to_numpy()[:1])[0])
            e = int(jg.global_node(i, row["end_node"].to_numpy()[:1])[0])
        else:
            if step is not None and step != -1:
                continue
            mine = np.flatnonzero(jg.node_pos == i)
            if not mine.size:
                continue
            s = int(mine[np.argmin(sched.t[mine])])
            e = int(mine[np.argmax(sched.t[mine])])
        dur = int(sched.t[e] - sched.t[s])
        if best is None or dur > best[0]:
            best = (dur, e, int(sched.t[s]))
    if best is None:
        raise ValueError(f"no rank has step {step}")
    return best[1], best[2]


def _rank(jg: JobGraph, v: int, u: int) -> int:
    pos = int(jg.node_pos[v]) if int(jg.node_pos[v]) >= 0 else int(jg.node_pos[u])
    return jg.ranks[pos].rank


def _is_comm(jg: JobGraph, v: int) -> bool:
    pos = int(jg.node_pos[v])
    if pos < 0:
        return True
    ev = jg.ranks[pos].trace.events
    return bool(work_class(ev["kind"].iloc[[int(jg.node_row[v])]])[0] == COMM)


def _kind(jg: JobGraph, u: int, v: int, ty: int) -> str:
    if ty in (EDGE["cpu"], EDGE["thread"]):
        return "cpu"
    if ty == EDGE["launch"]:
        return "launch"
    if ty == EDGE["gpu"]:
        return "comm" if _is_comm(jg, v) else "gpu"
    if ty == EDGE["collective"]:
        return "wait" if int(jg.node_pos[v]) < 0 else "comm"
    return "wait"


def _name(jg: JobGraph, v: int, u: int) -> str:
    node = v if int(jg.node_pos[v]) >= 0 else u
    pos = int(jg.node_pos[node])
    if pos < 0:
        return "collective"
    g = jg.ranks[pos]
    return g.trace.symbols[int(g.trace.events["name"].iloc[int(jg.node_row[node])])]


#: Columns of :func:`step_bounds`.
BOUND_COLUMNS = ["step", "rank", "step(us)", "bound_by", "bound_share_pctg", "top_work",
                 "top_work(us)", "at_median(us)", "saving_at_median(us)"]


def step_bounds(jg: JobGraph, sched: Schedule, rules: object = None) -> pd.DataFrame:
    """Per step, what bounds the job: the rank holding the most time of the job's critical
    path (``rank``; ``step(us)``: the job's replayed step, the path's length), the kind of
    work with the most time on the path (``bound_by``, its share), the single piece of
    work with the most time on it (``top_work``: kind and name, ``top_work(us)``), and the
    job's step if that rank's GPU work between collectives took the median across ranks
    (``at_median(us)``: ``no-stragglers:RANK``; ``saving_at_median(us)`` = replayed -
    that)."""
    from hta.analysis.whatif import predict

    steps: list[int] = sorted({int(s) for g in jg.ranks for s in g.steps["step"].tolist()})
    if not steps:
        steps = [-1]
    rows = []
    cache: dict[int, pd.DataFrame] = {}
    for step in steps:
        path = job_critical_path(jg, sched, step)
        if not len(path):
            continue
        total = float(path["dur(us)"].sum())
        by_kind = path.groupby("kind")["dur(us)"].sum().sort_values(ascending=False)
        by_work = path.groupby(["kind", "name"])["dur(us)"].sum().sort_values(ascending=False)
        end_rank = int(path.groupby("rank")["dur(us)"].sum().idxmax())
        if end_rank not in cache:
            cache[end_rank] = predict(jg, f"no-stragglers:{end_rank}", rules, base=sched)
        table = cache[end_rank]
        at_step = table[table["step"] == step]
        replayed = float(at_step["replayed(us)"].max()) if len(at_step) else total
        at_median = float(at_step["job_predicted(us)"].max()) if len(at_step) else total
        kind, name = by_work.index[0]
        rows.append((step, end_rank, total, by_kind.index[0],
                     100.0 * float(by_kind.iloc[0]) / total if total else 0.0,
                     f"{kind}: {name}", float(by_work.iloc[0]), at_median,
                     replayed - at_median))
    return pd.DataFrame(rows, columns=BOUND_COLUMNS)
