"""Where a blocking call comes from: its *site* (the operator and the labels around it),
the copy it made, and the advice that fits it. Used by ``host_sync``
(:mod:`hta.analysis.findings.host`).

The **site** of a blocking call (or of an operator standing for one) is the pair

* *operator*: the outermost ``cpu_op`` enclosing it through the ``parent`` links (the call
  itself when it is an operator), e.g. ``aten::to`` around ``aten::_to_copy`` ->
  ``aten::copy_`` -> ``cudaMemcpyAsync``; none for a bare ``torch.cuda.synchronize()``;
* *label*: the innermost ``user_annotation`` above it other than ``ProfilerStep#N``
  (``record_function`` labels such as ``## sparse_data_dist ##``), else the innermost
  ``gpu_user_annotation`` on the GPU timeline that encloses the copy the call made; the
  outermost such label is kept too.

The **copy** of a call is the GPU work its launch enqueued when that work is a copy
(through the correlation link): its name (``Memcpy DtoH (Device -> Pageable)``, which
says the direction and whether the host memory is pageable or pinned) and its ``bytes``.

The **advice** is chosen from what the site runs (first match): an implicit
synchronisation by the allocator (``cudaFree``); an operator whose output size depends on
the data (``aten::nonzero``, ``masked_select``, ``unique``, ``repeat_interleave``); a value
read on the host (``aten::item``, ``aten::_local_scalar_dense``, ``aten::is_nonzero``); a copy
between the GPU and the host (a linked HtoD or DtoH copy, or ``aten::to``, ``aten::_to_copy``,
``aten::copy_``, ``aten::cpu``);
an explicit synchronize with no operator around it; else the rule's general advice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from hta.analysis.findings.base import link
from hta.model.rules import KIND_CODE, MEMORY_KINDS, kind_mask
from hta.model.trace import RankTrace

_CPU_OP = KIND_CODE["cpu_op"]
_ANNOTATION = KIND_CODE["user_annotation"]
_GPU_ANNOTATION = KIND_CODE["gpu_annotation"]
#: Deepest call stack walked (a guard against a cycle in broken links).
MAX_DEPTH = 4096

STEP_LABEL = re.compile(r"^ProfilerStep#")
#: Calls that synchronise the whole device because they free memory.
IMPLICIT_SYNC = re.compile(
    r"^(cudaFree|cudaFreeHost|cuMemFree|cuMemFreeHost|hipFree|hipHostFree|hipFreeHost)"
    r"(_v\d+)?$"
)
DATA_DEPENDENT = re.compile(
    r"^aten::(nonzero|masked_select|unique\w*|_unique2?|repeat_interleave|argwhere)$")
HOST_READ = re.compile(r"^aten::(item|_local_scalar_dense|is_nonzero|tolist)$")
HOST_COPY = re.compile(r"^aten::(to|_to_copy|copy_|cpu)$")
#: Labels of a collective's input exchange (TorchRec input distribution, all-to-all).
EXCHANGE_LABEL = re.compile(r"(?i)all_?to_?all|all2all|data_dist|input_dist")

ADVICE = {
    "allocator": (
        "The caching allocator released memory (cudaFree), which waits for the whole "
        "device: do not call torch.cuda.empty_cache() in the loop, keep shapes stable, and "
        "reduce fragmentation or memory pressure (PYTORCH_CUDA_ALLOC_CONF="
        "expandable_segments:True, a smaller batch)."),
    "data_dependent": (
        "The operator's output size depends on the data (nonzero, masked_select, unique, "
        "boolean indexing, repeat_interleave without output_size), so the host waits for "
        "the GPU to learn it: use fixed-size forms (torch.where or masked_fill on the whole "
        "tensor, nonzero_static, output_size=) or move the step out of the hot loop."),
    "host_read": (
        "A value is read on the host (.item(), .tolist(), bool(tensor), a Python if on a "
        "GPU tensor): keep it on the GPU (torch.where, masks), or accumulate it and read it "
        "every N steps or a step later; torch.cuda.set_sync_debug_mode('warn') finds the "
        "calls."),
    "host_copy": (
        "A blocking copy between the GPU and the host (.to('cpu'), .cpu(), a copy to or "
        "from pageable memory) waits for the queued GPU work: copy with non_blocking=True "
        "from or into pinned buffers (tensor.pin_memory(), torch.empty(..., "
        "pin_memory=True)), record a CUDA event and wait on it only where the values are "
        "used."),
    "explicit": (
        "An explicit synchronize (torch.cuda.synchronize(), stream.synchronize(), "
        "event.synchronize(), often left from timing code) blocks the host: remove it from "
        "the step; to order streams use stream.wait_event / wait_stream, which do not "
        "block the host."),
}
EXCHANGE_ADVICE = (
    " If the values size a collective (all-to-all splits), start that exchange a batch "
    "ahead so the wait overlaps computation (e.g. TorchRec's TrainPipelineSparseDist runs "
    "the input distribution of batch i+1 during batch i) or use fixed splits."
)


@dataclass(frozen=True)
class Sites:
    """Per blocking row: ``op`` (outermost operator row), ``label`` and ``outer_label``
    (annotation rows), ``copy`` (GPU copy row), ``flags`` (bit per advice kind of
    :data:`FLAG_ORDER` found in the operators around the row); -1 where there is none."""

    op: np.ndarray
    label: np.ndarray
    outer_label: np.ndarray
    copy: np.ndarray
    flags: np.ndarray

    def take(self, keep: np.ndarray) -> Sites:
        """The sites of the rows ``keep`` selects (a mask or positions)."""
        return Sites(self.op[keep], self.label[keep], self.outer_label[keep],
                     self.copy[keep], self.flags[keep])


FLAG_ORDER = ("allocator", "data_dependent", "host_read", "host_copy")


def _name_flags(rt: RankTrace, name_ids: np.ndarray) -> np.ndarray:
    """Advice bits of each name id (tested once per distinct name)."""
    if name_ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    uniq, inverse = np.unique(name_ids, return_inverse=True)
    bits = np.zeros(uniq.size, dtype=np.int64)
    for k, pattern in enumerate((IMPLICIT_SYNC, DATA_DEPENDENT, HOST_READ, HOST_COPY)):
        bits |= np.array([pattern.search(rt.symbols[i]) is not None
                          for i in uniq.tolist()], dtype=np.int64) << k
    return bits[inverse.reshape(-1)]


def find_sites(rt: RankTrace, rows: np.ndarray) -> Sites:
    """The site, copy and advice bits of each blocking row (module docstring)."""
    codes = rt.kind_codes()
    names = rt.column("name")
    parent = link(rt, "parent")
    n = rows.size
    op = np.where(codes[rows] == _CPU_OP, rows, -1)
    label = np.full(n, -1, dtype=np.int64)
    outer = np.full(n, -1, dtype=np.int64)
    flags = _name_flags(rt, names[rows])
    cur = parent[rows].copy()
    for _ in range(MAX_DEPTH):
        live = np.flatnonzero(cur >= 0)
        if live.size == 0:
            break
        at = cur[live]
        is_op = codes[at] == _CPU_OP
        op[live[is_op]] = at[is_op]
        is_label = codes[at] == _ANNOTATION
        is_label[is_label] = [STEP_LABEL.search(rt.symbols[i]) is None
                              for i in names[at[is_label]].tolist()]
        first = live[is_label & (label[live] < 0)]
        label[first] = cur[first]
        outer[live[is_label]] = at[is_label]
        flags[live[is_op]] |= _name_flags(rt, names[at[is_op]])
        cur[live] = parent[at]
    copy = linked_copies(rt, rows)
    transfer = kind_mask(codes[np.where(copy >= 0, copy, 0)], ("memcpy_htod", "memcpy_dtoh"))
    flags[(copy >= 0) & transfer] |= 1 << FLAG_ORDER.index("host_copy")
    _gpu_labels(rt, copy, label, outer)
    return Sites(op, label, outer, copy, flags)


def linked_copies(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """The GPU copy (a memcpy, not a memset) each row's launch enqueued; -1 if none."""
    codes = rt.kind_codes()
    target = link(rt, "index_correlation")[rows]
    ok = target >= 0
    is_copy = kind_mask(codes[np.where(ok, target, 0)], MEMORY_KINDS - {"memset"})
    return np.where(ok & is_copy, target, -1)


