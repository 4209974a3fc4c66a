"""Finding: operators far below their roofline.

``ops_below_roof``
    From :func:`hta.analysis.perf.op_performance.rank_op_performance` (one row per call
    that launched GPU work, with FLOPs and bytes from its recorded shapes and its % of the
    device's roof; graph-replayed calls found in the capture traces among them, where the
    capture is merged: :mod:`hta.analysis.perf.replayed`), the calls of the analysis
    (launched in a selected step; every call without ``iterations``) are grouped by
    operator, shapes and types. A group is *far below its roof* when its time-weighted
    ``pct_of_peak`` is under :data:`FAR_BELOW` (35%: half of the attainable fraction)
    and it ran at least :data:`MIN_TIME_NS` (100 µs).

    **Saving.** A well-tuned kernel reaches about :data:`ATTAINABLE` (70%) of its roof
    (cuBLAS/CUTLASS GEMMs of large shapes reach 70-80% of the tensor peak; streaming
    kernels 80-90% of the bandwidth), so a call of time ``t`` at ``p``% of its roof would
    take ``t · p / (100 · ATTAINABLE)`` at the attainable rate, but no less than 5 µs per
    kernel it launched (``SMALL_NS``: launch ramp and one wave; below it ``small_kernels``
    calls a kernel small); the group's saving is ``Σ max(0, t − max(t · p /
    (100 · ATTAINABLE), 5 µs · kernels))``. A kernel made faster shortens the step
    only where nothing else runs on the GPU, so the saving is capped at the group's
    *exposed* kernel time: the union of its kernels' intervals minus the time other GPU
    work (any stream of the rank) runs meanwhile.

    **Not claimed twice.** Calls whose kernels other rules claim are left out: any kernel
    under 5 µs (``small_kernels``), any kernel with fewer blocks than SMs (grid-bound,
    ``low_occupancy``), fp32 GEMMs and convolutions off the tensor cores (``fp32_gemm``),
    the BatchNorm kernels of a pass without backward and the score kernels of unfused
    attention (:func:`hta.analysis.findings.fusion.fused_away`).

    **No shapes.** Without ``Input Dims`` (``record_shapes=False``) no call has a model and
    the rule stays silent; :data:`SHAPES_NOTE` is the sentence that says so once (the
    summary and the report print it).

    At most :data:`MAX_FINDINGS` groups per rank, largest saving first; the evidence names
    the operator, its shapes and types, the calls' count, steps and first start, the
    achieved rate against the roof, and the device.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from hta.analysis.findings.base import Finding, FindingRule, analysis_window, link
from hta.analysis.findings.fusion import fused_away
from hta.analysis.findings.kernel_common import fp32_claimed
from hta.analysis.findings.kernels import SMALL_NS
from hta.analysis.findings.rule_tools import fmt_time, step_tuple, steps_text
from hta.analysis.intervals import Cover, merge
from hta.analysis.perf.calls import gpu_rows
from hta.analysis.perf.op_performance import op_frame, rank_op_columns
from hta.analysis.perf.replayed import first_rows, replayed_slots
from hta.model.arrays import distinct
from hta.model.trace import RankTrace

#: Fraction of the roof a well-tuned kernel reaches (the saving's target).
ATTAINABLE = 0.70
#: A group is far below its roof under this % of it (half the attainable fraction).
FAR_BELOW = 100 * ATTAINABLE / 2
#: Least GPU time of a group for a finding (ns).
MIN_TIME_NS = 100_000
#: Most findings per rank.
MAX_FINDINGS = 5
SHAPES_NOTE = ("Operator FLOPs and % of peak need the shapes: profile with "
               "torch.profiler.profile(record_shapes=True).")
_KEYS = ["op", "input_dims", "input_types"]


def _claimed_elsewhere(rt: RankTrace, rows: np.ndarray) -> np.ndarray:
    """Per GPU work row of ``rows``: whether another kernel rule claims it (module
    docstring)."""
    claimed = rt.column("dur")[rows] < SMALL_NS
    args, pos = rt.side_rows("kernel_args")
    if len(args) and "blocks_per_sm" in args:
        low = np.zeros(len(rt.events), dtype=bool)
        low[pos[(args["blocks_per_sm"].to_numpy(dtype=float) < 1) & (pos >= 0)]] = True
        claimed |= low[rows]
    claimed |= fp32_claimed(rt, rows)
    fused = np.zeros(len(rt.events), dtype=bool)
    fused[fused_away(rt)] = True
    return claimed | fused[rows]


def _kernels_of(rt: RankTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The GPU work rows launched by an operator call, that call's event ``index`` for
    each, and whether another rule claims it. A graph-replayed kernel counted with its
    captured call (a capture merge, :mod:`hta.analysis.perf.replayed`) is owned by that
    call, whose ``index`` in the operator table is its first kernel's: so every call of
    the table owns some of these rows."""
    rows = gpu_rows(rt)
    owner = link(rt, "op_index")[rows]
    slots = replayed_slots(rt, rows)
    if slots is not None and (slots >= 0).any():
        first = first_rows(rows, slots, int(slots.max()) + 1)
        owner = np.where(slots >= 0, first[np.clip(slots, 0, None)], owner)
    ok = owner >= 0
    rows, owner_index = rows[ok], rt.column("index")[owner[ok]]
    return rows, owner_index, _claimed_elsewhere(rt, rows)


