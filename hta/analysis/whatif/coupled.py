"""The job's replay as per-rank replays coupled through the collectives' times alone.

The job graph (:mod:`.graph`) joins every rank's graph in one process. This module gets
the same schedule without ever putting two ranks' graphs together, so each rank's graph
can stay where the rank lives (a Dask worker) and only a few numbers per collective
travel:

* **Per rank** the graph is the rank's own (:func:`~.graph.rank_graph`) plus one node
  per collective instance it takes part in, its *barrier*, with the edges from the
  barrier to the rank's kernel end (the transfer time), as in the job graph, but no edge
  into it: the barrier is a source whose time, the instance's *release time* ``R(c)``,
  is given to the replay (:func:`~.graph.job_graph` with ``instances``).
* **Across ranks** the job graph's barrier is at the latest start of the instance's
  kernels: ``R(c) = max over ranks of s_r(c)``, where ``s_r(c)``, the rank's kernel
  start, is what the rank's replay gives for the release times it was handed. The
  job's schedule is the fixed point ``R = F(R)`` of that map; it is unique, because
  ``s_r(c)`` depends only on the release times of instances whose barrier comes before
  ``c`` in the job graph's node order (barriers are ordered by their measured time,
  :func:`~.graph.match_slots`), and at the fixed point every rank's node times equal
  the job graph's replay exactly (the same edges, delays and order; by induction over
  that order).

**Solving for the fixed point (policy iteration).** Plain iteration ``R <- F(R)`` is
exact but needs as many rounds as there are collectives one after the other on the
longest chain (each round settles one more). Instead each round, every rank replays
with the current ``R`` and returns, per kernel, its start and what set it: following
the replay's binding edges back from the kernel's start reaches a source node, either a
barrier ``b`` (then ``s_r(c) = R(b) + L`` with the path's length ``L``) or a node of the
rank's own (then ``s_r(c)`` is a constant ``a``). The client solves that max-plus system
in barrier order, ``R'(c) = max over ranks of (a, or R'(b) + L)``, in one pass, which
carries a shift along the whole chain at once, and hands ``R'`` out for the next round.
It stops when the ranks' starts reproduce the ``R`` they were given (``F(R) = R``: the
fixed point, so the answer is exact, not a tolerance). Each round keeps the barriers
already exact (the prefix in barrier order) and settles at least one more, so at worst
there are as many rounds as instances; in practice two or three, since a change moves
the whole chain with the same binding paths.

Changes are the same (:mod:`.changes`) and are applied to each rank's graph where it
lives; ``no-stragglers`` needs the median over the ranks of each segment's GPU time,
gathered in one more round first (:func:`segment_totals`).

:func:`coupled_predict` drives it on any :class:`~hta.model.runner.Kept` (per-rank
values kept where the ranks are: in this process, or on Dask workers). See
``docs/analyses/whatif.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from hta.analysis.clock import shift_rank
from hta.analysis.whatif.changes import Change, Edits, apply, straggler_totals
from hta.analysis.whatif.graph import (
    JobGraph,
    RankGraph,
    comm_slots,
    job_graph,
    match_slots,
    rank_graph,
)
from hta.analysis.whatif.replay import step_durations
from hta.analysis.whatif.schedule import Schedule, schedule
from hta.model.arrays import distinct
from hta.model.rules import RuleSet
from hta.model.runner import Kept, keep
from hta.model.trace import RankTrace

if TYPE_CHECKING:
    from hta.model.job import Job

logger = logging.getLogger(__name__)

#: What an unknown release time is (a barrier that holds nothing back).
NEVER = np.iinfo(np.int64).min // 4

#: The replays :func:`coupled_predict` runs: as measured, with the changes, and the
#: modelled one (every dependency at its usual delay: ``modelled_error_pctg``).
KINDS = ("base", "changed", "modelled")


# -- where the rank lives ----------------------------------------------------------------
def build_rank(rt: RankTrace, shift_ns: int) -> RankGraph:
    """The rank's replay graph, its times moved onto the reference clock by ``shift_ns``
    (:func:`~hta.analysis.clock.shift_rank`)."""
    return rank_graph(shift_rank(rt, int(shift_ns)))


def slots(g: RankGraph) -> pd.DataFrame:
    """What the client needs of a rank to match its collectives: its communication
    kernels (:func:`~.graph.comm_slots`)."""
    return comm_slots(g)


@dataclass
class CoupledRank:
    """One rank's graph with its barriers as sources (kept where the rank lives).

    ``jg``: the one-rank job graph; ``barrier_nodes`` / ``barrier_inst``: its barrier
    nodes and their instance numbers (global); ``start_nodes`` / ``start_inst``: per
    kernel of the rank in a matched instance, its start node and instance;
    ``measured``: its steps' durations in the trace (ns); ``measured_start``: its
    kernels' starts in the trace; ``edits``: per replay kind, the last request's key and
    edits; ``base``: the last unchanged replay and the release times it had (caches: a
    copy of this value that lost them, e.g. one Dask computed again, computes them
    again).
    """

    jg: JobGraph
    barrier_nodes: np.ndarray
    barrier_inst: np.ndarray
    start_nodes: np.ndarray
    start_inst: np.ndarray
    measured: np.ndarray
    measured_start: np.ndarray
    edits: dict[str, tuple[Any, Edits | None]] = field(default_factory=dict)
    base: tuple[bytes, Schedule] | None = None


def couple(g: RankGraph, instances: pd.DataFrame) -> CoupledRank:
    """The rank's graph coupled through the barriers of ``instances`` (its rows of
    :func:`~.graph.match_slots`)."""
    rows = instances.assign(_pos=0)
    jg = job_graph([g], rows)
    n_real = int(jg.offsets[-1])
    if len(rows):
        inst = distinct(rows["inst"].to_numpy(np.int64))
        b_nodes = jg.order_of[n_real + np.arange(inst.size)]
        s_nodes = jg.global_node(0, rows["_s"].to_numpy(np.int64))
        s_inst = rows["inst"].to_numpy(np.int64)
    else:
        inst = b_nodes = s_nodes = s_inst = np.zeros(0, dtype=np.int64)
    return CoupledRank(jg=jg, barrier_nodes=b_nodes, barrier_inst=inst,
                       start_nodes=s_nodes, start_inst=s_inst,
                       measured=step_durations(jg, 0, jg.node_ts)[1],
                       measured_start=jg.node_ts[s_nodes])


def rank_segment_totals(cr: CoupledRank, _: Any = None) -> dict[int, float]:
    """The rank's GPU computation per segment between collectives (``no-stragglers``)."""
    return straggler_totals(cr.jg, 0)


