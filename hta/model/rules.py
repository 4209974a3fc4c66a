"""Event kinds and the rule table that assigns them.

Every complete event gets one *kind*. The assignment is data: an ordered list of
:class:`Rule` objects, the first match wins, and users may put their own rules in front
(``TraceAnalysis(trace_dir, kind_rules=[Rule(...)])``). Rules are evaluated once per
distinct ``(category, name)`` pair, never per event, so they cost nothing at scale.

The same table gives GPU work its operator *category* (GEMM, attention, ..., see
:mod:`hta.model.categories`): the compute kernel rules are one rule per kernel family of
``KERNEL_FAMILIES``, each carrying its category (:meth:`RuleSet.category_of`,
:func:`categories`), so kinds and categories never disagree.

Kinds (the categories of the ``kind`` column, in this order):

=================  =====================================================================
kind               what it is
=================  =====================================================================
cpu_op             a PyTorch operator on a CPU thread (``cpu_op``; legacy ``Operator``)
user_annotation    ``record_function`` ranges, ``ProfilerStep#N``
python_function    Python stack frames recorded with ``with_stack``
runtime_launch     a CUDA/HIP/driver call that puts work on the GPU (kernel, graph,
                   async memcpy/memset launches)
runtime_sync       a synchronizing runtime call: one that blocks the CPU until the GPU
                   catches up (device/stream/event synchronize), or that makes a stream
                   wait on an event (``cudaStreamWaitEvent``, which does not block the CPU)
runtime_other      any other runtime or driver call
computation        a GPU kernel that computes (the default for a kernel matching no rule)
communication      a collective or peer-to-peer communication kernel (NCCL, RCCL,
                   NVSHMEM, expert-parallel dispatch/combine, custom all-reduce, any
                   kernel carrying collective args)
memcpy_htod ...    GPU copies by direction: htod, dtoh, dtod, ptop, other
memset             GPU memset
gpu_sync           ``cuda_sync`` records on the GPU timeline (stream/event waits)
gpu_annotation     ``gpu_user_annotation`` ranges
other              anything else (profiler spans, overhead, counters ranges)
=================  =====================================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from hta.model.categories import CATEGORIES, KERNEL_FAMILIES
from hta.model.prefilter import Filter, filter_text, literal_filter, may_match

RULES_VERSION = 2  # 2: the compute rule split into kernel families carrying a category

KINDS: tuple[str, ...] = (
    "cpu_op",
    "user_annotation",
    "python_function",
    "runtime_launch",
    "runtime_sync",
    "runtime_other",
    "computation",
    "communication",
    "memcpy_htod",
    "memcpy_dtoh",
    "memcpy_dtod",
    "memcpy_ptop",
    "memcpy_other",
    "memset",
    "gpu_sync",
    "gpu_annotation",
    "other",
)
KIND_CODE = {k: i for i, k in enumerate(KINDS)}

#: Kinds that occupy a GPU engine (kernels, copies, memsets).
GPU_WORK_KINDS: frozenset[str] = frozenset(
    {"computation", "communication", "memcpy_htod", "memcpy_dtoh", "memcpy_dtod",
     "memcpy_ptop", "memcpy_other", "memset"}
)
MEMORY_KINDS: frozenset[str] = frozenset(
    {"memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memcpy_ptop", "memcpy_other", "memset"}
)
#: Kinds that live on the GPU timeline (pid = device, tid = stream).
GPU_KINDS: frozenset[str] = GPU_WORK_KINDS | {"gpu_sync", "gpu_annotation"}
RUNTIME_KINDS: frozenset[str] = frozenset({"runtime_launch", "runtime_sync", "runtime_other"})
CPU_KINDS: frozenset[str] = frozenset(
    {"cpu_op", "user_annotation", "python_function"}
) | RUNTIME_KINDS


@dataclass(frozen=True)
class Rule:
    """Assign ``kind`` to events whose category and name match.

    ``cat`` and ``name`` are regular expressions searched (``re.search``) in the
    event's category and name; ``None`` matches anything. ``note`` says why the rule
    exists; it appears in :func:`describe_rules`. ``category`` is the operator category
    (:data:`hta.model.categories.CATEGORIES`) of the GPU work the rule matches; ``None``
    takes the kind's default (:func:`default_category`).
    """

    kind: str
    cat: str | None = None
    name: str | None = None
    note: str = ""
    category: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KIND_CODE:
            raise ValueError(f"unknown kind {self.kind!r}; choose one of {', '.join(KINDS)}")
        if self.category is not None and self.category not in CATEGORIES:
            raise ValueError(f"unknown category {self.category!r}; choose one of "
                             f"{', '.join(CATEGORIES)}")
        if _CHECKED_ON_USE:  # the default tables: compiled on first use (and by the tests)
            return
        for pattern in (self.cat, self.name):
            if pattern is not None:
                re.compile(pattern)  # a user's bad pattern fails here, where it is written

    def matches(self, cat: str, name: str) -> bool:
        """Whether this rule applies to an event of this category and name."""
        if self.cat is not None and not re.search(self.cat, cat):
            return False
        return self.name is None or re.search(self.name, name) is not None


KERNEL_CATS = r"^(kernel|Kernel|mtia_ccp_events|xpu_kernel|privateuse1_kernel)$"
RUNTIME_CATS = r"^(cuda_runtime|cuda_driver|Runtime|mtia_runtime|xpu_runtime|privateuse1_runtime)$"
MEMCPY_CATS = r"^(gpu_memcpy|Memcpy|xpu_memcpy)$"

_LAUNCH_NAMES = (
    r"^(cudaLaunchKernel(ExC)?(_ptsz|_v\d+)*|cuLaunchKernel(Ex)?|cudaLaunchCooperativeKernel"
    r"(MultiDevice)?|cuLaunchCooperativeKernel|cudaGraphLaunch(_v\d+)?|cuGraphLaunch"
    r"|cudaMemcpy(2D|3D|Peer|ToSymbol|FromSymbol)?(Async)?(_ptsz|_v\d+)*"
    r"|cuMemcpy\w*|cudaMemset(2D|3D)?(Async)?(_ptsz|_v\d+)*|cuMemset\w*"
    r"|hipLaunchKernel|hipExtLaunchKernel|hipModuleLaunchKernel|hipExtModuleLaunchKernel"
    r"|hipLaunchCooperativeKernel|hipExtLaunchMultiKernelMultiDevice|hipGraphLaunch"
    r"|hipMemcpy\w*|hipMemset\w*|hipHccModuleLaunchKernel"
    r"|runFunction.*|enqueueCommand memcpy\w*)$"  # MTIA
)
_SYNC_NAMES = (
    r"^(cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|cudaStreamWaitEvent"
    r"|cuStreamSynchronize|cuCtxSynchronize|cuEventSynchronize|cuStreamWaitEvent"
    r"|hipDeviceSynchronize|hipStreamSynchronize|hipEventSynchronize|hipStreamWaitEvent"
    r"|synchronize|synchronizeStream|enqueueCommand waitOnEvent)$"  # MTIA
)
_COMM_KERNEL_NAMES = (
    r"(?i)(^nccl|^rccl|ncclKernel|ncclDevKernel|nvshmem|"
    r"ep::(internode|intranode)|deep_ep|notify_dispatch|"
    r"cross_device_reduce|all_?reduce|reduce_?scatter|all_?gather|all_?to_?all|"
    r"multimem_all_reduce|symm_mem)"
)
#: One ``computation`` rule per kernel family of :data:`hta.model.categories.KERNEL_FAMILIES`
#: (first match wins), each carrying the family's category.
#: True while the default tables below are built: their patterns are not compiled at
#: import (tens of long alternations, ~10 ms) but when a table is first used.
_CHECKED_ON_USE = True

_FAMILY_RULES: tuple[Rule, ...] = tuple(
    Rule("computation", cat=KERNEL_CATS, name=f.name, note=f.note, category=f.category)
    for f in KERNEL_FAMILIES
)

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("cpu_op", cat=r"^(cpu_op|Operator)$"),
    Rule("user_annotation", cat=r"^user_annotation$"),
    Rule("python_function", cat=r"^(python_function|Python)$"),
    Rule("runtime_launch", cat=RUNTIME_CATS, name=_LAUNCH_NAMES,
         note="calls that enqueue GPU work, CUDA, driver and HIP"),
    Rule("runtime_sync", cat=RUNTIME_CATS, name=_SYNC_NAMES,
         note="calls that block the CPU until the GPU catches up"),
    Rule("runtime_other", cat=RUNTIME_CATS),
    Rule("memcpy_other", cat=r"^mtia_ccp_events$", name=r"^dma_request$",
         note="MTIA DMA transfers (direction only in args)"),
    Rule("gpu_sync", cat=r"^mtia_ccp_events$", name=r"^event_(record|wait)$"),
    Rule("communication", cat=KERNEL_CATS, name=_COMM_KERNEL_NAMES, category="communication",
         note="NCCL/RCCL, NVSHMEM, DeepEP dispatch/combine, custom all-reduce kernels"),
    *_FAMILY_RULES,
    Rule("computation", cat=r"^mtia_ccp_events$", category="other",
         note="MTIA processing-element jobs (pe_exe, merge, remote)"),
    Rule("memcpy_htod", cat=MEMCPY_CATS, name=r"HtoD|Host ?-> ?Device"),
    Rule("memcpy_dtoh", cat=MEMCPY_CATS, name=r"DtoH|Device ?-> ?(Host|Pageable|Pinned)"),
    Rule("memcpy_ptop", cat=MEMCPY_CATS, name=r"PtoP|Peer"),
    Rule("memcpy_dtod", cat=MEMCPY_CATS, name=r"DtoD|Device ?-> ?Device"),
    Rule("memcpy_other", cat=MEMCPY_CATS),
    Rule("memset", cat=r"^(gpu_memset|Memset|xpu_memset)$"),
    Rule("gpu_sync", cat=r"^cuda_sync$"),
    Rule("gpu_annotation", cat=r"^gpu_user_annotation$"),
)

#: The fallback for GPU kernels that match no rule; reported by ``unclassified``.
KERNEL_FALLBACK = Rule("computation", cat=KERNEL_CATS, note="kernel matched no rule")
OTHER_FALLBACK = Rule("other")
_CHECKED_ON_USE = False


_KERNEL_FALLBACK = -1
_OTHER_FALLBACK = -2


class _Matcher:
    """First-match lookup over a rule table, with the answers of ``Rule.matches`` tried
    in order, but cheaper: the rules whose category pattern applies are found once per
    distinct category, a literal prefilter (:mod:`hta.model.prefilter`) rules out most
    name patterns with substring tests on the lower-cased name, only the survivors'
    regular expressions run, and each (category, name) pair is answered once per
    process. A rule's filter is read when a name first reaches the rule, and its
    expression compiled when a name first passes the filter: a job whose names never get
    that far does not pay for them (a few ms for the default table)."""

    _MEMO_LIMIT = 1 << 18

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules
        self.texts: list[str | None] = [r.name for r in rules]
        self._names: list[re.Pattern[str] | None] = [None] * len(rules)
        self._filters: list[Filter | None] = [None] * len(rules)
        self._read: list[bool] = [False] * len(rules)  # whether _filters[i] is read
        self.by_cat: dict[str, tuple[tuple[int, ...], int]] = {}
        self.memo: dict[tuple[str, str], int] = {}
        self.kind_by_cat: dict[str, tuple[tuple[int, ...], str]] = {}
        self.kind_memo: dict[tuple[str, str], str] = {}

    def pattern(self, i: int) -> re.Pattern[str] | None:
        """Rule ``i``'s compiled name pattern (None: the rule takes any name)."""
        text = self.texts[i]
        return None if text is None else self._compiled(i, text)

    def _compiled(self, i: int, text: str) -> re.Pattern[str]:
        found = self._names[i]
        if found is None:
            found = self._names[i] = re.compile(text)
        return found

    def filter(self, i: int) -> Filter | None:
        """Rule ``i``'s literal filter (None: nothing to rule a name out with)."""
        if not self._read[i]:
            text = self.texts[i]
            self._filters[i] = literal_filter(text) if text is not None else None
            self._read[i] = True
        return self._filters[i]

    def _candidates(self, cat: str) -> tuple[tuple[int, ...], int]:
        found = self.by_cat.get(cat)
        if found is None:
            rows = tuple(i for i, r in enumerate(self.rules)
                         if r.cat is None or re.search(r.cat, cat))
            fallback = (_KERNEL_FALLBACK if KERNEL_FALLBACK.matches(cat, "")
                        else _OTHER_FALLBACK)
            found = self.by_cat[cat] = (rows, fallback)
        return found

    def _kind_candidates(self, cat: str) -> tuple[tuple[int, ...], str]:
        """The candidates that decide a pair's kind, and the kind when none of them
        matches: the last candidates are left out while they give the fallback's kind
        (e.g. the kernel family rules, all ``computation`` like the kernel fallback)."""
        found = self.kind_by_cat.get(cat)
        if found is None:
            rows, fallback = self._candidates(cat)
            kind = (KERNEL_FALLBACK if fallback == _KERNEL_FALLBACK else OTHER_FALLBACK).kind
            end = len(rows)
            while end and self.rules[rows[end - 1]].kind == kind:
                end -= 1
            found = self.kind_by_cat[cat] = (rows[:end], kind)
        return found

    def _search(self, rows: tuple[int, ...], name: str) -> int | None:
        """Index of the first of ``rows`` whose name pattern matches, else None."""
        lowered = filter_text(name)
        texts, filters, read = self.texts, self._filters, self._read
        for i in rows:
            text = texts[i]
            if text is None:
                return i
            if not may_match(filters[i] if read[i] else self.filter(i), lowered):
                continue
            if self._compiled(i, text).search(name) is not None:
                return i
        return None

    def first(self, cat: str, name: str) -> int:
        """Index of the first rule matching the pair, else a fallback code."""
        key = (cat, name)
        found = self.memo.get(key)
        if found is not None:
            return found
        rows, fallback = self._candidates(cat)
        hit = self._search(rows, name)
        found = fallback if hit is None else hit
        if len(self.memo) >= self._MEMO_LIMIT:
            self.memo.clear()
        self.memo[key] = found
        return found

    def kind(self, cat: str, name: str) -> str:
        """The kind of the first rule matching the pair (the fallback's when none does),
        trying only the rules that can change it."""
        key = (cat, name)
        found = self.kind_memo.get(key)
        if found is not None:
            return found
        first = self.memo.get(key)
        if first is not None:
            found = self.rules[first].kind if first >= 0 else (
                KERNEL_FALLBACK if first == _KERNEL_FALLBACK else OTHER_FALLBACK).kind
        else:
            rows, found = self._kind_candidates(cat)
            hit = self._search(rows, name)
            if hit is not None:
                found = self.rules[hit].kind
        if len(self.kind_memo) >= self._MEMO_LIMIT:
            self.kind_memo.clear()
        self.kind_memo[key] = found
        return found