def _candidates(calls: dict[str, np.ndarray]) -> np.ndarray:
    """Per call, whether its group (operator, shapes, types) can be far below its roof:
    the group has a call under the bar (:func:`_may_be_far_below`) and
    :data:`MIN_TIME_NS` of time in its calls (the group's pct is a time-weighted mean of
    its calls', so no other group can be). Calls with a missing key are in no group.
    ``calls``: operator table columns as arrays."""
    n = len(calls["pct_of_peak"])
    code = np.zeros(n, np.int64)
    ok = np.ones(n, dtype=bool)
    for k in _KEYS:
        c, uniq = pd.factorize(calls[k], sort=False)
        ok &= c >= 0
        code = code * (len(uniq) + 1) + c
    group = pd.factorize(code)[0]
    t = calls["kernel_time(us)"].astype(np.float64) * 1e3
    maybe = np.zeros(group.max() + 1 if len(group) else 0, dtype=bool)
    maybe[group[ok & _may_be_far_below(calls["pct_of_peak"].astype(np.float64))]] = True
    enough = np.bincount(group[ok], weights=t[ok], minlength=maybe.size) >= MIN_TIME_NS
    return ok & (maybe & enough)[group]


#: :func:`_groups`' summed columns (name: source column) and those taken from the
#: group's first call.
_SUMS = {"t_ns": "t_ns", "saving": "saving", "w": "w", "flops": "flops", "nbytes": "bytes"}
_FIRSTS = {"roof": "roof_tflops_per_s", "bound": "bound", "key": "peak_key",
           "device": "device", "category": "category"}