@dataclass(frozen=True)
class Request:
    """One replay asked of a rank: ``kind`` (:data:`KINDS`), the release times of its
    instances (``release``, aligned with the rank's ``barrier_inst``), the changes, the
    rules and the segment medians (``no-stragglers``)."""

    kind: str
    release: np.ndarray
    changes: tuple[Change, ...] = ()
    rules: RuleSet | None = None
    medians: Mapping[int, float] | None = None


@dataclass(frozen=True)
class Answer:
    """A rank's replay: per kernel its instance, ``start`` (``measured_start``: in the
    trace) and what set it (``via_inst``: the instance of the barrier its binding path
    starts from, -1 for a node of the rank's own; ``offset``: the start minus that
    barrier's release time, or the start); and its steps (``steps``; ``measured`` /
    ``replayed``: per step, ns)."""

    rank: int
    inst: np.ndarray
    start: np.ndarray
    via_inst: np.ndarray
    offset: np.ndarray
    steps: np.ndarray
    measured: np.ndarray
    replayed: np.ndarray
    measured_start: np.ndarray


def replay_rank(cr: CoupledRank, req: Request) -> Answer:
    """The rank's replay under ``req`` (module docstring)."""
    from hta.analysis.whatif.replay import modelled_edits

    jg = cr.jg
    # the edits of the kind's last request are kept for its next rounds (the rules come
    # unpickled each round on a worker: compared by their table, not their identity)
    key = (req.changes, req.rules.rules if req.rules is not None else None,
           tuple(sorted(req.medians.items())) if req.medians else None)
    kept = cr.edits.get(req.kind)
    if kept is None or kept[0] != key:
        if req.kind == "modelled":
            edits = modelled_edits(jg)
        elif req.kind == "changed" and req.changes:
            edits = apply(jg, list(req.changes), req.rules, req.medians)
        else:
            edits = None
        cr.edits[req.kind] = (key, edits)
    edits = cr.edits[req.kind][1]
    base = jg.base.copy()
    base[cr.barrier_nodes] = np.asarray(req.release, dtype=np.int64)
    if edits is None:
        src, dst, delay = jg.src, jg.dst, jg.delay
    else:
        src, dst, delay = edits.edges(jg)
        np.maximum(delay, 0, out=delay)  # a new array, the edits' own
    # a changed replay is read for its times and roots; the unchanged one is kept, and
    # the critical path's walks follow its binding edges
    sched = schedule(jg.num_nodes, src, dst, delay, base, jg.order_of, roots=True,
                     binding=edits is None)
    if edits is None:  # the unchanged replay: the critical path's walks start from it
        cr.base = (np.asarray(req.release, dtype=np.int64).tobytes(), sched)
    t = sched.t
    start = t[cr.start_nodes]
    assert sched.root is not None
    root = sched.root[cr.start_nodes]
    b_of = np.full(jg.num_nodes, -1, dtype=np.int64)
    b_of[cr.barrier_nodes] = cr.barrier_inst
    via_inst = b_of[root]
    offset = np.where(via_inst >= 0, start - t[root], start)
    steps, replayed = step_durations(jg, 0, t)
    return Answer(rank=jg.ranks[0].rank, inst=cr.start_inst, start=start,
                  via_inst=via_inst, offset=offset, steps=steps, measured=cr.measured,
                  replayed=replayed, measured_start=cr.measured_start)


