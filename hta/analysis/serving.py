"""Iterations of a serving engine: one row per engine step (vLLM's ``execute_model``,
SGLang's batch step, or a repeated graph launch), with its kind, time and GPU time.

**Finding the iterations** (per rank, the first rule that finds any):

1. ``annotation``: ``user_annotation`` ranges named as the engines' profilers name a step:
   vLLM's ``execute_<tokens>_context_<c>(...)_generation_<g>(...)`` (``c`` requests in
   prefill, ``g`` in decode: kind ``prefill`` when only ``c > 0``, ``decode`` when only
   ``g > 0``, ``mixed`` when both; batch ``c + g``, tokens ``<tokens>``) and SGLang's
   ``step[DECODE bs=N]`` / ``step[EXTEND bs=N toks=T]`` (``DECODE`` decode, ``EXTEND``
   or ``PREFILL`` prefill, ``MIXED`` mixed; batch ``N``, tokens ``T``). Where both name
   one step (SGLang traces carry both), the vLLM form is used;
2. ``execute_model``: ``python_function`` ranges whose name ends in ``: execute_model``
   (vLLM's model runner), kind ``""`` (the trace does not say);
3. ``graph launch``: each ``cudaGraphLaunch``/``hipGraphLaunch`` call, kind ``""``.

**Per iteration** (times in µs unless named ``_ns``): its GPU work is the GPU events
(kernels, copies, memsets) whose launch call starts inside the iteration's CPU range (as
a ``ProfilerStep`` owns the work it launched); ``start_ns`` is the range's start and
``end_ns`` the later of its end and its GPU work's last end; ``dur(us)`` their
difference. ``gpu_busy(us)``: the union of its GPU work's intervals (work overlapping on
two streams, or on one under programmatic dependent launch, counted once); ``idle(us)``:
``dur - gpu_busy``; ``<category>(us)`` for each kernel category of
:data:`hta.model.categories.CATEGORIES`: the summed durations of its GPU work of that
category (kernel names classified as :meth:`get_category_time` does). Columns:
:data:`COLUMNS` plus the category columns.

**Steady state and totals** (:func:`iteration_summary`): per kind, the iterations, the
first one of the kind on each rank (warm-up: first graph replays, allocator growth,
autotuning) left out of ``steady_*``; ``steady_median(us)`` the median iteration time of
the rest (of all, when the kind has a single iteration); ``total(us)``,
``gpu_busy(us)`` and ``idle(us)`` summed over the kind's iterations: the prefill and
decode totals.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from hta.analysis.intervals import merge
from hta.analysis.perf.calls import gpu_categories
from hta.model.categories import CATEGORIES
from hta.model.declared import WHOLE, Analysis, Columns
from hta.model.links import GRAPH_LAUNCH
from hta.model.rules import GPU_WORK_KINDS, KIND_CODE, RuleSet, kind_mask
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankTrace, Trace

COLUMNS = ["rank", "iteration", "source", "name", "kind", "batch", "tokens", "start_ns",
           "end_ns", "dur(us)", "gpu_busy(us)", "idle(us)"]
CATEGORY_COLUMNS = [f"{c}(us)" for c in CATEGORIES]
SUMMARY_COLUMNS = ["kind", "iterations", "steady_iterations", "steady_median(us)",
                   "total(us)", "gpu_busy(us)", "idle(us)"]
#: The table of :func:`rank_iterations` (object columns when it has no rows).
ITERATIONS = Columns.typed(COLUMNS + CATEGORY_COLUMNS)

_VLLM = re.compile(r"^execute_(\d+)_context_(\d+)\(.*\)_generation_(\d+)\(")
_SGLANG = re.compile(r"^step\[(DECODE|EXTEND|PREFILL|MIXED|IDLE)\b([^\]]*)\]")
_SGLANG_KIND = {"DECODE": "decode", "EXTEND": "prefill", "PREFILL": "prefill",
                "MIXED": "mixed", "IDLE": "idle"}


def parse_step_name(name: str) -> tuple[str, int, int] | None:
    """``(kind, batch, tokens)`` of an engine's step annotation (module docstring), None
    for other names; -1 where the name does not say."""
    m = _VLLM.match(name)
    if m:
        tokens, ctx, gen = (int(g) for g in m.groups())
        kind = "mixed" if ctx and gen else "prefill" if ctx else "decode" if gen else ""
        return kind, ctx + gen, tokens
    m = _SGLANG.match(name)
    if m:
        rest = m.group(2)
        bs = re.search(r"bs=(\d+)", rest)
        toks = re.search(r"toks=(\d+)", rest)
        return (_SGLANG_KIND[m.group(1)], int(bs.group(1)) if bs else -1,
                int(toks.group(1)) if toks else -1)
    return None


def _ranges(rt: RankTrace) -> tuple[str, list[tuple[int, str, str, int, int]]]:
    """The rule that found the iterations and, per iteration, ``(row, name, kind, batch,
    tokens)`` in start order."""
    sym = rt.symbols
    codes = rt.kind_codes()
    names = rt.column("name")
    ann = np.flatnonzero(codes == KIND_CODE["user_annotation"])
    vllm: list[tuple[int, str, str, int, int]] = []
    sglang: list[tuple[int, str, str, int, int]] = []
    for r in ann.tolist():
        text = sym[int(names[r])]
        parsed = parse_step_name(text)
        if parsed is not None:
            (vllm if _VLLM.match(text) else sglang).append((r, text, *parsed))
    if vllm or sglang:
        return "annotation", vllm or sglang
    py = np.flatnonzero(codes == KIND_CODE["python_function"])
    runner = [(r, sym[int(names[r])], "", -1, -1) for r in py.tolist()
              if sym[int(names[r])].endswith(": execute_model")]
    if runner:
        return "execute_model", runner
    launch = np.flatnonzero(codes == KIND_CODE["runtime_launch"])
    graphs = [(r, sym[int(names[r])], "", -1, -1) for r in launch.tolist()
              if GRAPH_LAUNCH.search(sym[int(names[r])])]
    return ("graph launch", graphs) if graphs else ("", [])


def rank_iterations(rt: RankTrace, rules: RuleSet | None = None) -> pd.DataFrame:
    """One rank's iterations: :data:`COLUMNS` + :data:`CATEGORY_COLUMNS`."""
    source, found = _ranges(rt)
    cols = COLUMNS + CATEGORY_COLUMNS
    if not found:
        return ITERATIONS.empty()
    ev = rt.events
    ts = ev["ts"].to_numpy(np.int64)
    end = ev["end"].to_numpy(np.int64)
    codes = rt.kind_codes()
    gpu = np.flatnonzero(kind_mask(codes, GPU_WORK_KINDS))
    launch = rt.column("index_correlation")[gpu]
    ok = launch >= 0
    gpu, launch_ts = gpu[ok], ts[launch[ok]]
    cats = gpu_categories(rt, gpu, rules or RuleSet())
    found = sorted(found, key=lambda f: (ts[f[0]], f[0]))
    rows = []
    for i, (r, name, kind, batch, tokens) in enumerate(found, start=1):
        mine = (launch_ts >= ts[r]) & (launch_ts < end[r]) if end[r] > ts[r] else \
            launch_ts == ts[r]
        g = gpu[mine]
        if source == "graph launch":  # the launch's own GPU work
            g = gpu[rt.column("index_correlation")[gpu] == r]
            mine = np.isin(gpu, g)
        stop = max(int(end[r]), int(end[g].max()) if g.size else int(end[r]))
        s, e = merge(ts[g], end[g])
        busy = int((e - s).sum())
        row = {"rank": rt.rank, "iteration": i, "source": source, "name": name,
               "kind": kind, "batch": batch, "tokens": tokens, "start_ns": int(ts[r]),
               "end_ns": stop, "dur(us)": (stop - ts[r]) / 1e3, "gpu_busy(us)": busy / 1e3,
               "idle(us)": (stop - ts[r] - busy) / 1e3}
        d = (end[g] - ts[g]).astype(np.float64)
        c = cats[mine]
        for cat, col in zip(CATEGORIES, CATEGORY_COLUMNS):
            row[col] = float(d[c == cat].sum()) / 1e3
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