def _groups(calls: pd.DataFrame) -> pd.DataFrame:
    """Per (op, shapes, types), in order of first appearance: calls, time, saving at the
    attainable fraction, pct of roof; the groups far below their roof with enough time.

    The keys are factorised to one integer code (rows with a missing key are left out, as
    a groupby does) and the sums run in one groupby over that code (the same summation,
    so the same floats); the first call of each group gives the other columns (a groupby's
    ``first``, which skips missing values: used instead when any is missing)."""
    t = calls["kernel_time(us)"].to_numpy() * 1e3
    pct = calls["pct_of_peak"].to_numpy()
    floor = calls["kernels"].to_numpy() * float(SMALL_NS)
    target = np.maximum(t * pct / (100 * ATTAINABLE), floor)
    made = {"t_ns": t, "saving": np.clip(t - target, 0, None), "w": t * pct}
    sources = {c: made[c] if c in made else calls[c].to_numpy() for c in _SUMS.values()}
    if not len(calls) or any(v.dtype != np.float64 for v in sources.values()) or any(
            calls[c].isna().any() for c in _FIRSTS.values()):
        return _groups_by_pandas(calls.assign(**made))
    code = np.zeros(len(calls), np.int64)
    ok = np.ones(len(calls), dtype=bool)
    for k in _KEYS:
        c, uniq = pd.factorize(calls[k].to_numpy(), sort=False)
        ok &= c >= 0
        code = code * (len(uniq) + 1) + c
    rows = np.flatnonzero(ok)
    group, uniq = pd.factorize(code[rows], sort=False)
    first = rows[np.unique(group, return_index=True)[1]]
    # a group's pct is a time-weighted mean of its calls': only a group with a call under
    # the bar can be far below it (:func:`_may_be_far_below`), the others are not summed
    maybe = np.zeros(len(uniq), dtype=bool)
    maybe[group[_may_be_far_below(pct[rows])]] = True
    sub = maybe[group]
    summed_rows = rows[sub]
    sums = pd.DataFrame({c: v[summed_rows] for c, v in sources.items()}).groupby(
        group[sub], sort=False).sum()
    summed = {name: np.full(len(uniq), np.nan) for name in _SUMS}
    for name, src in _SUMS.items():
        summed[name][sums.index.to_numpy()] = sums[src].to_numpy()
    # only the groups far below their roof are made a table (most ranks have none)
    pct, far = _far_below_roof(summed["w"], summed["t_ns"])
    kept = np.flatnonzero(far)
    index = pd.RangeIndex(len(uniq))[kept]
    first = first[kept]
    # the keys as a groupby gives them back (its index infers their dtype)
    out = {k: pd.Series(calls[k].to_numpy()[first], index=index) for k in _KEYS}
    out["calls"] = pd.Series(np.bincount(group, minlength=len(uniq)).astype(np.int64)[kept],
                             index=index)
    for name in _SUMS:
        out[name] = pd.Series(summed[name][kept], index=index)
    for name, src in _FIRSTS.items():
        out[name] = pd.Series(calls[src].to_numpy()[first], dtype=calls[src].dtype,
                              index=index)
    out["pct"] = pd.Series(pct[kept], index=index)
    return pd.DataFrame(out)


def _groups_by_pandas(calls: pd.DataFrame) -> pd.DataFrame:
    """:func:`_groups` by a groupby on the key columns (``calls`` with ``t_ns``,
    ``saving`` and ``w``)."""
    g = calls.groupby(_KEYS, sort=False).agg(
        calls=("index", "size"), t_ns=("t_ns", "sum"), saving=("saving", "sum"),
        w=("w", "sum"), flops=("flops", "sum"), nbytes=("bytes", "sum"),
        roof=("roof_tflops_per_s", "first"), bound=("bound", "first"),
        key=("peak_key", "first"), device=("device", "first"),
        category=("category", "first")).reset_index()
    return _far_below(g)


def _far_below(g: pd.DataFrame) -> pd.DataFrame:
    g["pct"], far = _far_below_roof(g["w"].to_numpy(), g["t_ns"].to_numpy())
    return g[far]


def _may_be_far_below(pct: np.ndarray) -> np.ndarray:
    """Per call, whether its % of roof is under the bar (with a margin of a millionth for
    the rounding of the groups' weighted sums): a group none of whose calls is cannot be
    far below its roof, since its pct is their time-weighted mean."""
    return pct < FAR_BELOW * (1 + 1e-6)


