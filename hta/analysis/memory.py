"""Memory timeline and peak from the trace's ``[memory]`` instant events.

A trace recorded with ``profile_memory=True`` holds one ``[memory]`` instant per
allocation and per free made by PyTorch's allocators, on the CPU thread that asked for
it. Its args give the device (``Device Type``, ``Device Id``), the block (``Addr``,
``Bytes``: positive for an allocation, negative for a free) and the allocator's totals
for that device right after the event (``Total Allocated``, ``Total Reserved``, bytes).
The loader keeps them in ``RankTrace.tables["instants"]`` (``addr``, ``bytes``,
``total_allocated``, ``total_reserved``, ``device_type``, ``device_id``).

Definitions
-----------
* **device**: ``"cpu"`` for device type 0, ``"cuda:<id>"`` for type 1, other types by
  their PyTorch name (``"xpu:0"``, ``"mtia:0"``, ...; ``"type<n>:<id>"`` when unknown);
  the id is left out when it is -1.
* :func:`memory_timeline`: one row per ``[memory]`` event that carries
  ``Total Allocated``, per rank and device, in time order (ties in file order):
  ``ts`` (int ns), ``total_allocated`` and ``total_reserved`` (int64 bytes; a missing
  ``Total Reserved`` is -1). Events without ``Total Allocated`` (very old traces) are
  left out and counted in a warning.
* :func:`memory_summary`, per rank and device:

  - ``peak_allocated_bytes``: the largest ``Total Allocated``, so exactly the largest
    value written in the file; ``peak_ts`` (ns) is the first event that reached it and
    ``peak_step`` the ``ProfilerStep`` number whose span holds ``peak_ts`` (-1 outside
    every step, 0 when the trace has no steps);
  - ``peak_reserved_bytes``: the largest ``Total Reserved``; ``reserved_at_peak_bytes``
    the reserved total at the peak event;
  - ``first_allocated_bytes``, ``last_allocated_bytes``: the totals at the first and
    last event (memory held before and after the profiled window);
  - ``allocations``, ``frees``: events with positive and negative ``Bytes``;
  - **live at the peak**: an allocation event (``Bytes > 0``) at or before the peak event
    (in time order, ties in file order) whose block is not freed before the peak, i.e.
    the next event of the same device and ``Addr`` is a free that comes after the peak
    event, or there is none. ``live_at_peak_bytes`` sums their ``Bytes``. Memory
    allocated before the profiler started is not seen, so ``live_at_peak_bytes <=
    peak_allocated_bytes`` (equal when the trace starts with nothing allocated), and
    ``unseen_at_peak_bytes`` is the difference;
  - each live allocation is attributed to the **innermost CPU operator** (kind
    ``cpu_op``) on the same process and thread whose span holds the event
    (``op.ts <= event.ts < op.end``; user annotations and Python frames are skipped to
    reach it), ``"(no operator)"`` when none does. ``top_operators`` lists the
    :data:`TOP_OPERATORS` operators with the most live bytes, as text
    ``"name: bytes"``; :func:`memory_peak_operators` gives the full table.

HTA's ``MemoryAnalysis`` reads a different file (PyTorch's
``export_memory_timeline_raw`` output, as in the shared ``memory_analysis/`` folder):
:func:`raw_memory_timeline` reads that one too.
"""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from hta.model.declared import WHOLE, Analysis, Columns
from hta.model.links import assign_iterations
from hta.model.selection import EVERYTHING, Selection, rank_step_spans
from hta.model.trace import RankTrace, Trace

logger = logging.getLogger(__name__)

MEMORY_EVENT = "[memory]"
TIMELINE_COLUMNS = ["rank", "device", "ts", "total_allocated", "total_reserved"]
SUMMARY_COLUMNS = [
    "rank", "device", "peak_allocated_bytes", "peak_ts", "peak_step", "peak_reserved_bytes",
    "reserved_at_peak_bytes", "first_allocated_bytes", "last_allocated_bytes", "allocations",
    "frees", "live_at_peak_bytes", "unseen_at_peak_bytes", "top_operators",
]
OPERATOR_COLUMNS = ["rank", "device", "operator", "live_bytes", "allocations", "share"]
TIMELINE = Columns.of({"rank": "int64", "device": "object", "ts": "int64",
                       "total_allocated": "int64", "total_reserved": "int64"})
SUMMARY = Columns.of({c: "object" if c in ("device", "top_operators") else "int64"
                      for c in SUMMARY_COLUMNS})
OPERATORS = Columns.of({"rank": "int64", "device": "object", "operator": "object",
                        "live_bytes": "int64", "allocations": "int64", "share": "float64"})