# -- the client ----------------------------------------------------------------------------
class RankValues(Protocol):
    """What :func:`coupled_predict` needs of the ranks: ``fn(value, item)`` on each rank's
    kept :class:`CoupledRank`, where it lives (:class:`hta.model.runner.Kept`)."""

    def map(self, fn: Any, items: Mapping[int, Any], description: str = ""
            ) -> dict[int, Any]:
        """Per rank of ``items``, ``fn(its value, items[rank])``."""
        ...


@dataclass
class Coupling:
    """The client's view of the coupling: per rank its instances in barrier order
    (``inst`` of its barriers), the barrier order of all instances (``order``) and
    their measured release times (``measured``)."""

    rank_inst: dict[int, np.ndarray]
    order: np.ndarray
    measured: np.ndarray
    rounds: dict[str, int] = field(default_factory=dict)
    release: dict[str, np.ndarray] = field(default_factory=dict)
    settled: dict[str, dict[int, Answer]] = field(default_factory=dict)
    inferred: dict[int, float] | None = None

    @classmethod
    def of(cls, instances: pd.DataFrame, ranks: Iterable[int]) -> Coupling:
        """From :func:`~.graph.match_slots`' rows (``rank``, ``inst``, ``latest_ns``)."""
        if not len(instances):
            z = np.zeros(0, dtype=np.int64)
            return cls({r: z for r in ranks}, z, z)
        inst = instances["inst"].to_numpy(np.int64)
        k = int(inst.max()) + 1
        measured = np.zeros(k, dtype=np.int64)
        measured[inst] = instances["latest_ns"].to_numpy(np.int64)
        order = np.lexsort((np.arange(k), measured))
        by_rank = instances.groupby("rank")["inst"]
        rank_inst = {r: distinct(by_rank.get_group(r).to_numpy(np.int64))
                     if r in by_rank.groups else np.zeros(0, dtype=np.int64) for r in ranks}
        return cls(rank_inst, order, measured)


