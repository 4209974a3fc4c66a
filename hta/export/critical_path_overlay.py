"""Write a rank's trace back with its critical path marked, for Perfetto / chrome://tracing.

The output is the original file, event for event and byte for byte, except that:

* every event with a node on the critical path gets ``"critical": 1`` in its ``args``;
* flow events (``ph`` ``s``/``f``, ``cat`` ``critical_path``, ``name`` the edge type,
  ``args`` ``{"weight(ns)", "critical", "type"}``) draw the path where it moves between a
  CPU thread and a GPU stream or between streams (its ``launch``, ``sync`` and
  ``event_wait`` edges) as arrows: ``s`` at the source point, ``f`` (``bp: "e"``) at the
  destination;
* with ``only_show_critical_events`` the complete (``X``) events that are neither
  critical nor annotations/Python functions are left out (other phases are kept);
* with ``show_all_edges`` (ignored when only critical events are shown) every graph edge
  between different events is drawn, critical or not.

Times of the added flow events are written in the file's own units: microseconds with
three decimals, relative to ``baseTimeNanoseconds`` when the file's times are. A flow at
an event's end is placed ``min(dur / 2, 1 µs)`` before it, so the viewer binds it to that
event rather than the next one. The events of our table are matched to the file's by
(start, duration, name) and order of appearance, with the loader's exact ns conversion.
"""

from __future__ import annotations

import gzip
import itertools
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from hta.analysis.critical_path.graph import EDGE_TYPES, CriticalPathGraph
from hta.kineto.columns import timestamps_ns
from hta.kineto.raw import read_raw_trace
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

_fast_gzip: ModuleType | None
try:  # Intel ISA-L compresses gzip several times faster than zlib when installed
    from isal import igzip as _fast_gzip
except ImportError:  # pragma: no cover - optional dependency
    _fast_gzip = None

#: Complete events kept by ``only_show_critical_events`` whatever they are (context).
KEPT_CATEGORIES = frozenset({"user_annotation", "python_function", "gpu_user_annotation"})
FLOW_CATEGORY = "critical_path"
END_NUDGE_NS = 1_000
#: Edge types drawn by default: where the path jumps between a thread and a stream or
#: between streams (along one track the ``critical`` marks show it).
CROSS_TRACK = ("launch", "sync", "event_wait")


class _Head(msgspec.Struct, gc=False):
    """The fields of an event needed to match it with the events table."""

    ph: str = ""
    cat: Any = ""
    name: Any = ""
    ts: msgspec.Raw = msgspec.Raw()
    dur: Any = None
    id: Any = None
    pid: msgspec.Raw = msgspec.Raw(b"0")
    tid: msgspec.Raw = msgspec.Raw(b"0")


_heads = msgspec.json.Decoder(list[_Head])
_fields = msgspec.json.Decoder(dict[str, msgspec.Raw])


def write_critical_path_overlay(
    rt: RankTrace,
    graph: CriticalPathGraph,
    output_dir: str | Path,
    only_show_critical_events: bool = True,
    show_all_edges: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> str:
    """Write ``overlaid_critical_path_<trace file name>`` into ``output_dir``; return its path.

    See the module docstring for what changes in the file. The output is gzipped when
    the original file's name ends in ``.gz``. The original is read again through
    :mod:`hta.kineto.raw` (a local path or the fsspec URL it was loaded from, with
    ``storage_options``).
    """
    if graph.rank != rt.rank:
        raise ValueError(f"the graph is of rank {graph.rank}, not of rank {rt.rank}")
    try:
        raw = read_raw_trace(str(rt.meta.get("source") or ""), storage_options)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"rank {rt.rank}: {exc}") from None
    source = raw.path
    out_dir = Path(output_dir).expanduser()
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectoryError(f"{out_dir} is not a folder; pass a folder as output_dir")
    out_dir.mkdir(parents=True, exist_ok=True)
    if only_show_critical_events:
        show_all_edges = False

    top, items = raw.top, raw.event_items()
    heads = _heads.decode(top["traceEvents"])
    origin = rt.time_origin_ns
    raw_of_row = _match_rows(rt, heads, origin, source)

    critical_rows = np.asarray(sorted(graph.critical_path_events_set), dtype=np.int64)
    critical_pos = raw_of_row[critical_rows]
    if (critical_pos < 0).any():
        raise ValueError(f"{source}: critical events could not be matched to the file's events")
    marked = {int(i): _mark_critical(items[i]) for i in critical_pos.tolist()}
    keep = _kept(heads, marked, only_show_critical_events)
    events = (marked.get(i, raw) for i, raw in enumerate(items) if keep[i])
    flows = _flows(rt, graph, heads, raw_of_row, origin, show_all_edges)
    path = out_dir / f"overlaid_critical_path_{source.name}"
    with _open_output(path) as f:
        _write(f, top, itertools.chain(events, flows))
    logger.info("Wrote %s", path)
    return str(path)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else str(value)


