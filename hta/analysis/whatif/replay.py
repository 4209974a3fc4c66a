"""The replay: the job scheduled again from its trace, and the step time after a change.

The replay is an earliest-start schedule (:mod:`.schedule`) of the job graph
(:mod:`.graph`: every rank's critical path DAG with measured edge delays, coupled at
collectives). Every node without a predecessor starts at its rank's first timestamp;
every other node as soon as its dependencies allow. A change (:mod:`.changes`) edits
delays or edges and the graph is scheduled again, so it moves what depends on the
changed work and nothing else.

Per rank and ``ProfilerStep`` (:func:`what_if`):

* ``measured(us)``: the step's duration in the trace, to the step's *completion*: a step
  is done when its ``ProfilerStep`` span has ended and the GPU work launched inside the
  span has finished (:func:`~.graph.step_work_ends`); it runs from the later of its
  span's start and the previous step's completion to its own completion. Where the host
  waits on the GPU every step this is the ``ProfilerStep`` span; where the host runs
  ahead (a GPU-bound loop with no synchronisation) it is the GPU's pace, which is what
  a faster kernel changes;
* ``replayed(us)``: the same in the replay without change;
* ``predicted(us)``: the span in the replay with the changes (equal to ``replayed``
  without a change);
* ``replay_error_pctg`` = ``100 * (replayed - measured) / measured``: the model's
  honesty figure;
* ``modelled_error_pctg``: the same for the modelled replay, a stricter one where every
  dependency edge (``launch``, ``stream``, ``event_wait``, ``sync``) takes its type's
  usual delay on the rank (the median of its binding delays) instead of the measured one, and only
  durations (GPU work, host work between the points of a thread, collective transfers)
  are measured: how much of the step the graph explains without the trace's own waits;
* ``predicted_low(us)`` / ``predicted_high(us)``: the prediction's range, ``predicted``
  minus / plus the sum of the spread of the rank's measured steps (2 x 1.4826 x their
  median absolute deviation: where steps vary from one to the next, so will the step
  after the change), the replay's error on the step (``|replayed - measured|``) and the
  share of the rank's binding edges that are inferred, not recorded, times the change
  predicted (``|replayed - predicted|``; :mod:`.uncertainty`); the low end is at least 0;
* ``job_measured(us)`` / ``job_predicted(us)``: the step's slowest rank, measured and
  predicted; ``job_predicted_low(us)`` / ``job_predicted_high(us)``: the slowest rank's
  range ends (the largest low and the largest high over the ranks).

A rank without ``ProfilerStep`` gets one row, ``step`` -1, for its whole trace: from its
first to its last node of GPU work or of a CPU thread that launches GPU work (a background
thread, such as a logger blocked for the whole trace, neither starts nor ends the pass).
See ``docs/analyses/whatif.md``.

On a job whose ranks live on Dask workers, :mod:`.coupled` gives the same table from
per-rank replays kept where the ranks are, coupled through the collectives' release times
alone (:func:`~.coupled.coupled_predict`, :func:`~.coupled.coupled_critical_path`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.grouped import row_medians
from hta.analysis.whatif import fixes as _fixes  # noqa: F401 - registers its changes
from hta.analysis.whatif.changes import Change, Edits, apply, check_targets
from hta.analysis.whatif.graph import (
    JOB_EDGE_TYPES,
    JobGraph,
    RankGraph,
    driving_nodes,
    event_nodes,
    index_type,
    job_graph,
    rank_graph,
    step_completion,
    step_nodes,
)
from hta.analysis.whatif.schedule import (
    Schedule,
    edited_times,
    native_schedule_available,
    schedule,
)
from hta.model.rules import RuleSet
from hta.model.trace import RankTrace

__all__ = ["COLUMNS", "JOB_EDGE_TYPES", "Change", "JobGraph", "RankGraph", "Schedule",
           "assemble", "build_job", "job_graph", "predict", "replay", "what_if", "with_trace",
           "without_trace"]

#: Columns of :func:`what_if`.
COLUMNS = ["rank", "step", "measured(us)", "replayed(us)", "predicted(us)",
           "predicted_low(us)", "predicted_high(us)",
           "replay_error_pctg", "modelled_error_pctg", "job_measured(us)",
           "job_predicted(us)", "job_predicted_low(us)", "job_predicted_high(us)"]
#: The step spread's weight in the range: ``SPREAD_SIGMAS`` robust standard deviations.
SPREAD_SIGMAS = 2.0

#: Dependency edges whose delay the modelled replay takes from the rank's usual
#: delay of that type.
DEPENDENCY_EDGES = ("launch", "stream", "event_wait", "sync")


#: Least events of a job whose ranks' graphs :func:`build_job` builds on forked workers.
PARALLEL_MIN_EVENTS = 400_000


def build_job(traces: Sequence[RankTrace], workers: int = 1) -> JobGraph:
    """The job graph of the given ranks (:mod:`.graph`); each rank's graph is built on
    ``workers`` processes forked from this one when the ranks hold
    :data:`PARALLEL_MIN_EVENTS` events or more (:func:`rank_graphs`)."""
    return job_graph(rank_graphs(traces, workers))


def rank_graphs(traces: Sequence[RankTrace], workers: int = 1) -> list[RankGraph]:
    """:func:`~.graph.rank_graph` of each trace, in order. On ``workers`` forked processes
    (inheriting the traces) when worth it: only a graph's arrays come back (about 55
    bytes an event), its traces are this process's own; a share whose graphs did not
    come back is built here."""
    from hta.model.spread import SHARES_PER_WORKER, can_fork, forked_map

    if workers < 2 or len(traces) < 2 or not can_fork() or \
            sum(len(rt.events) for rt in traces) < PARALLEL_MIN_EVENTS:
        return [rank_graph(rt) for rt in traces]
    n = min(len(traces), workers * SHARES_PER_WORKER)
    bounds = [len(traces) * k // n for k in range(n + 1)]
    shares = [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    outcomes = forked_map(lambda share: [without_trace(rank_graph(traces[i]))
                                         for i in share], shares, min(workers, n))
    graphs: list[RankGraph] = []
    for share, outcome in zip(shares, outcomes, strict=True):
        if outcome.ok:
            graphs += [with_trace(g, traces[i]) for i, g in zip(share, outcome.value,
                                                                   strict=True)]
        else:
            graphs += [rank_graph(traces[i]) for i in share]
    return graphs


#: A rank graph's fields made again from the others where it is given back its trace.
_REMADE = ("measured", "start_node", "end_node")


def without_trace(g: RankGraph) -> dict[str, Any]:
    """``g``'s fields but its trace and those :func:`with_trace` makes again from the
    others (what a forked worker sends back: about 55 bytes an event, its node ids and
    event rows being 32-bit where they fit, as :func:`~.graph.rank_graph` keeps them)."""
    return {f.name: getattr(g, f.name) for f in dataclasses.fields(g)
            if f.name != "trace" and f.name not in _REMADE}


def with_trace(fields: dict[str, Any], rt: RankTrace) -> RankGraph:
    """The graph of :func:`without_trace`'s fields, given back its trace (the same
    arrays, dtypes included, as the graph built here)."""
    ts = fields["node_ts"]
    start_node, end_node = event_nodes(len(rt.events), fields["node_event"],
                                       fields["node_is_start"], index_type(ts.size))
    return RankGraph(**fields, measured=ts[fields["dst"]] - ts[fields["src"]],
                     start_node=start_node, end_node=end_node, trace=rt)


def replay(jg: JobGraph, edits: Edits | None = None, binding: bool = True) -> Schedule:
    """Schedule the job graph as ``edits`` leave it (None: unchanged); ``binding``: with
    each node's binding edge (False: the times alone, :func:`schedule`)."""
    if edits is None:
        return schedule(jg.num_nodes, jg.src, jg.dst, jg.delay, jg.base, jg.order_of,
                        indptr=jg.edge_offsets(), binding=binding)
    if not binding and native_schedule_available():  # no edited edge list made
        return Schedule(t=edited_times(jg.edge_offsets(), jg.src, edits.delay, edits.keep,
                                       edits.added(jg), jg.base), via=None)
    src, dst, delay = edits.edges(jg)
    np.maximum(delay, 0, out=delay)  # a new array, the edits' own
    return schedule(jg.num_nodes, src, dst, delay, jg.base, jg.order_of,
                    indptr=jg.edge_offsets() if src is jg.src and dst is jg.dst else None,
                    binding=binding)


