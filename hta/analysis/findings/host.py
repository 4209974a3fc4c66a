"""Findings about the host holding the GPU back: synchronisation in the step, data loading.

Both rules measure *GPU idle time*: time in the analysed window when no kernel, copy or
memset runs on any stream of the rank. No idle nanosecond is claimed by two of the host
rules: data-loader spans belong to ``data_loading``, the idle during and after synchronising
calls to ``host_sync`` (minus data-loader time), and ``launch_bound``
(:mod:`hta.analysis.findings.launch_bound`) leaves out both.

``host_sync``
    Blocking calls and hidden synchronisations (:mod:`hta.analysis.findings.sync`).

``data_loading``
    A *data-loader span* is a CPU event named ``enumerate(DataLoader)#...``, containing
    ``DataLoaderIter.__next__``, the Python frame ``torch/utils/data/dataloader.py(N):
    __next__``, or a ``record_function`` labelled ``data``, ``data_loading``,
    ``dataloader`` or ``data_loader`` (any case). The saving is the GPU idle time inside
    the union of the spans that start in the analysed steps, clipped to the window (gaps
    inside a graph replay are not idle: traces often lack some of its kernels). A rank
    without GPU work has no finding (there is no GPU to stall).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.findings.base import Finding, FindingRule, analysis_window, link
from hta.analysis.findings.claims import claim_outside
from hta.analysis.findings.gpu_cover import graph_spans
from hta.analysis.findings.rule_tools import (
    data_loader_rows,
    fmt_time,
    in_selection,
    step_tuple,
    steps_text,
)
from hta.analysis.findings.sync import RULE as HOST_SYNC
from hta.analysis.intervals import Cover, merge
from hta.analysis.perf.calls import gpu_rows
from hta.model.trace import RankTrace


def check_data_loading(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``data_loading`` finding of one rank: GPU idle inside data-loader spans."""
    g = gpu_rows(rt)
    if g.size == 0:
        return []
    window = analysis_window(rt, iterations)
    rows = data_loader_rows(rt)
    rows = rows[in_selection(rt, rows, iterations, window)]
    if rows.size == 0:
        return []
    ev = rt.events
    start = np.maximum(ev["ts"].to_numpy()[rows], window[0])
    end = np.minimum(ev["end"].to_numpy()[rows], window[1])
    spans = graph_spans(rt, g)  # gaps inside a graph replay are not idle
    busy = Cover(np.r_[ev["ts"].to_numpy()[g], spans[0]], np.r_[ev["end"].to_numpy()[g], spans[1]])
    ms, me = merge(start, end)
    idle = (me - ms) - busy.within(ms, me)
    total = int(idle.sum())
    if total <= 0:
        return []
    steps = ev["iteration"].to_numpy()[rows]
    pieces = np.searchsorted(ms, start, side="right") - 1
    hit_steps = steps[idle[np.clip(pieces, 0, None)] > 0]
    names = ev["name"].to_numpy()[rows]
    top = rt.symbols[int(pd.Series(end - start).groupby(names).sum().idxmax())]
    parent = link(rt, "parent")[rows]
    outer = int(np.count_nonzero(~np.isin(parent, rows)))  # nested frames count once
    evidence = (
        f"{outer} data-loader span(s) ({top}) in {steps_text(rt, steps)} ran "
        f"{fmt_time(int((me - ms).sum()))} on the CPU, {fmt_time(total)} of it with the GPU "
        f"idle: no kernel, copy or memset on any stream (GPU timeline; host wait in the "
        f"idle time table)."
    )
    return [Finding((rt.rank,), step_tuple(hit_steps), evidence, total,
                    window[1] - window[0], claim=claim_outside(ms, me, None, busy))]


RULES: list[FindingRule] = [
    HOST_SYNC,
    FindingRule(
        id="data_loading",
        title="The GPU waits for the data loader",
        section="idle",
        advice=("Load data in the background: DataLoader(num_workers=N, pin_memory=True, "
                "persistent_workers=True, prefetch_factor=2 or more); move preprocessing "
                "to the GPU or to the workers; prefetch the next batch to the GPU on a side "
                "stream."),
        saving=("The GPU idle time (no kernel, copy or memset on any stream) inside the "
                "union of the data-loader spans of the analysed steps."),
        check=check_data_loading,
    ),
]
