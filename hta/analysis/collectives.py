"""Collectives: which operation each communication kernel runs, and how fast it moves data.

**Operation.** Every communication kernel (kind ``communication``, see
:mod:`hta.analysis.gpu_work`) gets one of :data:`OPERATIONS`. The first of these sources
that names an operation wins:

1. the ``Collective name`` of the kernel's own collective args (PyTorch copies the
   ``record_param_comms`` args onto NCCL kernels);
2. the events around the kernel's launch call, innermost first: a ``Collective name`` in
   the args of a ``record_param_comms`` op, an ``nccl:*`` / ``rccl:*`` annotation
   (``nccl:all_to_all``), a ``c10d::*`` or ``_c10d_functional::*`` op
   (``c10d::alltoall_base_``);
3. the kernel name (``ncclDevKernel_AllGather_RING_LL``, DeepEP ``dispatch``/``combine``,
   custom all-reduce kernels);
4. a framework's own collective operator around the launch, innermost first: an op
   ``NAMESPACE::NAME`` whose ``NAME`` names an operation, outside ``aten::`` and
   ``prim::`` (``vllm::all_reduce`` around RCCL's ``ncclDevKernel_Generic_2``, a kernel
   whose name says nothing).

Names are matched after lower-casing and dropping ``_``, ``-``, ``.`` and spaces, against
the ordered table :data:`OPERATION_PATTERNS` (data: a pattern and the operation it names).
A name that matches no pattern (``coalesced``, ``wait``) passes to the next source. The
order matters because NCCL runs an all-to-all as grouped sends and receives: its kernel is
``ncclDevKernel_SendRecv`` while the launching op says ``alltoall``. A kernel launched
outside the trace (CUDA-graph replays) can only be classified by its name; one that no
source names is ``other``. The column ``source`` says which source decided.

**Performance** (:func:`collective_performance`, one row per communication kernel):

* ``msg_bytes`` = max(``In msg nelems``, ``Out msg nelems``) × the element size of
  ``dtype`` (:data:`DTYPE_BYTES`): the buffer size NCCL tests report as ``size``: the
  reduced buffer for all-reduce, the gathered (output) buffer for all-gather, the input
  buffer for reduce-scatter, all that a rank sends for all-to-all;
* ``time(us)``: the kernel's duration. It includes any time the kernel waited for a
  late peer (see :mod:`hta.analysis.stragglers`), so a rank that arrived early shows a
  lower bandwidth than the link gave;
* ``algbw(GB/s)`` = ``msg_bytes / time`` (GB = 1e9 bytes);
* ``busbw(GB/s)`` = ``algbw`` × :func:`bus_factor` of the operation for
  ``n = group_size``, the factor NCCL tests use so that the bus bandwidth of every
  operation compares with the link's bandwidth: all-reduce ``2(n-1)/n``; all-gather,
  reduce-scatter, all-to-all, gather and scatter ``(n-1)/n``; broadcast, reduce and
  send/recv 1;
* ``exposed(us)``: the part of the kernel's time during which no computation kernel runs
  on the rank (any stream);
* ``launch_op``: the op that launched it: the outermost ``c10d::*`` op around the
  launch call, else the innermost ``nccl:*`` annotation or ``record_param_comms``;
* ``context``: tags of what launched it, from the names of the events around its launch
  and the kernel name (:data:`CONTEXT_PATTERNS`: ``backward`` for the autograd engine, also
  given to launches on a ``pt_autograd_N`` thread,
  ``fsdp``, ``ddp``, ``torchrec``, ``moe``, ``pipeline``, ``optimizer`` for
  ``Optimizer.step``), comma-separated;
* ``send_imbalance`` / ``recv_imbalance``: for all-to-all(v), the largest of the
  ``In split size`` (``Out split size``) entries over their mean: 1 when every peer gets
  the same share, ``n`` when one peer gets everything. NaN where no split sizes were
  recorded (an even all-to-all records none).

The args come from the kernel's own collective args, else from the nearest
``record_param_comms`` op around its launch. ``group_size`` is ``Group size``, else the
length of ``Process Group Ranks``. Values that cannot be known are NaN (no args: no
bytes; an unknown dtype: no bytes; no group size: no bus bandwidth).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import COMM, COMPUTE, as_list, rank_work_class, work_class
from hta.analysis.intervals import Cover
from hta.analysis.side_columns import side_number, side_slots, side_text
from hta.analysis.stragglers import comm_kernels
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.derived import derived
from hta.model.selection import EVERYTHING, Selection, StepList
from hta.model.trace import RankTrace, Trace

ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER = "all-reduce", "reduce-scatter", "all-gather"
ALL_TO_ALL, SEND_RECV, BROADCAST = "all-to-all", "send/recv", "broadcast"
REDUCE, GATHER, SCATTER, BARRIER, OTHER = "reduce", "gather", "scatter", "barrier", "other"
#: Every operation a communication kernel can get.
OPERATIONS = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, SEND_RECV, BROADCAST,
              REDUCE, GATHER, SCATTER, BARRIER, OTHER)

#: Ordered (pattern, operation): the first pattern found in a normalised name (lower
#: case, without ``_ - .`` and spaces) names its operation. Order matters: reduce-scatter
#: and all-reduce before reduce, all-gather before gather.
OPERATION_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"reducescatter", REDUCE_SCATTER),
    (r"allreduce|crossdevicereduce", ALL_REDUCE),
    (r"allgather", ALL_GATHER),
    (r"alltoall|all2all|dispatch|combine|deepep|ep::(?:inter|intra)node", ALL_TO_ALL),
    (r"sendrecv|send|recv|p2p", SEND_RECV),
    (r"broadcast|bcast", BROADCAST),
    (r"reduce", REDUCE),
    (r"gather", GATHER),
    (r"scatter", SCATTER),
    (r"barrier", BARRIER),
)
#: CPU-side names that may name an operation: ops and annotations of the collectives.
CPU_NAME_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::", "nccl:", "rccl:")
#: Operator namespaces whose ``gather``, ``scatter`` ... are tensor operations, not
#: collectives (never a source of the operation).
_TENSOR_NAMESPACES = ("aten", "prim", "prims", "quantized", "torchvision")
#: Which source decided the operation.
SOURCES = ("kernel_args", "launch_args", "launch_op", "kernel_name", "none")

#: Bytes per element of the ``dtype`` names PyTorch writes in collective args.
DTYPE_BYTES: dict[str, int] = {
    "Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
    "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16,
    "ComplexHalf": 4, "UInt16": 2, "UInt32": 4, "UInt64": 8, "Float8_e4m3fn": 1,
    "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "Float8_e8m0fnu": 1,
    "Float4_e2m1fn_x2": 1,
}

#: Ordered (tag, pattern): a tag of ``context`` when the pattern is found in the name of
#: an event around the launch or in the kernel name (case-sensitive, as written).
CONTEXT_PATTERNS: tuple[tuple[str, str], ...] = (
    ("backward", r"autograd::engine::evaluate_function|Backward"),
    ("fsdp", r"FullyShardedDataParallel|FSDP"),
    ("ddp", r"DistributedDataParallel|DDP"),
    ("torchrec", r"KJT|kjt|All2All_|ReduceScatterBase_|torchrec|ShardedEmbedding|sdd_|"
                 r"sparse_data_dist|sparse_arch"),
    ("moe", r"(?i)\bmoe|expert|deep_?ep|ep::(?:inter|intra)node|token_(?:dispatch|combine)"),
    ("pipeline", r"(?i)pipeline|1f1b|PipelineStage"),
    ("optimizer", r"Optimizer\.step"),
)

#: Columns of :func:`collective_performance`.
COLUMNS = ["rank", "collective", "process_group", "group_size", "dtype", "msg_bytes",
           "time(us)", "algbw(GB/s)", "busbw(GB/s)", "stream", "exposed(us)", "context",
           "launch_op", "name", "kernel", "source",
           "iteration", "seq", "start_ns", "end_ns", "in_msg_nelems", "out_msg_nelems",
           "send_imbalance", "recv_imbalance", "direction", "peer"]
_TEXT = {"collective", "process_group", "dtype", "name", "kernel", "source", "context",
         "launch_op", "direction"}
_INTS = {"rank", "stream", "iteration", "seq", "start_ns", "end_ns", "peer"}
#: :func:`collective_performance`'s table: text object, counts and times in ns int64, the
#: rest float64.
PERFORMANCE = Columns.of({c: "object" if c in _TEXT else "int64" if c in _INTS else "float64"
                          for c in COLUMNS})
_COMPILED = tuple((re.compile(p), op) for p, op in OPERATION_PATTERNS)
_CONTEXT = tuple((tag, re.compile(p)) for tag, p in CONTEXT_PATTERNS)
_STRIP = re.compile(r"[\s_.\-]+")


def operation_of(name: str) -> str | None:
    """The operation a name says (:data:`OPERATION_PATTERNS`), or None."""
    norm = _STRIP.sub("", str(name).lower())
    for pattern, op in _COMPILED:
        if pattern.search(norm):
            return op
    return None


def kernel_label(name: str, width: int = 120) -> str:
    """A kernel name without its return type and final parameter list, template
    arguments kept (they tell kernels apart): ``void ns::k<8>(int*, long)`` ->
    ``ns::k<8>``; cut to ``width`` characters."""
    text = str(name).strip()
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i].rstrip() or text
                break
    if text.startswith("void "):
        text = text[5:]
    return text if len(text) <= width else text[: width - 1] + "…"


def bus_factor(operation: str, n: float) -> float:
    """NCCL tests' bus-bandwidth factor of ``operation`` for a group of ``n`` ranks
    (NaN for ``barrier``/``other`` or an unknown ``n``)."""
    if not n or not np.isfinite(n) or n < 1:
        return float("nan")
    if operation == ALL_REDUCE:
        return 2.0 * (n - 1) / n
    if operation in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, GATHER, SCATTER):
        return (n - 1) / n
    if operation in (BROADCAST, REDUCE, SEND_RECV):
        return 1.0
    return float("nan")


def bus_factors(operations: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """:func:`bus_factor` of each (operation, group size), computed once per pair."""
    known: dict[tuple[object, float], float] = {}
    out = np.empty(len(operations), dtype=float)
    for i, pair in enumerate(zip(np.asarray(operations, dtype=object).tolist(),
                                 np.asarray(sizes, dtype=float).tolist(), strict=True)):
        factor = known.get(pair)
        if factor is None:
            factor = known[pair] = bus_factor(str(pair[0]), pair[1])
        out[i] = factor
    return out


def imbalance(splits: object) -> float:
    """Largest split over the mean split, from a split-size list or its JSON text (Kineto
    writes a JSON string holding the list); NaN for an empty or absent list, or one
    whose mean is 0."""
    values = _json_list(splits)
    arr = np.asarray(values if values is not None else [], dtype=float)
    if not arr.size or arr.mean() <= 0:
        return float("nan")
    return float(arr.max() / arr.mean())


def _json_list(raw: object) -> list | None:
    """A list from a list, its JSON text, or JSON text of a string holding it; None."""
    value = raw
    for _ in range(2):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value) if value.strip() else None
        except ValueError:
            return None
    return value if isinstance(value, list) else None


# -- per rank ------------------------------------------------------------------------------
def collective_performance(trace: Trace, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """One row per communication kernel of each rank (:data:`COLUMNS`), in start order.

    Per rank, so it runs through the runner (:mod:`hta.model.runner`). The selection's steps
    keep the kernels launched in those ``ProfilerStep`` numbers. Definitions: the
    module docstring.
    """
    return COLLECTIVE_ROWS.run(trace, selection)


def rank_collective_performance(rt: RankTrace, iterations: StepList = None
                                ) -> pd.DataFrame:
    """:func:`collective_performance` for one rank (computed once per rank and
    iterations: :func:`hta.model.derived.derived`)."""
    key = ("collective_performance",
           None if iterations is None else tuple(sorted(as_list(iterations))))
    return derived(rt, key, lambda: _rank_collective_performance(rt, iterations))


def rank_collective_rows(rank: RankTrace, iterations: StepList = None
                         ) -> pd.DataFrame:
    """One rank's rows of :func:`collective_performance`, in a frame of their own (the
    rank's derived table, :func:`rank_collective_performance`, stays unshared)."""
    frame = rank_collective_performance(rank, iterations)
    return pd.concat([frame], ignore_index=True) if len(frame) else PERFORMANCE.empty()


