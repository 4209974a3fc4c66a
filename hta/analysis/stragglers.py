"""Stragglers: which rank arrives late at the collectives, and how long the others wait.

A collective (all-reduce, all-gather, send/recv ...) cannot finish before every rank of
its process group has started it, so a rank that starts late holds the others up. We
read this from the communication kernels of every rank (every event of kind
``communication``: NCCL, RCCL, NVSHMEM ... see :mod:`hta.analysis.gpu_work`).

**Matching.** The kernels of one *collective instance* on the ranks are found by key:

* by **sequence number** when the kernel carries the collective args that Kineto copies
  onto NCCL kernels with a ``Seq``: key ``(process group, seq, k)``, where ``k`` numbers
  the kernels of one rank sharing that ``(process group, seq)`` in start order
  (coalesced collectives launch several);
* else by **order**: key ``(process group, name, kernel name, iteration, k)``, ``k``
  numbering a rank's kernels of that name and kernel name in that ``ProfilerStep`` (the
  iteration its launch belongs to) and process group in start order. The *name* is the
  collective's (``Collective name``), else the operation of the ``nccl:OP`` range
  PyTorch puts around each collective call's launch (``nccl:all_to_all``), else the
  kernel name: ranks that launch an all-to-all and an all-reduce in different orders
  through the same kernel are paired call by call.

**Send/recv** kernels are paired apart (:mod:`hta.analysis.p2p`): the ``k``-th send from
rank ``a`` to ``b`` meets the ``k``-th receive on ``b`` from ``a`` in the same process
group (``matched_by`` ``"p2p"``; ``direction`` and ``peer`` say which half and with whom).
A transfer has two participants; ``waited_ns`` is the time the earlier half spent before
the other started, and no half is ever ``last``: the later one holds nobody up, it is
the other half of the transfer. So send/recv never make a straggler and the per-rank
summary leaves them out (pipeline waits are :mod:`hta.analysis.pipeline`'s).

The *process group* is the ``Process Group Name`` of the kernel's collective args, or
``"stream S"`` (the kernel's stream) when it has none. A key found on a single rank is
an instance with one participant: it has no lag and causes no wait.

**Per instance and rank** (integer ns; times are kernel starts and ends on the rank's
clock, which Kineto aligns to wall-clock time, so clock skew between hosts shows as lag):

* ``arrival_lag_ns``: this rank's start minus the earliest start of the instance;
* ``last``: true for the rank(s) with the latest start, when that start is later than
  the earliest (nobody is last when all start together);
* ``waited_ns``: for a rank that is not last, the part of its kernel spent waiting for
  the last one: ``min(latest start - its start, its duration - the last rank's
  duration)``, at least 0 (the last rank's kernel never waits, so it is the transfer
  alone; a rank that arrived earlier spends the difference waiting; capping by the
  lag keeps a longer transfer from counting as wait). 0 for the last rank(s). When
  several ranks tie for last, the shortest of their durations is used;
* ``wait_caused_ns``: for the last rank, the sum of ``waited_ns`` over the other ranks
  of the instance; shared equally (integer division) when several ranks tie for last;
  0 for every other rank;
* ``excess_lag_ns``: for a rank that alone was last, the smallest ``waited_ns`` among
  the others: the time by which *every* other rank was held up, so how much sooner the
  collective would have ended everywhere had this rank arrived with the rest; 0 for the
  others and for ties (no single rank could have saved it).

Example: ranks 0, 1, 2, 3 start an all-reduce at 100, 100, 130, 400 µs and all end at
450 µs (durations 350, 350, 320, 50). Lags: 0, 0, 30, 300 µs. Rank 3 is last; the others
waited min(300, 300) = 300, 300 and min(270, 270) = 270 µs, so rank 3 caused 870 µs of
wait and its excess lag is 270 µs.

**Per rank** (:func:`straggler_summary`), over collective instances (not send/recv) with
two or more participants:
``collectives``, ``late_count`` (instances where it was last), ``mean_lag(us)``,
``total_lag(us)``, ``total_waited(us)`` (what it waited for others),
``total_wait_caused(us)``, ``total_excess_lag(us)`` and ``score``: the rank's share of
all the wait caused in the selection (its ``total_wait_caused`` over the sum over all
ranks; 0 when nobody waited). Ranks are weighed by the time they cost the others, over
every collective, not by one kernel.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import COMM, as_list, rank_work_class
from hta.analysis.p2p import NO_PEER, P2P_NAMES, p2p_pairs, p2p_peers
from hta.analysis.rowmap import nearest_marked_ancestor
from hta.analysis.side_columns import side_number, side_slots, side_text
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.derived import derived
from hta.model.selection import EVERYTHING, Selection, StepList
from hta.model.trace import RankTrace, Trace

logger = logging.getLogger(__name__)

#: Columns of :func:`rank_collectives` (one row per communication kernel of a rank). The
#: ``Process Group Ranks`` text is not among them: the matching never reads it, and per
#: kernel and rank it is a list of the group's ranks (about 5 KB for 1,000 ranks), which
#: made the process matching the ranks grow with ranks x ranks x collectives.
KERNEL_COLUMNS = ["rank", "process_group", "process_group_desc", "seq", "name", "kernel",
                  "stream", "iteration", "start_ns", "end_ns", "in_msg_nelems", "direction",
                  "peer"]
#: Columns of :func:`collective_arrivals`.
ARRIVAL_COLUMNS = ["collective", "process_group", "seq", "name", "rank", "stream",
                   "iteration", "start_ns", "end_ns", "arrival_lag_ns", "waited_ns",
                   "wait_caused_ns",
                   "excess_lag_ns", "last", "participants", "matched_by", "kernel",
                   "process_group_desc", "in_msg_nelems", "direction", "peer"]
#: Columns of :func:`straggler_summary`.
SUMMARY_COLUMNS = ["rank", "collectives", "late_count", "mean_lag(us)", "total_lag(us)",
                   "total_waited(us)", "total_wait_caused(us)", "total_excess_lag(us)",
                   "score"]
NO_SEQ = -1
_TEXT = {"process_group", "process_group_desc", "name", "kernel",
         "matched_by", "direction"}


def _usual(columns: list[str]) -> Columns:
    """The columns with their usual dtypes (text object, ``last`` bool, times in µs,
    ``score`` and ``in_msg_nelems`` float64, the rest int64)."""
    def dtype(c: str) -> str:
        if c in _TEXT:
            return "object"
        if c == "last":
            return "bool"
        return "float64" if "(us)" in c or c in ("score", "in_msg_nelems") else "int64"
    return Columns.of({c: dtype(c) for c in columns})


KERNELS = _usual(KERNEL_COLUMNS)
ARRIVALS = _usual(ARRIVAL_COLUMNS)
SUMMARY = _usual(SUMMARY_COLUMNS)


# -- one rank -------------------------------------------------------------------------------
def rank_collectives(trace: Trace, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """The communication kernels of each rank with their collective args
    (:data:`KERNEL_COLUMNS`), in start order; per rank, so it runs through
    the runner (:mod:`hta.model.runner`). ``seq`` is -1 where the kernel has none."""
    return COLLECTIVE_KERNELS.run(trace, selection)


def rank_collective_kernels(rank: RankTrace, iterations: StepList = None
                            ) -> pd.DataFrame:
    """One rank's rows of :func:`rank_collectives`: its communication kernels."""
    frame = comm_kernels(rank, iterations)
    return frame if len(frame) else KERNELS.empty()


