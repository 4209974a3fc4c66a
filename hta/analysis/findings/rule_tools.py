"""Tools the findings rules share: name tests, step selection, formatting, copy sizes
and data-loader spans (GPU rows: :func:`hta.analysis.perf.calls.gpu_rows`).

A *data-loader span* is a CPU event named ``enumerate(DataLoader)#...``, containing
``DataLoaderIter.__next__``, the Python frame ``torch/utils/data/dataloader.py(N):
__next__``, or a ``record_function`` labelled ``data``, ``data_loading``, ``dataloader`` or
``data_loader`` (any case).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from hta.analysis.findings.events import link, step_numbers
from hta.analysis.intervals import Cover
from hta.analysis.rowmap import ancestor_pairs, nearest_marked_ancestor
from hta.model.arrays import distinct
from hta.model.derived import derived
from hta.model.rules import KIND_CODE, RUNTIME_KINDS, codes_in, kind_mask
from hta.model.symbol_masks import symbol_verdicts
from hta.model.trace import RankTrace

#: A DataLoader that runs worker processes (``num_workers > 0``).
MULTI_PROCESS_LOADER = re.compile(r"MultiProcessingDataLoaderIter")
DATA_LOADER = re.compile(
    r"^enumerate\(DataLoader\)#|DataLoaderIter\.__next__"
    r"|torch/utils/data/dataloader\.py\(\d+\): __next__$"
)
#: Calls that run code ``torch.compile`` compiled.
COMPILED_CALL = re.compile(r"^Torch-Compiled Region|^CompiledFunction|^## Call CompiledFxGraph")
#: ``record_function`` labels taken as data loading (user annotations only).
DATA_ANNOTATION = re.compile(r"(?i)^data([_ ]?load(ing|er)?)?$")
#: Names of warm-up code (a ``record_function`` label, an operator or a Python frame:
#: PARAM's ``[param|...|warmup|forward]``, vLLM's ``compile_or_warm_up_model``,
#: Inductor's ``in_warmup``).
WARM_UP = re.compile(r"(?i)warm[-_ ]?up")

_CPU_KINDS = ("cpu_op", "user_annotation", "python_function")
_CALLER_KINDS = (*_CPU_KINDS, *sorted(RUNTIME_KINDS))
_ANNOTATION = KIND_CODE["user_annotation"]


@runtime_checkable
class Searchable(Protocol):
    """A compiled pattern, or one behind a literal prefilter
    (:class:`hta.model.prefilter.Prefiltered`)."""

    def search(self, string: str, /) -> object: ...


#: What :func:`name_matches` tests a name with: a pattern (searched) or a predicate.
NameTest = Searchable | Callable[[str], bool]


def name_matches(rt: RankTrace, rows: np.ndarray, pattern: NameTest) -> np.ndarray:
    """Whether each row's name matches ``pattern`` (a compiled pattern, searched, or a
    predicate on the name, which must depend on the name alone): each distinct name is
    tested once per process and test (the verdicts are kept per name id for the rank's
    symbol table, which the ranks of a job share,
    :func:`hta.model.symbol_masks.symbol_verdicts`, and per name text for the ranks that
    number names their own way)."""
    return symbol_verdicts(rt.symbols, pattern, rt.column("name")[rows],
                           lambda names: _verdicts(pattern, names))


#: Per test, its verdict on each name already tested in this process: the ranks of a job
#: share most names (each rank numbers them its own way), and a pattern searched over
#: a long templated kernel name costs microseconds. A test's verdicts are dropped past
#: :data:`MAX_KNOWN` names, and every test's past :data:`MAX_TESTS` tests.
_KNOWN: dict[NameTest, dict[str, bool]] = {}
MAX_KNOWN = 200_000
MAX_TESTS = 256


def _verdicts(pattern: NameTest, names: list[str]) -> list[bool]:
    """``pattern``'s verdict on each name, each name tested once per process."""
    known = _KNOWN.get(pattern)
    if known is None or len(known) > MAX_KNOWN:
        if len(_KNOWN) >= MAX_TESTS:
            _KNOWN.clear()
        known = _KNOWN[pattern] = {}
    test = pattern.search if isinstance(pattern, Searchable) else pattern
    out = []
    for name in names:
        verdict = known.get(name)
        if verdict is None:
            verdict = known[name] = bool(test(name))
        out.append(verdict)
    return out


def in_selection(rt: RankTrace, rows: np.ndarray, iterations: Sequence[int] | None,
                 window: tuple[int, int]) -> np.ndarray:
    """Rows starting inside the window and, with ``iterations``, in a selected step."""
    ts = rt.column("ts")[rows]
    keep = (ts >= window[0]) & (ts < window[1])
    if iterations is not None:
        keep &= np.isin(rt.column("iteration")[rows], list(iterations))
    return keep