def _match_rows(rt: RankTrace, heads: list[_Head], origin: int, source: object) -> np.ndarray:
    """Raw position of each row of the events table (-1 where no file event matches).

    Rows and the file's ``X`` events are matched on (start ns, duration ns, name) and, for
    equal keys, order of appearance (the loader's sort is stable).
    """
    x = np.asarray([i for i, h in enumerate(heads) if h.ph == "X"], dtype=np.int64)
    ts, present = timestamps_ns([heads[i].ts for i in x.tolist()], [])
    dur = _durations_ns([heads[i].dur for i in x.tolist()])
    index = {text: i for i, text in enumerate(rt.symbols)}
    name = np.fromiter((index.get(_text(heads[i].name), -1) for i in x.tolist()),
                       dtype=np.int64, count=x.size)
    x, ts, dur, name = x[present], ts[present] + origin, dur[present], name[present]
    ev = rt.events
    o_ts = ev["ts"].to_numpy(np.int64)
    o_dur = ev["dur"].to_numpy(np.int64)
    o_name = rt.column("name").astype(np.int64)
    out = np.full(o_ts.size, -1, dtype=np.int64)
    mine = np.lexsort((np.arange(o_ts.size), o_name, o_dur, o_ts))
    theirs = np.lexsort((x, name, dur, ts))
    if mine.size == theirs.size and (o_ts[mine] == ts[theirs]).all() and (
            o_dur[mine] == dur[theirs]).all() and (o_name[mine] == name[theirs]).all():
        out[mine] = x[theirs]
        return out
    # the file and the table differ (events the loader skipped): join on key and occurrence
    raw = pd.DataFrame({"ts": ts, "dur": dur, "name": name, "pos": x})
    raw["occ"] = raw.groupby(["ts", "dur", "name"], sort=False).cumcount()
    ours = pd.DataFrame({"ts": o_ts, "dur": o_dur, "name": o_name})
    ours["occ"] = ours.groupby(["ts", "dur", "name"], sort=False).cumcount()
    pos = ours.merge(raw, on=["ts", "dur", "name", "occ"], how="left")["pos"].to_numpy()
    out = np.where(pd.isna(pos), -1, pos).astype(np.int64)
    missing = int((out < 0).sum())
    if missing:
        logger.warning("%s: %d event(s) of the table have no match in the file", source, missing)
    return out


def _durations_ns(values: list[Any]) -> np.ndarray:
    """``dur`` values (µs) to int64 ns the way the loader does: missing or negative -> 0."""
    try:
        f = np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        f = np.asarray([_float(v) for v in values], dtype=np.float64)
    f = np.where(np.isfinite(f), f, 0.0)
    return np.maximum(np.rint(f * 1000.0), 0).astype(np.int64)


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _kept(heads: list[_Head], critical: dict[int, bytes], only_critical: bool) -> list[bool]:
    if not only_critical:
        return [True] * len(heads)
    return [h.ph != "X" or i in critical or _text(h.cat) in KEPT_CATEGORIES
            for i, h in enumerate(heads)]


_ARGS = re.compile(rb'"args"\s*:\s*\{\s*(\}?)')


def _mark_critical(raw: msgspec.Raw) -> bytes:
    """The event with ``"critical": 1`` added to its args, every other byte unchanged."""
    text = bytes(raw)
    if b'"critical"' not in text:
        match = _ARGS.search(text)
        if match is not None:  # insert right after the args object's opening brace
            sep = b"" if match.group(1) else b","
            at = match.start(1)
            return text[:at] + b'"critical":1' + sep + text[at:]
        if b'"args"' not in text:
            end = text.rstrip().rfind(b"}")
            return text[:end] + b',"args":{"critical":1}' + text[end:]
    fields = _fields.decode(text)  # unusual shapes: decode, set, encode
    args_raw = fields.get("args")
    args = msgspec.json.decode(args_raw) if args_raw is not None else {}
    if not isinstance(args, dict):
        args = {"args": args}
    args["critical"] = 1
    fields["args"] = msgspec.Raw(msgspec.json.encode(args))
    return msgspec.json.encode(fields)