COLLECTIVE_ROWS = Analysis("Collectives", rank_collective_rows, PERFORMANCE, steps=PER_STEP)


def _rank_collective_performance(rt: RankTrace, iterations: StepList
                                 ) -> pd.DataFrame:
    ev = rt.events
    if not len(ev):
        return PERFORMANCE.empty()
    keep = rank_work_class(rt) == COMM
    if iterations is not None:
        keep &= np.isin(rt.column("iteration"), as_list(iterations))
    rows = np.flatnonzero(keep)
    if not rows.size:
        return PERFORMANCE.empty()
    _, where = side_slots(rt, "collective_args")  # per event: its args row, -1
    chains = _ancestors(rt, rows)
    args = _args_rows(where, rows, chains)
    ops, sources = _operations(rt, rows, where, chains)
    columns = _columns(rt, rows, args, ops, sources)
    columns["context"], columns["launch_op"] = _callers(rt, rows, chains)
    columns["exposed(us)"] = _exposed_ns(ev, rows) / 1e3
    # send/recv: which half, and the peer (hta.analysis.p2p); the same rows in order
    k = comm_kernels(rt, iterations)
    columns["direction"], columns["peer"] = k["direction"].to_numpy(), k["peer"].to_numpy()
    # one frame, built in the table's column order (each column set on a built frame, or
    # the columns selected afterwards, costs a copy: most of a small rank's table)
    return pd.DataFrame({c: columns[c] for c in COLUMNS})


