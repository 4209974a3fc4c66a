"""What the kernel rules share: which kernels belong to the analysis, and kernel names
for evidence, short yet telling apart kernels that share a short name.

**Selection.** :func:`in_steps`: a GPU row belongs to the analysis when its launch belongs
to a selected step (the ``iteration`` column, as the kernel tables pick rows), or, without
``iterations``, to any step or starts inside the analysed window.

**Graph replays.** :func:`graph_replayed_work`: which GPU work rows a CUDA/HIP graph
launch enqueued (their gaps are the GPU's, whatever the launch call's duration).

**fp32 GEMMs and convolutions.** :data:`FP32_GEMM` and :func:`fp32_conv`, the names of
GEMMs and convolutions computed in plain fp32 (:func:`fp32_matrix`: the ``fp32_gemm``
rule claims them; ``low_occupancy`` and ``ops_below_roof`` leave them to it).

**Labels.**

:func:`hta.analysis.names.short_name` drops template arguments, so every CUTLASS 3 GEMM
becomes ``cutlass::device_kernel`` and evidence such as "cutlass::device_kernel ×140"
hides which GEMMs are meant. A *label* is the short name, followed, when other kernels of
the same list share that short name, by the tokens of its full name that differ from
theirs (identifiers, each namespace apart, and numbers, in order, at most
:data:`MAX_TOKENS`)::

    cutlass::device_kernel<…128, 256, KernelTmaWarpSpecializedCooperative…>
    cutlass::device_kernel<…64, 128, KernelTmaWarpSpecializedPingpong…>

The tokens are found by aligning each full name's token list with the list of the
group's first name (:class:`difflib.SequenceMatcher`); the first name shows its tokens
at every place where another one differs. Names without template arguments (cuBLAS
``sm90_xmma_gemm_…``, Triton, Tensile ``Cijk_…``) are already distinct and are only cut
to :data:`MAX_CHARS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np

from hta.analysis.findings.base import analysis_window, link
from hta.analysis.findings.events import step_numbers
from hta.analysis.findings.rule_tools import fmt_time, name_matches
from hta.analysis.gpu_work import rank_work_class
from hta.analysis.names import short_name
from hta.model.derived import derived
from hta.model.links import graph_replayed
from hta.model.prefilter import Prefiltered
from hta.model.rules import KIND_CODE
from hta.model.trace import RankTrace

_COMPUTATION = KIND_CODE["computation"]

#: fp32 GEMM kernels on CUDA cores (NVIDIA) or fp32 Tensile kernels (AMD), by name (its
#: ``search`` skips names lacking the pattern's words: :class:`hta.model.prefilter.Prefiltered`).
FP32_GEMM = Prefiltered(re.compile(
    r"(^|[^a-z])(maxwell|pascal|volta|turing|ampere|sm\d+)_sgemm_"  # cuBLAS SIMT sgemm
    r"|(^|[^a-z])sgemm_(\d+x\d+|largek)"          # cuBLAS sgemm_128x128_, sgemm_largek_
    r"|magma_sgemm"                                # cuBLAS magma_sgemmEx_kernel<float, ...>
    r"|simt_sgemm"                                 # CUTLASS cutlass_80_simt_sgemm_...
    r"|(^|[^a-z])gemmSN_\w+<float"                 # cuBLAS small-N fp32 GEMM
    r"|xmma_gemm_\w*_ffma_"                        # cuBLASLt SIMT (ffma: fp32 FMA)
    r"|^Cijk_A[a-zA-Z]+_B[a-zA-Z]+_SB?_"          # AMD Tensile, S = fp32 in and out
))
#: Convolution kernels computing in fp32 on CUDA cores (NVIDIA) or vector ALUs (AMD), by
#: name, when :data:`LOW_PRECISION` does not also match (see :func:`fp32_conv`).
FP32_CONV = Prefiltered(re.compile(
    r"scudnn"                                      # cuDNN volta_/ampere_scudnn_128x64_...
    r"|convolve_sgemm<float"                       # implicit_/precomputed_convolve_sgemm
    r"|winograd\w*::\w+<float"                     # cudnn::winograd_nonfused::...<float
    r"|(fprop|dgrad|wgrad)\w*_f32f32_f32f32_f32_"  # cuDNN xmma implicit GEMM, fp32 math
    r"|cudnn::\w+::(dgrad|wgrad)\w*<float"         # cudnn::cnn::wgrad_alg0_engine<float
    r"|igemm_\w+_fp32_"                             # MIOpen igemm_fwd_gtcx3_nhwc_fp32_...
))
#: 16-bit, 8-bit and TF32 types in a kernel name: such a kernel is not plain fp32
#: (``ampere_fp16_scudnn_fp16_...`` reads and writes fp16).
LOW_PRECISION = re.compile(r"(?i)f16|bf16|fp16|half|tf32|int8|i8i8|e4m3|e5m2")


def fp32_conv(name: str) -> bool:
    """Whether a kernel name is a convolution computed in plain fp32 (:data:`FP32_CONV`)."""
    return FP32_CONV.search(name) is not None and LOW_PRECISION.search(name) is None


def tensor_cores(rt: RankTrace) -> bool | None:
    """Whether the rank's NVIDIA GPU has tensor cores (compute capability 7 or more, by
    ``deviceProperties``): without them (Pascal and older) no fp32 GEMM or convolution
    is off the tensor cores. None when the trace does not tell or the part is not
    NVIDIA's (AMD parts number their architectures their own way)."""
    majors = [int(p["computeMajor"]) for p in rt.meta.get("device_properties") or []
              if isinstance(p, dict) and isinstance(p.get("computeMajor"), int)
              and _nvidia(str(p.get("name", "")))]
    return max(majors) >= 7 if majors else None