def coupled_predict(ranks: RankValues, coupling: Coupling,
                    changes: Iterable[str | Change] | str | Change | None = None,
                    rules: RuleSet | None = None, modelled: bool = True,
                    max_rounds: int | None = None, check: bool = True) -> pd.DataFrame:
    """:func:`hta.analysis.whatif.predict`'s table from per-rank replays coupled through
    the release times (module docstring). ``ranks``: the :class:`CoupledRank` of every
    rank, kept where it lives; ``coupling``: :class:`Coupling` of their instances.
    ``coupling.rounds`` records the rounds each replay took."""
    from hta.analysis.whatif.replay import assemble, parse_changes

    parsed = tuple(parse_changes(changes))
    medians = None
    if any(c.kind == "no-stragglers" for c in parsed):
        totals = ranks.map(rank_segment_totals, {r: None for r in coupling.rank_inst},
                           "What-if: segment times")
        by_seg: dict[int, list[float]] = {}
        for part in totals.values():
            for seg, total in part.items():
                by_seg.setdefault(seg, []).append(total)
        medians = {k: float(np.median(v)) for k, v in by_seg.items()}
    if check:
        check_coupled_targets(ranks, coupling, parsed, rules, medians)
    base = _settled(ranks, coupling, "base", max_rounds)
    changed = solve(ranks, coupling, Request("changed", np.zeros(0), parsed, rules, medians),
                    coupling.release.get("base"), max_rounds) if parsed else base
    usual = _settled(ranks, coupling, "modelled", max_rounds) if modelled else None
    parts = []
    for rank in sorted(base):
        b, c = base[rank], changed[rank]
        mod = usual[rank].replayed if usual is not None else np.full(b.steps.size, np.nan)
        parts.append((rank, b.steps, b.measured, b.replayed, c.replayed, mod))
    return assemble(parts, inferred_shares(ranks, coupling))


def rank_touched(cr: CoupledRank, ask: tuple[tuple[Change, ...], RuleSet | None,
                                            Mapping[int, float] | None]) -> list[bool]:
    """Per change of ``ask`` (changes, rules, segment medians), whether it changes any edge
    of this rank's graph (run where the rank is kept)."""
    from hta.analysis.whatif.changes import apply

    changes, rules, medians = ask
    jg = cr.jg
    out = []
    for ch in changes:
        e = apply(jg, [ch], rules, medians)
        out.append(not (e.keep.all() and not e.add_src and np.array_equal(e.delay, jg.delay)))
    return out


def check_coupled_targets(kept: RankValues, coupling: Coupling, changes: tuple[Change, ...],
                          rules: RuleSet | None, medians: Mapping[int, float] | None) -> None:
    """:func:`hta.analysis.whatif.changes.check_targets` over ranks kept where they live:
    a targeted change that changes no rank's graph raises
    :class:`~hta.errors.ChangeMatchesNothingError`."""
    from hta.analysis.whatif.changes import TARGETED, no_work_error

    targeted = tuple(c for c in changes if c.kind in TARGETED)
    if not targeted:
        return
    answers = kept.map(rank_touched, {r: (targeted, rules, medians)
                                      for r in coupling.rank_inst}, "What-if: targets")
    for k, ch in enumerate(targeted):
        if not any(flags[k] for flags in answers.values()):
            raise no_work_error(ch, gpu_work=True)


def inferred_shares(kept: RankValues, coupling: Coupling) -> dict[int, float]:
    """Per rank, the share of its binding edges that are inferred (computed where the
    rank is kept, once per coupling)."""
    from hta.analysis.whatif.uncertainty import coupled_rank_uncertainty

    if coupling.inferred is None:
        rows = kept.map(coupled_rank_uncertainty, {r: None for r in coupling.rank_inst},
                         "What-if: inferred edges")
        coupling.inferred = {r: float(row["inferred_binding_pctg"]) / 100.0
                             for r, row in rows.items()}
    return coupling.inferred