def heaviest_name(rt: RankTrace, rows: np.ndarray, weights: np.ndarray) -> str:
    """The name of ``rows`` whose rows weigh the most in all (integer ``weights``, one a
    row; ties: the lowest symbol id)."""
    ids, inverse = np.unique(rt.column("name")[rows], return_inverse=True)
    total = np.zeros(ids.size, dtype=np.int64)
    np.add.at(total, inverse.reshape(-1), np.asarray(weights, dtype=np.int64))
    return rt.symbols[int(ids[np.argmax(total)])]


def fmt_time(ns: float) -> str:
    """``12.3 µs`` below a millisecond, ``4.567 ms`` above (``1,234.567 ms``)."""
    return f"{ns / 1e3:,.1f} µs" if abs(ns) < 1e6 else f"{ns / 1e6:,.3f} ms"


def fmt_steps(steps: Sequence[int] | np.ndarray) -> str:
    """``steps 3-10``, ``steps 3, 5, 9``, ``step 4`` or ``no ProfilerStep``."""
    values = np.asarray(steps, dtype=np.int64).ravel()
    steps = distinct(values[values >= 0]).tolist()
    if not steps:
        return "outside any ProfilerStep"
    if len(steps) == 1:
        return f"step {steps[0]}"
    if steps == list(range(steps[0], steps[-1] + 1)):
        return f"steps {steps[0]}-{steps[-1]}"
    shown = ", ".join(str(s) for s in steps[:6])
    return f"steps {shown}{', ...' if len(steps) > 6 else ''}"


def steps_text(rt: RankTrace, steps: Sequence[int] | np.ndarray) -> str:
    """:func:`fmt_steps`, or ``the trace (no ProfilerStep)`` on a rank without
    ``ProfilerStep`` spans (the loader gives all its events step 0, which is no step)."""
    if not len(step_numbers(rt)):
        return "the trace (no ProfilerStep)"
    return fmt_steps(steps)


def step_text(rt: RankTrace, step: int) -> str:
    """``step 12``, ``outside any step`` for -1, or ``no ProfilerStep`` on a rank without
    ``ProfilerStep`` spans."""
    if not len(step_numbers(rt)):
        return "no ProfilerStep"
    return step_of(step)


def step_of(step: int) -> str:
    """``step 12``, or ``outside any step`` for -1."""
    return f"step {int(step)}" if step >= 0 else "outside any step"


def step_tuple(values: np.ndarray) -> tuple[int, ...]:
    """The distinct step numbers (>= 0), sorted."""
    return tuple(int(s) for s in distinct(values) if s >= 0)


