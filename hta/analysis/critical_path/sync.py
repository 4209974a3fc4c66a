"""Synchronization edges: which GPU work a CPU call or a GPU stream waited for.

``sync`` edges go from the end of GPU work to the end of the CPU call that waited for it
(device, stream and event synchronize, blocking memcpy); ``event_wait`` edges from the end
of the work a ``cudaStreamWaitEvent`` waits for to the start of the first work enqueued on
the waiting stream after it. See ``docs/critical_path.md`` for the rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hta.analysis.critical_path.events import (
    Cols,
    Streams,
    names_matching,
    stream_ids,
)
from hta.model.rules import KIND_CODE, KINDS, RUNTIME_KINDS, kind_mask
from hta.model.trace import RankTrace

#: Scope of ``runtime_sync`` calls that have no ``cuda_sync`` record in the trace. The rule
#: table says a call synchronizes; which streams it waits for is this table's job. A stream
#: synchronize whose stream is not recorded waits on its thread's current stream: the
#: stream of the thread's previous launch.
DEVICE_SYNC_CALLS = re.compile(
    r"^(cudaDeviceSynchronize|cuCtxSynchronize|hipDeviceSynchronize)$")
STREAM_SYNC_CALLS = re.compile(
    r"^(cudaStreamSynchronize|cuStreamSynchronize|hipStreamSynchronize)$")
#: Memcpy calls that return only when the copy is done (CUDA's "synchronous" memcpy API;
#: HtoD from pageable memory excepted, which returns once the data is staged).
BLOCKING_MEMCPY_CALLS = re.compile(
    r"^(cudaMemcpy(2D|3D|Peer|ToSymbol|FromSymbol)?(_v\d+)?|cuMemcpy(HtoD|DtoH|DtoD|Peer)?(_v\d+)?"
    r"|hipMemcpy(2D|3D|Peer|ToSymbol|FromSymbol|DtoH|HtoD|DtoD)?|hipMemcpyWithStream)$"
)
#: An asynchronous DtoH copy into pageable memory blocks the calling thread too.
PAGEABLE = re.compile(r"Pageable", re.IGNORECASE)

#: ``wait_on(src_rows, dst_nodes, src_is_end, edge_type, drop_reason)``: add edges from the
#: end of GPU work (event rows) to graph nodes; work outside the window becomes an external
#: wait of the node.
WaitOn = Callable[[np.ndarray, np.ndarray, bool, str, str], None]


@dataclass
class _Records:
    """The ``cuda_sync`` records of a rank with their args, and when the events they wait
    for were recorded."""

    c: Cols
    rows: np.ndarray  # the records (event rows with a launching call)
    wait_stream: np.ndarray  # per event row: ``wait_on_stream``, -1 absent
    wait_corr: np.ndarray  # per event row: ``wait_on_cuda_event_record_corr_id``, -1 absent
    r_corr: np.ndarray  # correlation ids of runtime calls, sorted
    r_rows: np.ndarray  # their rows, in that order

    @classmethod
    def of(cls, rt: RankTrace, c: Cols) -> _Records:
        """The records of ``rt`` (``c``: its columns)."""
        n = c.ts.shape[0]
        records = np.flatnonzero((c.codes == KIND_CODE["gpu_sync"]) & (c.ic >= 0))
        args = rt.tables.get("sync_args")
        wait_stream = np.full(n, -1, dtype=np.int64)
        wait_corr = np.full(n, -1, dtype=np.int64)
        if args is not None and len(args):
            idx = args["index"].to_numpy(np.int64)
            wait_stream[idx] = stream_ids(args["wait_on_stream"].to_numpy())
            wait_corr[idx] = args["wait_on_event_correlation"].to_numpy(np.int64)
        # the time of the cudaEventRecord call with a given correlation id
        runtime_rows = np.flatnonzero(kind_mask(c.codes, RUNTIME_KINDS) & (c.corr >= 0))
        r_order = np.argsort(c.corr[runtime_rows], kind="stable")
        return cls(c, records, wait_stream, wait_corr, c.corr[runtime_rows][r_order],
                   runtime_rows[r_order])

    def recorded_at(self, recs: np.ndarray) -> np.ndarray:
        """When the event a record waits for was recorded (-1: unknown)."""
        c, r_corr = self.c, self.r_corr
        corrs = self.wait_corr[recs]
        out = np.full(recs.shape[0], -1, dtype=np.int64)
        if r_corr.size:
            pos = np.clip(np.searchsorted(r_corr, corrs), 0, r_corr.size - 1)
            hit = (r_corr[pos] == corrs) & (corrs >= 0)
            out[hit] = c.ts[self.r_rows[pos[hit]]]
        no_id = corrs < 0
        out[no_id] = c.ts[c.ic[recs[no_id]]]  # older traces: the waiting call's start
        return out


#: Pairs (GPU work rows, CPU call rows) of ``sync`` edges, gathered piece by piece.
_Pairs = tuple[list[np.ndarray], list[np.ndarray]]


#: The key of :attr:`CriticalPathGraph.dropped` that counts the synchronizations the graph
#: could not tie to the GPU work they waited for.
UNRESOLVED_SYNC = "synchronizations that could not be resolved"


def sync_edges(rt: RankTrace, c: Cols, rows: np.ndarray, local: np.ndarray,
               end_node: np.ndarray, start_node: np.ndarray, streams: Streams,
               wait_on: WaitOn, dropped: dict[str, int]) -> None:
    """``sync`` edges into CPU call ends and ``event_wait`` edges between streams.

    ``cuda_sync`` records are classified by their fields, not their names: a record on a
    stream that names a stream to wait on is a GPU-side wait (``Stream Wait Event``); a
    record on no stream that names a stream or an event is an event synchronize; a record
    on a stream alone is a stream synchronize; a record with neither is a device
    synchronize when its call is a device synchronize by name (an unresolved one
    otherwise). An event wait waits for the work enqueued on ``wait_on_stream`` before
    the ``cudaEventRecord`` call named by ``wait_on_cuda_event_record_corr_id``; older
    traces leave that id out, and then the waiting call's own start stands in for the
    record's time (the event was recorded before it). Synchronize calls without a record
    take their scope from their name, and blocking copies hold their call.
    """
    rec = _Records.of(rt, c)
    unresolved = _event_waits(rec, local, start_node, streams, wait_on)
    pairs: _Pairs = ([], [])
    unresolved += _recorded_syncs(rt, rec, local, streams, pairs)
    unresolved += _unrecorded_syncs(rt, c, rec, rows, streams, pairs)
    _blocking_copies(rt, c, rows, pairs)
    if unresolved:
        dropped[UNRESOLVED_SYNC] = unresolved
    if pairs[0]:
        src = np.concatenate(pairs[0])
        call = np.concatenate(pairs[1])
        ok = (src >= 0) & (local[call] >= 0)
        wait_on(src[ok], end_node[local[call[ok]]], True, "sync",
                "synchronizations ending before the GPU work they wait for")


def _event_waits(rec: _Records, local: np.ndarray, start_node: np.ndarray, streams: Streams,
                 wait_on: WaitOn) -> int:
    """GPU -> GPU: a stream waits for work on another stream (``cudaStreamWaitEvent``).
    Adds the ``event_wait`` edges; returns how many waits could not be resolved."""
    c, wait_stream = rec.c, rec.wait_stream
    records = rec.rows
    gg = records[(c.stream[records] >= 0) & (wait_stream[records] >= 0)]
    unresolved = 0
    for dev, stream_w, stream_y in set(zip(c.pid[gg].tolist(), c.stream[gg].tolist(),
                                           wait_stream[gg].tolist())):
        part = gg[(c.pid[gg] == dev) & (c.stream[gg] == stream_w) & (wait_stream[gg] == stream_y)]
        t_rec = rec.recorded_at(part)
        src = np.where(t_rec >= 0, streams.last_enqueued_before(dev, stream_y, t_rec), -1)
        unresolved += int((t_rec < 0).sum())
        dst = streams.first_enqueued_from(dev, stream_w, c.ts[c.ic[part]])
        ok = (dst >= 0) & (local[np.clip(dst, 0, None)] >= 0)
        wait_on(src[ok], start_node[local[dst[ok]]], True, "event_wait",
                "event waits ending after the waiting GPU event starts")
    return unresolved


def _recorded_syncs(rt: RankTrace, rec: _Records, local: np.ndarray, streams: Streams,
                    pairs: _Pairs) -> int:
    """GPU -> CPU, with a record: event, stream and device synchronize. Adds to ``pairs``;
    returns how many could not be resolved."""
    c, wait_stream, records = rec.c, rec.wait_stream, rec.rows
    pairs_src, pairs_call = pairs
    on_stream = c.stream[records] >= 0
    names_stream = wait_stream[records] >= 0
    names_event = rec.wait_corr[records] >= 0
    unresolved = 0
    calls = c.ic[records]
    call_ok = (c.codes[calls] == KIND_CODE["runtime_sync"]) & (local[calls] >= 0)
    ev_sync = records[call_ok & ~on_stream & (names_stream | names_event)]
    for dev, stream_y in set(zip(c.pid[ev_sync].tolist(), wait_stream[ev_sync].tolist())):
        part = ev_sync[(c.pid[ev_sync] == dev) & (wait_stream[ev_sync] == stream_y)]
        t_rec = rec.recorded_at(part)
        if stream_y < 0:  # the event's stream is unknown
            unresolved += part.size
            continue
        src = np.where(t_rec >= 0, streams.last_enqueued_before(dev, stream_y, t_rec), -1)
        unresolved += int((t_rec < 0).sum())
        pairs_src.append(src)
        pairs_call.append(c.ic[part])
    st_sync = records[call_ok & on_stream & ~names_stream]
    for dev, stream_s in set(zip(c.pid[st_sync].tolist(), c.stream[st_sync].tolist())):
        part = st_sync[(c.pid[st_sync] == dev) & (c.stream[st_sync] == stream_s)]
        pairs_src.append(streams.last_enqueued_before(dev, stream_s, c.ts[c.ic[part]]))
        pairs_call.append(c.ic[part])
    bare_record = call_ok & ~on_stream & ~names_stream & ~names_event
    device_call = np.isin(c.name[calls], names_matching(rt.symbols, DEVICE_SYNC_CALLS))
    unresolved += int((bare_record & ~device_call).sum())
    dev_sync = records[bare_record & device_call]
    for dev in set(c.pid[dev_sync].tolist()):
        part = dev_sync[c.pid[dev_sync] == dev]
        for s in streams.streams_of(dev):
            pairs_src.append(streams.last_enqueued_before(dev, s, c.ts[c.ic[part]]))
            pairs_call.append(c.ic[part])
    return unresolved


def _unrecorded_syncs(rt: RankTrace, c: Cols, rec: _Records, rows: np.ndarray,
                      streams: Streams, pairs: _Pairs) -> int:
    """GPU -> CPU, without a record: the scope comes from the call's name. Adds to
    ``pairs``; returns how many could not be resolved."""
    with_record = np.zeros(c.ts.shape[0], dtype=bool)
    with_record[c.ic[rec.rows]] = True
    bare = rows[(c.codes[rows] == KIND_CODE["runtime_sync"]) & ~with_record[rows]]
    if not bare.size:
        return 0
    is_dev = np.isin(c.name[bare], names_matching(rt.symbols, DEVICE_SYNC_CALLS))
    is_st = np.isin(c.name[bare], names_matching(rt.symbols, STREAM_SYNC_CALLS))
    st_dev, st_stream = _current_stream(c, bare)
    known = c.stream[bare] >= 0
    st_stream = np.where(known, c.stream[bare], st_stream)
    is_st &= st_stream >= 0
    for dev in streams.devices:
        for s in streams.streams_of(dev):
            on_s = is_st & (st_stream == s) & (known | (st_dev == dev))
            part = bare[is_dev | on_s]
            pairs[0].append(streams.last_enqueued_before(dev, s, c.ts[part]))
            pairs[1].append(part)
    return int((~is_dev & ~is_st).sum())


def _blocking_copies(rt: RankTrace, c: Cols, rows: np.ndarray, pairs: _Pairs) -> None:
    """GPU -> CPU: copies whose launching call returns only when they are done."""
    copies = rows[kind_mask(c.codes[rows], {k for k in KINDS if k.startswith("memcpy")})]
    copies = copies[c.ic[copies] >= 0]
    launcher = c.ic[copies]
    by_launch = c.codes[launcher] == KIND_CODE["runtime_launch"]
    copies, launcher = copies[by_launch], launcher[by_launch]
    if copies.size:
        sync_call = np.isin(c.name[launcher], names_matching(rt.symbols, BLOCKING_MEMCPY_CALLS))
        pageable = np.isin(c.name[copies], names_matching(rt.symbols, PAGEABLE))
        htod = c.codes[copies] == KIND_CODE["memcpy_htod"]
        dtoh = c.codes[copies] == KIND_CODE["memcpy_dtoh"]
        blocking = (sync_call & ~(htod & pageable)) | (dtoh & pageable)
        pairs[0].append(copies[blocking])
        pairs[1].append(launcher[blocking])


def _current_stream(c: Cols, calls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(device, stream) of the last GPU work each call's thread launched before it, or -1.

    A stream synchronize whose stream the trace does not record is taken to wait on the
    thread's current stream: the one its previous launch went to.
    """
    dev = np.full(calls.shape[0], -1, dtype=np.int64)
    stream = np.full(calls.shape[0], -1, dtype=np.int64)
    launches = np.flatnonzero((c.codes == KIND_CODE["runtime_launch"]) & (c.ic >= 0))
    if launches.size == 0 or calls.size == 0:
        return dev, stream
    for pid, tid in set(zip(c.pid[calls].tolist(), c.tid[calls].tolist())):
        mine = launches[(c.pid[launches] == pid) & (c.tid[launches] == tid)]
        which = np.flatnonzero((c.pid[calls] == pid) & (c.tid[calls] == tid))
        if mine.size == 0:
            continue
        pos = np.searchsorted(c.ts[mine], c.ts[calls[which]], side="left") - 1
        ok = pos >= 0
        work = c.ic[mine[pos[ok]]]
        dev[which[ok]] = c.pid[work]
        stream[which[ok]] = np.where(c.stream[work] >= 0, c.stream[work], c.tid[work])
    return dev, stream