def _nvidia(device: str) -> bool:
    """Whether a device name is NVIDIA's (some omit the vendor: ``Tesla T4``)."""
    return "NVIDIA" in device.upper() or any(
        w in device for w in ("Tesla", "Quadro", "GeForce", "TITAN", "RTX", "GTX"))


def fp32_matrix(name: str) -> bool:
    """Whether a kernel name is an fp32 GEMM or convolution off the tensor cores: what the
    ``fp32_gemm`` finding claims and ``dtype:`` speeds up."""
    return FP32_GEMM.search(name) is not None or fp32_conv(name)


def fp32_claimed(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """Whether each of ``rows`` is a kernel the ``fp32_gemm`` finding claims
    (:func:`fp32_matrix`), so the other kernel rules leave it: none on a GPU without
    tensor cores (:func:`tensor_cores`), where that finding stays silent."""
    if tensor_cores(rt) is False:
        return np.zeros(rows.size, dtype=bool)
    return name_matches(rt, rows, fp32_matrix)

#: Most differing tokens shown in a label.
MAX_TOKENS = 6
#: Longest label, in characters (longer ones end in "…").
MAX_CHARS = 100

_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+")
#: Namespaces too common to tell kernels apart, never shown in a label.
_NAMESPACES = frozenset({"at", "c10", "std", "cute", "cutlass", "native", "detail", "cuda",
                         "void", "const", "unsigned"})


def cut(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` cut to ``limit`` characters, ending in "…" when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def kernel_labels(names: Sequence[str]) -> list[str]:
    """One label per name (module docstring); names sharing a short name are told apart,
    the first of them taken as the reference. Equal names get equal labels."""
    shorts = [short_name(n) for n in names]
    groups: dict[str, list[str]] = {}
    for name, short in zip(names, shorts, strict=True):
        members = groups.setdefault(short, [])
        if name not in members:
            members.append(name)
    label_of: dict[str, str] = {}
    for short, members in groups.items():
        if len(members) == 1:
            label_of[members[0]] = cut(short)
            continue
        for name, tokens in zip(members, _differing_tokens(members), strict=True):
            shown = ", ".join(_distinct(tokens)[:MAX_TOKENS]) if tokens else "?"
            label_of[name] = cut(f"{short}<…{shown}…>")
        _number_duplicates(members, label_of)
    return [label_of[n] for n in names]


def _tokens(name: str) -> list[str]:
    """Identifier and number tokens of the template arguments of ``name`` (the whole name
    when it has none); each namespace of a qualified name is a token of its own."""
    return [t for t in _TOKEN.findall(first_template_arguments(name)) if t.isdigit() or len(t) > 2]


def first_template_arguments(name: str) -> str:
    """The first top-level ``<...>`` of ``name`` (the kernel's own template arguments;
    the parameter list that repeats them is left out), or ``name`` when there is none."""
    start = name.find("<")
    if start < 0:
        return name
    depth = 0
    for i in range(start, len(name)):
        depth += {"<": 1, ">": -1}.get(name[i], 0)
        if depth == 0:
            return name[start:i + 1]
    return name[start:]


def _shown(token: str, other: str) -> str:
    """``token`` without the prefix it shares with ``other`` (when that is long):
    ``…WarpSpecializedCooperative`` against ``…WarpSpecializedPingpong`` is ``Cooperative``."""
    k = 0
    while k < min(len(token), len(other)) and token[k] == other[k]:
        k += 1
    return token[k:] if k >= 6 and k < len(token) else token


def _changes(ref: list[str], tokens: list[str]) -> list[tuple[int, int, int, int]]:
    """The ranges ``(i1, i2, j1, j2)`` where ``tokens`` differ from ``ref``: position by
    position when both have as many tokens (one template with other arguments), else as
    :class:`difflib.SequenceMatcher` aligns them."""
    if len(ref) == len(tokens):
        return [(i, i + 1, i, i + 1) for i, (a, b) in enumerate(zip(ref, tokens, strict=True))
                if a != b]
    matcher = SequenceMatcher(None, ref, tokens, autojunk=False)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _differing_tokens(members: list[str]) -> list[list[str]]:
    """For each member, its tokens where it differs from the first member (the first
    member: its tokens wherever any other member differs from it)."""
    ref = _tokens(members[0])
    ref_shown: dict[int, str] = {}
    out: list[list[str]] = [[]]
    for name in members[1:]:
        tokens = _tokens(name)
        mine: list[str] = []
        for i1, i2, j1, j2 in _changes(ref, tokens):
            paired = i2 - i1 == j2 - j1
            for k in range(i1, i2):
                other = tokens[j1 + k - i1] if paired else ""
                ref_shown.setdefault(k, _shown(ref[k], other))
            mine.extend(_shown(tokens[j], ref[i1 + j - j1] if paired else "")
                        for j in range(j1, j2))
        out.append(mine)
    out[0] = [ref_shown[i] for i in sorted(ref_shown)]
    return out


def _distinct(tokens: list[str]) -> list[str]:
    """``tokens`` with repeated identifiers and common namespaces dropped (numbers all
    kept: a tile 128x128)."""
    seen: set[str] = set(_NAMESPACES)
    out = []
    for t in tokens:
        if t.isdigit() or t not in seen:
            out.append(t)
            seen.add(t)
    return out


def _number_duplicates(members: list[str], label_of: dict[str, str]) -> None:
    """Append ``#k`` to labels that still collide (differences past MAX_TOKENS)."""
    seen: dict[str, int] = {}
    for name in members:
        label = label_of[name]
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label_of[name] = f"{label} #{seen[label]}"


def graph_replayed_work(rt: RankTrace) -> np.ndarray:
    """For each row of :func:`gpu_work` (the same rows, in the same order): whether a
    CUDA/HIP graph launch enqueued it (:func:`hta.model.links.graph_replayed`)."""
    rows = np.flatnonzero(rank_work_class(rt) >= 0)
    launch = link(rt, "index_correlation")
    return graph_replayed(rt.symbols, rt.column("name"), launch)[rows]


def fmt_at(rt: RankTrace, ts: int) -> str:
    """``12.345 ms`` into the trace: ``ts`` from the rank's first event, as Perfetto and
    chrome://tracing show a trace's timeline."""
    first = int(rt.events["ts"].min()) if len(rt.events) else 0
    return f"{(int(ts) - first) / 1e6:,.3f} ms"


def _totals(ids: np.ndarray, weights: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct ids, and per id its count and total weight."""
    uniq, inverse = np.unique(ids, return_inverse=True)
    inverse = inverse.reshape(-1)
    return (uniq, np.bincount(inverse, minlength=uniq.size),
            np.bincount(inverse, weights=weights, minlength=uniq.size))


def label_times(rt: RankTrace, ids: np.ndarray, weights: np.ndarray, n: int = 3
                ) -> list[tuple[int, str, int, float]]:
    """The ``n`` kernel names (symbol ids) with the largest total weight, as
    ``(id, label, count, weight)``; labels tell apart names sharing a short name."""
    uniq, count, total = _totals(ids, weights)
    top = sorted(range(uniq.size), key=lambda i: (-total[i], int(uniq[i])))[:n]
    labels = kernel_labels([rt.symbols[int(uniq[i])] for i in top])
    return [(int(uniq[i]), label, int(count[i]), float(total[i]))
            for i, label in zip(top, labels, strict=True)]


def top_labels(rt: RankTrace, ids: np.ndarray, weights: np.ndarray, n: int = 3) -> str:
    """``label ×count (time)`` of the ``n`` kernel names with the largest total weight."""
    return ", ".join(f"{label} ×{c} ({fmt_time(t)})"
                     for _, label, c, t in label_times(rt, ids, weights, n))


def in_steps(rt: RankTrace, iteration: np.ndarray, ts: np.ndarray,
             iterations: Sequence[int] | None, window: tuple[int, int]) -> np.ndarray:
    """GPU rows that belong to the analysis: with ``iterations``, those of the selected
    steps; without, those of any step plus those starting in the window. Rows are picked by
    the step of their launch (the ``iteration`` column), as the kernel tables do, so the
    kernels a step launched count even when the GPU runs them after the step's span."""
    if iterations is not None:
        return np.isin(iteration, list(iterations))
    steps = step_numbers(rt)
    return np.isin(iteration, steps) | ((ts >= window[0]) & (ts < window[1]))


@dataclass(frozen=True)
class Kernels:
    """The compute kernels of the analysis (:func:`compute_kernels`): event rows, start,
    duration, step, name id, launching operator row (-1 none), and the compute time they
    sum to."""

    rows: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    step: np.ndarray
    ids: np.ndarray
    ops: np.ndarray
    total: int


def claimed_rows(rt: RankTrace, key: str,
                 pick: Callable[[RankTrace, Kernels], np.ndarray]) -> np.ndarray:
    """The compute-kernel rows of the rank's whole analysed window that ``pick`` selects (a
    mask over :func:`compute_kernels`), read-only: what a rule claims, which
    ``ops_below_roof`` leaves to it. Computed once per rank, under ``key``."""
    def rows() -> np.ndarray:
        k = compute_kernels(rt, None, analysis_window(rt, None))
        out = k.rows[pick(rt, k)]
        out.setflags(write=False)
        return out

    return derived(rt, key, rows)


def kernel_blocks(rt: RankTrace) -> np.ndarray:
    """Per event row: its kernel's grid in blocks (``grid`` of the ``kernel_args`` side
    table, the product of its three sizes), NaN where unknown. Computed once per rank."""
    return derived(rt, "findings.kernel_blocks", lambda: _kernel_blocks(rt))


def _kernel_blocks(rt: RankTrace) -> np.ndarray:
    blocks = np.full(len(rt.events), np.nan)
    args, pos = rt.side_rows("kernel_args")
    if len(args):
        ok = pos >= 0
        # each column read alone: selecting the three makes a frame first
        x, y, z = (args[c].to_numpy(dtype=float)[ok] for c in ("grid_x", "grid_y", "grid_z"))
        blocks[pos[ok]] = np.where((x > 0) & (y > 0) & (z > 0), x * y * z, np.nan)
    blocks.setflags(write=False)
    return blocks


def compute_kernels(rt: RankTrace, iterations: Sequence[int] | None,
                    window: tuple[int, int]) -> Kernels:
    """The compute kernels (kind ``computation``) of the analysis (:func:`in_steps`),
    found once per rank, steps and window (a dozen rules read them; the arrays are
    read-only)."""
    def find() -> tuple[np.ndarray, ...]:
        rows = np.flatnonzero(rt.kind_codes() == _COMPUTATION)
        ts, end = rt.column("ts")[rows], rt.column("end")[rows]
        step = rt.column("iteration")[rows]
        sel = in_steps(rt, step, ts, iterations, window)
        rows, ts, dur, step = rows[sel], ts[sel], (end - ts)[sel], step[sel]
        return rows, ts, dur, step, rt.column("name")[rows], link(rt, "op_index")[rows]

    steps = None if iterations is None else tuple(iterations)
    rows, ts, dur, step, ids, ops = derived(
        rt, ("findings.compute_kernels", steps, tuple(window)), find)
    return Kernels(rows, ts, dur, step, ids, ops, int(dur.sum()))


def top_names(rt: RankTrace, ids: np.ndarray, weights: np.ndarray, n: int = 3,
              with_time: bool = True) -> str:
    """``name ×count (time)`` of the ``n`` short names with the largest total weight."""
    uniq, count, total = _totals(ids, weights)
    by_short: dict[str, list[float]] = {}
    for i, c, t in zip(uniq.tolist(), count.tolist(), total.tolist(), strict=True):
        acc = by_short.setdefault(short_name(rt.symbols[i]), [0, 0.0])
        acc[0] += c
        acc[1] += t
    top = sorted(by_short.items(), key=lambda kv: (-kv[1][1], kv[0]))[:n]
    if not with_time:
        return ", ".join(f"{name} ×{int(c)}" for name, (c, _) in top)
    return ", ".join(f"{name} ×{int(c)} ({fmt_time(t)})" for name, (c, t) in top)