def _far_below_roof(w: np.ndarray, t_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group, its % of roof (time-weighted, ``w / t_ns``) and whether it is far
    below the roof (:data:`FAR_BELOW`) with :data:`MIN_TIME_NS` of GPU time or more."""
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = w / t_ns
    return pct, (pct < FAR_BELOW) & (t_ns >= MIN_TIME_NS)


def _exposed(rt: RankTrace, rows: np.ndarray, others: Cover) -> int:
    """Union of these GPU rows' intervals minus the time other GPU work runs (ns)."""
    s, e = merge(rt.column("ts")[rows], rt.column("end")[rows])
    return int(((e - s) - others.within(s, e)).sum())


def check_ops_below_roof(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``ops_below_roof`` findings of one rank (module docstring)."""
    kernel_rows, owner, is_claimed = _kernels_of(rt)
    claimed = distinct(owner[is_claimed])
    free = np.setdiff1d(distinct(owner), claimed, assume_unique=True)
    if not free.size:
        return []  # every call has a kernel another rule claims
    # only the calls no other rule claims are modelled (most ranks have few): leaving
    # out a claimed call only shortens its group, whose pct is a time-weighted mean of its
    # calls', so the groups far below their roof are found among these calls alone
    columns = rank_op_columns(rt, free)
    judged = ~np.isnan(columns["pct_of_peak"].astype(np.float64))
    if iterations is not None:
        judged &= np.isin(columns["iteration"], iterations)
    columns = {k: v[judged] for k, v in columns.items()}
    judged = _candidates(columns)  # a table only for the groups that may be far below
    if not judged.any():
        return []  # most ranks
    calls = op_frame({k: v[judged] for k, v in columns.items()})
    groups = _groups(calls).sort_values("saving", ascending=False).head(MAX_FINDINGS)
    if not len(groups):
        return []
    window = analysis_window(rt, iterations)
    all_gpu = gpu_rows(rt)
    keys = [calls[k].to_numpy() for k in _KEYS]
    # what a group's evidence reads of its calls
    slim = calls[[c for c in ("index", "iteration", "captured") if c in calls]]
    found = []
    for g in groups.itertuples(index=False):
        members = slim[(keys[0] == g.op) & (keys[1] == g.input_dims)
                       & (keys[2] == g.input_types)]
        rows = kernel_rows[np.isin(owner, members["index"].to_numpy())]
        rest = np.setdiff1d(all_gpu, rows, assume_unique=True)
        others = Cover(rt.column("ts")[rest], rt.column("end")[rest])
        saving = min(int(g.saving), _exposed(rt, rows, others), window[1] - window[0])
        if saving <= 0:
            continue
        found.append(Finding((rt.rank,), step_tuple(members["iteration"].to_numpy()),
                             _evidence(rt, g, members, window), saving,
                             window[1] - window[0], subject=f"{g.op} {g.input_dims}",
                             advice=_advice(g)))
    return found


def _evidence(rt: RankTrace, g: object, members: pd.DataFrame, window: tuple[int, int]
              ) -> str:
    first = int(rt.column("ts")[int(members["index"].to_numpy()[0])])
    secs = g.t_ns / 1e9  # type: ignore[attr-defined]
    rate = (f"{g.flops / secs / 1e12:,.2f} TFLOP/s" if g.bound == "compute"  # type: ignore[attr-defined]
            else f"{g.nbytes / secs / 1e12:,.3f} TB/s")  # type: ignore[attr-defined]
    return (f"{g.op} {g.input_dims} ({g.input_types}) ran {g.calls} time(s) in "  # type: ignore[attr-defined]
            f"{steps_text(rt, members['iteration'].to_numpy())}, first at "
            f"+{fmt_time(first - window[0])} into the window, for {fmt_time(g.t_ns)} of "  # type: ignore[attr-defined]
            f"GPU time at {rate}: {g.pct:.1f}% of its {g.bound}-bound roof on the "  # type: ignore[attr-defined]
            f"{g.device} ({g.key}); at {100 * ATTAINABLE:.0f}% of the roof it would take "  # type: ignore[attr-defined]
            f"{fmt_time(g.t_ns - g.saving)} (operator performance table"  # type: ignore[attr-defined]
            + ("; graph-replayed calls, operator and shapes from the capture traces"
               if "captured" in members and members["captured"].any() else "") + ").")


#: Least sequence length for a square score matrix to be read as unfused attention.
SCORES_MIN_LEN = 256


def unfused_attention(dims: str) -> bool:
    """Whether the shapes read or make a batched square matrix of side >=
    :data:`SCORES_MIN_LEN`: the L×L score matrix of attention computed by separate
    bmm / softmax / bmm calls (an input [.., L, L], or a product [.., L, D] @ [.., D, L]
    with D < L)."""
    try:
        shapes = json.loads(dims) if dims else []
    except ValueError:
        return False
    batched = [s for s in shapes if isinstance(s, list) and len(s) >= 3
               and all(isinstance(d, int) for d in s)]
    if any(s[-1] == s[-2] >= SCORES_MIN_LEN for s in batched):
        return True
    return len(batched) >= 2 and (batched[0][-2] == batched[1][-1] >= SCORES_MIN_LEN
                                  and batched[0][-1] == batched[1][-2] < batched[0][-2])


#: Operators whose square [.., L, L] operand can be attention scores: products and softmax
#: (an elementwise op on a square map is as often an image's feature map).
SCORE_OPS = ("mm", "bmm", "matmul", "baddbmm", "softmax")


def _advice(g: object) -> str:
    cat, bound, dims = g.category, g.bound, g.input_dims  # type: ignore[attr-defined]
    op = str(g.op)  # type: ignore[attr-defined]
    if (cat in ("GEMM", "normalization", "elementwise") and unfused_attention(dims)
            and any(name in op for name in SCORE_OPS)):
        return ("These shapes hold an L×L attention score matrix: attention computed as "
                "bmm → softmax → bmm writes it to memory and reads it back. Use "
                "torch.nn.functional.scaled_dot_product_attention (flash or cuDNN backend), "
                "which never materialises it.")
    if cat == "attention" and op.startswith("aten::_"):
        rocm = str(g.device).startswith("MI")  # type: ignore[attr-defined]
        return ("The fused attention kernel runs well below the peak at these shapes: "
                "compare the SDPA backends on this shape (torch.nn.attention.sdpa_kernel: "
                "flash, efficient, cuDNN)"
                + ("; on ROCm, try the Composable Kernel or aiter flash-attention kernels"
                   if rocm else "")
                + "; keep the head dimension at 64 or 128, and pack short or ragged "
                "sequences into one call (variable-length batching).")
    if cat == "attention":
        return ("Use a fused attention kernel: scaled_dot_product_attention with a flash or "
                "cuDNN backend (torch.nn.attention.sdpa_kernel), head dim a multiple of 8.")
    if cat in ("GEMM", "MoE") and bound == "compute":
        # an fp32 key on a matrix product is the kernels' own fp32 math (SIMT or AMD
        # fp32 matrix cores: hta.analysis.perf.kernel_math), not the tensor cores
        peak = "fp32 peak of its kernels" if g.key == "fp32" else "tensor-core peak"  # type: ignore[attr-defined]
        return (f"This matrix product runs well below the {peak}: check that every "
                "dimension is a multiple of 16 (8 for fp16/bf16 on older parts), that the "
                "operands are contiguous, and try torch.compile(mode='max-autotune') or a "
                "larger batch to give the library a better tile.")
    if cat in ("GEMM", "MoE", "convolution"):
        return (f"The shapes {dims} give too little work per byte to fill the GPU: batch "
                "these products (bmm, grouped GEMM), fuse them with their neighbours "
                "(torch.compile), or grow the batch.")
    return ("This memory-bound operator moves its tensors well below the memory bandwidth: "
            "fuse it with the operators around it (torch.compile) so the data is read once, "
            "and check for non-contiguous inputs (a .contiguous() copy or strided access).")


RULES: list[FindingRule] = [
    FindingRule(
        id="ops_below_roof",
        title="Operators far below their roofline",
        section="hardware",
        advice="Give the operator more work per launch, fuse it, or fix its shapes.",
        saving=(f"Per operator and shapes, the time above what its calls would take at "
                f"{100 * ATTAINABLE:.0f}% of their roof (compute peak or memory bandwidth), "
                "capped at the time its kernels run with no other GPU work; only groups "
                f"under {FAR_BELOW:.0f}% of their roof, with shapes recorded."),
        check=check_ops_below_roof,
    ),
]