def parse_changes(changes: Iterable[str | Change] | str | Change | None) -> list[Change]:
    """Changes from strings or :class:`Change` objects (one string is one change)."""
    if changes is None:
        return []
    if isinstance(changes, str | Change):
        changes = [changes]
    return [Change.parse(c) for c in changes]


def predict(jg: JobGraph, changes: Iterable[str | Change] | str | Change | None = None,
            rules: RuleSet | None = None, base: Schedule | None = None,
            modelled: bool = True,
            windows: Mapping[int, Window] | None = None,
            check: bool = True) -> pd.DataFrame:
    """:data:`COLUMNS` for a built job graph (see :func:`what_if`); without ``modelled``
    the modelled replay is not run and ``modelled_error_pctg`` is NaN. ``windows``: per
    rank without ``ProfilerStep``, the ``(start, end)`` (ns, measured) whose nodes make its
    one row (default: all its nodes), e.g. the findings' analysis window, or a list of
    them, one row each (its iterations, numbered from 1). ``check``: a
    change aimed at work that finds none raises
    :class:`~hta.errors.ChangeMatchesNothingError` (:func:`.changes.check_targets`)."""
    parsed = parse_changes(changes)
    edits = apply(jg, parsed, rules) if parsed else None
    if check:
        check_targets(jg, parsed, rules, edits if len(parsed) == 1 else None)
    base = base or replay(jg)
    # the changed replays are read for their times alone
    changed = replay(jg, edits, binding=False) if edits is not None else base
    strict = replay(jg, modelled_edits(jg), binding=False) if modelled else None
    parts = []
    for i, g in enumerate(jg.ranks):
        w = (windows or {}).get(g.rank)
        steps, measured = step_durations(jg, i, jg.node_ts, w)
        if not steps.size:
            continue
        mod = (step_durations(jg, i, strict.t, w)[1] if strict is not None
               else np.full(steps.size, np.nan))
        parts.append((g.rank, steps, measured, step_durations(jg, i, base.t, w)[1],
                      step_durations(jg, i, changed.t, w)[1], mod))
    # the same for every prediction on the graph: kept with it
    return assemble(parts, jg.kept("inferred_fractions", lambda: {
        g.rank: inferred_fraction(g) for g in jg.ranks}))