def _settled(ranks: RankValues, coupling: Coupling, kind: str, max_rounds: int | None
             ) -> dict[int, Answer]:
    """The answers of a replay that no change alters (``base``, ``modelled``), solved once
    and kept in ``coupling``."""
    if kind not in coupling.settled:
        start = coupling.release.get("base") if kind != "base" else None
        coupling.settled[kind] = solve(ranks, coupling, Request(kind, np.zeros(0)), start,
                                       max_rounds)
    return coupling.settled[kind]


def solve(ranks: RankValues, coupling: Coupling, req: Request,
          start: np.ndarray | None = None, max_rounds: int | None = None
          ) -> dict[int, Answer]:
    """The ranks' answers at the fixed point of the release times for the replay ``req``
    (module docstring); ``start``: the first guess (default: the measured times)."""
    release = (coupling.measured if start is None else start).copy()
    limit = max_rounds or coupling.measured.size + 2
    for rounds in range(1, limit + 1):
        items = {r: _with_release(req, release[inst]) for r, inst in coupling.rank_inst.items()}
        answers = ranks.map(replay_rank, items, f"What-if: {req.kind} replay, round {rounds}")
        reached = _max_start(answers, release.size)
        if np.array_equal(reached[_used(coupling)], release[_used(coupling)]):
            coupling.rounds[req.kind] = rounds
            coupling.release[req.kind] = release
            logger.info("coupled what-if: the %s replay settled in %d round(s) over %d "
                        "collective instance(s)", req.kind, rounds, release.size)
            return answers
        release = _solve_linear(answers, coupling, release.size)
    raise RuntimeError(f"the coupled {req.kind} replay did not settle in {limit} rounds")


def _with_release(req: Request, release: np.ndarray) -> Request:
    return Request(req.kind, release, req.changes, req.rules, req.medians)


def _used(coupling: Coupling) -> np.ndarray:
    """Instances some rank takes part in (all, when matched)."""
    used = np.zeros(coupling.measured.size, dtype=bool)
    for inst in coupling.rank_inst.values():
        used[inst] = True
    return used


def _max_start(answers: Mapping[int, Answer], k: int) -> np.ndarray:
    """Per instance, the latest start the ranks reached: ``F(R)``."""
    out = np.full(k, NEVER, dtype=np.int64)
    for a in answers.values():
        np.maximum.at(out, a.inst, a.start)
    return out


def _solve_linear(answers: Mapping[int, Answer], coupling: Coupling, k: int) -> np.ndarray:
    """The release times of the max-plus system the answers state, in barrier order."""
    inst = np.concatenate([a.inst for a in answers.values()])
    via = np.concatenate([a.via_inst for a in answers.values()])
    off = np.concatenate([a.offset for a in answers.values()])
    rank_of = np.empty(k, dtype=np.int64)
    rank_of[coupling.order] = np.arange(k)
    # constants first, then the terms read off the barriers, visited in barrier order
    out = np.full(k, NEVER, dtype=np.int64)
    const = via < 0
    np.maximum.at(out, inst[const], off[const])
    dep = ~const
    d_inst, d_via, d_off = inst[dep], via[dep], off[dep]
    o = np.argsort(rank_of[d_inst], kind="stable")
    d_inst, d_via, d_off = d_inst[o].tolist(), d_via[o].tolist(), d_off[o].tolist()
    r = out.tolist()
    for c, b, length in zip(d_inst, d_via, d_off, strict=True):
        v = r[b] + length
        if v > r[c]:
            r[c] = v
    return np.asarray(r, dtype=np.int64)


