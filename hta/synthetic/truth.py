"""The ground truth of a generated trace, computed from its events."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hta.synthetic.catalog import GPU_CATS, LAUNCH_NAMES
from hta.synthetic.timefmt import _gc_paused, _time_ns

# --------------------------------------------------------------------------------------------
# Ground truth
# --------------------------------------------------------------------------------------------


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def _intersection_ns(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def gpu_kind(cat: str, name: str) -> str:
    """Kind of a GPU event: computation, communication, memcpy_HtoD/DtoH/DtoD or memset."""
    if cat == "kernel":
        return "communication" if name.startswith("nccl") else "computation"
    if cat == "gpu_memset":
        return "memset"
    return "memcpy_" + name.split(" ", 2)[1]


def summarize_truth(trace: dict[str, Any]) -> dict[str, Any]:
    """Ground truth of a generated trace dict, counted from the dict itself.

    Times are exact integer ns (``ts`` of :class:`Microseconds` values; plain floats are
    rounded).  Absolute times are epoch ns (``baseTimeNanoseconds`` + ts in relative mode).
    GPU events are the ``X`` events of cat ``kernel``, ``gpu_memcpy`` and ``gpu_memset``
    (``gpu_user_annotation`` spans are not GPU work).  ``gpu_busy_ns`` is the exact length of
    the union of their ``[ts, ts + dur)`` intervals over all streams; ``gpu_idle_ns`` is the
    span from the first start to the last end minus that union.  Launches are the runtime
    calls in :data:`LAUNCH_NAMES`; one is linked when a GPU event has its correlation.
    ``comm_compute_overlap_ns`` is the length of the intersection of the union of
    communication kernels with the union of computation kernels.
    """
    with _gc_paused():
        return _summarize(trace)


@dataclass
class _Tally:
    """What :func:`summarize_truth` counts while it walks the events once."""

    base: int
    by_cat: Counter[str] = field(default_factory=Counter)
    by_ph: Counter[str | None] = field(default_factory=Counter)
    flows: Counter[str] = field(default_factory=Counter)
    kinds: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("computation", "communication", "memcpy_HtoD", "memcpy_DtoH", "memcpy_DtoD",
         "memset"), 0))
    kind_ns: dict[str, int] = field(default_factory=dict)
    by_stream: Counter[int] = field(default_factory=Counter)
    runtime_by_name: Counter[str] = field(default_factory=Counter)
    intervals: list[tuple[int, int]] = field(default_factory=list)
    comm: list[tuple[int, int]] = field(default_factory=list)
    comp: list[tuple[int, int]] = field(default_factory=list)
    gpu_corr: set[int] = field(default_factory=set)
    gpu_corr_list: list[int] = field(default_factory=list)
    launch_corr: list[int] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    zero: int = 0
    sub_us: int = 0
    cpu_ops: int = 0
    memory: int = 0

    def __post_init__(self) -> None:
        self.kind_ns = dict.fromkeys(self.kinds, 0)

    def add(self, e: dict[str, Any]) -> None:
        """Count one event."""
        ph = e.get("ph")
        self.by_ph[ph] += 1
        cat = e.get("cat")
        if cat is None:
            return
        self.by_cat[cat] += 1
        if ph in ("s", "f"):
            self.flows[f"{cat}_{ph}"] += 1
        elif ph == "i":
            self.memory += e.get("name") == "[memory]"
        elif ph == "X" and cat in GPU_CATS:
            self.gpu(e, cat)
        elif ph == "X":
            self.cpu(e, cat, e["name"])

    def gpu(self, e: dict[str, Any], cat: str) -> None:
        """Count one GPU event (kernel, memcpy, memset)."""
        s = self.base + _time_ns(e["ts"])
        d = _time_ns(e["dur"])
        self.intervals.append((s, s + d))
        kind = gpu_kind(cat, e["name"])
        self.kinds[kind] += 1
        self.kind_ns[kind] += d
        if kind == "communication":
            self.comm.append((s, s + d))
        elif kind == "computation":
            self.comp.append((s, s + d))
        self.by_stream[e["tid"]] += 1
        corr = e["args"]["correlation"]
        self.gpu_corr.add(corr)
        self.gpu_corr_list.append(corr)
        self.zero += d == 0
        self.sub_us += 0 < d < 1000

    def cpu(self, e: dict[str, Any], cat: str, name: str) -> None:
        """Count one complete event that is not GPU work."""
        if cat == "cuda_runtime":
            self.runtime_by_name[name] += 1
            if name in LAUNCH_NAMES:
                self.launch_corr.append(e["args"]["correlation"])
        elif cat == "cpu_op":
            self.cpu_ops += 1
            if name == "record_param_comms":
                a = e["args"]
                self.collectives.append({
                    "name": a["Collective name"], "seq": a["Seq"], "dtype": a["dtype"],
                    "in_nelems": a["In msg nelems"], "out_nelems": a["Out msg nelems"],
                    "group_size": a["Group size"],
                })
        elif cat == "user_annotation" and name.startswith("ProfilerStep#"):
            self.steps.append(name)


def _summarize(trace: dict[str, Any]) -> dict[str, Any]:
    events = trace["traceEvents"]
    t = _Tally(base=int(trace.get("baseTimeNanoseconds", 0)))
    for e in events:
        t.add(e)
    merged = _merge(t.intervals)
    busy = sum(e - s for s, e in merged)
    first = min((s for s, _ in t.intervals), default=0)
    last = max((e for _, e in t.intervals), default=0)
    launch_set = set(t.launch_corr)
    dist = trace.get("distributedInfo", {})
    return {
        "rank": dist.get("rank"),
        "world_size": dist.get("world_size"),
        "num_events": len(events),
        "counts_by_cat": dict(sorted(t.by_cat.items())),
        "counts_by_ph": dict(sorted(t.by_ph.items())),
        "flow_counts": dict(sorted(t.flows.items())),
        "cpu_ops": t.cpu_ops,
        "memory_events": t.memory,
        "gpu_events": len(t.intervals),
        "gpu_kind_counts": dict(t.kinds),
        "gpu_kind_time_ns": t.kind_ns,
        "gpu_events_by_stream": dict(sorted(t.by_stream.items())),
        "zero_duration_gpu_events": t.zero,
        "sub_us_gpu_events": t.sub_us,
        "runtime_events": sum(t.runtime_by_name.values()),
        "runtime_by_name": dict(sorted(t.runtime_by_name.items())),
        "runtime_launches": len(t.launch_corr),
        "runtime_launches_linked": sum(c in t.gpu_corr for c in t.launch_corr),
        "gpu_events_linked": sum(c in launch_set for c in t.gpu_corr_list),
        "gpu_first_start_ns": first,
        "gpu_last_end_ns": last,
        "gpu_span_ns": last - first,
        "gpu_busy_ns": busy,
        "gpu_idle_ns": (last - first) - busy,
        "comm_compute_overlap_ns": _intersection_ns(_merge(t.comm), _merge(t.comp)),
        "profiler_steps": len(t.steps),
        "profiler_step_names": t.steps,
        "collectives": t.collectives,
    }