#: Operators named in ``memory_summary``'s ``top_operators``.
TOP_OPERATORS = 5
NO_OPERATOR = "(no operator)"
#: PyTorch's c10::DeviceType codes, by name.
DEVICE_TYPES = {0: "cpu", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep",
                6: "hip", 7: "fpga", 8: "maia", 9: "xla", 10: "vulkan", 11: "metal",
                12: "xpu", 13: "mps", 14: "meta", 15: "hpu", 16: "ve", 17: "lazy",
                18: "ipu", 19: "mtia", 20: "privateuseone"}


def device_name(device_type: int, device_id: int) -> str:
    """``"cuda:0"``, ``"cpu"``...: PyTorch's spelling of a device."""
    kind = DEVICE_TYPES.get(int(device_type), f"type{int(device_type)}")
    return kind if int(device_id) < 0 else f"{kind}:{int(device_id)}"


def _memory_events(rt: RankTrace) -> pd.DataFrame:
    """The rank's ``[memory]`` instants with ``Total Allocated``, in time order (ties in
    file order), with ``device`` as text and ``seq`` their position per device."""
    ins = rt.tables.get("instants")
    if ins is None or not len(ins) or "total_allocated" not in ins:
        return pd.DataFrame()
    sym = rt.symbols
    ids = [i for i, s in enumerate(sym) if s == MEMORY_EVENT]
    mem = ins[ins["name"].isin(ids)]
    missing = int(mem["total_allocated"].isna().sum())
    if missing:
        logger.warning("rank %d: %d [memory] event(s) without 'Total Allocated' left out",
                       rt.rank, missing)
        mem = mem[mem["total_allocated"].notna()]
    if not len(mem):
        return pd.DataFrame()
    dtype = mem["device_type"].to_numpy(dtype=np.int64)
    did = mem["device_id"].to_numpy(dtype=np.int64)
    codes, uniques = pd.factorize(dtype * (1 << 32) + (did + 1))
    names = np.array([device_name(int(u) >> 32, (int(u) & 0xFFFFFFFF) - 1) for u in uniques],
                     dtype=object)
    device = names[codes]
    reserved = mem["total_reserved"].to_numpy(dtype=np.float64)
    out = pd.DataFrame({
        "device": device,
        "ts": mem["ts"].to_numpy(dtype=np.int64),
        "total_allocated": mem["total_allocated"].to_numpy(dtype=np.float64).astype(np.int64),
        "total_reserved": np.where(np.isnan(reserved), -1, reserved).astype(np.int64),
        "bytes": np.nan_to_num(mem["bytes"].to_numpy(dtype=np.float64)).astype(np.int64),
        "addr": mem["addr"].to_numpy(dtype=np.int64),
        "pid": mem["pid"].to_numpy(dtype=np.int64),
        "tid": mem["tid"].to_numpy(dtype=np.int64),
        "file_order": np.arange(len(mem), dtype=np.int64),
    })
    out = out.sort_values(["device", "ts", "file_order"], kind="stable", ignore_index=True)
    out["seq"] = out.groupby("device", sort=False).cumcount().to_numpy(dtype=np.int64)
    return out


