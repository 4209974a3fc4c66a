"""The ``optimizer_passes`` finding: an unfused optimizer taking a large share of the GPU
time, passing over the parameters and their state once per operation of its update.

**Optimizer kernels.** The compute kernels of the analysis launched inside the optimizer's
step: under an event named ``Optimizer.step#<Class>.step`` (:data:`OPTIMIZER_STEP`, the
label ``torch.optim`` records around ``step()``), found up the launching operator's
parents. On a rank with no such label (an optimizer called outside ``torch.optim``'s
``step``, or a trace recorded without it), the kernels of multi-tensor operators
(``aten::_foreach_*``) stand for it: no other common code runs them over every parameter
each step (gradient clipping and zeroing run one or two).

**Implementation**, from the operators that launched them, weighted by kernel time:
``fused`` when they are the fused optimizers' operators (``_fused_adam_``,
``_fused_adamw_``, ``_fused_sgd_``, ``_fused_adagrad_``: :data:`FUSED_OP`), ``foreach``
when they are multi-tensor operators (``_foreach_*``), ``for-loop`` otherwise (one kernel
per operation and parameter). A fused optimizer reads each parameter, its gradient and its
state once and writes them once. The two others run one kernel per operation of the
update (Adam: about seven), each reading its operands from memory and writing its result
back, so the same bytes move several times.

**Fires** when the unfused optimizer's kernels take at least :data:`MIN_SHARE` (15 %) of
the compute kernel time. A fused optimizer is left alone: what its time costs is the size
of the state, which the trace does not show.

**Saving**: :data:`FUSED_SAVES` (3/8) of the optimizer kernels' time (GPU time, not
replayed). Fusing removes the passes over memory that the operations repeat: SGD with
momentum makes 8 tensor passes a parameter in its foreach form against 5 fused (3/8 less),
Adam about 16 against 7 (9/16 less); the finding takes the smaller share. The
``fused-optimizer`` change of the replay moves the launches only, not the passes, so it is
not this finding's replay. When the backward pass computes dense gradients of embedding
tables (``aten::embedding_dense_backward``), the advice also names sparse gradients, with
which the optimizer updates only the rows a batch used.
"""

from __future__ import annotations

import re

import numpy as np

from hta.analysis.findings.base import Finding, FindingRule, analysis_window
from hta.analysis.findings.claims import Claim
from hta.analysis.findings.kernel_common import (
    Kernels,
    claimed_rows,
    compute_kernels,
    fmt_at,
)
from hta.analysis.findings.rule_tools import (
    fmt_time,
    name_matches,
    step_text,
    step_tuple,
    steps_text,
    within_named,
)
from hta.model.derived import derived
from hta.model.rules import KIND_CODE, codes_in
from hta.model.trace import RankTrace

#: The optimizer's step, as ``torch.optim`` labels it (``Optimizer.step#AdamW.step``).
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
#: The fused optimizers' operators.
FUSED_OP = re.compile(r"^aten::_fused_\w+")
#: The multi-tensor (foreach) operators.
FOREACH_OP = re.compile(r"^aten::_foreach_\w+")
#: Dense gradients of embedding tables.
DENSE_EMBEDDING_GRAD = re.compile(r"^aten::embedding_dense_backward$")
#: Least share of the compute kernel time in the unfused optimizer's kernels.
MIN_SHARE = 0.15
#: Share of the unfused optimizer's kernel time that fusing saves (module docstring).
FUSED_SAVES = 3 / 8
_CPU_OP = KIND_CODE["cpu_op"]
_CALLERS = np.array([KIND_CODE["cpu_op"], KIND_CODE["user_annotation"]], dtype=np.int64)


def optimizer_kernels(rt: RankTrace, k: Kernels) -> np.ndarray:
    """Per kernel of ``k``: whether it was launched inside the optimizer's step (or, on a
    rank without the optimizer's label, by a multi-tensor operator: module docstring)."""
    if k.rows.size == 0:
        return np.zeros(0, dtype=bool)
    if labelled(rt):
        return within_named(rt, k.ops, OPTIMIZER_STEP)
    return within_named(rt, k.ops, FOREACH_OP)


def labelled(rt: RankTrace) -> bool:
    """Whether the rank records ``torch.optim``'s ``Optimizer.step#...`` label."""
    return derived(rt, "findings.optimizer_labelled", lambda: bool(
        name_matches(rt, np.flatnonzero(codes_in(rt.kind_codes(), _CALLERS)),
                     OPTIMIZER_STEP).any()))


def implementation(rt: RankTrace, k: Kernels, hit: np.ndarray) -> str:
    """``fused``, ``foreach`` or ``for-loop``: the kind of the operators that launched most
    of the optimizer kernels' time (module docstring)."""
    ops, dur = k.ops[hit], k.dur[hit]
    has = ops >= 0
    fused = np.zeros(ops.size, dtype=bool)
    foreach = np.zeros(ops.size, dtype=bool)
    fused[has] = name_matches(rt, ops[has], FUSED_OP)
    foreach[has] = name_matches(rt, ops[has], FOREACH_OP)
    times = {"fused": int(dur[fused].sum()), "foreach": int(dur[foreach & ~fused].sum()),
             "for-loop": int(dur[~fused & ~foreach].sum())}
    return max(times, key=lambda kind: times[kind])