COLLECTIVE_KERNELS = Analysis("Collectives", rank_collective_kernels, KERNELS, steps=PER_STEP)


def comm_kernels(rt: RankTrace, iterations: StepList = None) -> pd.DataFrame:
    """One rank's communication kernels, :data:`KERNEL_COLUMNS` (see :func:`rank_collectives`;
    computed once per rank and steps: the clock offsets, the straggler rule and the
    what-if job graph read the same table, :func:`hta.model.derived.derived`)."""
    steps = None if iterations is None else tuple(as_list(iterations))
    return derived(rt, ("comm_kernels", steps), lambda: _comm_kernels(rt, iterations))


def _comm_kernels(rt: RankTrace, iterations: StepList) -> pd.DataFrame:
    ev = rt.events
    if not len(ev):
        return KERNELS.empty()
    keep = rank_work_class(rt) == COMM
    if iterations is not None:
        keep &= np.isin(rt.column("iteration"), as_list(iterations))
    rows = np.flatnonzero(keep)
    n = rows.size
    sym = np.asarray(rt.symbols, dtype=object)
    kernel = sym[rt.column("name")[rows]] if n else np.zeros(0, dtype=object)
    stream = rt.column("stream")[rows]
    pg = np.array([f"stream {s}" for s in stream], dtype=object)
    desc = np.full(n, "", dtype=object)
    name = kernel.copy()
    seq = np.full(n, NO_SEQ, dtype=np.int64)
    nelems = np.full(n, np.nan)
    pg_ranks = np.full(n, "", dtype=object)
    coll, where = side_slots(rt, "collective_args")
    if n and len(coll):
        arg = where[rows]
        has = arg >= 0
        at = arg[has]

        def text(column: str) -> np.ndarray:
            return side_text(rt, "collective_args", column)[at]

        pg_name = text("process_group_name")
        named = pg_name != ""
        idx = np.flatnonzero(has)
        pg[idx[named]] = pg_name[named]
        desc[idx] = text("process_group_desc")
        cname = text("collective_name")
        name[idx[cname != ""]] = cname[cname != ""]
        s = side_number(rt, "collective_args", "seq")[at]
        fin = np.isfinite(s)
        seq[idx[fin]] = s[fin].astype(np.int64)
        nelems[idx] = side_number(rt, "collective_args", "in_msg_nelems")[at]
        pg_ranks[idx] = text("process_group_ranks")
    unnamed = name == kernel
    ranges = np.full(n, "", dtype=object)
    # the nccl:OP range around the launch: the name of a kernel with no collective name,
    # and a send/recv's peer where its GPU annotation is missing
    look = np.flatnonzero(unnamed | np.isin(name, P2P_NAMES))
    if look.size:
        ops, ranges[look] = _launch_ranges(rt, rows[look], kernel[look])
        name[look] = np.where(unnamed[look], ops, name[look])
    direction, peer = p2p_peers(rt, rows, name, kernel, pg_ranks, ranges)
    return pd.DataFrame({
        "rank": np.full(n, rt.rank, dtype=np.int64), "process_group": pg,
        "process_group_desc": desc, "seq": seq, "name": name,
        "kernel": kernel, "stream": stream.astype(np.int64),
        "iteration": rt.column("iteration")[rows].astype(np.int64),
        "start_ns": rt.column("ts")[rows].astype(np.int64),
        "end_ns": rt.column("end")[rows].astype(np.int64), "in_msg_nelems": nelems,
        "direction": direction, "peer": peer,
    })  # in KERNEL_COLUMNS' order (naming the columns again costs a reindex)