def memory_timeline(trace: Trace, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """Allocated and reserved bytes after every ``[memory]`` event, per rank and device
    (columns :data:`TIMELINE_COLUMNS`, sorted by rank, device, ts). Definitions in the
    module docstring. Empty (typed) when no selected rank recorded memory events."""
    return MEMORY_TIMELINE.run(trace, selection)


def rank_memory_timeline(rank: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`memory_timeline` (typed and empty without memory events)."""
    mem = _memory_events(rank)
    if not len(mem):
        return TIMELINE.empty()
    frame = mem[["device", "ts", "total_allocated", "total_reserved"]].copy()
    frame.insert(0, "rank", np.int64(rank.rank))
    return frame.reset_index(drop=True)


MEMORY_TIMELINE = Analysis("Memory timeline", rank_memory_timeline, TIMELINE, steps=WHOLE)


def _live_at_peak(dev: pd.DataFrame, peak_seq: int) -> np.ndarray:
    """Mask of ``dev``'s rows (one device, ``seq`` order) that are allocations still live
    at the event ``peak_seq``."""
    addr = dev["addr"].to_numpy()
    seq = dev["seq"].to_numpy()
    nbytes = dev["bytes"].to_numpy()
    order = np.lexsort((seq, addr))
    a, s = addr[order], seq[order]
    same_next = np.r_[a[1:] == a[:-1], False]
    next_seq = np.r_[s[1:], np.iinfo(np.int64).max]
    next_is_free = np.r_[nbytes[order][1:] < 0, False]
    freed_at = np.where(same_next & next_is_free, next_seq, np.iinfo(np.int64).max)
    live_sorted = (nbytes[order] > 0) & (s <= peak_seq) & (freed_at > peak_seq)
    live = np.zeros(len(dev), dtype=bool)
    live[order] = live_sorted
    return live


def enclosing_cpu_ops(rt: RankTrace, ts: np.ndarray, pid: np.ndarray,
                      tid: np.ndarray) -> np.ndarray:
    """Row of the innermost ``cpu_op`` on thread (pid, tid) with ``op.ts <= ts < op.end``
    for each instant; -1 where none."""
    ev = rt.events
    out = np.full(ts.shape[0], -1, dtype=np.int64)
    depth = rt.column("depth")
    cpu_rows = np.flatnonzero(depth >= 0)
    if not cpu_rows.size or not ts.size:
        return out
    e_pid = rt.column("pid")[cpu_rows]
    e_tid = rt.column("tid")[cpu_rows]
    e_ts = rt.column("ts")[cpu_rows]
    keys = pd.MultiIndex.from_arrays([np.r_[e_pid, pid], np.r_[e_tid, tid]])
    thread = pd.factorize(keys)[0].astype(np.int64)
    e_thread, q_thread = thread[: cpu_rows.size], thread[cpu_rows.size:]
    # Events by (thread, start, depth): the last one starting at or before an instant is
    # the deepest event that started last; the innermost event holding the instant is
    # on its chain of parents.
    order = np.lexsort((depth[cpu_rows], e_ts, e_thread))
    span = int(max(e_ts.max(), ts.max()) - min(e_ts.min(), ts.min())) + 1
    base = int(min(e_ts.min(), ts.min()))
    sorted_keys = e_thread[order] * span + (e_ts[order] - base)
    pos = np.searchsorted(sorted_keys, q_thread * span + (ts - base), side="right") - 1
    ok = pos >= 0
    ok[ok] = e_thread[order][pos[ok]] == q_thread[ok]
    cur = np.full(ts.shape[0], -1, dtype=np.int64)
    cur[ok] = cpu_rows[order][pos[ok]]
    is_op = (ev["kind"] == "cpu_op").to_numpy()
    ev_ts = rt.column("ts")
    ev_end = rt.column("end")
    parent = rt.column("parent")
    active = cur >= 0
    while active.any():
        idx = np.flatnonzero(active)
        c = cur[idx]
        found = is_op[c] & (ev_ts[c] <= ts[idx]) & (ts[idx] < ev_end[c])
        out[idx[found]] = c[found]
        nxt = parent[c]
        cur[idx] = nxt
        active[idx] = ~found & (nxt >= 0)
    return out


def _rank_peaks(rt: RankTrace) -> tuple[list[dict], list[pd.DataFrame]]:
    mem = _memory_events(rt)
    rows: list[dict] = []
    ops: list[pd.DataFrame] = []
    if not len(mem):
        return rows, ops
    starts, ends, numbers = rank_step_spans(rt)
    names = np.asarray(rt.symbols, dtype=object)
    for device, dev in mem.groupby("device", sort=True):
        dev = dev.reset_index(drop=True)
        alloc = dev["total_allocated"].to_numpy()
        at = int(np.argmax(alloc))
        peak_ts = int(dev["ts"].iat[at])
        if starts.size:
            step = int(assign_iterations(np.array([peak_ts]), starts, ends, numbers)[0])
        else:
            step = 0
        live = _live_at_peak(dev, int(dev["seq"].iat[at]))
        part = dev[live]
        op_rows = enclosing_cpu_ops(rt, part["ts"].to_numpy(), part["pid"].to_numpy(),
                                    part["tid"].to_numpy())
        op_name = np.full(op_rows.shape[0], NO_OPERATOR, dtype=object)
        has = op_rows >= 0
        op_name[has] = names[rt.column("name")[op_rows[has]]]
        by_op = (pd.DataFrame({"operator": op_name, "bytes": part["bytes"].to_numpy()})
                 .groupby("operator", sort=False)["bytes"].agg(["sum", "count"])
                 .reset_index().sort_values(["sum", "operator"], ascending=[False, True],
                                            ignore_index=True))
        live_bytes = int(part["bytes"].sum())
        peak = int(alloc[at])
        ops.append(pd.DataFrame({
            "rank": np.int64(rt.rank), "device": device,
            "operator": by_op["operator"].astype(object),
            "live_bytes": by_op["sum"].astype(np.int64),
            "allocations": by_op["count"].astype(np.int64),
            "share": by_op["sum"] / peak if peak > 0 else np.nan,
        }))
        top = "; ".join(f"{n}: {int(b)}" for n, b in
                        zip(by_op["operator"].head(TOP_OPERATORS),
                            by_op["sum"].head(TOP_OPERATORS)))
        nbytes = dev["bytes"].to_numpy()
        rows.append({
            "rank": rt.rank, "device": device, "peak_allocated_bytes": peak,
            "peak_ts": peak_ts, "peak_step": step,
            "peak_reserved_bytes": int(dev["total_reserved"].max()),
            "reserved_at_peak_bytes": int(dev["total_reserved"].iat[at]),
            "first_allocated_bytes": int(alloc[0]), "last_allocated_bytes": int(alloc[-1]),
            "allocations": int((nbytes > 0).sum()), "frees": int((nbytes < 0).sum()),
            "live_at_peak_bytes": live_bytes, "unseen_at_peak_bytes": peak - live_bytes,
            "top_operators": top,
        })
    return rows, ops


def memory_summary(trace: Trace, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """Per rank and device: the allocation peak, when it happened, and the operators
    holding the most memory at that moment (columns :data:`SUMMARY_COLUMNS`; definitions
    in the module docstring)."""
    return MEMORY_SUMMARY.run(trace, selection)


def rank_memory_summary(rank: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`memory_summary`: one per device with memory events."""
    return _summary_table(_rank_peaks(rank)[0])


MEMORY_SUMMARY = Analysis("Memory summary", rank_memory_summary, SUMMARY, steps=WHOLE)


def _summary_table(rows: list[dict]) -> pd.DataFrame:
    if not rows:
        return SUMMARY.empty()
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def memory_peak_operators(trace: Trace, selection: Selection = EVERYTHING
                          ) -> pd.DataFrame:
    """Per rank, device and operator: bytes of the allocations live at the device's
    peak (``live_bytes``), how many (``allocations``) and ``share`` of the peak
    (columns :data:`OPERATOR_COLUMNS`, most bytes first)."""
    return MEMORY_PEAK_OPERATORS.run(trace, selection)


def rank_memory_peak_operators(rank: RankTrace) -> pd.DataFrame:
    """One rank's rows of :func:`memory_peak_operators`: per device, its operators."""
    return _operator_table([f for f in _rank_peaks(rank)[1] if len(f)])


MEMORY_PEAK_OPERATORS = Analysis("Memory at peak", rank_memory_peak_operators, OPERATORS,
                                 steps=WHOLE)


def _operator_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if not frames:
        return OPERATORS.empty()
    return pd.concat(frames, ignore_index=True)[OPERATOR_COLUMNS]


#: Categories of PyTorch's memory profiler, in the order of the index written by
#: ``export_memory_timeline_raw`` (the last, 7, is "unknown").
RAW_CATEGORIES = ("parameter", "optimizer_state", "input", "temporary", "activation",
                  "gradient", "autograd_detail", "unknown")


def raw_memory_timeline(path: str | Path) -> pd.DataFrame:
    """Read PyTorch's ``export_memory_timeline_raw`` file (a gzipped or plain JSON list of
    ``[time_ns, action, bytes, category]``; time -1 for memory that existed before the
    profile), the file HTA's ``MemoryAnalysis`` plots.

    Returns one row per distinct time, in file order: ``ts`` (ns; the pre-existing -1
    replaced by the first real time), one column per category of
    :data:`RAW_CATEGORIES` (bytes in use after every entry at that time) and ``total``
    (their sum). Bytes of an entry are added as written: a free is a negative entry.
    Times are grouped as they come (consecutive entries with the same time), as HTA does.
    """
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    entries = json.loads(raw)
    if not isinstance(entries, list) or any(
            not isinstance(e, list) or len(e) != 4 for e in entries[:1]):
        raise ValueError(f"{path}: not a memory timeline export (a list of "
                         "[time, action, bytes, category])")
    arr = np.asarray(entries, dtype=np.int64).reshape(-1, 4)
    t, nbytes, cat = arr[:, 0], arr[:, 2], arr[:, 3]
    if ((cat < 0) | (cat >= len(RAW_CATEGORIES))).any():
        raise ValueError(f"{path}: category index outside 0..{len(RAW_CATEGORIES) - 1}")
    per_cat = np.zeros((len(t), len(RAW_CATEGORIES)), dtype=np.int64)
    per_cat[np.arange(len(t)), cat] = nbytes
    cum = np.cumsum(per_cat, axis=0)
    last = np.r_[t[1:] != t[:-1], True] if len(t) else np.zeros(0, dtype=bool)
    real = t[t > 0]
    t = np.where(t < 0, real.min() if real.size else 0, t)
    out = pd.DataFrame(cum[last], columns=list(RAW_CATEGORIES))
    out.insert(0, "ts", t[last])
    out["total"] = cum[last].sum(axis=1)
    return out