def unfused_optimizer_kernels(rt: RankTrace) -> np.ndarray:
    """The kernel rows this rule claims on the rank's whole analysed window (an unfused
    optimizer's, when the rule fires there; what ``ops_below_roof`` leaves to it).
    Computed once per rank."""
    return claimed_rows(rt, "findings.optimizer_passes", _claimed)


def _claimed(rt: RankTrace, k: Kernels) -> np.ndarray:
    hit = optimizer_kernels(rt, k)
    return hit if _fires(rt, k, hit) else np.zeros_like(hit)


def _fires(rt: RankTrace, k: Kernels, hit: np.ndarray) -> bool:
    time = int(k.dur[hit].sum())
    return (k.total > 0 and time > 0 and time >= MIN_SHARE * k.total
            and implementation(rt, k, hit) != "fused")


def check_optimizer(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``optimizer_passes`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    k = compute_kernels(rt, iterations, window)
    hit = optimizer_kernels(rt, k)
    if not _fires(rt, k, hit):
        return []
    kind = implementation(rt, k, hit)
    time = int(k.dur[hit].sum())
    saving = int(FUSED_SAVES * time)
    dur, ts, step = k.dur[hit], k.ts[hit], k.step[hit]
    steps = step_tuple(step)
    per_step = f", {fmt_time(time / len(steps))} a step" if len(steps) > 1 else ""
    first = int(np.argmin(ts))
    what = (f"The {_optimizer_names(rt, window)} step" if labelled(rt) else
            "Multi-tensor operators (aten::_foreach_*, an optimizer's update run outside "
            "torch.optim's Optimizer.step label)")
    evidence = (
        f"{what} ({kind}: {_kind_text(kind)}) launched "
        f"{int(hit.sum())} kernels that ran {fmt_time(time)}{per_step}, "
        f"{100 * time / k.total:.1f}% of the compute kernel time in "
        f"{steps_text(rt, step)} (the first at {fmt_at(rt, int(ts[first]))}, "
        f"{step_text(rt, int(step[first]))}). A fused optimizer passes over the parameters "
        f"and their state once: at least {FUSED_SAVES:.0%} of that time less "
        f"({fmt_time(saving)}).")
    advice = ADVICE
    if _dense_embedding_grads(rt, window):
        evidence += (" The backward pass computes dense gradients of embedding tables "
                     "(aten::embedding_dense_backward), so the optimizer updates every row "
                     "of every table each step.")
        advice = ADVICE + " " + EMBEDDING_ADVICE
    return [Finding((rt.rank,), steps, evidence, saving, window[1] - window[0],
                    advice=advice, claim=Claim(ts, ts + dur, FUSED_SAVES * dur))]


def _kind_text(kind: str) -> str:
    return {"foreach": "one multi-tensor kernel per operation and group of parameters",
            "for-loop": "one kernel per operation and parameter"}[kind]


def _optimizer_names(rt: RankTrace, window: tuple[int, int]) -> str:
    """``Adam``, ``SGD and Adam``: the classes of the optimizer steps in ``window``."""
    labels = np.flatnonzero((rt.column("ts") >= window[0])
                            & (rt.column("ts") < window[1]))
    labels = labels[name_matches(rt, labels, OPTIMIZER_STEP)]
    names = sorted({str(rt.symbols[i]).split("#", 1)[1].split(".", 1)[0]
                    for i in rt.column("name")[labels].tolist()})
    return " and ".join(names) + " optimizer" if names else "optimizer"


def _dense_embedding_grads(rt: RankTrace, window: tuple[int, int]) -> bool:
    ts = rt.column("ts")
    rows = np.flatnonzero((rt.kind_codes() == _CPU_OP) & (ts >= window[0])
                          & (ts < window[1]))
    return bool(rows.size) and bool(name_matches(rt, rows, DENSE_EMBEDDING_GRAD).any())


ADVICE = (
    "Use the fused implementation of the optimizer, which updates each parameter and its "
    "state in one kernel: torch.optim.Adam(..., fused=True) (also AdamW, SGD and Adagrad; "
    "parameters on the GPU in floating point), or torch.compile the optimizer step. "
    "Lower-precision optimizer states (8-bit Adam, bf16 states) or sharding the state "
    "across ranks (ZeRO, FSDP) cut the bytes each step moves further.")

EMBEDDING_ADVICE = (
    "Most of those bytes are likely the embedding tables: with sparse gradients "
    "(nn.Embedding(..., sparse=True) or nn.EmbeddingBag(..., sparse=True) with "
    "torch.optim.SparseAdam or Adagrad for those parameters) the optimizer updates only "
    "the rows the batch used.")

RULES: list[FindingRule] = [
    FindingRule(
        id="optimizer_passes",
        title="Unfused optimizer passes over the parameters many times",
        section="kernels",
        advice=ADVICE,
        saving=("3/8 of the time of the kernels launched inside an unfused (foreach or "
                "for-loop) optimizer step, the least a fused optimizer saves in passes "
                "over memory (GPU time, not replayed)."),
        check=check_optimizer,
    ),
]