SERVER_ITERATIONS = Analysis("Server iterations", rank_iterations, ITERATIONS, steps=WHOLE,
                             add_rank=True)


def server_iterations(trace: Trace, selection: Selection = EVERYTHING,
                      rules: RuleSet | None = None) -> pd.DataFrame:
    """Every selected rank's iterations (module docstring); per rank, so it runs through
    the runner (:mod:`hta.model.runner`)."""
    return SERVER_ITERATIONS.run(trace, selection, rules)


def iteration_summary(iterations: pd.DataFrame) -> pd.DataFrame:
    """Per kind (``""``: not said): :data:`SUMMARY_COLUMNS` (module docstring)."""
    if not len(iterations):
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    it = iterations.sort_values(["rank", "start_ns"], kind="stable")
    first = it.groupby(["rank", "kind"]).cumcount() == 0
    rows = []
    for kind, k in it.groupby("kind", sort=True):
        steady = k[~first.loc[k.index]]
        use = steady if len(steady) else k
        rows.append({"kind": kind, "iterations": len(k), "steady_iterations": len(steady),
                     "steady_median(us)": float(use["dur(us)"].median()),
                     "total(us)": float(k["dur(us)"].sum()),
                     "gpu_busy(us)": float(k["gpu_busy(us)"].sum()),
                     "idle(us)": float(k["idle(us)"].sum())})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


__all__ = ["CATEGORY_COLUMNS", "COLUMNS", "ITERATIONS", "SERVER_ITERATIONS", "SUMMARY_COLUMNS",
           "iteration_summary", "parse_step_name", "rank_iterations", "server_iterations"]