def _us_text(ns: int) -> bytes:
    """Integer ns as a µs JSON number with exactly three decimals (no float rounding)."""
    sign = "-" if ns < 0 else ""
    a = abs(int(ns))
    return f"{sign}{a // 1000}.{a % 1000:03d}".encode()


def _flows(rt: RankTrace, graph: CriticalPathGraph, heads: list[_Head],
           raw_of_row: np.ndarray, origin: int, show_all_edges: bool) -> list[bytes]:
    """``s``/``f`` pairs for the path's cross-track edges (or all edges between events)."""
    critical = np.zeros(graph.num_edges, dtype=bool)
    critical[graph.path_edges] = True
    if show_all_edges:
        chosen = np.arange(graph.num_edges)
        src, dst = graph.edge_src[chosen], graph.edge_dst[chosen]
        differ = graph.node_event[src] != graph.node_event[dst]
    else:
        chosen = graph.path_edges
        src, dst = graph.edge_src[chosen], graph.edge_dst[chosen]
        differ = np.isin(graph.edge_type[chosen], [EDGE_TYPES.index(t) for t in CROSS_TRACK])
    chosen, src, dst = chosen[differ], src[differ], dst[differ]
    if chosen.size == 0:
        return []
    dur = rt.column("dur")
    first_id = _next_flow_id(heads)

    def where(node: int) -> tuple[msgspec.Raw, msgspec.Raw, bytes]:
        row = int(graph.node_event[node])
        pos = int(raw_of_row[row])
        if pos < 0:
            raise ValueError(f"event row {row} has no match in the trace file")
        t = int(graph.node_ts[node])
        if not graph.node_is_start[node]:
            t -= min(int(dur[row]) // 2, END_NUDGE_NS)
        return heads[pos].pid, heads[pos].tid, _us_text(t - origin)

    weight = graph.edge_weight
    out: list[bytes] = []
    encode = msgspec.json.encode
    for k, (e, u, v) in enumerate(zip(chosen.tolist(), src.tolist(), dst.tolist())):
        args = {"weight(ns)": int(weight[e]), "critical": int(critical[e]),
                "type": EDGE_TYPES[int(graph.edge_type[e])]}
        name = EDGE_TYPES[int(graph.edge_type[e])]
        for ph, node in (("s", u), ("f", v)):
            pid, tid, ts = where(node)
            event: dict[str, Any] = {"ph": ph, "id": first_id + k, "pid": pid, "tid": tid,
                                     "ts": msgspec.Raw(ts), "cat": FLOW_CATEGORY, "name": name,
                                     "args": args}
            if ph == "f":
                event["bp"] = "e"
            out.append(encode(event))
    return out


def _next_flow_id(heads: list[_Head]) -> int:
    """An id above every numeric flow id in the file, so new flows never join old ones."""
    top = 0
    for h in heads:
        if h.ph in ("s", "f", "t") and h.id is not None:
            try:
                top = max(top, int(h.id, 0) if isinstance(h.id, str) else int(h.id))
            except (TypeError, ValueError):
                continue
    return top + 1


def _open_output(path: Path) -> Any:
    """A binary file for the output; gzip (fast level) when the name ends in ``.gz``."""
    if path.name.endswith(".gz"):
        if _fast_gzip is not None:
            return _fast_gzip.open(path, "wb", compresslevel=1)
        return gzip.open(path, "wb", compresslevel=1)
    return open(path, "wb")  # noqa: SIM115 - closed by the caller's with block


def _write(f: Any, top: dict[str, msgspec.Raw], events: Iterable[Any],
           chunk: int = 8_192) -> None:
    """The top-level object, keys in their original order, ``traceEvents`` streamed."""
    f.write(b"{")
    for k, (key, value) in enumerate(top.items()):
        f.write((b"," if k else b"") + msgspec.json.encode(key) + b":")
        if key != "traceEvents":
            f.write(value)
            continue
        f.write(b"[")
        first = True
        it = iter(events)
        while True:
            part = list(itertools.islice(it, chunk))
            if not part:
                break
            f.write((b"" if first else b",") + b",".join(part))
            first = False
        f.write(b"]")
    f.write(b"}")
