"""The whole job on one Perfetto timeline: every selected rank in one protobuf trace.

Written with Perfetto's own trace protos (the ``perfetto`` package: ``pip install
perfetto``, or the project's extra ``.[perfetto]``), so ui.perfetto.dev opens it at any
size (no JSON parsing in the browser). The layout:

* **one process group per rank**, named ``rank R (host)`` (the trace's ``host_name``;
  ``rank R`` when it has none), ordered by rank;
* inside it, **one track per CPU thread** (Kineto's thread name, else ``thread T``) and
  **one per GPU stream** (``GPU D stream S``), each event of the rank a slice on the track
  of its ``pid``/``tid``. Slices on a Perfetto track must nest; events that overlap
  without nesting (kernels of one stream overlapping under programmatic dependent launch,
  CPU events the profiler closed out of order) go to a companion track ``... (overlap
  k)`` right below, so no event is lost or cut;
* **flows** from each runtime launch to the GPU work it enqueued (one flow per GPU event,
  from Kineto's correlation ids);
* **findings** (:mod:`hta.analysis.findings`): per rank and rule, a track ``finding:
  <title>`` holding one slice over the stretch the finding is about, annotated with the
  rule, its evidence, its estimated saving and the advice, and inside it one slice per
  interval of the rank's timeline the finding's saving comes from (its claim), annotated
  with the time it claims there. Job findings (stragglers) appear on each rank they made
  wait. At most :data:`MAX_CLAIM_SLICES` intervals per finding and rank (the longest).

Times are the events' int64 ns, minus the rank's clock offset when ``offsets`` gives one
(:func:`hta.analysis.clock.applied_offsets`), so ranks on different hosts line up.
Names are interned per rank (each rank is its own packet sequence), which keeps the file
to about 25 bytes per slice end.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hta.analysis.intervals import merge
from hta.analysis.select import rank_numbers
from hta.model.rules import GPU_WORK_KINDS, KIND_CODE, codes_in
from hta.model.selection import Selection

if TYPE_CHECKING:
    from hta.model.job import Job
    from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

#: Intervals of one finding's claim drawn per rank (the longest ones).
MAX_CLAIM_SLICES = 2_000
#: Packets per serialized chunk (bounded memory on large ranks).
_CHUNK = 100_000
_GPU_CODES = np.array(sorted(KIND_CODE[k] for k in (*GPU_WORK_KINDS, "gpu_annotation")))
_LAUNCH = KIND_CODE["runtime_launch"]


def protos() -> Any:
    """Perfetto's trace protos (``perfetto_trace_pb2``); a clear error without them."""
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("writing a Perfetto protobuf trace needs Perfetto's Python "
                          "package: pip install perfetto (the project's extra "
                          ".[perfetto])") from exc
    return perfetto_trace_pb2


@dataclass
class FindingSlice:
    """One finding on one rank: its title, annotations and the intervals it claims."""

    rule: str
    title: str
    subject: str
    evidence: str
    advice: str
    est_saving_ns: int
    start: np.ndarray
    end: np.ndarray
    amount: np.ndarray


@dataclass
class ExportStats:
    """What :func:`write_job_perfetto` wrote."""

    path: Path
    ranks: list[int] = field(default_factory=list)
    slices: int = 0
    flows: int = 0
    tracks: int = 0
    overlap_tracks: int = 0
    finding_slices: int = 0
    bytes: int = 0