def coupled_ranks(job: Job, shifts: Mapping[int, int] | None = None,
                  ranks: Iterable[int] | None = None) -> tuple[Kept, Coupling]:
    """Every rank's :class:`CoupledRank`, built and kept where the rank lives, and the
    client's :class:`Coupling`: one round builds the ranks' graphs and brings back their
    communication kernels, the client matches the collectives, a second round couples
    each rank's graph to its instances. ``shifts``: rank -> ns to move its clock by."""
    shifts = shifts or {}
    wanted = list(ranks) if ranks is not None else job.get_ranks()
    graphs = keep(job, build_rank, {r: int(shifts.get(r, 0)) for r in wanted},
                  summary=slots, description="What-if: rank graphs")
    frames = [graphs.summaries[r] for r in graphs.ranks]
    instances = match_slots(frames, positions=list(range(len(frames))))
    empty = frames[0].iloc[:0] if frames else pd.DataFrame()
    if len(instances):  # each rank's rows, in one pass over them (not one pass a rank)
        by_rank = {int(r): rows for r, rows in instances.groupby("rank", sort=False)}
        mine = {r: by_rank.get(r, instances.iloc[:0]) for r in graphs.ranks}
    else:
        mine = {r: empty for r in graphs.ranks}
    coupled = graphs.then(couple, mine, description="What-if: coupling")
    graphs.release()
    return coupled, Coupling.of(instances, coupled.ranks)


# -- the job's critical path from the coupled replays ---------------------------------------
@dataclass(frozen=True)
class PathAsk:
    """What a rank walks back along its binding edges in the unchanged replay (with the
    release times ``release``): from its completion of step ``step`` when ``end`` (the
    rank whose step is the job's; ``step`` None: its first step, -1: its whole trace),
    and from its kernel start of each instance in ``from_inst``; every walk stops at a
    point at or before ``begin_ns`` (None: the rank's own begin of the step)."""

    release: np.ndarray
    step: int | None = None
    end: bool = False
    begin_ns: int | None = None
    from_inst: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass(frozen=True)
class Piece:
    """A walk back on one rank: its segments in path order (``rank``, ``kind``,
    ``name``, ``start_ns``, ``dur_ns``; :mod:`.jobpath`'s kinds) and where it stopped:
    ``stop_inst``, the instance whose barrier set its first point (-1: none), and that
    barrier's release time ``stop_ns``."""

    segments: pd.DataFrame
    stop_inst: int
    stop_ns: int


def rank_path(cr: CoupledRank, ask: PathAsk) -> tuple[int, Piece | None, dict[int, Piece]]:
    """The rank's walks for ``ask``: ``(begin_ns, the walk from the step's completion or
    None, instance -> the walk from its kernel start)``."""
    from hta.analysis.whatif.jobpath import binding_edges, step_end, walk_back

    jg = cr.jg
    release = np.asarray(ask.release, dtype=np.int64)
    if cr.base is not None and cr.base[0] == release.tobytes():
        sched = cr.base[1]
    else:
        base = jg.base.copy()
        base[cr.barrier_nodes] = release
        sched = schedule(jg.num_nodes, jg.src, jg.dst, jg.delay, base, jg.order_of)
        cr.base = (release.tobytes(), sched)
    t = sched.t
    binding = binding_edges(jg, sched)
    begin = ask.begin_ns
    end_piece = None
    b_of = np.full(jg.num_nodes, -1, dtype=np.int64)
    b_of[cr.barrier_nodes] = cr.barrier_inst

    def walk(v: int, stop_t: int) -> Piece:
        segments, last = walk_back(jg, t, binding, v, stop_t)
        return Piece(segments, int(b_of[last]) if t[last] > stop_t else -1, int(t[last]))

    if ask.end:
        found = step_end(jg, 0, t, ask.step)
        if found is None:
            raise ValueError(f"rank {jg.ranks[0].rank} has no step {ask.step}")
        _, end_node, own_begin = found
        begin = own_begin if begin is None else begin
        end_piece = walk(end_node, begin)
    pieces = {}
    if begin is not None and ask.from_inst.size:
        where = dict(zip(cr.start_inst.tolist(), cr.start_nodes.tolist(), strict=True))
        for c in ask.from_inst.tolist():
            pieces[int(c)] = walk(int(where[c]), begin)
    return (begin if begin is not None else 0), end_piece, pieces


