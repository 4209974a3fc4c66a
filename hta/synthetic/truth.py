"""The ground truth of a generated trace, computed from its events."""

from __future__ import annotations

from collections import Counter
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


def _summarize(trace: dict[str, Any]) -> dict[str, Any]:
    events = trace["traceEvents"]
    base = int(trace.get("baseTimeNanoseconds", 0))
    by_cat: Counter[str] = Counter()
    by_ph: Counter[str] = Counter()
    flows: Counter[str] = Counter()
    kinds: dict[str, int] = dict.fromkeys(
        ("computation", "communication", "memcpy_HtoD", "memcpy_DtoH", "memcpy_DtoD", "memset"),
        0,
    )
    kind_ns = dict.fromkeys(kinds, 0)
    by_stream: Counter[int] = Counter()
    runtime_by_name: Counter[str] = Counter()
    intervals: list[tuple[int, int]] = []
    comm: list[tuple[int, int]] = []
    comp: list[tuple[int, int]] = []
    gpu_corr: set[int] = set()
    gpu_corr_list: list[int] = []
    launch_corr: list[int] = []
    steps: list[str] = []
    collectives: list[dict[str, Any]] = []
    zero = sub_us = cpu_ops = memory = 0
    for e in events:
        ph = e.get("ph")
        by_ph[ph] += 1
        cat = e.get("cat")
        if cat is None:
            continue
        by_cat[cat] += 1
        if ph in ("s", "f"):
            flows[f"{cat}_{ph}"] += 1
            continue
        if ph == "i":
            memory += e.get("name") == "[memory]"
            continue
        if ph != "X":
            continue
        name = e["name"]
        if cat in GPU_CATS:
            s = base + _time_ns(e["ts"])
            d = _time_ns(e["dur"])
            intervals.append((s, s + d))
            kind = gpu_kind(cat, name)
            kinds[kind] += 1
            kind_ns[kind] += d
            if kind == "communication":
                comm.append((s, s + d))
            elif kind == "computation":
                comp.append((s, s + d))
            by_stream[e["tid"]] += 1
            corr = e["args"]["correlation"]
            gpu_corr.add(corr)
            gpu_corr_list.append(corr)
            zero += d == 0
            sub_us += 0 < d < 1000
        elif cat == "cuda_runtime":
            runtime_by_name[name] += 1
            if name in LAUNCH_NAMES:
                launch_corr.append(e["args"]["correlation"])
        elif cat == "cpu_op":
            cpu_ops += 1
            if name == "record_param_comms":
                a = e["args"]
                collectives.append(
                    {
                        "name": a["Collective name"],
                        "seq": a["Seq"],
                        "dtype": a["dtype"],
                        "in_nelems": a["In msg nelems"],
                        "out_nelems": a["Out msg nelems"],
                        "group_size": a["Group size"],
                    }
                )
        elif cat == "user_annotation" and name.startswith("ProfilerStep#"):
            steps.append(name)
    merged = _merge(intervals)
    busy = sum(e - s for s, e in merged)
    first = min((s for s, _ in intervals), default=0)
    last = max((e for _, e in intervals), default=0)
    launch_set = set(launch_corr)
    dist = trace.get("distributedInfo", {})
    return {
        "rank": dist.get("rank"),
        "world_size": dist.get("world_size"),
        "num_events": len(events),
        "counts_by_cat": dict(sorted(by_cat.items())),
        "counts_by_ph": dict(sorted(by_ph.items())),
        "flow_counts": dict(sorted(flows.items())),
        "cpu_ops": cpu_ops,
        "memory_events": memory,
        "gpu_events": len(intervals),
        "gpu_kind_counts": dict(kinds),
        "gpu_kind_time_ns": kind_ns,
        "gpu_events_by_stream": dict(sorted(by_stream.items())),
        "zero_duration_gpu_events": zero,
        "sub_us_gpu_events": sub_us,
        "runtime_events": sum(runtime_by_name.values()),
        "runtime_by_name": dict(sorted(runtime_by_name.items())),
        "runtime_launches": len(launch_corr),
        "runtime_launches_linked": sum(c in gpu_corr for c in launch_corr),
        "gpu_events_linked": sum(c in launch_set for c in gpu_corr_list),
        "gpu_first_start_ns": first,
        "gpu_last_end_ns": last,
        "gpu_span_ns": last - first,
        "gpu_busy_ns": busy,
        "gpu_idle_ns": (last - first) - busy,
        "comm_compute_overlap_ns": _intersection_ns(_merge(comm), _merge(comp)),
        "profiler_steps": len(steps),
        "profiler_step_names": steps,
        "collectives": collectives,
    }
