"""Changes to the job graph: what a fix would do, as edits of edge delays and edges.

Each change is a short string (:meth:`Change.parse`) or a :class:`Change`:

``kernels:PATTERN*F``
    GPU work whose name matches ``PATTERN`` (a regular expression, searched) takes ``F``
    times as long: the delay of its start -> end edge (for a coupled collective, its
    transfer time, on both of its end's edges) is multiplied by ``F``.
``category:NAME*F``
    The same for the GPU work of one category of :mod:`hta.model.categories` (``GEMM``,
    ``attention``, ``communication`` ...; kernels carrying collective args are
    ``communication``).
``no-stragglers`` (``no-stragglers:RANK``)
    No rank's GPU computation between two collectives takes longer than the median across
    ranks of its duration: per rank, the non-communication GPU work is cut into segments
    by the rank's coupled collectives (a segment is named by the collective instance that
    ends it, the last one by "after the last"); the events of a segment longer than the
    median are scaled by the median over the ranks of the segment's total duration divided
    by this rank's. Segments at or below the median keep their time: removing stragglers
    never slows a rank down. With ``:RANK`` only that rank changes.
``no-launch-overhead``
    Launch calls take no time and the host submits ahead, as a CUDA graph of the step
    would: every launch edge is replaced by an edge of delay 0 from the start of the
    ``ProfilerStep`` the launch belongs to (outside steps a kernel keeps its launch edge:
    there is no step to submit ahead), the host time inside launch calls is 0 and the
    launch queue no longer holds the host back.
``overlap-comm``
    Collectives no longer block computation: the edges from the end of a communication
    kernel to the start of non-communication GPU work (stream order and event waits) are
    removed. The host still waits where it synchronizes (a ``sync`` edge from GPU work
    also comes from the latest collective before that work on its stream), and
    collectives stay in order. An upper bound: the graph cannot tell which computation
    uses a collective's result.
``no-host-sync``
    Host waits for the GPU disappear: every ``sync`` edge is removed, and the host time
    from the previous point of the thread to the end of a synchronizing call (a
    ``runtime_sync`` call or a blocking copy) becomes the rank's usual CPU step (the
    ``cpu`` floor), when that is shorter.
``no-data-loader``
    Host time inside data-loader spans (as the findings define them: ``enumerate(
    DataLoader)#...``, ``DataLoaderIter.__next__`` ...) becomes 0.

The changes that model the findings' advice, ``no-sync:SITE``, ``pinned-copies``,
``workers:N``, ``cuda-graphs``, ``fused-optimizer`` and ``dtype:bf16|fp16|tf32``, are
defined in :mod:`.fixes`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hta.analysis.critical_path.events import names_matching
from hta.analysis.gpu_work import COMM, classes_of_codes, rank_work_class
from hta.analysis.whatif.graph import EDGE, JobGraph
from hta.analysis.whatif.schedule import index_ranges
from hta.errors import ChangeMatchesNothingError
from hta.model.arrays import distinct
from hta.model.rules import GPU_WORK_KINDS, KIND_CODE, RuleSet, codes_in, kind_mask
from hta.model.trace import thread_keys

#: Changes that take no argument.
SIMPLE = ("no-stragglers", "no-launch-overhead", "overlap-comm", "no-host-sync",
          "no-data-loader", "pinned-copies", "cuda-graphs", "fused-optimizer")
#: Types ``dtype:`` accepts.
DTYPES = ("bf16", "fp16", "tf32")
#: Changes with an argument after a colon (:mod:`.fixes`).
WITH_ARGUMENT = ("no-sync:SITE", "workers:N", "dtype:bf16|fp16|tf32")
_SCALED = re.compile(r"^(kernels|category):(.+)\*([0-9.eE+-]+)$")


@dataclass(frozen=True)
class Change:
    """One change: ``kind`` is ``kernels``, ``category`` or one of :data:`SIMPLE`;
    ``pattern`` and ``factor`` for the scaled kinds, ``rank`` for ``no-stragglers:RANK``."""

    kind: str
    pattern: str = ""
    factor: float = 1.0
    rank: int | None = None

    @classmethod
    def parse(cls, text: str | Change) -> Change:
        """A change from its string (module docstring); raises ValueError saying what is
        expected."""
        if isinstance(text, Change):
            return text
        t = str(text).strip()
        m = _SCALED.match(t)
        if m:
            kind, pattern, factor = m.group(1), m.group(2), m.group(3)
            try:
                f = float(factor)
            except ValueError:
                f = -1.0
            if not np.isfinite(f) or f < 0:
                raise ValueError(f"{t!r}: the factor must be a number >= 0")
            if kind == "kernels":
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"{t!r}: bad regular expression ({exc})") from None
            else:
                from hta.model.categories import CATEGORIES

                if pattern not in CATEGORIES:
                    raise ValueError(f"{t!r}: unknown category; one of "
                                     f"{', '.join(CATEGORIES)}")
            return cls(kind, pattern, f)
        argued = _with_argument(t)
        if argued is not None:
            return argued
        if t.startswith("no-stragglers:"):
            try:
                return cls("no-stragglers", rank=int(t.split(":", 1)[1]))
            except ValueError:
                raise ValueError(f"{t!r}: expected no-stragglers:RANK") from None
        if t in SIMPLE:
            return cls(t)
        raise ValueError(
            f"unknown change {t!r}; expected kernels:PATTERN*F, category:NAME*F, "
            f"no-stragglers[:RANK], {', '.join(SIMPLE[1:])}, {', '.join(WITH_ARGUMENT)}")

    def __str__(self) -> str:
        if self.kind in ("kernels", "category"):
            return f"{self.kind}:{self.pattern}*{self.factor:g}"
        if self.kind in ("no-sync", "dtype"):
            return f"{self.kind}:{self.pattern}"
        if self.kind == "workers":
            return f"workers:{int(self.factor)}"
        if self.kind == "no-stragglers" and self.rank is not None:
            return f"no-stragglers:{self.rank}"
        return self.kind


def _with_argument(t: str) -> Change | None:
    """``no-sync:SITE``, ``workers:N`` or ``dtype:TYPE`` (None for another change)."""
    kind, _, arg = t.partition(":")
    if kind == "no-sync":
        try:
            re.compile(arg)
        except re.error as exc:
            raise ValueError(f"{t!r}: bad regular expression ({exc})") from None
        if not arg:
            raise ValueError(f"{t!r}: expected no-sync:SITE (an operator such as aten::item, "
                             "or a call such as cudaStreamSynchronize)")
        return Change("no-sync", arg)
    if kind == "workers":
        if not arg.isdigit() or int(arg) < 1:
            raise ValueError(f"{t!r}: expected workers:N with N a whole number >= 1")
        return Change("workers", factor=float(int(arg)))
    if kind == "dtype":
        if arg not in DTYPES:
            raise ValueError(f"{t!r}: expected dtype:{'|'.join(DTYPES)}")
        return Change("dtype", arg)
    return None


@dataclass
class Edits:
    """The job graph's edges as a change leaves them: per-edge ``delay`` and ``keep``,
    and added edges (global node ids, delays)."""

    delay: np.ndarray
    keep: np.ndarray
    add_src: list[np.ndarray] = field(default_factory=list)
    add_dst: list[np.ndarray] = field(default_factory=list)
    add_delay: list[np.ndarray] = field(default_factory=list)

    @classmethod
    def of(cls, jg: JobGraph) -> Edits:
        """No change yet."""
        return cls(delay=jg.delay.astype(np.float64), keep=np.ones(jg.src.size, dtype=bool))

    def edges(self, jg: JobGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(src, dst, delay)`` of the kept and added edges, sorted by ``dst``; ``delay``
        is a new array, the caller's to change."""
        if not self.add_src:  # the kept edges are still in order
            if self.keep.all():
                return jg.src, jg.dst, _rounded(self.delay)
            k = self.keep
            return jg.src[k], jg.dst[k], _rounded(self.delay[k])
        k = self.keep & (jg.src < jg.dst)
        src, dst, delay = jg.src[k], jg.dst[k], self.delay[k]
        a_src, a_dst, a_delay = self.added(jg)
        # The kept edges are sorted by (dst, src) already: the few added ones are
        # inserted after their equals, as a stable sort of both would place them.
        n = np.int64(max(jg.node_ts.size, int(a_src.max(initial=0)) + 1,
                         int(a_dst.max(initial=0)) + 1))
        at = np.searchsorted(dst * n + src, a_dst * n + a_src, side="right")
        return (np.insert(src, at, a_src), np.insert(dst, at, a_dst),
                _rounded(np.insert(delay, at, a_delay)))

    def added(self, jg: JobGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(src, dst, delay)`` of the added edges that go from a lower to a higher node
        id (the others cannot be scheduled: left out), sorted by ``(dst, src)`` (stable;
        ``delay`` float ns, as added)."""
        if not self.add_src:
            z = np.zeros(0, dtype=np.int64)
            return z, z, np.zeros(0, dtype=np.float64)
        a_src, a_dst = np.concatenate(self.add_src), np.concatenate(self.add_dst)
        a_delay = np.concatenate(self.add_delay).astype(np.float64, copy=False)
        ok = a_src < a_dst
        a_src, a_dst, a_delay = a_src[ok], a_dst[ok], a_delay[ok]
        n = np.int64(max(jg.node_ts.size, int(a_src.max(initial=0)) + 1,
                         int(a_dst.max(initial=0)) + 1))
        o = np.argsort(a_dst * n + a_src, kind="stable")
        return a_src[o], a_dst[o], a_delay[o]


def _rounded(delay: np.ndarray) -> np.ndarray:
    """``delay`` (ns, float) rounded to the nearest integer, as a new int64 array (made
    in one pass: a job graph's edges number millions)."""
    out = np.empty(delay.shape, dtype=np.int64)
    np.rint(delay, out=out, casting="unsafe")
    return out


def apply(jg: JobGraph, changes: list[Change], rules: RuleSet | None = None,
          medians: Mapping[int, float] | None = None) -> Edits:
    """The edits all ``changes`` make, in order. ``medians``: per segment, the median
    over the job's ranks of its GPU computation (``no-stragglers``), when ``jg`` holds
    only some of the ranks (:mod:`.coupled`); None: computed over ``jg``'s ranks."""
    edits = Edits.of(jg)
    for ch in changes:
        if ch.kind == "no-stragglers":
            _no_stragglers(jg, edits, ch, rules or RuleSet(), medians)
        else:
            _APPLY[ch.kind](jg, edits, ch, rules or RuleSet())
    return edits


#: Changes aimed at some work: each must find some (:func:`check_targets`).
TARGETED = {
    "kernels": "no GPU work whose name matches the pattern (a regular expression, searched)",
    "category": "no GPU work of that category",
    "no-sync": "no blocking call whose site operator or name matches the site whole",
    "pinned-copies": "no copy from or to pageable host memory",
    "workers": "no data-loader span",
    "no-data-loader": "no data-loader span",
    "dtype": "no fp32 GEMM, convolution or elementwise kernel",
    "fused-optimizer": "no kernel launched inside an Optimizer.step span",
    "no-stragglers": "no rank's GPU computation between two collectives runs longer than "
                     "the median across ranks",
}

#: Targeted changes that act on GPU work.
GPU_TARGETS = frozenset({"kernels", "category", "pinned-copies", "dtype"})


def check_targets(jg: JobGraph, changes: list[Change], rules: RuleSet | None = None,
                  edits: Edits | None = None) -> None:
    """Raise :class:`~hta.errors.ChangeMatchesNothingError` for the first change of
    :data:`TARGETED` that leaves every edge of ``jg`` as it is (it found no work);
    ``edits``: those of the one change, when already made."""
    for ch in changes:
        if ch.kind not in TARGETED:
            continue
        def finds_work(ch: Change = ch) -> bool:
            e = edits if edits is not None and len(changes) == 1 else apply(jg, [ch], rules)
            return not (e.keep.all() and not e.add_src and np.array_equal(e.delay, jg.delay))

        # a change asked alone and then with others is applied alone once per graph
        if not jg.kept(("finds_work", repr(ch), None if rules is None else rules.rules),
                       finds_work):
            raise no_work_error(ch, any(_gpu_rows(i, jg).size for i in range(len(jg.ranks))))


def no_work_error(ch: Change, gpu_work: bool) -> ChangeMatchesNothingError:
    """The error of a targeted change ``ch`` that found no work (``gpu_work``: whether the
    traces hold any)."""
    from hta.errors import ChangeMatchesNothingError

    what = TARGETED[ch.kind]
    if ch.kind in GPU_TARGETS and not gpu_work:
        what = "these traces hold no GPU work (a CPU-only profile)"
    return ChangeMatchesNothingError(
        f"{ch}: matches no work in these traces ({what}); a prediction would be no change")


# -- helpers --------------------------------------------------------------------------------
def _gpu_rows(i: int, jg: JobGraph) -> np.ndarray:
    return np.flatnonzero(kind_mask(jg.ranks[i].trace.kind_codes(), GPU_WORK_KINDS))


class EndScales:
    """Delays of the edges into the end nodes of GPU work (its execution edge and, when
    coupled, the collective's transfer edge), multiplied: each rank's rows and factors
    gathered (:meth:`add`), then the edges into them scaled in one pass over the job's
    edges (:meth:`apply`)."""

    def __init__(self, jg: JobGraph) -> None:
        self.jg = jg
        self.nodes: list[np.ndarray] = []
        self.factors: list[np.ndarray] = []

    def add(self, i: int, rows: np.ndarray, factor: np.ndarray | float) -> EndScales:
        """Rank position ``i``'s ``rows`` (GPU work), each scaled by ``factor``."""
        local = self.jg.ranks[i].end_node[rows]
        ok = local >= 0
        if ok.any():
            self.nodes.append(self.jg.global_node(i, local[ok]))
            self.factors.append(np.broadcast_to(np.asarray(factor, dtype=np.float64),
                                                rows.shape)[ok])
        return self

    def apply(self, edits: Edits) -> None:
        """Scale the delays in ``edits``."""
        if not self.nodes:
            return
        jg = self.jg
        nodes, f = np.concatenate(self.nodes), np.concatenate(self.factors)
        # a node listed twice takes its last factor; a factor of 1 changes nothing
        nodes, last = np.unique(nodes[::-1], return_index=True)
        f = f[::-1][last]
        scaled = f != 1.0
        nodes, f = nodes[scaled], f[scaled]
        edges = jg.edges_into_nodes(nodes, "gpu", "collective")
        edits.delay[edges] *= f[np.searchsorted(nodes, jg.dst[edges])]


def _scale_kernels(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    pattern = re.compile(ch.pattern)
    scales = EndScales(jg)
    for i, g in enumerate(jg.ranks):
        rows = _gpu_rows(i, jg)
        ids = names_matching(g.trace.symbols, pattern)
        scales.add(i, rows[np.isin(g.trace.column("name")[rows], ids)], ch.factor)
    scales.apply(edits)


def _scale_category(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    from hta.analysis.perf.calls import gpu_categories

    scales = EndScales(jg)
    for i, g in enumerate(jg.ranks):
        rows = _gpu_rows(i, jg)
        cats = gpu_categories(g.trace, rows, rules)
        scales.add(i, rows[cats == ch.pattern], ch.factor)
    scales.apply(edits)


def straggler_segments(jg: JobGraph, i: int) -> tuple[np.ndarray, np.ndarray, dict[int, float]]:
    """Rank position ``i``'s GPU computation cut into segments by its coupled collectives
    (``no-stragglers``): its rows, each row's segment (the collective instance ending it,
    -1 after the last) and each segment's total duration (ns)."""
    coll = jg.collectives
    g = jg.ranks[i]
    ev = g.trace.events
    rows = _gpu_rows(i, jg)
    rows = rows[rank_work_class(g.trace)[rows] != COMM]
    mine = coll[coll["coupled"] & (coll["_pos"] == i)].sort_values("start_ns")
    starts = mine["start_ns"].to_numpy(np.int64)
    ids = np.r_[mine["collective"].to_numpy(np.int64), -1]
    seg = ids[np.searchsorted(starts, ev["ts"].to_numpy()[rows], side="right")]
    dur = ev["dur"].to_numpy()[rows].astype(np.float64)
    keys, inv = np.unique(seg, return_inverse=True)
    sums = np.bincount(inv, weights=dur, minlength=keys.size)
    return rows, seg, dict(zip(keys.tolist(), sums.tolist(), strict=True))


def straggler_totals(jg: JobGraph, i: int) -> dict[int, float]:
    """Segment -> total GPU computation (ns) of rank position ``i``
    (:func:`straggler_segments`); empty when nothing is coupled."""
    if not len(jg.collectives):
        return {}
    return straggler_segments(jg, i)[2]


def _no_stragglers(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet,
                   medians: Mapping[int, float] | None = None) -> None:
    if not len(jg.collectives):
        return
    segments = [straggler_segments(jg, i) for i in range(len(jg.ranks))]
    if medians is None:
        by_key: dict[int, list[float]] = {}
        for _, _, totals in segments:
            for k, s in totals.items():
                by_key.setdefault(k, []).append(s)
        medians = {k: float(np.median(v)) for k, v in by_key.items()}
    scales = EndScales(jg)
    for i, (rows, seg, totals) in enumerate(segments):
        if ch.rank is not None and jg.ranks[i].rank != ch.rank:
            continue
        own = np.asarray([totals[k] for k in seg.tolist()], dtype=np.float64)
        med = np.asarray([medians[k] for k in seg.tolist()], dtype=np.float64)
        # a rank above the median comes down to it; a rank below keeps its own time
        # (evening out would slow it, and no fix of a straggler slows the others)
        factor = np.where(own > med, med / np.where(own > 0, own, 1.0), 1.0)
        scales.add(i, rows, factor)
    scales.apply(edits)


def _no_launch_overhead(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    edits.keep &= jg.type != EDGE["queue"]
    for i, g in enumerate(jg.ranks):
        launch = jg.edges_into(i, "launch")
        if not launch.size or not len(g.steps):
            continue  # outside a step a kernel still waits for its launch (no step to submit)
        mine = jg.dst[launch]
        it = g.trace.column("iteration")[jg.node_row[mine]]
        s_local = _step_start_nodes(g.steps, it)
        ok = s_local >= 0
        edits.keep[launch[ok]] = False
        edits.add_src.append(jg.global_node(i, s_local[ok]))
        edits.add_dst.append(mine[ok])
        edits.add_delay.append(np.zeros(int(ok.sum())))
    # host time inside launch calls is 0
    _zero_cpu_inside(jg, edits, [KIND_CODE["runtime_launch"]])


def node_kind_codes(jg: JobGraph) -> np.ndarray:
    """Per node of the job graph, the ``kind`` code of its event (-1: a barrier, or an
    event without a kind); kept with the graph."""
    def compute() -> np.ndarray:
        # in the graph's build order (each rank's nodes, then the barriers), then placed
        # at the nodes' ids (``order_of``: build position -> id)
        built = [g.trace.kind_codes()[g.node_event] for g in jg.ranks]
        built.append(np.full(jg.num_nodes - sum(b.size for b in built), -1))
        codes = np.empty(jg.num_nodes, dtype=np.int8)  # KINDS has fewer than 127
        codes[jg.order_of] = np.concatenate(built)
        codes.flags.writeable = False
        return codes

    return jg.kept("node_kind_codes", compute)


def _step_start_nodes(steps: pd.DataFrame, it: np.ndarray) -> np.ndarray:
    """Per step number in ``it``, the start node (local) of the step of ``steps`` with
    that number (the last such row), -1 where none has it."""
    numbers = steps["step"].to_numpy(np.int64)
    if not numbers.size:
        return np.full(len(it), -1, dtype=np.int64)
    order = np.argsort(numbers, kind="stable")
    sorted_numbers = numbers[order]
    at = np.searchsorted(sorted_numbers, it, side="right") - 1
    ok = (at >= 0) & (sorted_numbers[np.clip(at, 0, None)] == it)
    start = steps["start_node"].to_numpy(np.int64)[order]
    return np.where(ok, start[np.clip(at, 0, None)], -1).astype(np.int64)


def _zero_cpu_inside(jg: JobGraph, edits: Edits, kind_codes: list[int]) -> None:
    """Delay 0 on the ``cpu`` edges into the end nodes of events of ``kind_codes``."""
    m = np.flatnonzero(jg.type == EDGE["cpu"])
    m = m[~jg.node_is_start[jg.dst[m]]]
    edits.delay[m[codes_in(node_kind_codes(jg)[jg.dst[m]], kind_codes)]] = 0.0


def _overlap_comm(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    codes = node_kind_codes(jg)
    is_comm = classes_of_codes(codes) == COMM
    gpu_start = kind_mask(codes, GPU_WORK_KINDS) & jg.node_is_start
    for i in range(len(jg.ranks)):
        _host_waits_for_comm(jg, edits, i)
    typ = jg.type
    hit = np.isin(typ, [EDGE["stream"], EDGE["event_wait"]]) & is_comm[jg.src] \
        & gpu_start[jg.dst] & ~is_comm[jg.dst]
    edits.keep &= ~hit


def _host_waits_for_comm(jg: JobGraph, edits: Edits, i: int) -> None:
    """A host wait for GPU work still waits for the collectives before it on its stream:
    per ``sync`` edge from rank ``i``'s GPU work, an edge from the end of the latest
    communication kernel that started before that work on its stream (delay: the rank's
    ``sync`` floor, or the measured gap when shorter)."""
    g = jg.ranks[i]
    sync = jg.edges_from(i, "sync")
    if not sync.size:
        return
    comm = np.flatnonzero(rank_work_class(g.trace) == COMM)
    comm = comm[g.end_node[comm] >= 0]
    if not comm.size:
        return
    rt = g.trace
    ts = rt.column("ts")
    stream = rt.column("stream").astype(np.int64) * 4096 + rt.column("pid") % 4096
    rows = jg.node_row[jg.src[sync]]
    src_new, dst_new, delay_new = [], [], []
    for s in distinct(stream[rows]).tolist():
        c_rows = comm[stream[comm] == s]
        if not c_rows.size:
            continue
        c_rows = c_rows[np.argsort(ts[c_rows], kind="stable")]
        m = sync[stream[rows] == s]
        k = np.searchsorted(ts[c_rows], ts[jg.node_row[jg.src[m]]], side="right") - 1
        ok = k >= 0
        c_end = jg.global_node(i, g.end_node[c_rows[k[ok]]])
        dst = jg.dst[m[ok]]
        fwd = c_end < dst
        measured = jg.node_ts[dst[fwd]] - jg.node_ts[c_end[fwd]]
        src_new.append(c_end[fwd])
        dst_new.append(dst[fwd])
        delay_new.append(np.minimum(measured, g.floor[EDGE["sync"]]).astype(np.float64))
    edits.add_src.extend(src_new)
    edits.add_dst.extend(dst_new)
    edits.add_delay.extend(delay_new)


def _no_host_sync(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    waiting = (node_kind_codes(jg) == KIND_CODE["runtime_sync"]) & ~jg.node_is_start
    waiting[jg.dst[jg.type == EDGE["sync"]]] = True
    unblock_nodes(jg, edits, waiting)


def unblock_nodes(jg: JobGraph, edits: Edits, waiting: np.ndarray) -> None:
    """The nodes marked in ``waiting`` (the ends of blocking calls) no longer wait for the
    GPU: the ``sync`` edges into them go, and the ``cpu`` edges into them take at most
    their rank's usual CPU step (its ``cpu`` floor)."""
    into = waiting[jg.dst]
    edits.keep &= ~((jg.type == EDGE["sync"]) & into)
    cpu = np.flatnonzero((jg.type == EDGE["cpu"]) & into)
    floor = np.asarray([g.floor[EDGE["cpu"]] for g in jg.ranks], dtype=np.float64)
    edits.delay[cpu] = np.minimum(edits.delay[cpu], floor[jg.node_pos[jg.dst[cpu]]])


def cap_handoffs(jg: JobGraph, edits: Edits, i: int, start: np.ndarray, end: np.ndarray,
                 wait: np.ndarray) -> None:
    """Cap at ``wait`` (per span) the delay of the ``thread`` edges that leave rank
    position ``i``'s main thread inside the data-loader spans ``[start, end)`` (sorted):
    a multi-process loader's batch reaches the main thread through its pin-memory
    thread, whose work waits on the workers (untraced) from the span's start; with the
    loading moved off the loop, that wait is what the change leaves."""
    te = jg.edges_from(i, "thread")
    if not te.size or not start.size:
        return
    at = jg.node_ts[jg.src[te]]
    k = np.searchsorted(start, at, side="right") - 1
    ok = (k >= 0) & (at <= end[np.clip(k, 0, None)])
    te, k = te[ok], k[ok]
    edits.delay[te] = np.minimum(edits.delay[te], wait[k])


def _no_data_loader(jg: JobGraph, edits: Edits, ch: Change, rules: RuleSet) -> None:
    from hta.analysis.findings.rule_tools import data_loader_rows

    for i, g in enumerate(jg.ranks):
        rows = data_loader_rows(g.trace)
        if not rows.size:
            continue
        edits.delay[cpu_edges_within(jg, i, rows)] = 0.0
        ok = (g.start_node[rows] >= 0) & (g.end_node[rows] >= 0)
        spans = rows[ok][np.argsort(g.trace.column("ts")[rows[ok]], kind="stable")]
        cap_handoffs(jg, edits, i, g.trace.column("ts")[spans], g.trace.column("end")[spans],
                     np.zeros(spans.size))


def cpu_edges_within(jg: JobGraph, i: int, rows: np.ndarray) -> np.ndarray:
    """Indices of rank position ``i``'s ``cpu`` edges that run inside the spans of
    ``rows`` (CPU events) on their thread: from a node at or after a span's start node to
    one at or before its end node. Ascending.

    Only the edges into the rank's nodes in the spans' union are read (each node's range
    of the edges sorted by destination), not a pass over every one of them."""
    g = jg.ranks[i]
    s_loc, e_loc = g.start_node[rows], g.end_node[rows]
    ok = (s_loc >= 0) & (e_loc >= 0)
    if not ok.any():
        return np.zeros(0, dtype=np.int64)
    s_glob = jg.global_node(i, s_loc[ok])
    e_glob = jg.global_node(i, e_loc[ok])
    pid, tid = g.trace.column("pid"), g.trace.column("tid")
    thread = thread_keys(pid[rows[ok]], tid[rows[ok]])
    o = np.argsort(s_glob, kind="stable")
    lo, hi, thread = s_glob[o], e_glob[o], thread[o]
    nodes = jg.nodes_of(i)
    e = jg.edges_into_nodes(nodes[_within_union(nodes, lo, hi)], "cpu")
    src, dst = jg.src[e], jg.dst[e]
    at = jg.node_row[dst]
    th = thread_keys(pid[at], tid[at])  # the thread of each edge's destination
    inside = np.zeros(e.size, dtype=bool)
    for t in distinct(thread).tolist():
        mine = thread == t
        t_lo, t_hi = lo[mine], np.maximum.accumulate(hi[mine])
        on = np.flatnonzero(th == t)
        k = np.searchsorted(t_lo, src[on], side="right") - 1
        inside[on] = (k >= 0) & (dst[on] <= t_hi[np.clip(k, 0, None)])
    return e[inside]


def _within_union(dst: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Positions in ``dst`` (node ids, sorted) of those in the union of the
    spans ``[lo, hi]`` (``lo`` ascending; a span ending before its start holds
    nothing, and reads as ``[lo, lo]``)."""
    reach = np.maximum.accumulate(np.maximum(hi, lo))
    new = np.r_[True, lo[1:] > reach[:-1]]  # a span past every earlier one's end
    starts = lo[new]
    ends = reach[np.r_[np.flatnonzero(new)[1:] - 1, lo.size - 1]]
    return index_ranges(np.searchsorted(dst, starts, side="left"),
                        np.searchsorted(dst, ends, side="right"))


def register(kind: str, edit: object) -> None:
    """Add the edit function of a change kind (:mod:`.fixes` registers its changes when
    :mod:`hta.analysis.whatif` is imported)."""
    _APPLY[kind] = edit  # type: ignore[assignment]


_APPLY = {
    "kernels": _scale_kernels, "category": _scale_category, "no-stragglers": _no_stragglers,
    "no-launch-overhead": _no_launch_overhead, "overlap-comm": _overlap_comm,
    "no-host-sync": _no_host_sync, "no-data-loader": _no_data_loader,
}
