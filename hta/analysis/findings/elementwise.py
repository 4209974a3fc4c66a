"""The ``elementwise_chains`` finding: chains of eager elementwise kernels over large
tensors, each reading and writing the whole tensor where one fused kernel would do it once.

**Elementwise kernels.** A compute kernel of the analysis whose name is one of PyTorch's
eager elementwise or reduction templates (:data:`ELEMENTWISE`: ``vectorized_elementwise_
kernel``, ``unrolled_elementwise_kernel``, ``elementwise_kernel``, ``reduce_kernel``; the
same names in ROCm builds) and that runs at least :data:`MIN_KERNEL_NS` (20 µs: a large
tensor; shorter ones are the fixed cost ``small_kernels`` names). Compiled code (Triton,
``fused_*``) has other names: it is fused already.

**Chains.** On each stream, in start order, a run of at least :data:`MIN_CHAIN` (3) such
kernels with no other compute kernel between them, each over as many blocks as the one
before it where the trace records grids (one tensor size), launched by two or more
operators (one operator again and again is a loop over tensors), is a chain: what a
chain of operators such as ``x.div(s).pow(2).mul(c).exp()`` runs in eager mode, each
kernel reading its input from memory and writing its output back.

**Saving.** Fused, a chain reads its inputs and writes its output once: it takes about as
long as its longest kernel, so the saving is the chain's time less its longest kernel's,
summed over the chains of the analysed steps (GPU time: which kernels fuse and how long
the fused kernel runs are not in the trace, so it is not replayed). The rule fires when
the chains take at least :data:`MIN_SHARE` (10%) of the compute kernel time. Chained
kernels are this rule's: ``ops_below_roof`` leaves them to it
(:func:`hta.analysis.findings.fusion.fused_away`).
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
    kernel_blocks,
)
from hta.analysis.findings.rule_tools import (
    COMPILED_CALL,
    fmt_time,
    name_matches,
    step_text,
    step_tuple,
    steps_text,
    within_named,
)
from hta.model.trace import RankTrace

#: PyTorch's eager elementwise and reduction kernel templates.
ELEMENTWISE = re.compile(r"(?<![A-Za-z_])(vectorized_elementwise_kernel"
                         r"|unrolled_elementwise_kernel|elementwise_kernel|reduce_kernel)\b")
#: Shortest kernel of a chain (ns).
MIN_KERNEL_NS = 20_000
#: Fewest kernels in a chain.
MIN_CHAIN = 3
#: Least share of the compute kernel time in chains for the rule to fire.
MIN_SHARE = 0.10


def chains(rt: RankTrace, k: Kernels) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel of ``k``: the chain it belongs to (-1 none), and whether it is its
    chain's longest kernel (module docstring)."""
    n = k.rows.size
    chain = np.full(n, -1, dtype=np.int64)
    longest = np.zeros(n, dtype=bool)
    if n == 0:
        return chain, longest
    link_ok = (k.dur >= MIN_KERNEL_NS) & name_matches(rt, k.rows, ELEMENTWISE)
    if link_ok.sum() < MIN_CHAIN:
        return chain, longest
    stream = rt.column("stream")[k.rows]
    order = np.lexsort((k.ts, stream))
    ok, st, gr = link_ok[order], stream[order], kernel_blocks(rt)[k.rows][order]
    # a run starts at each link that follows a non-link, starts a new stream, or covers
    # another number of blocks (another tensor size) than the link before it
    same_grid = (gr[1:] == gr[:-1]) | np.isnan(gr[1:]) | np.isnan(gr[:-1])
    new = ok & ~np.r_[False, ok[:-1] & (st[1:] == st[:-1]) & same_grid]
    run = np.where(ok, np.cumsum(new) - 1, -1)
    n_runs = int(new.sum())
    size = np.bincount(run[ok], minlength=n_runs)
    # and its kernels come from two or more operators (one operator again and again is a
    # loop over tensors, not a chain over one)
    op_name = np.where(k.ops >= 0, rt.column("name")[np.maximum(k.ops, 0)], -1)[order]
    pairs = np.unique(np.stack([run[ok], op_name[ok]]), axis=1)
    kinds = np.bincount(pairs[0], minlength=n_runs)
    keep = (size >= MIN_CHAIN) & (kinds >= 2)
    kept = order[ok & keep[np.maximum(run, 0)]]
    if kept.size == 0:
        return chain, longest
    ids = np.unique(run[np.argsort(order)][kept], return_inverse=True)[1].reshape(-1)
    chain[kept] = ids
    by = np.lexsort((-k.dur[kept], ids))  # per chain, its longest kernel first
    first = np.r_[True, ids[by][1:] != ids[by][:-1]]
    longest[kept[by][first]] = True
    return chain, longest


