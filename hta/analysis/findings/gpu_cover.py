"""What holds the GPU, as intervals the findings share: its work, the spans of graph
replays (traces often hold only some of a replayed graph's kernels), and which copy calls
block the host. Below the rules (:mod:`.sync`, :mod:`.warmup`, :mod:`.hostbound` and
:mod:`.host` use it), so that they can use each other without import circles."""

from __future__ import annotations

import re

import numpy as np

from hta.analysis.findings.events import link
from hta.analysis.findings.rule_tools import name_matches, runs_compiled
from hta.analysis.intervals import Cover
from hta.analysis.perf.calls import gpu_rows
from hta.model.arrays import distinct
from hta.model.derived import derived
from hta.model.links import GRAPH_LAUNCH
from hta.model.trace import RankTrace

#: Synchronous copy calls (``runtime_launch`` in the kind rules): no ``Async`` in the name.
BLOCKING_COPY = re.compile(r"^(cuda|cu|hip)Memcpy(?!\w*Async)\w*$")
_NEVER = np.iinfo(np.int64).min // 4


def graph_spans(rt: RankTrace, g: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(start, end)`` of each graph replay: from the first to the last end of the GPU work
    one graph launch enqueued (``g``: the rank's GPU rows, when the caller has them).
    Traces often hold only some of a replayed graph's kernels, so the gaps inside that
    span are not taken as idle."""
    g = gpu_rows(rt) if g is None else g
    launch = link(rt, "index_correlation")[g]
    ok = launch >= 0
    g, launch = g[ok], launch[ok]
    graph = name_matches(rt, launch, GRAPH_LAUNCH)
    if not graph.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    g, launch = g[graph], launch[graph]
    ids, inverse = np.unique(launch, return_inverse=True)
    inverse = inverse.reshape(-1)
    start = np.full(ids.size, np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(ids.size, _NEVER, dtype=np.int64)
    np.minimum.at(start, inverse, rt.column("ts")[g])
    np.maximum.at(end, inverse, rt.column("end")[g])
    return start, end


def graph_launches(rt: RankTrace) -> int:
    """How many graph launches (``cudaGraphLaunch``, ``hipGraphLaunch``, ...) enqueued GPU
    work the trace holds: the rank already replays CUDA/HIP graphs (captured by hand, or
    by ``torch.compile(mode="reduce-overhead")``'s cudagraph trees); computed once per
    rank."""
    return derived(rt, "findings.graph_launches", lambda: _graph_launches(rt))


def _graph_launches(rt: RankTrace) -> int:
    launch = link(rt, "index_correlation")[gpu_rows(rt)]
    launch = launch[launch >= 0]
    return int(distinct(launch[name_matches(rt, launch, GRAPH_LAUNCH)]).size)


#: The host-side advice for a rank that already replays graphs (in place of "capture the
#: step in a CUDA graph").
GRAPHED_HOST_ADVICE = (
    "This rank already replays CUDA/HIP graphs ({n} graph launches): the host time left "
    "runs outside them. Find what stays out of the graphs: graph breaks "
    "(TORCH_LOGS=graph_breaks), partitions torch.compile did not graph "
    "(TORCH_LOGS=perf_hints says 'skipping cudagraphs due to ...': CPU tensors, mutated "
    "inputs, dynamic shapes), and the Python around the compiled call (input preparation, "
    "sampling, logging, bookkeeping); bring it into the graph or move it off the step, "
    "and give each replay more work (a larger batch).")


#: The host-side advice for a rank that runs compiled code (in place of "fuse with
#: torch.compile").
COMPILED_HOST_ADVICE = (
    "The code already runs compiled (torch.compile): the host time left is outside the "
    "compiled regions or in the Python around them. Remove graph breaks "
    "(TORCH_LOGS=graph_breaks) so that more of the step runs compiled, replay the compiled "
    "code as CUDA graphs (mode='reduce-overhead'), move per-step Python work (logging, "
    "bookkeeping, input preparation) off the step, and give each step more work (a "
    "larger batch).")


def graph_aware(rt: RankTrace, advice: str) -> str:
    """``advice``, or :data:`GRAPHED_HOST_ADVICE` where it tells to capture CUDA graphs and
    the rank already replays them, or :data:`COMPILED_HOST_ADVICE` where it tells to use
    ``torch.compile`` and the rank runs compiled code."""
    if "CUDA graph" in advice:
        n = graph_launches(rt)
        if n:
            return GRAPHED_HOST_ADVICE.format(n=n)
    if "torch.compile" in advice and runs_compiled(rt):
        return COMPILED_HOST_ADVICE
    return advice


def idle_cover(rt: RankTrace, dl: Cover, g: np.ndarray | None = None) -> Cover:
    """What does not count as GPU idle: GPU work (rows ``g``, found when not given), graph
    replay spans and the data-loader spans ``dl``."""
    g = gpu_rows(rt) if g is None else g
    spans = graph_spans(rt, g)
    return Cover(np.concatenate([rt.column("ts")[g], dl.s, spans[0]]),
                 np.concatenate([rt.column("end")[g], dl.e, spans[1]]))


__all__ = ["BLOCKING_COPY", "COMPILED_HOST_ADVICE", "GRAPHED_HOST_ADVICE", "graph_aware",
           "graph_launches", "graph_spans", "idle_cover"]