def fmt_bytes(n: float) -> str:
    """``512 B``, ``12.3 KB``, ``4.5 MB``, ``1.2 GB`` (powers of 1000)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def bytes_of(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """Bytes of the given rows from the ``memory_args`` table (NaN where unknown); looks
    up only those rows (the table is sorted by ``index``)."""
    out = np.full(rows.size, np.nan)
    table = rt.tables.get("memory_args")
    if table is None or not len(table) or rows.size == 0:
        return out
    index = table["index"].to_numpy(dtype=np.int64)
    nbytes = table["bytes"].to_numpy(dtype=np.float64)
    if index.size > 1 and (index[1:] < index[:-1]).any():
        order = np.argsort(index, kind="stable")
        index, nbytes = index[order], nbytes[order]
    want = rt.column("index")[rows]
    at = np.clip(np.searchsorted(index, want), 0, index.size - 1)
    hit = index[at] == want
    out[hit] = nbytes[at[hit]]
    return out


def under_warm_up(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """Whether each row runs inside an event (annotation, operator, Python frame) whose
    name says warm-up (:data:`WARM_UP`), or is one: code that runs once, before the
    steady state the findings judge."""
    ev = rt.events
    callers = np.flatnonzero(kind_mask(ev["kind"].array.codes, _CALLER_KINDS))
    marked = np.zeros(len(ev), dtype=bool)
    marked[callers[name_matches(rt, callers, WARM_UP)]] = True
    if not rows.size or not marked.any():
        return np.zeros(rows.size, dtype=bool)
    row, anc = ancestor_pairs(link(rt, "parent"), rows)
    return np.isin(rows, row[marked[anc]])


def runs_compiled(rt: RankTrace) -> bool:
    """Whether the rank runs code ``torch.compile`` compiled (:data:`COMPILED_CALL`)."""
    return derived(rt, "findings.runs_compiled", lambda: _runs_compiled(rt))


def _runs_compiled(rt: RankTrace) -> bool:
    codes = rt.kind_codes()
    calls = np.flatnonzero(kind_mask(codes, _CALLER_KINDS))
    names = distinct(rt.column("name")[calls])
    return any(COMPILED_CALL.search(rt.symbols[int(n)]) for n in names.tolist())


# -- data-loader spans ---------------------------------------------------------------------
def data_loader_rows(rt: RankTrace) -> np.ndarray:
    """Positions of the data-loader spans (see the module docstring); computed once per
    rank (:func:`hta.model.derived.derived`, a read-only array)."""
    return derived(rt, "findings.data_loader_rows", lambda: _data_loader_rows(rt))


def _data_loader_rows(rt: RankTrace) -> np.ndarray:
    codes = rt.kind_codes()
    cpu = np.flatnonzero(kind_mask(codes, _CPU_KINDS))
    hit = name_matches(rt, cpu, DATA_LOADER)
    ann = codes[cpu] == _ANNOTATION
    hit[ann] |= name_matches(rt, cpu[ann], DATA_ANNOTATION)
    return cpu[hit]


#: Python frames (``with_stack=True``) that create a DataLoader or its iterator: worker
#: processes start and the first batches are prefetched. Not a data-loader span (no
#: worker hides them); :func:`iterator_start_rows` finds them.
ITERATOR_START = re.compile(
    r"torch/utils/data/dataloader\.py\(\d+\): (__iter__|_get_iterator|__init__)$")


def iterator_start_rows(rt: RankTrace) -> np.ndarray:
    """Positions of the outermost Python frames that create a DataLoader or its
    iterator (:data:`ITERATOR_START`), by start."""
    codes = rt.kind_codes()
    frames = np.flatnonzero(codes == KIND_CODE["python_function"])
    rows = frames[name_matches(rt, frames, ITERATOR_START)]
    if not rows.size:
        return rows
    mark = np.zeros(len(rt.events), dtype=bool)
    mark[rows] = True
    parent = link(rt, "parent")
    nested = np.zeros(rows.size, dtype=bool)
    up = parent[rows]
    while (live := up >= 0).any():
        nested |= live & mark[np.where(live, up, 0)]
        up = np.where(live, parent[np.where(live, up, 0)], -1)
    return rows[~nested]


def data_loader_cover(rt: RankTrace) -> Cover:
    """The union of every data-loader span of the rank."""
    rows = data_loader_rows(rt)
    return Cover(rt.column("ts")[rows], rt.column("end")[rows])


#: Events that belong to a backward pass.
BACKWARD = re.compile(r"autograd::engine::evaluate_function|Backward\d*\b|backward"
                      r"|(?<![A-Za-z])bn_bw_|_bwd(_|\b)|(?<![A-Za-z])bwd_|BatchNormBwd")


def runs_backward(rt: RankTrace, window: tuple[int, int]) -> bool:
    """Whether any event starting in ``window`` belongs to a backward pass
    (:data:`BACKWARD`: named after the autograd engine or a backward function or kernel,
    such as ``autograd::engine::evaluate_function``, ``AddmmBackward0``, ``bn_bw_``,
    ``*_bwd_*``): a pass without one is inference."""
    ts = rt.column("ts")
    rows = np.flatnonzero((ts >= window[0]) & (ts < window[1]))
    return bool(name_matches(rt, rows, BACKWARD).any())


#: The kinds of events a launching operator may run inside (operators, annotations,
#: Python frames).
CALLER_KINDS = (KIND_CODE["cpu_op"], KIND_CODE["user_annotation"],
                KIND_CODE["python_function"])


def within_named(rt: RankTrace, ops: np.ndarray, pattern: NameTest,
                 kinds: Sequence[int] = CALLER_KINDS) -> np.ndarray:
    """Per operator row of ``ops`` (-1: none): whether it, or an event of ``kinds`` around
    it, has a name matching ``pattern`` (a kernel's launching operator under
    ``aten::_to_copy``, a convolution, a compiled function)."""
    out = np.zeros(ops.size, dtype=bool)
    has = ops >= 0
    if not has.any():
        return out
    ev = rt.events
    callers = np.flatnonzero(codes_in(rt.kind_codes(), kinds))
    mark = np.zeros(len(ev), dtype=bool)
    mark[callers[name_matches(rt, callers, pattern)]] = True
    if mark.any():
        at = ops[has]
        out[has] = mark[at] | (nearest_marked_ancestor(link(rt, "parent"), at, mark) >= 0)
    return out
