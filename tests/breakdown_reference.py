"""Independent reference figures for the breakdown tests, in plain Python from the JSON.

Nothing here uses the ``hta`` package: events are read with the standard ``json`` module
(floats as ``Decimal``, so microseconds with three decimals become exact integer
nanoseconds), classified by category and name the simple way these real traces allow
(every communication kernel in them is an ``ncclKernel_*``/``ncclDevKernel_*``), and
interval unions are computed with a sort and a loop.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

GPU_WORK_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def load_json(path: Path) -> dict[str, Any]:
    """The trace file, floats as ``Decimal``."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh, parse_float=Decimal)


def complete_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """``X`` events with ``ts_ns``/``end_ns`` (exact absolute ns) added."""
    base = int(trace.get("baseTimeNanoseconds") or 0)
    out = []
    for e in trace["traceEvents"]:
        if e.get("ph") != "X":
            continue
        ts = int(Decimal(e["ts"]) * 1000)
        if base and ts < base // 2:
            ts += base
        dur = int(Decimal(e.get("dur", 0)) * 1000)
        out.append({**e, "ts_ns": ts, "end_ns": ts + dur})
    return out


def work_class(e: dict[str, Any]) -> str | None:
    """``compute``, ``comm``, ``memory`` or None (not GPU work)."""
    if e.get("cat") not in GPU_WORK_CATS:
        return None
    if e["cat"] != "kernel":
        return "memory"
    return "comm" if e["name"].startswith("nccl") else "compute"


def union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merged, sorted, disjoint intervals (touching ones merged, empty ones dropped)."""
    merged: list[list[int]] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def length(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in union(intervals))


def intersection(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Intersection of two unions (two-pointer walk)."""
    a, b = union(a), union(b)
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def temporal(events: list[dict[str, Any]]) -> dict[str, int]:
    """span, idle, compute, non_compute, comm, overlap (ns) over the GPU work."""
    by_cls: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        cls = work_class(e)
        if cls:
            by_cls[cls].append((e["ts_ns"], e["end_ns"]))
    every = [i for v in by_cls.values() for i in v]
    if not every:
        return {}
    span = max(e for _, e in every) - min(s for s, _ in every)
    busy = length(every)
    compute = length(by_cls["compute"])
    return {
        "span": span, "idle": span - busy, "compute": compute,
        "non_compute": busy - compute, "comm": length(by_cls["comm"]),
        "overlap": length(intersection(by_cls["comm"], by_cls["compute"])),
    }


def idle_gaps(events: list[dict[str, Any]], delay_ns: int,
              hta_semantics: bool = False) -> dict[tuple[int, str], int]:
    """Sum of idle gaps (ns) per (stream, category), as documented in hta.analysis.idle.

    ``hta_semantics``: HTA 0.5's version instead: the gap is measured from the end of the
    previous event only (not of everything before), and negative gaps (overlapping events)
    are summed too, as ``kernel_wait`` or ``other``.
    """
    launch_ts = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch_ts[e["args"]["correlation"]] = e["ts_ns"]
    streams: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if work_class(e):
            streams[int(e["args"]["stream"])].append(e)
    out: dict[tuple[int, str], int] = defaultdict(int)
    for stream, evs in streams.items():
        evs.sort(key=lambda x: x["ts_ns"])
        running = None
        for e in evs:
            if running is not None and (e["ts_ns"] > running or hta_semantics):
                gap = e["ts_ns"] - running
                launch = launch_ts.get(e["args"].get("correlation"))
                if launch is not None and launch > running:
                    cat = "host_wait"
                elif gap < delay_ns:
                    cat = "kernel_wait"
                else:
                    cat = "other"
                out[(stream, cat)] += gap
            keep_max = running is not None and not hta_semantics
            running = max(running, e["end_ns"]) if keep_max else e["end_ns"]
    return dict(out)


def duration_sums(events: list[dict[str, Any]], cat: str) -> dict[str, tuple[int, int]]:
    """(sum of durations in ns, count) per name of the events of one category."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("cat") == cat:
            out[e["name"]][0] += e["end_ns"] - e["ts_ns"]
            out[e["name"]][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def hta_view(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events as HTA 0.5 analyses them (with ``include_last_profiler_step=True``):

    * GPU work whose launch call is not in the trace (no runtime event with its
      correlation), or starts after the end of the last ``ProfilerStep``, is dropped;
    * times are cut to whole µs inward: start rounded up, end rounded down
      (``round_down_time_stamps``), so a sub-µs event can end before it starts.
    """
    launch = {e["args"]["correlation"]: e["ts_ns"] for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    step_ends = [e["end_ns"] for e in events if e["name"].startswith("ProfilerStep#")]
    last_end = max(step_ends) if len(step_ends) > 1 else None
    out = []
    for e in events:
        if work_class(e):
            ts = launch.get(e["args"].get("correlation"))
            if ts is None or (last_end is not None and ts > last_end):
                continue
        start = -(-e["ts_ns"] // 1000) * 1000
        end = e["end_ns"] // 1000 * 1000
        out.append({**e, "ts_ns": start, "end_ns": end})
    return out
