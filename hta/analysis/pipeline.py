"""Pipeline parallelism: where each stage's compute stream idles, per step and micro-batch.

**Stages.** The selected ranks that exchange send/recv kernels (:mod:`hta.analysis.p2p`)
form a graph (a peer outside the selection is left out); each connected part is one
pipeline. When a part is a chain, its stages are its
ranks in chain order, stage 0 being the end whose first transfer of the first step is a
send (it feeds the pipeline; the other end's first transfer is a receive); when no end
says so, the lower rank. A part that is a ring (interleaved schedules send from the last
stage back to the first) is ordered from the lowest rank along its first sends.

**Phase and micro-batch of the computation.** Each computation kernel of a stage gets a
phase (``forward`` / ``backward``) and a micro-batch:

* from the annotation around its launch call, when the trace has them: PyTorch's pipelining
  schedules name each action ``PP:<stage><F|B|I|W><micro-batch>`` (``F`` forward; ``B``,
  ``I`` and ``W``: backward);
* else from the transfers around it in launch order: a run of computation kernels with no
  transfer launched between them takes the phase and number of the receive launched just
  before it, else of the send launched just after it. A receive from the previous stage
  or a send to the next is ``forward``, the other way ``backward``; the ``k``-th forward
  transfer with one peer in a step is micro-batch ``k`` (the same for backward). An op
  launched with no transfer between it and the op before it is counted with that op (on
  the last stage, each backward follows its forward with nothing between them: it counts
  as that forward); a run with neither gets phase ``""`` and micro-batch -1.

**Per stage, step, micro-batch and phase** (:data:`COLUMNS`; integer ns on one clock,
reported in µs):

* the step's *window*: from the earliest computation kernel start to the latest end, over
  all the stages of the pipeline, in that ``ProfilerStep``: the pipeline's fill and flush
  are inside it;
* ``compute(us)``: the union of the stage's computation kernels of that micro-batch and
  phase;
* ``bubble(us)``: the time in the window when the stage's computation runs nothing,
  each gap counted for the kernels that end it; the gap after the stage's last kernel up
  to the window's end is phase ``flush`` (micro-batch -1). Summed over a stage and step:
  the window minus the stage's computation;
* ``wait(us)``: in the stage's send/recv kernels of that micro-batch and phase, the time
  before the peer's matching kernel started;
* ``transfer(us)``: the rest of those kernels' time.

**Per stage and step** (:func:`pipeline_steps`): the sums, ``micro_batches`` (forward
micro-batches seen), ``chunks`` (v: the model chunks the stage runs, the distinct stage
numbers of its ``PP:`` annotations; 1 without them), the ``schedule`` and
``bubble_theory(us)``: ``(P - 1) / v`` times the stage's mean computation per micro-batch
(all its chunks), P the stages.

**Schedule**, per pipeline: ``interleaved`` for a ring or when a stage runs several model
chunks; ``gpipe`` when every stage runs all its forwards of the step before its first
backward; ``1f1b`` when stage ``s`` runs ``min(P - s, M)`` forwards before its first
backward; else ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import COMM, COMPUTE, rank_gpu_work, rank_work_class
from hta.analysis.p2p import RECV, SEND
from hta.analysis.rowmap import nearest_marked_ancestor
from hta.analysis.stragglers import comm_kernels
from hta.model.declared import Analysis, Columns
from hta.model.selection import StepList
from hta.model.trace import RankTrace

#: Columns of :func:`rank_pipeline_compute` (one row per run of computation of a rank).
RUN_COLUMNS = ["rank", "step", "start_ns", "end_ns", "phase", "micro_batch", "direction",
               "peer", "chunk"]
#: :func:`rank_pipeline_compute`'s table (text: ``phase``, ``direction``; the rest int64).
RUNS = Columns.of({c: "object" if c in ("phase", "direction") else "int64"
                   for c in RUN_COLUMNS})
COLUMNS = ["pipeline", "stage", "rank", "step", "micro_batch", "phase", "compute(us)",
           "bubble(us)", "wait(us)", "transfer(us)"]
STEP_COLUMNS = ["pipeline", "stage", "rank", "step", "schedule", "micro_batches", "chunks",
                "window(us)", "compute(us)", "bubble(us)", "bubble_theory(us)", "wait(us)",
                "transfer(us)"]
FORWARD, BACKWARD, FLUSH = "forward", "backward", "flush"
_ACTION = re.compile(r"^PP:(\d+)(F|B|I|W)(\d+)$")


# -- one rank -------------------------------------------------------------------------------
def rank_pipeline_compute(rt: RankTrace, iterations: StepList = None) -> pd.DataFrame:
    """One rank's runs of computation (:data:`RUN_COLUMNS`): each kernel's interval with
    its label, from the ``PP:`` annotation it was launched in (``phase``,
    ``micro_batch``) or the transfers launched around it (``direction``, ``peer``,
    ``micro_batch`` = the transfer's number), then kernels with the same label that touch
    merged. Raw times on the rank's clock. Empty for a rank with no send/recv."""
    k = comm_kernels(rt)
    if not len(k) or not (k["peer"].to_numpy() >= 0).any():
        return RUNS.empty()
    w = rank_gpu_work(rt)
    steps = set(int(s) for s in iterations) if iterations is not None else None
    comp = np.flatnonzero(w.cls == COMPUTE)
    comm = np.flatnonzero(w.cls == COMM)
    order_c = np.where(w.launch_ts[comp] >= 0, w.launch_ts[comp], w.ts[comp])
    rows = np.flatnonzero(rank_work_class(rt) >= 0)  # rank_gpu_work's rows
    phase, mb, chunk = _annotated(rt, rt.link("index_correlation")[rows[comp]])
    p2p = k["peer"].to_numpy() >= 0
    order_p = np.where(w.launch_ts[comm] >= 0, w.launch_ts[comm], w.ts[comm])[p2p]
    direction, peer, number = _p2p_numbers(k[p2p])
    d, q, m = _label_by_transfers(order_c, w.iteration[comp], order_p,
                                  k["iteration"].to_numpy()[p2p], direction, peer, number)
    frame = pd.DataFrame({
        "rank": rt.rank, "step": w.iteration[comp].astype(np.int64),
        "start_ns": w.ts[comp].astype(np.int64), "end_ns": w.end[comp].astype(np.int64),
        "phase": phase, "micro_batch": np.where(mb >= 0, mb, m),
        "direction": np.where(phase == "", d, ""), "peer": np.where(phase == "", q, -1),
        "chunk": chunk,
    })
    frame = frame[frame["step"] >= 0]
    if steps is not None:
        frame = frame[frame["step"].isin(steps)]
    return _merge_runs(frame)


#: Each stage's runs of computation (:func:`rank_pipeline_compute`); the facade passes
#: the steps and restricts the ranks to the same steps.
PIPELINE_COMPUTE = Analysis("Pipeline stages", rank_pipeline_compute, RUNS)


def _annotated(rt: RankTrace, launches: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per kernel (by the event row of its launch call, -1: none): phase, micro-batch
    and stage number (the model chunk) of the innermost ``PP:`` annotation around its
    launch; ``""``, -1 and -1 where none is."""
    n = launches.shape[0]
    phase = np.full(n, "", dtype=object)
    mb = np.full(n, -1, dtype=np.int64)
    chunk = np.full(n, -1, dtype=np.int64)
    names = rt.column("name")
    acts = [_action(str(t)) for t in rt.symbols]
    marked = np.array([a is not None for a in acts], dtype=bool)
    if not marked.any():
        return phase, mb, chunk
    found = nearest_marked_ancestor(rt.link("parent"), launches, marked[names])
    for i in np.flatnonzero(found >= 0).tolist():
        act = acts[int(names[found[i]])]
        if act is not None:  # always: its row was marked
            phase[i], mb[i], chunk[i] = act
    return phase, mb, chunk


@lru_cache(maxsize=4096)
def _action(name: str) -> tuple[str, int, int] | None:
    """``(phase, micro-batch, stage number)`` of a ``PP:`` action's name, else None."""
    m = _ACTION.match(name)
    if not m:
        return None
    return (FORWARD if m.group(2) == "F" else BACKWARD), int(m.group(3)), int(m.group(1))


def _p2p_numbers(k: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``direction``, ``peer`` and the number of each send/recv kernel among the rank's
    kernels with that direction and peer in its step, in start order."""
    frame = k[["iteration", "direction", "peer", "start_ns"]].reset_index(drop=True)
    order = frame.sort_values("start_ns", kind="stable").index
    number = np.empty(len(frame), dtype=np.int64)
    number[order] = frame.loc[order].groupby(
        ["iteration", "direction", "peer"], sort=False).cumcount().to_numpy()
    return (frame["direction"].to_numpy(dtype=object), frame["peer"].to_numpy(np.int64),
            number)


def _label_by_transfers(order_c: np.ndarray, step_c: np.ndarray, order_p: np.ndarray,
                        step_p: np.ndarray, direction: np.ndarray, peer: np.ndarray,
                        number: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per computation kernel: the (direction, peer, number) of the receive launched just
    before its run of kernels, else of the send launched just after (module docstring)."""
    n = order_c.shape[0]
    d = np.full(n, "", dtype=object)
    q = np.full(n, -1, dtype=np.int64)
    m = np.full(n, -1, dtype=np.int64)
    if not order_p.size:
        return d, q, m
    po = np.argsort(order_p, kind="stable")
    t_p, s_p = order_p[po], step_p[po]
    d_p, q_p, m_p = direction[po], peer[po], number[po]
    before = np.searchsorted(t_p, order_c, side="right") - 1  # last transfer launched before
    after = before + 1  # first transfer launched after
    has_b = (before >= 0)
    bi = np.clip(before, 0, None)
    use_b = has_b & (d_p[bi] == RECV) & (s_p[bi] == step_c)
    ai = np.clip(after, 0, t_p.size - 1)
    use_a = ~use_b & (after < t_p.size) & (d_p[ai] == SEND) & (s_p[ai] == step_c)
    for use, idx in ((use_b, bi), (use_a, ai)):
        d[use], q[use], m[use] = d_p[idx[use]], q_p[idx[use]], m_p[idx[use]]
    return d, q, m


def _merge_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """Touching or overlapping kernels of one step with the same label, merged."""
    if not len(frame):
        return RUNS.empty()
    f = frame.sort_values("start_ns", kind="stable").reset_index(drop=True)
    key = (f["step"].astype(str) + "|" + f["phase"] + "|" + f["micro_batch"].astype(str)
           + "|" + f["direction"] + "|" + f["peer"].astype(str) + "|"
           + f["chunk"].astype(str))
    start, end = f["start_ns"].to_numpy(np.int64), f["end_ns"].to_numpy(np.int64)
    running = np.maximum.accumulate(end)
    new = np.r_[True, (start[1:] > running[:-1]) | (key.to_numpy()[1:] != key.to_numpy()[:-1])]
    run = np.cumsum(new) - 1
    firsts = np.flatnonzero(new)
    out = f.iloc[firsts].reset_index(drop=True)
    out["end_ns"] = pd.Series(end).groupby(run).max().to_numpy()
    return out[RUN_COLUMNS]


# -- the job ----------------------------------------------------------------------------------
def stage_order(arrivals: pd.DataFrame) -> dict[int, tuple[int, int, int]]:
    """rank -> ``(pipeline, stage, stages)`` from the send/recv pairs of
    :func:`~hta.analysis.stragglers.match_collectives`'s table (module docstring)."""
    p = arrivals[(arrivals["matched_by"] == "p2p") & (arrivals["peer"] >= 0)]
    # only the ranks in the table: a peer not selected (or not traced) is no stage here
    p = p[p["peer"].isin(set(p["rank"].tolist()))]
    if not len(p):
        return {}
    peers: dict[int, set[int]] = {}
    for r, q in zip(p["rank"].to_numpy(np.int64), p["peer"].to_numpy(np.int64), strict=True):
        if r != q:
            peers.setdefault(int(r), set()).add(int(q))
            peers.setdefault(int(q), set()).add(int(r))
    first = _first_direction(p)
    out: dict[int, tuple[int, int, int]] = {}
    for pipe, part in enumerate(_components(peers)):
        chain = _chain(part, peers, first)
        for stage, r in enumerate(chain):
            out[r] = (pipe, stage, len(chain))
    return out


def _first_direction(p: pd.DataFrame) -> dict[int, str]:
    """Each rank's first send/recv of its first step: ``send`` or ``recv``."""
    first_step = p.groupby("rank")["iteration"].transform("min")
    q = p[p["iteration"] == first_step].sort_values(["rank", "start_ns"], kind="stable")
    return {int(r): str(d) for r, d in zip(q.drop_duplicates("rank")["rank"],
                                            q.drop_duplicates("rank")["direction"],
                                            strict=True)}


def _components(peers: dict[int, set[int]]) -> list[list[int]]:
    seen: set[int] = set()
    parts = []
    for r in sorted(peers):
        if r in seen:
            continue
        stack, part = [r], []
        seen.add(r)
        while stack:
            x = stack.pop()
            part.append(x)
            for y in sorted(peers[x]):
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        parts.append(sorted(part))
    return parts


def _chain(part: list[int], peers: dict[int, set[int]], first: dict[int, str]) -> list[int]:
    """The stages of one pipeline in order (module docstring)."""
    ends = [r for r in part if len(peers[r]) == 1]
    if len(part) == 1:
        return part
    if len(ends) == 2:
        feeding = [r for r in ends if first.get(r) == SEND]
        start = feeding[0] if len(feeding) == 1 else min(ends)
    else:  # a ring, or a shape that is no chain: from the lowest rank
        start = min(part)
    chain, prev = [start], -1
    while len(chain) < len(part):
        nxt = [y for y in sorted(peers[chain[-1]]) if y != prev and y not in chain]
        if not nxt:
            break
        prev = chain[-1]
        chain.append(nxt[0])
    chain += [r for r in part if r not in chain]
    return chain


def is_ring(arrivals: pd.DataFrame, stages: Mapping[int, tuple[int, int, int]],
            pipeline: int) -> bool:
    """Whether the pipeline's first and last stages exchange transfers (module docstring)."""
    members = {r: s for r, (p, s, _) in stages.items() if p == pipeline}
    if len(members) < 3:
        return False
    n = len(members)
    end = {r for r, s in members.items() if s in (0, n - 1)}
    p = arrivals[(arrivals["matched_by"] == "p2p") & arrivals["rank"].isin(end)]
    return bool(p["peer"].isin(end).any())