_MATCHERS: dict[tuple[Rule, ...], _Matcher] = {}


def _matcher_for(rules: tuple[Rule, ...]) -> _Matcher:
    """One matcher per rule table and process (rule tables are few)."""
    found = _MATCHERS.get(rules)
    if found is None:
        if len(_MATCHERS) >= 16:
            _MATCHERS.clear()
        found = _MATCHERS[rules] = _Matcher(rules)
    return found


class RuleSet:
    """An ordered rule table: user rules first, then the defaults."""

    def __init__(
        self, user_rules: Iterable[Rule] = (), *, defaults: Sequence[Rule] = DEFAULT_RULES
    ) -> None:
        self.user_rules: tuple[Rule, ...] = tuple(user_rules)
        self.rules: tuple[Rule, ...] = self.user_rules + tuple(defaults)
        self._matcher: _Matcher | None = None

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_matcher"] = None  # rebuilt on first use wherever the table goes
        return state

    def rule_for(self, cat: str, name: str) -> tuple[Rule, bool]:
        """The first rule matching one pair, and whether it is a rule of the table
        (False for the kernel fallback)."""
        if self._matcher is None:
            self._matcher = _matcher_for(self.rules)
        found = self._matcher.first(cat, name)
        if found >= 0:
            return self.rules[found], True
        if found == _KERNEL_FALLBACK:
            return KERNEL_FALLBACK, False
        return OTHER_FALLBACK, True

    def kind_of(self, cat: str, name: str) -> tuple[str, bool]:
        """Return (kind, matched) for one pair; ``matched`` is False for the fallbacks."""
        rule, matched = self.rule_for(cat, name)
        return rule.kind, matched

    def kind(self, cat: str, name: str) -> str:
        """The kind of one pair, as :meth:`kind_of` gives it, without finding out whether
        a rule or a fallback gave it: cheaper, since the rules after which every rule
        left and the fallback give one kind are not tried (the kernel family rules)."""
        if self._matcher is None:
            self._matcher = _matcher_for(self.rules)
        return self._matcher.kind(cat, name)

    def category_of(self, cat: str, name: str) -> str:
        """The category of one pair: its rule's, else the kind's default; ``""`` for
        events that are not GPU work."""
        rule, _ = self.rule_for(cat, name)
        return rule.category or default_category(rule.kind)

    def fingerprint(self) -> str:
        """A short text that changes whenever the user's rules change."""
        return f"v{RULES_VERSION}:" + repr(self.user_rules)

    def describe(self) -> list[dict[str, str]]:
        """The table as rows, for docs and for users checking what applies."""
        return [
            {"kind": r.kind, "category": r.category or default_category(r.kind),
             "cat": r.cat or "*", "name": r.name or "*", "note": r.note,
             "source": "user" if i < len(self.user_rules) else "default"}
            for i, r in enumerate(self.rules)
        ]


