"""Perfetto protobuf traces (``.pftrace``, ``.pb``, ``.pb.gz``) read into Kineto's JSON
layout, so the rest of the loader sees one format.

PyTorch's profiler (Kineto's Perfetto trace builder) can write, beside the JSON, a
protobuf trace of the same run. Its layout, which this module reads:

* a process track ``Kineto Trace`` (pid 0) holding the trace spans and the metadata:
  instant events ``trace_metadata`` whose debug annotations are the JSON's top-level keys
  (``distributedInfo``, ``baseTimeNanoseconds``, ``host_name`` ..., each value its JSON
  text), and ``device_properties`` (annotation ``properties``: the JSON's
  ``deviceProperties`` entries);
* a process track per device (pid = the device, or the OS process for CPU activities),
  a thread track per resource (``thread.pid``/``thread.tid``: the JSON's pid and tid, the
  stream for GPU work), and one child track per activity, holding its slice;
* each activity a ``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END`` pair with its name, absolute
  timestamps in ns, a debug annotation ``metadata`` (the JSON's ``args`` as JSON text,
  with or without the braces) and ``correlation_id``.

**What such a file lacks** against the JSON, and what we do about it:

* **no category**: the JSON's ``cat`` is not written. It is inferred from the args:
  ``device`` and ``stream`` make GPU work (``gpu_memcpy``/``gpu_memset`` by name, else
  ``kernel``), a slice on a process track with no thread a trace span (``Trace``),
  ``cbid`` a runtime call (``cuda_driver`` for ``cu*`` names that are not
  ``cuda*``), ``Python id`` a ``python_function``, ``wait_on_stream`` or a sync name a
  ``cuda_sync``; ``ProfilerStep#N`` and ``## ... ##`` names are ``user_annotation``;
  everything else on the CPU is a ``cpu_op``. So a ``record_function`` range is an
  operator, not an annotation, and a GPU annotation (``gpu_user_annotation``, which has
  no stream arg) is read as a CPU event of the stream's track: a file whose slices carry
  categories (TrackEvent ``categories``) keeps them instead;
* **no flows**: ``ac2g`` flows are not needed (launches and GPU work are linked by
  correlation, which the args hold); forward-backward flows (``fwdbwd``) are lost;
* **no instant, counter or memory events** (``[memory]``): the memory timeline is empty;
* **no ``External id`` on GPU work and runtime calls**, which Kineto's JSON writer adds
  from the linked operator: runtime calls are tied to operators by nesting on their
  thread, as in the JSON.

Files from other writers are read the same way: any slice on any track (names interned or
not), pid and tid from the nearest thread (or process) descriptor above the track; a
slice without ``metadata`` has no args, so GPU work is then not told from CPU work.
Slices left open at the end of the file are dropped and counted.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hta.errors import TraceLoadError

if TYPE_CHECKING:
    from hta.kineto.files import RemotePath

logger = logging.getLogger(__name__)

#: Names of protobuf trace files (matched at the end of the name, any case). A JSON file
#: with one of these names is read as JSON: the content decides.
PROTOBUF_SUFFIXES = (".pftrace", ".pftrace.gz", ".pb", ".pb.gz", ".perfetto-trace")
_SYNC_NAMES = {"Stream Sync", "Event Sync", "Context Sync", "Stream Wait Event",
               "Device Sync"}
_INSTALL = "reading a Perfetto protobuf trace needs Perfetto's Python package: pip install " \
    "perfetto (the project's extra .[perfetto])"


def _is_json_text(head: bytes) -> bool:
    """JSON opens with ``{`` or ``[`` after white space (or a byte-order mark), and its
    first bytes are text: no control byte but tab, newline and carriage return."""
    stripped = head.lstrip(b" \t\r\n").removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    return stripped[:1] in (b"{", b"[") and not any(b < 32 and b not in (9, 10, 13)
                                                    for b in head)


def looks_like_protobuf(head: bytes) -> bool:
    """Whether the (inflated) start of a file is a protobuf ``Trace`` rather than JSON:
    the first byte opens field 1 (``packet``), length-delimited (0x0A, also a newline,
    so JSON text after a newline is told apart by being text)."""
    return head[:1] == b"\x0a" and not _is_json_text(head)


def is_protobuf_file(path: Any) -> bool:
    """Whether ``path`` holds a protobuf trace (gzip inflated first), by its content."""
    import zlib

    try:
        with path.open("rb") as fh:
            head = fh.read(64)
        if head[:2] == b"\x1f\x8b":
            with path.open("rb") as fh:
                head = zlib.decompressobj(31).decompress(fh.read(1 << 16), 64)
    except (OSError, zlib.error):
        return False
    return looks_like_protobuf(head)


def _protos(path: Path | RemotePath) -> Any:
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError:
        raise TraceLoadError(path, "this is a Perfetto protobuf trace", _INSTALL) from None
    return perfetto_trace_pb2


def _annotation_value(a: Any) -> Any:
    for field in ("string_value", "int_value", "uint_value", "double_value", "bool_value"):
        if a.HasField(field):
            return getattr(a, field)
    return None


def _json_text(text: str) -> Any:
    """A value that Kineto wrote as JSON text; the text itself when it is not JSON."""
    import orjson  # here: a JSON trace never needs it (a few ms to import)

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _args(text: str) -> dict[str, Any] | None:
    body = text.strip()
    if not body:
        return {}
    if not body.startswith("{"):
        body = "{" + body.rstrip(", \n") + "}"
    import orjson

    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def infer_category(name: str, args: dict[str, Any]) -> str:
    """The Kineto category of a slice written without one (module docstring)."""
    if "device" in args and "stream" in args and "cbid" not in args:
        if name.startswith("Memcpy"):
            return "gpu_memcpy"
        if name.startswith("Memset"):
            return "gpu_memset"
        return "kernel"
    if "cbid" in args or "cid" in args:
        return "cuda_driver" if name.startswith("cu") and not name.startswith("cuda") \
            else "cuda_runtime"
    if "Python id" in args:
        return "python_function"
    if name in _SYNC_NAMES or "wait_on_stream" in args:
        return "cuda_sync"
    if name.startswith("ProfilerStep#") or (name.startswith("## ") and name.endswith(" ##")):
        return "user_annotation"
    return "cpu_op"


def to_kineto(path: Path | RemotePath, data: bytes | bytearray) -> tuple[dict[str, Any], list[str]]:
    """The trace in ``data`` (a protobuf ``Trace``, inflated) as a Kineto JSON document,
    and notes on what was inferred or dropped. Raises :class:`TraceLoadError` (one line)
    for a truncated or foreign file."""
    pb = _protos(path)
    from google.protobuf.message import DecodeError

    try:
        trace = pb.Trace.FromString(bytes(data))
    except DecodeError:
        raise TraceLoadError(path, "not a complete Perfetto protobuf trace (its protobuf "
                             "data is cut short or corrupt)",
                             "the file is cut short or is not a trace; collect it again"
                             ) from None
    tracks: dict[int, Any] = {}
    names: dict[int, dict[int, str]] = defaultdict(dict)
    cats: dict[int, dict[int, str]] = defaultdict(dict)
    open_: dict[int, list[tuple[int, str, list[str], dict[str, Any] | None]]] = \
        defaultdict(list)
    slices: list[tuple[int, int, int, str, list[str], dict[str, Any] | None]] = []
    top: dict[str, Any] = {}
    bad_args = 0
    for p in trace.packet:
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            names[seq] = {}
            cats[seq] = {}
        if p.HasField("interned_data"):
            for entry in p.interned_data.event_names:
                names[seq][entry.iid] = entry.name
            for entry in p.interned_data.event_categories:
                cats[seq][entry.iid] = entry.name
        if p.HasField("track_descriptor"):
            tracks[p.track_descriptor.uuid] = p.track_descriptor
            continue
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        if e.type == pb.TrackEvent.TYPE_SLICE_END:
            stack = open_.get(e.track_uuid)
            if stack:
                ts, name, cat, begin_args = stack.pop()
                slices.append((e.track_uuid, ts, p.timestamp, name, cat, begin_args))
            continue
        name = e.name if e.HasField("name") else names[seq].get(e.name_iid, "")
        ann = {a.name: _annotation_value(a) for a in e.debug_annotations}
        if e.type == pb.TrackEvent.TYPE_INSTANT:
            if name == "trace_metadata":
                top.update({k: _json_text(v) if isinstance(v, str) else v
                            for k, v in ann.items()})
            elif name == "device_properties" and isinstance(ann.get("properties"), str):
                text = ann["properties"].strip()
                props = _json_text(text if text.startswith("[") else f"[{text}]")
                if isinstance(props, list):
                    top["deviceProperties"] = props
            continue
        if e.type != pb.TrackEvent.TYPE_SLICE_BEGIN:
            continue
        cat = list(e.categories) or [cats[seq].get(i, "") for i in e.category_iids]
        args: dict[str, Any] = {}
        if isinstance(ann.get("metadata"), str):
            parsed = _args(ann["metadata"])
            if parsed is None:
                bad_args += 1
            else:
                args = parsed
        if ann.get("correlation_id") and "correlation" not in args:
            args["correlation"] = ann["correlation_id"]
        open_[e.track_uuid].append((p.timestamp, name, cat, args))
    _refuse_export(path, tracks)
    if not slices:
        raise TraceLoadError(path, "a protobuf file with no slices: not a profiler trace",
                             "give the JSON trace, or the .pftrace PyTorch wrote")
    left_open = sum(len(s) for s in open_.values())
    doc, notes = _document(tracks, slices, top)
    if left_open:
        notes.append(f"{left_open:,} slice(s) never closed in the file were dropped")
    if bad_args:
        notes.append(f"{bad_args:,} slice(s) had metadata that is not JSON; read "
                     "without args")
    return doc, notes


#: The process name :mod:`hta.export.perfetto_job` gives each rank: ``rank R`` or
#: ``rank R (host)``.
_EXPORTED_RANK = re.compile(r"rank (\d+)(?: \(.*\))?")


def _refuse_export(path: Path | RemotePath, tracks: dict[int, Any]) -> None:
    """Raise a :class:`TraceLoadError` naming a job-wide export of this package (read as
    one rank it would be nonsense: every rank's events on one CPU-only 'rank')."""
    exported = _exported_ranks(tracks)
    if exported:
        raise TraceLoadError(
            path, f"a job-wide Perfetto trace written by 'hta export --format perfetto' "
            f"({len(exported)} rank(s) on one timeline: {_rank_list(exported)}), not a "
            "profiler trace", "analyse the trace folder it was exported from")


def _exported_ranks(tracks: dict[int, Any]) -> list[int]:
    """The ranks of a job-wide export of this package (its processes are named ``rank R``
    and it has ``finding: ...`` or ``GPU D stream S`` tracks); [] for any other file."""
    ranks, ours = [], False
    for td in tracks.values():
        if td.HasField("process"):
            match = _EXPORTED_RANK.fullmatch(td.process.process_name)
            if match:
                ranks.append(int(match.group(1)))
        name = td.name if td.HasField("name") else ""
        ours = ours or name.startswith("finding: ") or bool(_GPU_TRACK.fullmatch(name))
    return sorted(set(ranks)) if ours else []


_GPU_TRACK = re.compile(r"GPU \d+ stream \d+(?: \(overlap \d+\))?")


def _rank_list(ranks: list[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:8])
    return shown + (", ..." if len(ranks) > 8 else "")


def _owner(tracks: dict[int, Any], uuid: int) -> tuple[int, int, bool]:
    """pid and tid of a track: the nearest thread descriptor at or above it, else the
    nearest process (tid 0); and whether a thread was found."""
    seen = 0
    while uuid in tracks and seen < 64:
        d = tracks[uuid]
        if d.HasField("thread"):
            return int(d.thread.pid), int(d.thread.tid), True
        if d.HasField("process"):
            return int(d.process.pid), 0, False
        uuid = d.parent_uuid
        seen += 1
    return 0, 0, False


def _document(tracks: dict[int, Any], slices: list[Any], top: dict[str, Any]
              ) -> tuple[dict[str, Any], list[str]]:
    base = min(s[1] for s in slices)
    inferred = 0
    owners: dict[int, tuple[int, int, bool]] = {}
    events: list[dict[str, Any]] = []
    for uuid, ts, end, name, cat, args in slices:
        if uuid not in owners:
            owners[uuid] = _owner(tracks, uuid)
        pid, tid, on_thread = owners[uuid]
        category = cat[0] if cat and cat[0] else ""
        if not category and not on_thread:
            category = "Trace"  # Kineto's trace spans sit on its process track
        if not category:
            category = infer_category(name, args or {})
            inferred += 1
        event = {"ph": "X", "cat": category, "name": name, "pid": pid, "tid": tid,
                 "ts": (ts - base) / 1000, "dur": (end - ts) / 1000}
        if args:
            event["args"] = args
        events.append(event)
    # thread names, as Kineto's JSON gives them in metadata events
    for d in tracks.values():
        if d.HasField("thread") and (d.thread.thread_name or d.name):
            events.append({"ph": "M", "name": "thread_name", "pid": int(d.thread.pid),
                           "tid": int(d.thread.tid),
                           "args": {"name": d.thread.thread_name or d.name}})
    doc = {k: v for k, v in top.items() if k not in ("traceEvents", "baseTimeNanoseconds")}
    doc.setdefault("schemaVersion", 1)
    doc["baseTimeNanoseconds"] = base
    doc["traceEvents"] = events
    notes = []
    if inferred:
        notes.append(f"Perfetto protobuf trace: {inferred:,} slice(s) had no category; "
                     "inferred from their args and names (see hta.kineto.pftrace)")
    return doc, notes


def to_kineto_json(path: Path | RemotePath, data: bytes | bytearray
                   ) -> tuple[bytes, list[str]]:
    """:func:`to_kineto` as JSON text (what the JSON decoders read)."""
    import orjson

    doc, notes = to_kineto(path, data)
    return orjson.dumps(doc), notes


__all__ = ["PROTOBUF_SUFFIXES", "infer_category", "is_protobuf_file", "looks_like_protobuf",
           "to_kineto", "to_kineto_json"]