def _gpu_labels(rt: RankTrace, copy: np.ndarray, label: np.ndarray,
                outer: np.ndarray) -> None:
    """Give rows without a CPU label the innermost ``gpu_user_annotation`` (same device)
    that encloses their copy's start, and the outermost one as ``outer``."""
    need = np.flatnonzero((label < 0) & (copy >= 0))
    if need.size == 0:
        return
    ann = np.flatnonzero(rt.kind_codes() == _GPU_ANNOTATION)
    if ann.size == 0:
        return
    ts, end = rt.column("ts"), rt.column("end")
    dev = rt.column("device")
    for i in need.tolist():
        c = copy[i]
        hit = ann[(ts[ann] <= ts[c]) & (end[ann] > ts[c]) & (dev[ann] == dev[c])]
        if hit.size:
            length = end[hit] - ts[hit]
            label[i] = hit[np.argmin(length)]
            outer[i] = hit[np.argmax(length)]


def site_advice(flags: int, explicit: bool, labels: list[str]) -> str:
    """The advice for a site with these advice bits; ``explicit`` when its calls have no
    operator around them; ``labels`` the site's annotation names."""
    kind = next((k for i, k in enumerate(FLAG_ORDER) if flags >> i & 1), None)
    if kind is None and explicit:
        kind = "explicit"
    if kind is None:
        return ""
    text = ADVICE[kind]
    if kind in ("host_read", "host_copy") and any(EXCHANGE_LABEL.search(s) for s in labels):
        text += EXCHANGE_ADVICE
    return text