def _exposed_ns(ev: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Per kernel row: its time with no computation kernel running (ns)."""
    comp = work_class(ev["kind"]) == COMPUTE
    cover = Cover(ev["ts"].to_numpy()[comp], ev["end"].to_numpy()[comp])
    start, end = ev["ts"].to_numpy()[rows], ev["end"].to_numpy()[rows]
    return (np.maximum(end - start, 0) - cover.within(start, end)).astype(np.int64)


def _callers(rt: RankTrace, rows: np.ndarray, chains: list[list[int]]
             ) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel: the :data:`CONTEXT_PATTERNS` tags of its launch's callers and name
    (and ``backward`` when the launch ran on an autograd engine thread), and the
    launching op (the outermost ``c10d::*`` op around the launch, else the innermost
    ``nccl:*`` annotation or ``record_param_comms``; "" when none)."""
    sym = rt.symbols
    names = rt.column("name")
    on_autograd = _on_autograd_thread(rt, rows)
    cache: dict[tuple[int, ...], tuple[str, str]] = {}
    tags = np.full(rows.size, "", dtype=object)
    ops = np.full(rows.size, "", dtype=object)
    for i, chain in enumerate(chains):
        key = (int(on_autograd[i]), int(names[rows[i]]), *(int(names[p]) for p in chain))
        if key not in cache:
            texts = [sym[k] for k in key[1:]]
            joined = "\n".join(texts)
            comm = [t for t in texts[1:] if t.startswith(CPU_NAME_PREFIXES)
                    or t == "record_param_comms"]
            c10d = [t for t in comm if "c10d" in t]
            found = [tag for tag, pat in _CONTEXT if pat.search(joined)
                     or (tag == "backward" and key[0])]
            cache[key] = (",".join(found), c10d[-1] if c10d else comm[0] if comm else "")
        tags[i], ops[i] = cache[key]
    return tags, ops


def _on_autograd_thread(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """Per kernel: whether its launch call ran on a thread Kineto names
    ``pt_autograd_N`` (the autograd engine's, which runs the backward pass)."""
    out = np.zeros(rows.size, dtype=bool)
    meta = rt.tables.get("metadata_events")
    if meta is None or not len(meta) or not rows.size:
        return out
    values = side_text(rt, "metadata_events", "value")
    named = np.flatnonzero((side_text(rt, "metadata_events", "name") == "thread_name")
                           & np.array(["pt_autograd" in v for v in values], dtype=bool))
    if not named.size:
        return out
    threads = set(zip(meta["pid"].to_numpy()[named].tolist(),
                      meta["tid"].to_numpy()[named].tolist()))
    launch = rt.link("index_correlation")[rows]
    ok = launch >= 0
    pid = rt.column("pid")[launch[ok]]
    tid = rt.column("tid")[launch[ok]]
    out[ok] = [(p, t) in threads for p, t in zip(pid.tolist(), tid.tolist())]
    return out


def _ancestors(rt: RankTrace, rows: np.ndarray) -> list[list[int]]:
    """Per kernel row: the positions of its launch call's enclosing events, innermost
    first (empty when it has no launch call in the trace)."""
    launch = rt.link("index_correlation")[rows]
    parent = rt.link("parent")
    chains: list[list[int]] = []
    for pos in launch.tolist():
        chain: list[int] = []
        p = parent[pos] if pos >= 0 else -1
        while p >= 0 and len(chain) < 64:
            chain.append(int(p))
            p = parent[p]
        chains.append(chain)
    return chains


def _args_rows(where: np.ndarray, rows: np.ndarray, chains: list[list[int]]) -> np.ndarray:
    """Per kernel: the ``collective_args`` row of its own args, else of the nearest
    ``record_param_comms`` op (any event with collective args) around its launch; -1.
    ``where``: per event row, its ``collective_args`` row or -1
    (:meth:`~hta.model.trace.RankTrace.side_row_of_event`); ``chains``:
    :func:`_ancestors` of ``rows``."""
    out = where[rows].copy()
    for i in np.flatnonzero(out < 0).tolist():
        for p in chains[i]:
            if where[p] >= 0:
                out[i] = where[p]
                break
    return out


def _operations(rt: RankTrace, rows: np.ndarray, where: np.ndarray,
                chains: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The operation and its source of each kernel (module docstring, steps 1-3)."""
    sym = rt.symbols
    coll = rt.tables.get("collective_args")
    cnames = side_text(rt, "collective_args", "collective_name") if coll is not None and len(
        coll) else np.zeros(0, dtype=object)
    names = rt.column("name")
    n = rows.size
    ops = np.full(n, OTHER, dtype=object)
    sources = np.full(n, "none", dtype=object)
    own = where[rows]
    cache: dict[str, str | None] = {}

    def named(text: str) -> str | None:
        if text not in cache:
            cache[text] = operation_of(text)
        return cache[text]

    for i in range(n):
        if own[i] >= 0 and (op := named(cnames[own[i]])):
            ops[i], sources[i] = op, "kernel_args"
            continue
        for p in chains[i]:
            if where[p] >= 0 and (op := named(cnames[where[p]])):
                ops[i], sources[i] = op, "launch_args"
                break
            text = sym[names[p]]
            if text.startswith(CPU_NAME_PREFIXES) and (op := named(text.split(":", 1)[-1])):
                ops[i], sources[i] = op, "launch_op"
                break
        else:
            if op := named(sym[names[rows[i]]]):
                ops[i], sources[i] = op, "kernel_name"
                continue
            for p in chains[i]:
                ns, sep, short = sym[names[p]].partition("::")
                if sep and ns not in _TENSOR_NAMESPACES and (op := named(short)):
                    ops[i], sources[i] = op, "launch_op"
                    break
    return ops, sources


def _columns(rt: RankTrace, rows: np.ndarray, args: np.ndarray, ops: np.ndarray,
             sources: np.ndarray) -> dict[str, Any]:
    """The performance columns from the kernels' args (module docstring), but those of
    the launch's callers, the exposed time and the send/recv direction and peer."""
    n = rows.size
    sym = np.asarray(rt.symbols, dtype=object)
    kernel = sym[rt.column("name")[rows]]
    stream = rt.column("stream")[rows].astype(np.int64)
    start = rt.column("ts")[rows].astype(np.int64)
    end = rt.column("end")[rows].astype(np.int64)
    col = _arg_columns(rt, args, n)
    pg = np.where(col["pg"] != "", col["pg"], np.array([f"stream {s}" for s in stream],
                                                        dtype=object))
    label = np.array([g if not d or d == g else f"{g} ({d})"
                      for g, d in zip(pg.tolist(), col["desc"].tolist())], dtype=object)
    elem = np.array([DTYPE_BYTES.get(d, np.nan) for d in col["dtype"].tolist()], dtype=float)
    nbytes = np.fmax(col["in"], col["out"]) * elem
    dur = (end - start).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(dur > 0, nbytes / dur, np.nan)  # bytes/ns = GB/s
    factor = bus_factors(ops, col["size"])
    return {
        "rank": np.full(n, rt.rank, dtype=np.int64), "collective": ops,
        "process_group": label, "group_size": col["size"], "dtype": col["dtype"],
        "msg_bytes": nbytes, "time(us)": dur / 1e3, "algbw(GB/s)": algbw,
        "busbw(GB/s)": algbw * factor, "stream": stream, "name": col["name"],
        "kernel": kernel, "source": sources,
        "iteration": rt.column("iteration")[rows].astype(np.int64),
        "seq": col["seq"], "start_ns": start, "end_ns": end, "in_msg_nelems": col["in"],
        "out_msg_nelems": col["out"], "send_imbalance": col["send_imb"],
        "recv_imbalance": col["recv_imb"],
    }


def _arg_columns(rt: RankTrace, args: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """The collective args of each kernel (row ``args[i]`` of ``collective_args``)."""
    out = {k: np.full(n, "", dtype=object) for k in ("pg", "desc", "dtype", "name")}
    out.update({k: np.full(n, np.nan) for k in ("in", "out", "size", "send_imb",
                                                "recv_imb")})
    out["seq"] = np.full(n, -1, dtype=np.int64)
    has = np.flatnonzero(args >= 0)
    coll = rt.tables.get("collective_args")
    if not has.size or coll is None:
        return out
    at = args[has]

    def text(column: str) -> np.ndarray:
        return side_text(rt, "collective_args", column)[at]

    def number(column: str) -> np.ndarray:
        return side_number(rt, "collective_args", column)[at]

    out["pg"][has] = text("process_group_name")
    out["desc"][has] = text("process_group_desc")
    out["dtype"][has] = text("dtype")
    out["name"][has] = text("collective_name")
    out["in"][has] = number("in_msg_nelems")
    out["out"][has] = number("out_msg_nelems")
    size = number("group_size")
    listed = _per_text(text("process_group_ranks"), _count_ranks)
    out["size"][has] = np.where(np.isfinite(size) & (size > 0), size, listed)
    seq = number("seq")
    out["seq"][has] = np.where(np.isfinite(seq), seq, -1).astype(np.int64)
    for key, column in (("send_imb", "in_split_sizes"), ("recv_imb", "out_split_sizes")):
        if column in coll.columns:
            out[key][has] = _per_text(text(column), imbalance)
    return out


def _per_text(texts: np.ndarray, fn) -> np.ndarray:
    """``fn`` of each of ``texts`` (Python strings), computed once per distinct text."""
    codes, uniques = pd.factorize(texts, use_na_sentinel=False)
    values = np.array([fn(u) for u in uniques], dtype=float)
    return values[codes] if len(values) else np.full(len(texts), np.nan)


def _count_ranks(raw: object) -> float:
    """The number of ranks in ``Process Group Ranks`` text (NaN when unknown)."""
    value = _json_list(raw)
    return float(len(value)) if value else float("nan")


# -- summary ---------------------------------------------------------------------------------
#: Columns of :func:`collective_summary`.
SUMMARY_COLUMNS = ["collective", "process_group", "group_size", "dtype", "msg_bytes", "calls",
                   "ranks", "total_time(us)", "mean_time(us)", "algbw(GB/s)",
                   "busbw(GB/s)", "max_busbw(GB/s)", "exposed(us)"]


def collective_summary(perf: pd.DataFrame) -> pd.DataFrame:
    """Per (collective, process group, group size, dtype, message size) of
    :func:`collective_performance`'s table: ``calls``, ``ranks`` (how many), total and
    mean time, ``algbw``/``busbw`` over the group's time (total bytes moved over total
    time: what the group achieved, long calls weigh more), the fastest call's
    ``max_busbw`` and the exposed time. Largest total time first; rows without a message
    size are kept (NaN bandwidths)."""
    if not len(perf):
        return pd.DataFrame({c: pd.Series([], dtype="object" if c in (
            "collective", "process_group", "dtype") else "float64") for c in SUMMARY_COLUMNS})
    p = perf.copy()
    p["_bus"] = p["busbw(GB/s)"] * p["time(us)"]
    p["_alg"] = p["algbw(GB/s)"] * p["time(us)"]
    keys = ["collective", "process_group", "group_size", "dtype", "msg_bytes"]
    g = p.groupby(keys, dropna=False, sort=False)
    out = pd.DataFrame({
        "calls": g.size(), "ranks": g["rank"].nunique(),
        "total_time(us)": g["time(us)"].sum(), "mean_time(us)": g["time(us)"].mean(),
        "algbw(GB/s)": g["_alg"].sum(min_count=1) / g["time(us)"].sum(),
        "busbw(GB/s)": g["_bus"].sum(min_count=1) / g["time(us)"].sum(),
        "max_busbw(GB/s)": g["busbw(GB/s)"].max(), "exposed(us)": g["exposed(us)"].sum(),
    }).reset_index()
    out = out.sort_values("total_time(us)", ascending=False, kind="stable", ignore_index=True)
    return out[SUMMARY_COLUMNS]