def inferred_fraction(g: RankGraph) -> float:
    """The share of a rank's binding edges that are inferred (0..1)."""
    from hta.analysis.whatif.uncertainty import rank_uncertainty

    return float(rank_uncertainty(g)["inferred_binding_pctg"]) / 100.0  # type: ignore[arg-type]


#: A rank's window for a replay without ProfilerStep: one ``(start, end)`` (ns), or a list
#: of them (its iterations).
Window = tuple[int, int] | Sequence[tuple[int, int]]


def step_durations(jg: JobGraph, i: int, t: np.ndarray,
                   window: Window | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rank position ``i``'s steps and their durations (ns) under node times ``t``
    (module docstring): per ``ProfilerStep``, from the later of its span's start and the
    previous step's completion to its completion; a rank without steps has one, ``-1``,
    from its first to its last node (those measured inside ``window`` when given; none
    when it has no node), or, when ``window`` is a list of windows, one per window that
    holds nodes, numbered from 1."""
    g = jg.ranks[i]
    if len(g.steps):
        begin, done_node = step_completion(jg, i, t)
        return step_nodes(jg, i)[0], t[done_node].astype(np.int64) - begin
    if window is not None and len(window) and not isinstance(window[0], int | np.integer):
        return _window_durations(jg, i, t, window)  # type: ignore[arg-type]
    mine = jg.nodes_of(i)
    if window is None:
        mine = driving_nodes(jg, i, mine)
    done_before: int | None = None
    if window is not None:
        lo, hi = int(window[0]), int(window[1])  # type: ignore[arg-type]
        ts = jg.node_ts[mine]
        done_before = _done_before(t, mine, ts, lo)
        mine = mine[(ts >= lo) & (ts <= hi)]
    if not mine.size:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    first = int(t[mine].min())
    if done_before is not None:
        first = max(first, done_before)
    last = max(int(t[mine].max()), first)
    return np.asarray([-1]), np.asarray([last - first])


def _window_durations(jg: JobGraph, i: int, t: np.ndarray,
                      windows: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Rank position ``i``'s iterations (``windows``, by the nodes' measured starts) and
    their durations under node times ``t``: each from the completion of the one before
    (the first: from its earliest node, or the completion of the work before it if
    later) to its own completion, the latest of its nodes (never before the completion
    before it). A change that lets the host run ahead (no
    launch cost) moves an iteration's host nodes into earlier ones; measured from
    completion to completion, the iterations still add up to the span of the whole."""
    mine = jg.nodes_of(i)
    ts = jg.node_ts[mine]
    steps, spans = [], []
    before = _done_before(t, mine, ts, windows[0][0]) if len(windows) else None
    done: int | None = None
    for k, (lo, hi) in enumerate(windows, start=1):
        inside = mine[(ts >= lo) & (ts < hi)]
        if not inside.size:
            continue
        first = int(t[inside].min())
        # the first: from its earliest node, once the work before it is done
        begin = done if done is not None else first if before is None else max(first, before)
        done = max(begin, int(t[inside].max()))
        steps.append(k)
        spans.append(done - begin)
    return np.asarray(steps, dtype=np.int64), np.asarray(spans, dtype=np.int64)


def _done_before(t: np.ndarray, mine: np.ndarray, ts: np.ndarray, start: int) -> int | None:
    """The latest time under ``t`` of the rank's nodes measured before ``start`` (None when
    none): a window starts no earlier than the work before it completes (a change that
    shortens the host's work before the window must not stretch the window back over GPU
    work still running from before it)."""
    before = mine[ts < start]
    return int(t[before].max()) if before.size else None


def assemble(parts: Sequence[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                   np.ndarray]],
             inferred: Mapping[int, float] | None = None) -> pd.DataFrame:
    """:data:`COLUMNS` from per-rank ``(rank, steps, measured, replayed, predicted,
    modelled)`` step durations (ns; modelled NaN when not replayed); ``inferred``: per
    rank, the share of its binding edges that are inferred (for the range)."""
    parts = [p for p in parts if p[1].size]
    if not parts:
        return pd.DataFrame({c: [] for c in COLUMNS})

    def joined(k: int) -> np.ndarray:
        return np.concatenate([p[k] for p in parts])

    rank = np.concatenate([np.full(p[1].size, p[0], dtype=np.int64) for p in parts])
    m, rep, pred, mod = (joined(k) / 1e3 for k in (2, 3, 4, 5))
    out = pd.DataFrame({"rank": rank, "step": joined(1), "measured(us)": m,
                        "replayed(us)": rep, "predicted(us)": pred})
    pos = m > 0
    safe = np.where(pos, m, 1)
    out["replay_error_pctg"] = np.where(pos, 100 * (rep - m) / safe, 0.0)
    out["modelled_error_pctg"] = np.where(pos, 100 * (mod - m) / safe, 0.0)
    half = _half_width(out, inferred or {})
    out["predicted_low(us)"] = np.maximum(pred - half, 0.0)
    out["predicted_high(us)"] = pred + half
    by_step = out.groupby("step")
    out["job_measured(us)"] = by_step["measured(us)"].transform("max")
    out["job_predicted(us)"] = by_step["predicted(us)"].transform("max")
    out["job_predicted_low(us)"] = by_step["predicted_low(us)"].transform("max")
    out["job_predicted_high(us)"] = by_step["predicted_high(us)"].transform("max")
    return out[COLUMNS].sort_values(["step", "rank"], ignore_index=True)