def chained_kernels(rt: RankTrace) -> np.ndarray:
    """The kernel rows in chains on the rank's whole analysed window (what
    ``ops_below_roof`` leaves to this rule). Computed once per rank."""
    return claimed_rows(rt, "findings.elementwise_chains", lambda r, k: chains(r, k)[0] >= 0)


def check_chains(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``elementwise_chains`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    k = compute_kernels(rt, iterations, window)
    if k.total <= 0:
        return []
    chain, longest = chains(rt, k)
    inside = chain >= 0
    time = int(k.dur[inside].sum())
    if time < MIN_SHARE * k.total:
        return []
    saved = inside & ~longest
    saving = int(k.dur[saved].sum())
    if saving <= 0:
        return []
    n_chains = int(chain.max()) + 1
    per_chain = np.bincount(chain[inside], weights=k.dur[inside], minlength=n_chains)
    top = int(np.argmax(per_chain))
    members = np.flatnonzero(chain == top)
    members = members[np.argsort(k.ts[members], kind="stable")]
    evidence = (
        f"{n_chains} chain{'s' if n_chains > 1 else ''} of eager elementwise kernels "
        f"({int(inside.sum())} kernels of "
        f"{fmt_time(MIN_KERNEL_NS)} or more, at least {MIN_CHAIN} in a row on their stream "
        f"with no other compute kernel between) ran {fmt_time(time)}, "
        f"{100 * time / k.total:.1f}% of the compute kernel time in "
        f"{steps_text(rt, k.step[inside])}. The longest chain: {_ops_text(rt, k, members)} "
        f"({members.size} kernels, {fmt_time(int(per_chain[top]))}) at "
        f"{fmt_at(rt, int(k.ts[members[0]]))}, {step_text(rt, int(k.step[members[0]]))}. "
        f"Fused, a chain runs about as long as its longest kernel: "
        f"{fmt_time(saving)} less (kernels table).")
    compiled = within_named(rt, k.ops[inside], COMPILED_CALL)
    advice = ADVICE
    if 2 * int(k.dur[inside][compiled].sum()) >= time:
        evidence += (f" {100 * int(k.dur[inside][compiled].sum()) / time:.0f}% of that time "
                     "runs inside torch.compile'd functions (CompiledFunction), as eager "
                     "kernels.")
        advice = COMPILED_ADVICE
    return [Finding((rt.rank,), step_tuple(k.step[inside]), evidence, saving,
                    window[1] - window[0], advice=advice,
                    claim=Claim(k.ts[saved], k.ts[saved] + k.dur[saved], None))]


def _ops_text(rt: RankTrace, k: Kernels, members: np.ndarray, most: int = 8) -> str:
    """The operators that launched a chain's kernels, in order (``a -> b -> c``)."""
    names = []
    for i in members[:most].tolist():
        op = int(k.ops[i])
        names.append(str(rt.symbols[int(rt.column("name")[op])]) if op >= 0
                     else "(no operator)")
    more = f" -> ... ({members.size - most} more)" if members.size > most else ""
    return " -> ".join(names) + more


ADVICE = (
    "Each operator of these chains reads a whole tensor from GPU memory and writes its "
    "result back, so a chain of n operators moves the data n times. Fuse each chain into "
    "one kernel that reads its inputs once: torch.compile the function or module that "
    "holds it (its kernels become one Triton kernel), write it as one Triton kernel, or "
    "use the fused operator where one exists (torch.nn.functional.gelu or silu rather than "
    "their formulas, torch.addcmul, torch.lerp, torch.where). Lower precision (bf16) also "
    "halves the bytes each kernel moves.")

COMPILED_ADVICE = (
    "These chains run inside functions torch.compile compiled, yet as one eager kernel per "
    "operator: the compiled graph was not fused, as with backend='aot_eager' or 'eager' "
    "(debugging backends), or with operators Inductor fell back on. Compile with the "
    "default Inductor backend, which fuses such chains into one Triton kernel each, and "
    "check what it generated (TORCH_LOGS=output_code; TORCH_LOGS=graph_breaks for code "
    "left out of the graph).")

RULES: list[FindingRule] = [
    FindingRule(
        id="elementwise_chains",
        title="Chains of elementwise kernels not fused",
        section="kernels",
        advice=ADVICE,
        saving=("Per chain of eager elementwise kernels on a stream (3 or more, 20 µs or "
                "more each), its time less its longest kernel's: what one fused kernel "
                "saves (GPU time, not replayed)."),
        check=check_chains,
    ),
]