def coupled_critical_path(ranks: RankValues, coupling: Coupling, step: int | None = None
                          ) -> pd.DataFrame:
    """:func:`hta.analysis.whatif.jobpath.job_critical_path` from the coupled replays:
    the rank whose step is longest walks back from its completion; where the walk
    reaches a collective's barrier it goes on from the kernel start of the rank that
    arrived last (the job graph's binding edge: the latest start, ties to the later
    measured start, then the higher rank). Two rounds: that rank's walk (it gives the
    step's begin), then every last arriver's walks from its kernel starts inside the
    step."""
    from hta.analysis.whatif.jobpath import PATH_COLUMNS

    base = _settled(ranks, coupling, "base", None)
    release = coupling.release["base"]
    ending = _ending_rank(base, step)
    if ending is None:
        raise ValueError(f"no rank has step {step}")
    own = {r: release[i] for r, i in coupling.rank_inst.items()}
    begin, end_piece, _ = ranks.map(rank_path, {ending: PathAsk(own[ending], step, True)},
                                    "What-if: critical path")[ending]
    assert end_piece is not None
    last = _last_arrivers(base, coupling)
    pieces: dict[int, Piece] = {}
    if end_piece.stop_inst >= 0:
        inside = np.flatnonzero((release > begin) & (release <= end_piece.stop_ns))
        asks: dict[int, list[int]] = {}
        for c in inside.tolist():  # each instance's last arriver walks back from it
            asks.setdefault(int(last[c]), []).append(c)
        answers = ranks.map(rank_path, {r: PathAsk(own[r], begin_ns=begin,
                                                   from_inst=np.asarray(cs, dtype=np.int64))
                                        for r, cs in asks.items()}, "What-if: critical path")
        for _, _, found in answers.values():
            pieces.update(found)
    chain = [end_piece]
    while chain[-1].stop_inst >= 0 and chain[-1].stop_inst in pieces:
        chain.append(pieces[chain[-1].stop_inst])
    seg = pd.concat([p.segments for p in reversed(chain)], ignore_index=True)
    return pd.DataFrame({"rank": seg["rank"].to_numpy(np.int64), "kind": seg["kind"],
                         "name": seg["name"], "start(us)": (seg["start_ns"] - begin) / 1e3,
                         "dur(us)": seg["dur_ns"] / 1e3}, columns=PATH_COLUMNS)


def _ending_rank(answers: Mapping[int, Answer], step: int | None) -> int | None:
    """The rank whose step ``step`` is longest in the replay (the first on ties)."""
    best = None
    for rank in sorted(answers):
        a = answers[rank]
        if a.steps.size and a.steps[0] >= 0:
            want = int(a.steps[0]) if step is None else int(step)
            pos = np.flatnonzero(a.steps == want)
            if not pos.size:
                continue
            dur = int(a.replayed[pos[0]])
        elif step is None or step == -1:
            if not a.steps.size:
                continue
            dur = int(a.replayed[0])
        else:
            continue
        if best is None or dur > best[0]:
            best = (dur, rank)
    return None if best is None else best[1]


def _last_arrivers(answers: Mapping[int, Answer], coupling: Coupling) -> np.ndarray:
    """Per instance, the rank whose kernel started last (ties: the later measured start,
    then the higher rank): where the job graph's barrier takes its time from."""
    k = coupling.measured.size
    rows = [(a.inst, a.start, a.measured_start, np.full(a.inst.size, r, dtype=np.int64))
            for r, a in answers.items()]
    inst, start, measured, rank = (np.concatenate(x) for x in zip(*rows, strict=True))
    o = np.lexsort((rank, measured, start, inst))
    inst, rank = inst[o], rank[o]
    out = np.full(k, -1, dtype=np.int64)
    out[inst] = rank  # the last of each instance's run wins
    return out