def _half_width(out: pd.DataFrame, inferred: Mapping[int, float]) -> np.ndarray:
    """Per row, the half-width of the predicted step's range (µs): the spread of the
    rank's measured steps (:data:`SPREAD_SIGMAS` times 1.4826 times their median absolute
    deviation), plus the replay's error on the step, plus the rank's inferred share of the
    change the step predicts (``|replayed - predicted|``)."""
    measured = out["measured(us)"].to_numpy(dtype=float)
    rank = out["rank"].to_numpy(np.int64)
    ranks, of_row = np.unique(rank, return_inverse=True)
    median, _ = row_medians([rank], measured)
    mad, _ = row_medians([rank], np.abs(measured - median))  # 0 for a rank of one step
    spread = SPREAD_SIGMAS * 1.4826 * mad
    replayed = out["replayed(us)"].to_numpy(dtype=float)
    err = np.abs(replayed - measured)
    share = np.asarray([float(inferred.get(int(r), 0.0)) for r in ranks.tolist()],
                       dtype=float)[of_row]
    return spread + err + share * np.abs(replayed - out["predicted(us)"].to_numpy(float))


def modelled_edits(jg: JobGraph) -> Edits:
    """Edits of the modelled replay: dependency edges at their type's usual delay."""
    edits = Edits.of(jg)
    codes = [JOB_EDGE_TYPES.index(t) for t in DEPENDENCY_EDGES]
    m = np.flatnonzero(np.isin(jg.type, codes) & (jg.node_pos[jg.dst] >= 0))
    if m.size:
        floors = np.stack([g.floor for g in jg.ranks])  # rank position x edge type
        edits.delay[m] = floors[jg.node_pos[jg.dst[m]], jg.type[m]]
    return edits


def what_if(traces: Sequence[RankTrace],
            changes: Iterable[str | Change] | str | Change | None = None,
            rules: RuleSet | None = None) -> pd.DataFrame:
    """Replay the job and predict each rank's step time after ``changes``.

    Args:
        traces: the ranks (all of them for a multi-rank job: collectives couple them).
        changes: strings such as ``"kernels:gemm*0.5"`` or :class:`Change` objects,
            applied in order (see :mod:`.changes`); none replays the trace as it is.
        rules: the kind rules the trace was loaded with (for ``category:`` changes).

    Returns:
        One row per rank and step, :data:`COLUMNS` (module docstring).
    """
    return predict(build_job(traces), changes, rules)