def nest_lanes(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The lane of each interval (given sorted by start, longest first on ties) such that
    intervals of one lane nest properly: a new interval goes to the first lane whose open
    intervals, once those ended by its start are closed, either are none or enclose it."""
    lanes: list[list[int]] = []
    out = np.zeros(ts.size, dtype=np.int64)
    tl, el = ts.tolist(), end.tolist()
    for i in range(ts.size):
        s, e = tl[i], el[i]
        for k, stack in enumerate(lanes):
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or stack[-1] >= e:
                stack.append(e)
                out[i] = k
                break
        else:
            lanes.append([e])
            out[i] = len(lanes) - 1
    return out


def begin_end_order(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                              np.ndarray]:
    """For properly nested intervals sorted by start (longest first on ties): the packet
    sequence ``(time, is_begin, interval)`` that opens and closes them in order."""
    times: list[int] = []
    begins: list[bool] = []
    which: list[int] = []
    stack: list[int] = []
    tl, el = ts.tolist(), end.tolist()
    for i in range(len(tl)):
        while stack and el[stack[-1]] <= tl[i]:
            j = stack.pop()
            times.append(el[j])
            begins.append(False)
            which.append(j)
        times.append(tl[i])
        begins.append(True)
        which.append(i)
        stack.append(i)
    while stack:
        j = stack.pop()
        times.append(el[j])
        begins.append(False)
        which.append(j)
    return (np.asarray(times, dtype=np.int64), np.asarray(begins, dtype=bool),
            np.asarray(which, dtype=np.int64))


class _RankWriter:
    """The packets of one rank (one trusted packet sequence)."""

    def __init__(self, pb: Any, rank: int, seq: int) -> None:
        self.pb = pb
        self.rank = rank
        self.seq = seq
        self.trace = pb.Trace()
        self.first = True
        self.interned: dict[str, int] = {}
        self.out: list[bytes] = []

    def packet(self) -> Any:
        if len(self.trace.packet) >= _CHUNK:
            self.flush()
        p = self.trace.packet.add()
        p.trusted_packet_sequence_id = self.seq
        if self.first:
            p.sequence_flags = self.pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            self.first = False
        else:
            p.sequence_flags = self.pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        return p

    def name_iid(self, p: Any, name: str) -> int:
        iid = self.interned.get(name)
        if iid is None:
            iid = len(self.interned) + 1
            self.interned[name] = iid
            entry = p.interned_data.event_names.add()
            entry.iid = iid
            entry.name = name
        return iid

    def flush(self) -> None:
        if len(self.trace.packet):
            self.out.append(self.trace.SerializeToString())
            self.trace = self.pb.Trace()


def _host(rt: RankTrace) -> str:
    settings = rt.meta.get("settings") or {}
    host = settings.get("host_name") if isinstance(settings, dict) else None
    return str(host) if host else ""


def _thread_names(rt: RankTrace) -> dict[tuple[int, int], str]:
    meta = rt.tables.get("metadata_events")
    if meta is None or not len(meta):
        return {}
    rows = meta[meta["name"].astype(str) == "thread_name"]
    return {(int(p), int(t)): str(v) for p, t, v in
            zip(rows["pid"], rows["tid"], rows["value"]) if str(v)}


def _track_name(gpu: bool, pid: int, tid: int, names: Mapping[tuple[int, int], str]) -> str:
    if gpu:
        return f"GPU {pid} stream {tid}"
    given = names.get((pid, tid))
    if given:
        return given if str(tid) in given else f"thread {tid} ({given})"
    return f"thread {tid}" if pid >= 0 and tid >= 0 else f"pid {pid} tid {tid}"


def write_rank(pb: Any, w: _RankWriter, rt: RankTrace, offset_ns: int,
               findings: list[FindingSlice], stats: ExportStats) -> None:
    """Every packet of one rank: its process and tracks, its events and flows, its
    findings."""
    rank_uuid = (rt.rank + 1) << 32
    p = w.packet()
    d = p.track_descriptor
    d.uuid = rank_uuid
    d.process.pid = rt.rank + 1
    host = _host(rt)
    d.process.process_name = f"rank {rt.rank} ({host})" if host else f"rank {rt.rank}"
    d.child_ordering = pb.TrackDescriptor.EXPLICIT
    ev = rt.events
    n = len(ev)
    ts = ev["ts"].to_numpy(np.int64) - offset_ns
    end = ev["end"].to_numpy(np.int64) - offset_ns
    kind = ev["kind"].cat.codes.to_numpy(np.int64) if n else np.zeros(0, np.int64)
    pid = ev["pid"].to_numpy(np.int64)
    tid = ev["tid"].to_numpy(np.int64)
    gpu = codes_in(kind, _GPU_CODES)
    names = np.asarray(rt.symbols, dtype=object)
    name_ids = ev["name"].to_numpy(np.int64)
    # flows: GPU row -> its launch; ids unique across ranks
    corr = ev["index_correlation"].to_numpy(np.int64)
    flow_gpu = np.flatnonzero(gpu & (corr >= 0))
    flow_gpu = flow_gpu[kind[corr[flow_gpu]] == _LAUNCH] if flow_gpu.size else flow_gpu
    starts: dict[int, list[int]] = {}
    for g in flow_gpu.tolist():
        starts.setdefault(int(corr[g]), []).append(rank_uuid | (g + 1))
    ends = {int(g): rank_uuid | (int(g) + 1) for g in flow_gpu.tolist()}
    stats.flows += int(flow_gpu.size)
    # tracks: (gpu, pid, tid), GPU streams after the CPU threads
    thread_names = _thread_names(rt)
    keys = np.stack([gpu.astype(np.int64), pid, tid], axis=1) if n else np.zeros((0, 3),
                                                                                  np.int64)
    uniq, track_of = (np.unique(keys, axis=0, return_inverse=True) if n
                      else (keys, np.zeros(0, np.int64)))
    track_of = np.asarray(track_of).ravel()
    order_rank = 0
    all_times, all_begin, all_rows, all_tracks = [], [], [], []
    for t, (is_gpu, tpid, ttid) in enumerate(uniq.tolist()):
        rows = np.flatnonzero(track_of == t)
        rows = rows[np.lexsort((-(end[rows] - ts[rows]), ts[rows]))]
        lanes = nest_lanes(ts[rows], end[rows])
        base = _track_name(bool(is_gpu), int(tpid), int(ttid), thread_names)
        for lane in range(int(lanes.max()) + 1 if rows.size else 0):
            uuid = rank_uuid + 1 + order_rank
            p = w.packet()
            d = p.track_descriptor
            d.uuid = uuid
            d.parent_uuid = rank_uuid
            d.name = base if lane == 0 else f"{base} (overlap {lane})"
            d.sibling_order_rank = order_rank
            order_rank += 1
            stats.tracks += 1
            stats.overlap_tracks += lane > 0
            mine = rows[lanes == lane]
            times, begin, which = begin_end_order(ts[mine], end[mine])
            all_times.append(times)
            all_begin.append(begin)
            all_rows.append(mine[which])
            all_tracks.append(np.full(times.size, uuid, dtype=np.int64))
    stats.slices += n
    if all_times:
        times = np.concatenate(all_times)
        order = np.argsort(times, kind="stable")
        _write_events(pb, w, times[order], np.concatenate(all_begin)[order],
                      np.concatenate(all_rows)[order], np.concatenate(all_tracks)[order],
                      names, name_ids, starts, ends)
    _write_findings(pb, w, rank_uuid, order_rank, findings, offset_ns, stats)


def _write_events(pb: Any, w: _RankWriter, times: np.ndarray, begin: np.ndarray,
                  rows: np.ndarray, tracks: np.ndarray, names: np.ndarray,
                  name_ids: np.ndarray, starts: Mapping[int, list[int]],
                  ends: Mapping[int, int]) -> None:
    begin_type = pb.TrackEvent.TYPE_SLICE_BEGIN
    end_type = pb.TrackEvent.TYPE_SLICE_END
    for t, b, r, u in zip(times.tolist(), begin.tolist(), rows.tolist(), tracks.tolist()):
        p = w.packet()
        p.timestamp = t
        e = p.track_event
        e.track_uuid = u
        if b:
            e.type = begin_type
            nid = int(name_ids[r])
            e.name_iid = w.name_iid(p, str(names[nid]) if 0 <= nid < len(names) else "")
            out = starts.get(r)
            if out:
                e.flow_ids.extend(out)
            term = ends.get(r)
            if term is not None:
                e.terminating_flow_ids.append(term)
        else:
            e.type = end_type


def _annotate(e: Any, key: str, value: Any) -> None:
    a = e.debug_annotations.add()
    a.name = key
    if isinstance(value, str):
        a.string_value = value
    elif isinstance(value, float):
        a.double_value = value
    else:
        a.int_value = int(value)


def _write_findings(pb: Any, w: _RankWriter, rank_uuid: int, order_rank: int,
                    findings: list[FindingSlice], offset_ns: int, stats: ExportStats) -> None:
    for k, f in enumerate(findings):
        s, e = f.start - offset_ns, f.end - offset_ns
        if not s.size:
            continue
        uuid = rank_uuid + 1 + order_rank + k
        p = w.packet()
        d = p.track_descriptor
        d.uuid = uuid
        d.parent_uuid = rank_uuid
        d.name = f"finding: {f.title}" + (f" ({f.subject})" if f.subject else "")
        d.sibling_order_rank = order_rank + k
        stats.tracks += 1
        p = w.packet()
        p.timestamp = int(s.min())
        ev = p.track_event
        ev.type = pb.TrackEvent.TYPE_SLICE_BEGIN
        ev.track_uuid = uuid
        ev.name = f.title
        _annotate(ev, "rule", f.rule)
        if f.subject:
            _annotate(ev, "subject", f.subject)
        _annotate(ev, "evidence", f.evidence)
        _annotate(ev, "est_saving(us)", f.est_saving_ns / 1e3)
        _annotate(ev, "advice", f.advice)
        _annotate(ev, "intervals", int(s.size))
        for a, b, amt in zip(s.tolist(), e.tolist(), f.amount.tolist()):
            for t, kind in ((a, pb.TrackEvent.TYPE_SLICE_BEGIN),
                            (b, pb.TrackEvent.TYPE_SLICE_END)):
                p = w.packet()
                p.timestamp = t
                ev = p.track_event
                ev.type = kind
                ev.track_uuid = uuid
                if kind == pb.TrackEvent.TYPE_SLICE_BEGIN:
                    ev.name = f.rule
                    _annotate(ev, "claimed(us)", float(amt) / 1e3)
        p = w.packet()
        p.timestamp = int(e.max())
        p.track_event.type = pb.TrackEvent.TYPE_SLICE_END
        p.track_event.track_uuid = uuid
        stats.finding_slices += int(s.size) + 1


def claim_slices(rule: Any, finding: Any, claim: Any) -> FindingSlice | None:
    """A finding's claim as drawable intervals: merged where they overlap (two streams at
    once), the :data:`MAX_CLAIM_SLICES` longest kept, in time order; None when empty."""
    if claim is None or not claim.start.size:
        return None
    amount = (claim.amount if claim.amount is not None
              else (claim.end - claim.start).astype(np.float64))
    s, e = merge(claim.start, claim.end)
    if not s.size:
        return None
    # the claimed amount of each merged interval: the amounts of the pieces inside it
    which = np.searchsorted(s, claim.start, side="right") - 1
    got = np.bincount(np.clip(which, 0, None), weights=amount, minlength=s.size)
    if s.size > MAX_CLAIM_SLICES:
        keep = np.sort(np.argsort(-(e - s), kind="stable")[:MAX_CLAIM_SLICES])
        s, e, got = s[keep], e[keep], got[keep]
    return FindingSlice(rule.id, rule.title, finding.subject, finding.evidence,
                        finding.advice or rule.advice, int(finding.est_saving_ns), s, e, got)


def rank_finding_slices(job: Job, selection: Selection) -> dict[int, list[FindingSlice]]:
    """Per rank of ``selection`` (resolved: its ranks named), the findings to draw: each
    non-informational rule's findings with the time they claim (rank rules on the rank,
    job rules on each rank they claim time on). A rule that fails is logged and left
    out."""
    from hta.analysis.findings.catalog import default_rules

    ranks = rank_numbers(job, selection)
    iterations = selection.iteration_list
    out: dict[int, list[FindingSlice]] = {r: [] for r in ranks}
    rules = [r for r in default_rules() if not r.info]
    for rule in (r for r in rules if r.scope == "job"):
        try:
            found = rule.check(job, selection)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - one broken rule must not sink the export
            logger.warning("finding rule %s left out of the export: %s", rule.id, exc)
            continue
        for f in found:
            for r, claim in (f.rank_claims or {}).items():
                part = claim_slices(rule, f, claim)
                if part is not None and int(r) in out:
                    out[int(r)].append(part)
    for r in ranks:
        rt = job.rank(r)
        for rule in (x for x in rules if x.scope == "rank"):
            try:
                found = rule.check(rt, iterations)  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - as above
                logger.warning("finding rule %s left out of the export on rank %s: %s",
                               rule.id, r, exc)
                continue
            for f in found:
                part = claim_slices(rule, f, f.claim)
                if part is not None:
                    out[r].append(part)
    return out


def write_job_perfetto(job: Job, path: str | Path, ranks: Iterable[int] | None = None, *,
                       offsets: Mapping[int, int] | None = None,
                       findings: Mapping[int, list[FindingSlice]] | None = None
                       ) -> ExportStats:
    """Write the selected ranks of ``job`` (all when None) as one Perfetto protobuf trace
    at ``path`` (layout: the module docstring). ``offsets``: rank -> ns to subtract
    (clock alignment); ``findings``: per rank, the findings to draw
    (:func:`rank_finding_slices`). Written to a temporary name, then renamed."""
    pb = protos()
    path = Path(path)
    selected = rank_numbers(job, Selection.of(ranks))
    stats = ExportStats(path=path, ranks=selected)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            for r in selected:
                w = _RankWriter(pb, r, seq=r + 1)
                write_rank(pb, w, job.rank(r), int((offsets or {}).get(r, 0)),
                           list((findings or {}).get(r, [])), stats)
                w.flush()
                for chunk in w.out:
                    fh.write(chunk)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    stats.bytes = path.stat().st_size
    return stats


__all__ = ["MAX_CLAIM_SLICES", "ExportStats", "FindingSlice", "begin_end_order",
           "claim_slices", "nest_lanes", "protos", "rank_finding_slices",
           "write_job_perfetto"]