_NCCL_RANGE = re.compile(r"^nccl:(\w+)")


def _launch_ranges(rt: RankTrace, rows: np.ndarray, kernels: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel: the operation of the innermost ``nccl:OP`` range (PyTorch's name of
    each collective call, ``nccl:all_reduce``, ``nccl:send 0->1``) around its launch
    call, else its kernel name; and the range's whole name (``""`` without one)."""
    names = rt.column("name")
    ranged = np.array([str(t).startswith("nccl:") for t in rt.symbols], dtype=bool)
    found = nearest_marked_ancestor(rt.link("parent"), rt.link("index_correlation")[rows],
                                    ranged[names])
    out, texts = kernels.copy(), np.full(kernels.shape[0], "", dtype=object)
    for i in np.flatnonzero(found >= 0).tolist():
        text = str(rt.symbols[int(names[found[i]])])
        m = _NCCL_RANGE.match(text)
        if m:
            out[i], texts[i] = m.group(1), text
    return out, texts


# -- matching across ranks ----------------------------------------------------------------
def match_collectives(kernels: pd.DataFrame) -> pd.DataFrame:
    """Match the kernels of :func:`rank_collectives` (several ranks) into instances and
    compute the per-rank numbers; returns :data:`ARRIVAL_COLUMNS` (module docstring)."""
    if not len(kernels):
        return ARRIVALS.empty()
    k = kernels.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)
    by_seq = k["seq"].to_numpy() != NO_SEQ
    k["matched_by"] = np.where(by_seq, "seq", "order")
    # the key without k: seq rows ignore name and step, order rows ignore seq
    k["_by"] = by_seq
    k["_name"] = np.where(by_seq, "", k["name"].astype(str) + "|" + k["kernel"].astype(str))
    k["_step"] = np.where(by_seq, 0, k["iteration"].to_numpy(np.int64))
    base = ["_by", "process_group", "seq", "_name", "_step"]
    k["_base"] = k.groupby(base, sort=False).ngroup()
    # k: the k-th kernel of a rank with that key, in start order
    k["_k"] = k.groupby(["rank", "_base"], sort=False).cumcount()
    # send/recv: one transfer per (group, sender, receiver, k) (hta.analysis.p2p)
    if "direction" not in k:  # a table from before send/recv were told apart
        k["direction"], k["peer"] = "", NO_PEER
    pair = p2p_pairs(k["direction"].to_numpy(dtype=object), k["peer"].to_numpy(np.int64),
                     k["rank"].to_numpy(np.int64), k["process_group"].to_numpy(dtype=object))
    p2p = pair >= 0
    k.loc[p2p, "matched_by"] = "p2p"
    k["_k"] = np.where(p2p, pair, k["_k"].to_numpy())
    k["_base"] = np.where(p2p, -1, k["_base"].to_numpy())
    k["_key"] = k.groupby(["_base", "_k"], sort=False).ngroup()
    grp = k.groupby("_key", sort=False)
    first = grp["start_ns"].transform("min").to_numpy(np.int64)
    latest = grp["start_ns"].transform("max").to_numpy(np.int64)
    participants = grp["rank"].transform("size").to_numpy()
    start = k["start_ns"].to_numpy(np.int64)
    dur = k["end_ns"].to_numpy(np.int64) - start
    # a transfer's later half holds nobody up: no send/recv is ever "last"
    is_last = (start == latest) & (latest > first) & ~p2p
    k["_last"] = is_last
    big = np.iinfo(np.int64).max
    k["_last_dur"] = np.where(is_last, dur, big)
    last_dur = grp["_last_dur"].transform("min").to_numpy(np.int64)
    # waited: the part of a rank's kernel spent waiting for the last arriver
    waited = np.where(is_last | (latest == first), 0,
                      np.clip(np.minimum(latest - start, dur - last_dur), 0, None))
    # send/recv: the time before the peer's kernel started (within the kernel)
    waited = np.where(p2p, np.clip(np.minimum(latest - start, dur), 0, None), waited)
    k["_waited"] = waited
    k["_min_wait"] = np.where(is_last, big, waited)
    wait_total = grp["_waited"].transform("sum").to_numpy(np.int64)
    min_wait = grp["_min_wait"].transform("min").to_numpy(np.int64)
    n_last = grp["_last"].transform("sum").to_numpy(np.int64)
    # ids in order of the instance's earliest start
    firsts = grp["start_ns"].min().sort_values(kind="stable")
    ids = np.empty(len(firsts), dtype=np.int64)
    ids[firsts.index.to_numpy()] = np.arange(len(firsts), dtype=np.int64)
    out = pd.DataFrame({
        "collective": ids[k["_key"].to_numpy()],
        "process_group": k["process_group"], "seq": k["seq"], "name": k["name"],
        "rank": k["rank"], "stream": k["stream"], "iteration": k["iteration"],
        "start_ns": start, "end_ns": k["end_ns"].to_numpy(np.int64),
        "arrival_lag_ns": start - first, "waited_ns": waited,
        "wait_caused_ns": np.where(is_last, wait_total // np.maximum(n_last, 1), 0),
        "excess_lag_ns": np.where(is_last & (n_last == 1), min_wait, 0),
        "last": is_last, "participants": participants.astype(np.int64),
        "matched_by": k["matched_by"], "kernel": k["kernel"],
        "process_group_desc": k["process_group_desc"], "in_msg_nelems": k["in_msg_nelems"],
        "direction": k["direction"], "peer": k["peer"],
    }, columns=ARRIVAL_COLUMNS)
    return out.sort_values(["collective", "rank"], kind="stable", ignore_index=True)


def collective_arrivals(trace: Trace, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """One row per (collective instance, rank): :data:`ARRIVAL_COLUMNS`.

    The selection's ranks limit the ranks compared (a collective's lag is then measured
    among those ranks only); its steps, the ``ProfilerStep`` numbers. Each rank's kernels are
    read next to the data (:mod:`hta.model.runner`) and matched here.
    Definitions: the module docstring.
    """
    return match_collectives(COLLECTIVE_KERNELS.run(trace, selection))


def matched_collectives(arrivals: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`match_collectives`'s table the straggler tables judge:
    collectives seen on two ranks or more, send/recv left out."""
    if not len(arrivals):
        return arrivals
    return arrivals[(arrivals["participants"] >= 2) & (arrivals["matched_by"] != "p2p")]


def straggler_summary(arrivals: pd.DataFrame) -> pd.DataFrame:
    """Per rank: :data:`SUMMARY_COLUMNS` from :func:`collective_arrivals`'s table.

    Only instances with two or more participants count. Sorted by ``score``, highest
    first (then by rank).
    """
    a = matched_collectives(arrivals)
    if not len(a):
        return SUMMARY.empty()
    g = a.groupby("rank", sort=True)
    out = pd.DataFrame({
        "collectives": g.size(),
        "late_count": g["last"].sum().astype(np.int64),
        "mean_lag(us)": g["arrival_lag_ns"].mean() / 1e3,
        "total_lag(us)": g["arrival_lag_ns"].sum() / 1e3,
        "total_waited(us)": g["waited_ns"].sum() / 1e3,
        "total_wait_caused(us)": g["wait_caused_ns"].sum() / 1e3,
        "total_excess_lag(us)": g["excess_lag_ns"].sum() / 1e3,
    })
    total = float(g["wait_caused_ns"].sum().sum())
    out["score"] = g["wait_caused_ns"].sum() / total if total > 0 else 0.0
    out = out.reset_index()
    out = out.sort_values(["score", "rank"], ascending=[False, True], kind="stable",
                          ignore_index=True)
    return out[SUMMARY_COLUMNS]


def potential_stragglers(summary: pd.DataFrame, num_candidates: int = 2) -> list[int]:
    """The ``num_candidates`` ranks with the highest ``score`` among those that made
    others wait at all (``score > 0``); fewer, or none, when fewer ranks did."""
    if not len(summary):
        return []
    hit = summary[summary["score"] > 0]
    return [int(r) for r in hit["rank"].head(max(1, int(num_candidates)))]