def classify(
    symbols: Sequence[str],
    cat_ids: np.ndarray,
    name_ids: np.ndarray,
    rules: RuleSet,
    collective_rows: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Kind code per event, and a bool mask of kernels that matched no rule.

    Kernels that carry collective args (``Collective name``) are communication whatever
    their name, because that is what the writer says they are.
    """
    n = len(cat_ids)
    if n == 0:
        return np.zeros(0, dtype=np.int8), np.zeros(0, dtype=bool)
    width = np.int64(max(len(symbols), 1))
    pair = cat_ids.astype(np.int64) * width + name_ids.astype(np.int64)
    uniq, inverse = np.unique(pair, return_inverse=True)
    codes = np.empty(len(uniq), dtype=np.int8)
    unmatched = np.zeros(len(uniq), dtype=bool)
    for i, key in enumerate(uniq.tolist()):
        kind, matched = rules.kind_of(symbols[key // width], symbols[key % width])
        codes[i] = KIND_CODE[kind]
        unmatched[i] = not matched
    kind_codes = codes[inverse]
    unmatched_rows = unmatched[inverse]
    if collective_rows is not None and len(collective_rows):
        gpu_kernel = (kind_codes == KIND_CODE["computation"])
        sel = collective_rows[gpu_kernel[collective_rows]]
        kind_codes[sel] = KIND_CODE["communication"]
        unmatched_rows[sel] = False
    return kind_codes, unmatched_rows


def kinds(
    symbols: Sequence[str],
    cat_ids: np.ndarray,
    name_ids: np.ndarray,
    rules: RuleSet,
    collective_rows: np.ndarray | None = None,
) -> np.ndarray:
    """Kind code per event: the first result of :func:`classify`, without the rule
    lookups only the unmatched mask needs (the kernel family rules)."""
    if len(cat_ids) == 0:
        return np.zeros(0, dtype=np.int8)
    width = np.int64(max(len(symbols), 1))
    pair = cat_ids.astype(np.int64) * width + name_ids.astype(np.int64)
    uniq, inverse = np.unique(pair, return_inverse=True)
    codes = np.array([KIND_CODE[rules.kind(symbols[key // width], symbols[key % width])]
                      for key in uniq.tolist()], dtype=np.int8)
    kind_codes = codes[inverse]
    if collective_rows is not None and len(collective_rows):
        gpu_kernel = (kind_codes == KIND_CODE["computation"])
        kind_codes[collective_rows[gpu_kernel[collective_rows]]] = KIND_CODE["communication"]
    return kind_codes


def default_category(kind: str) -> str:
    """The category of GPU work whose rule names none: communication kernels are
    ``communication``, copies and memsets ``copy/memset``, other kernels ``other``;
    ``""`` for events that are not GPU work."""
    if kind == "communication":
        return "communication"
    if kind in MEMORY_KINDS:
        return "copy/memset"
    return "other" if kind == "computation" else ""


def categories(
    symbols: Sequence[str], cat_ids: np.ndarray, name_ids: np.ndarray, rules: RuleSet,
    collective_rows: np.ndarray | None = None,
) -> np.ndarray:
    """Category of each given event (object array of :data:`CATEGORIES` names, ``""``
    for events that are not GPU work), one rule lookup per distinct (category, name).
    ``collective_rows`` (positions in the given arrays) carry collective args: their
    kernels are ``communication``, as in :func:`classify`."""
    n = len(cat_ids)
    out = np.full(n, "", dtype=object)
    if n == 0:
        return out
    width = np.int64(max(len(symbols), 1))
    pair = cat_ids.astype(np.int64) * width + name_ids.astype(np.int64)
    uniq, inverse = np.unique(pair, return_inverse=True)
    table = np.array([rules.category_of(symbols[k // width], symbols[k % width])
                      for k in uniq.tolist()], dtype=object)
    out = table[inverse]
    if collective_rows is not None and len(collective_rows):
        rows = np.asarray(collective_rows, dtype=np.int64)
        kernel = out[rows] != ""
        out[rows[kernel & (out[rows] != "copy/memset")]] = "communication"
    return out


def kind_codes(kinds: Iterable[str]) -> list[int]:
    """Codes of the given kind names (for filtering the ``kind`` column's codes)."""
    return [KIND_CODE[k] for k in kinds]


def kind_mask(codes: np.ndarray, kinds: Iterable[str]) -> np.ndarray:
    """Rows whose ``kind`` code (``events["kind"].cat.codes``) is one of ``kinds``; a
    missing kind (code -1) is in no set (:func:`codes_in`)."""
    return codes_in(codes, kind_codes(kinds))


#: Up to this many wanted codes, :func:`codes_in` compares (a pass per code, each about
#: twenty times faster than a table lookup or ``np.isin`` per row); more, one lookup.
_FEW_CODES = 4


def codes_in(codes: np.ndarray, wanted: Iterable[int]) -> np.ndarray:
    """Whether each of ``codes`` (the ``kind`` column's codes, -1 for a missing kind) is
    one of ``wanted``: ``np.isin`` for small integer codes, without its sort."""
    wanted = [int(w) for w in wanted]
    codes = np.asarray(codes)
    if len(wanted) <= _FEW_CODES:
        out = np.zeros(codes.shape, dtype=bool)
        for w in wanted:
            out |= codes == w
        return out
    table = np.zeros(len(KINDS) + 1, dtype=bool)  # the extra last slot answers code -1
    table[wanted] = True
    return table[codes]
