"""Point-to-point transfers (send/recv): which way each kernel goes, and to which peer.

A send/recv kernel is not a collective: only two ranks take part, and the one that starts
later is not holding a group up, it is the other half of a transfer. So
:func:`hta.analysis.stragglers.match_collectives` pairs them apart from the collectives,
and the straggler tables never count them.

**Direction.** ``send`` or ``recv``, from the kernel's ``Collective name`` (``send``,
``recv``, ``isend``, ``irecv``), else from the annotation around it (below); ``""`` for
every other communication kernel.

**Peer.** PyTorch names each point-to-point call ``nccl:send A->B`` on the sender and
``nccl:recv B<-A`` on the receiver (A sends, B receives; ranks within the process group),
a CPU range around the call's launch, which Kineto copies onto the GPU as a
``gpu_user_annotation`` on the kernel's stream. The peer is the second number of the GPU
annotation that holds the kernel, else of the CPU range around its launch, mapped to a
global rank through the kernel's ``Process Group Ranks`` (the group's rank list; the
number is kept as it is when the list is absent). ``-1`` when neither names it: such a
kernel is left unmatched.

**Batched transfers.** A send/recv kernel of a batched call (``batch_isend_irecv``,
named ``coalesced``: several transfers, maybe with two peers, in one kernel) gets
direction ``sendrecv`` and no peer: it is left unmatched, so it is never a collective's
straggler (the trace does not say which transfer of the batch waited for whom). (The CPU
op ``record_param_comms`` also records each transfer's peer, in its ``Rank`` arg, which
the loader does not keep.)

**Matching.** The ``k``-th send from rank ``a`` to rank ``b`` in a process group meets
the ``k``-th receive on ``b`` from ``a`` in that group (both in start order): NCCL keeps
the order of the transfers between two ranks of a communicator.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import numpy as np
import pandas as pd

from hta.model.trace import RankTrace

SEND, RECV = "send", "recv"
_DIRECTION = {"send": SEND, "isend": SEND, "recv": RECV, "irecv": RECV}
_ANNOTATION = re.compile(r"nccl:(send|recv)\s+(\d+)\s*(?:->|<-)\s*(\d+)")
_P2P_KERNEL = re.compile(r"(?i)sendrecv|send|recv")
NO_PEER = -1
#: The direction of a batched send/recv kernel (several transfers, maybe with two peers,
#: in one kernel: ``batch_isend_irecv``): no single peer, never paired.
BATCH = "sendrecv"
#: Names of a batched point-to-point call (its ``Collective name`` or ``nccl:`` range).
_BATCHED = frozenset({"coalesced", "batch_isend_irecv", "sendrecv", "send_recv"})
#: ``Collective name`` values of point-to-point calls.
P2P_NAMES = (*_DIRECTION, *sorted(_BATCHED))


def p2p_peers(rt: RankTrace, rows: np.ndarray, names: np.ndarray, kernels: np.ndarray,
              pg_ranks: np.ndarray, ranges: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """``(direction, peer)`` of the communication kernels at event rows ``rows`` of the
    rank (module docstring); ``names``: their collective names, ``kernels``: their kernel
    names, ``pg_ranks``: their ``Process Group Ranks`` text (``""`` when absent),
    ``ranges``: the ``nccl:...`` CPU range around each launch (``""`` when none)."""
    n = rows.size
    direction = np.array([_DIRECTION.get(str(c).lower(), "") for c in names], dtype=object)
    peer = np.full(n, NO_PEER, dtype=np.int64)
    is_p2p = {k: bool(_P2P_KERNEL.search(k)) for k in set(map(str, kernels))}  # few names
    p2p_kernel = np.array([is_p2p[str(k)] for k in kernels], dtype=bool)
    batched = p2p_kernel & (direction == "") & np.array(
        [str(c).lower() in _BATCHED for c in names], dtype=bool)
    direction[batched] = BATCH
    unnamed = np.array([str(c) == str(k) for c, k in zip(names, kernels, strict=True)],
                       dtype=bool)  # no collective name: the kernel's name stands for it
    candidate = ((direction != "") & (direction != BATCH)) | (unnamed & p2p_kernel)
    if not candidate.any():
        return direction, peer
    texts = ranges if ranges is not None else np.full(n, "", dtype=object)
    held = _held_by_annotation(rt, rows[candidate])
    for i, found in zip(np.flatnonzero(candidate), held, strict=True):
        found = found or _parse(str(texts[i]))  # the GPU annotation, else the CPU range
        if found is None:
            continue
        way, local = found
        if direction[i] == "":
            direction[i] = way
        if direction[i] == way:
            peer[i] = _global_rank(str(pg_ranks[i]), local)
    return direction, peer


def _held_by_annotation(rt: RankTrace, rows: np.ndarray) -> list[tuple[str, int] | None]:
    """For each event row: the ``(direction, peer number)`` of the ``nccl:send/recv``
    GPU annotation on its stream that holds it (starts no later, ends no earlier), or
    None."""
    marks = _p2p_annotations(rt)
    out: list[tuple[str, int] | None] = [None] * rows.size
    if not len(marks):
        return out
    ts = rt.column("ts")[rows]
    end = rt.column("end")[rows]
    stream = rt.column("stream")[rows]
    for s, part in marks.groupby("stream", sort=False):
        starts, ends = part["ts"].to_numpy(), part["end"].to_numpy()
        ways, peers = part["way"].to_numpy(dtype=object), part["peer"].to_numpy(np.int64)
        mine = np.flatnonzero(stream == s)
        found = np.searchsorted(starts, ts[mine], side="right") - 1
        for i, j in zip(mine.tolist(), found.tolist(), strict=True):
            # annotations of one stream may nest: walk back to the innermost that holds it
            while j >= 0 and ends[j] < end[i]:
                j -= 1
            if j >= 0:
                out[i] = (str(ways[j]), int(peers[j]))
    return out


def _p2p_annotations(rt: RankTrace) -> pd.DataFrame:
    """The rank's ``nccl:send``/``nccl:recv`` GPU annotations: ``stream``, ``ts``,
    ``end``, ``way`` and ``peer`` (the second rank number), sorted by stream and start."""
    ev = rt.events
    kind = ev["kind"]
    keep = (kind == "gpu_annotation").to_numpy()
    if not keep.any():
        return pd.DataFrame(columns=["stream", "ts", "end", "way", "peer"])
    rows = np.flatnonzero(keep)
    sym = rt.symbols
    parsed = [_parse(str(sym[int(i)])) for i in rt.column("name")[rows]]
    good = np.array([p is not None for p in parsed], dtype=bool)
    rows = rows[good]
    found = [p for p in parsed if p is not None]
    # Kineto writes a GPU annotation's stream only as its tid (no stream arg)
    stream = rt.column("stream")[rows]
    stream = np.where(stream >= 0, stream, rt.column("tid")[rows])
    marks = pd.DataFrame({
        "stream": stream, "ts": rt.column("ts")[rows],
        "end": rt.column("end")[rows], "way": [w for w, _ in found],
        "peer": np.array([q for _, q in found], dtype=np.int64)})
    return marks.sort_values(["stream", "ts"], kind="stable", ignore_index=True)


@lru_cache(maxsize=4096)
def _parse(name: str) -> tuple[str, int] | None:
    m = _ANNOTATION.search(name)
    return (m.group(1), int(m.group(3))) if m else None


@lru_cache(maxsize=1024)
def _group_ranks(text: str) -> tuple[int, ...]:
    try:
        value = json.loads(text) if text else None
        if isinstance(value, str):  # PyTorch writes the list as a string: "[0, 1, 2]"
            value = json.loads(value)
    except ValueError:
        return ()
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return tuple(value)
    return ()


def _global_rank(pg_ranks: str, local: int) -> int:
    ranks = _group_ranks(pg_ranks)
    return ranks[local] if 0 <= local < len(ranks) else local


def p2p_pairs(direction: np.ndarray, peer: np.ndarray, rank: np.ndarray,
              group: np.ndarray) -> np.ndarray:
    """For kernels in start order per rank (the rows of several ranks): the key of the
    transfer each send/recv kernel takes part in (its matching partner has the same key),
    ``-1`` for the kernels that are not point-to-point. A kernel whose peer is unknown
    gets a key of its own."""
    n = direction.shape[0]
    key = np.full(n, -1, dtype=np.int64)
    is_p2p = direction != ""
    if not is_p2p.any():
        return key
    idx = np.flatnonzero(is_p2p)
    sender = np.where(direction[idx] == SEND, rank[idx], peer[idx])
    receiver = np.where(direction[idx] == SEND, peer[idx], rank[idx])
    frame = pd.DataFrame({"g": group[idx], "a": sender, "b": receiver,
                          "d": direction[idx], "r": rank[idx]})
    frame["k"] = frame.groupby(["r", "g", "a", "b", "d"], sort=False).cumcount()
    ids = frame.groupby(["g", "a", "b", "k"], sort=False).ngroup().to_numpy(np.int64).copy()
    unknown = peer[idx] < 0
    ids[unknown] = ids.max(initial=-1) + 1 + np.arange(int(unknown.sum()))
    key[idx] = ids
    return key
