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
    ``dataloader`` or ``data_loader`` (any case): fetching a batch. An *iterator
    start-up* is the outermost Python frame (``with_stack=True``) of
    ``torch/utils/data/dataloader.py(N): __iter__``, ``_get_iterator`` or ``__init__``:
    creating a DataLoader or its iterator starts the worker processes and prefetches the
    first batches. The saving is the GPU idle time inside the union of the spans and
    start-ups that start in the analysed steps, clipped to the window (gaps inside a
    graph replay are not idle: traces often lack some of its kernels). The evidence tells
    the two apart: the batches' idle, and the start-ups' count per step and idle. A
    single start-up in a window of two or more steps is one-time: named, not counted.
    Start-ups every step mean the loop creates a new iterator each time: the advice is
    to create it once. A rank without GPU work has no finding (there is no GPU to
    stall).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.findings.base import (
    Finding,
    FindingRule,
    analysis_window,
    link,
    step_table,
)
from hta.analysis.findings.claims import claim_outside
from hta.analysis.findings.gpu_cover import graph_spans
from hta.analysis.findings.loops import iterations_found
from hta.analysis.findings.rule_tools import (
    MULTI_PROCESS_LOADER,
    data_loader_rows,
    fmt_time,
    heaviest_name,
    in_selection,
    iterator_start_rows,
    name_matches,
    step_tuple,
    steps_text,
)
from hta.analysis.findings.sync import RULE as HOST_SYNC
from hta.analysis.intervals import Cover, merge
from hta.analysis.perf.calls import gpu_rows
from hta.model.arrays import union
from hta.model.trace import RankTrace


def check_data_loading(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``data_loading`` finding of one rank: GPU idle inside data-loader spans, and
    inside the frames that start a DataLoader iterator (module docstring)."""
    g = gpu_rows(rt)
    if g.size == 0:
        return []
    window = analysis_window(rt, iterations)
    fetch = data_loader_rows(rt)
    fetch = fetch[in_selection(rt, fetch, iterations, window)]
    starts = iterator_start_rows(rt)
    starts = starts[in_selection(rt, starts, iterations, window)]
    steps_in = _steps_in_window(rt, iterations, window)
    once = 0 < starts.size < 2 <= steps_in  # one start-up in a window of steps: one-time
    rows = union(fetch, starts) if not once else fetch
    if rows.size == 0:
        return []
    ev = rt.events
    spans = graph_spans(rt, g)  # gaps inside a graph replay are not idle
    busy = Cover(np.r_[rt.column("ts")[g], spans[0]], np.r_[rt.column("end")[g], spans[1]])
    ms, me, idle = _idle_in(ev, rows, window, busy)
    total = int(idle.sum())
    if total <= 0:
        return []
    start = np.maximum(rt.column("ts")[rows], window[0])
    steps = rt.column("iteration")[rows]
    pieces = np.searchsorted(ms, start, side="right") - 1
    hit_steps = steps[idle[np.clip(pieces, 0, None)] > 0]
    evidence, advice = _loader_text(rt, fetch, starts, once, window, busy, steps_in)
    if not advice and fetch.size and name_matches(rt, fetch, MULTI_PROCESS).any():
        advice = WORKERS_BUSY_ADVICE
    evidence = (f"{evidence} In all {fmt_time(int((me - ms).sum()))} on the CPU, "
                f"{fmt_time(total)} of it with the GPU idle: no kernel, copy or memset on "
                f"any stream (GPU timeline; host wait in the idle time table).")
    return [Finding((rt.rank,), step_tuple(hit_steps), evidence, total,
                    window[1] - window[0], advice=advice,
                    claim=claim_outside(ms, me, None, busy))]


#: A DataLoader that already runs worker processes (``num_workers > 0``).
MULTI_PROCESS = MULTI_PROCESS_LOADER
#: The advice when the loop waits for a loader that already has workers.
WORKERS_BUSY_ADVICE = (
    "The loader already runs worker processes (_MultiProcessingDataLoaderIter) and the "
    "loop still waits for them: they produce batches slower than the step consumes them. "
    "Raise num_workers (up to the free CPU cores) and prefetch_factor, make the "
    "per-sample work cheaper (decode and augment on the GPU, or on batched tensors), "
    "pin_memory=True with non_blocking copies, persistent_workers=True; check that the "
    "workers are not starved of CPU cores or of I/O.")


def _idle_in(ev: pd.DataFrame, rows: np.ndarray, window: tuple[int, int], busy: Cover
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union of ``rows``' spans clipped to ``window`` and the GPU idle in each piece."""
    start = np.maximum(ev["ts"].to_numpy()[rows], window[0])
    end = np.minimum(ev["end"].to_numpy()[rows], window[1])
    ms, me = merge(start, end)
    return ms, me, (me - ms) - busy.within(ms, me)


def _steps_in_window(rt: RankTrace, iterations: list[int] | None,
                     window: tuple[int, int]) -> int:
    """How many ProfilerSteps (or, without them, found iterations) the window holds."""
    table = step_table(rt)
    if len(table):
        steps = table["step"].to_numpy()
        return int(np.isin(steps, iterations).sum()) if iterations is not None else \
            int(steps.size)
    it = iterations_found(rt)
    return it.count_in(window) if it is not None else 1


def _loader_text(rt: RankTrace, fetch: np.ndarray, starts: np.ndarray, once: bool,
                 window: tuple[int, int], busy: Cover, steps_in: int) -> tuple[str, str]:
    """The evidence's first sentences (batches fetched, iterators started) and the advice
    ("" for the rule's) when iterators are started again and again."""
    ev = rt.events
    parts = []
    if fetch.size:
        top = heaviest_name(rt, fetch, rt.column("end")[fetch] - rt.column("ts")[fetch])
        outer = int(np.count_nonzero(~np.isin(link(rt, "parent")[fetch], fetch)))
        _, _, idle = _idle_in(ev, fetch, window, busy)
        parts.append(f"{outer} data-loader span(s) ({top}) in "
                     f"{steps_text(rt, ev['iteration'].to_numpy()[fetch])} fetching batches, "
                     f"the GPU idle {fmt_time(int(idle.sum()))} in them.")
    advice = ""
    if starts.size:
        s_ms, s_me, idle = _idle_in(ev, starts, window, busy)
        ran = int((s_me - s_ms).sum())
        what = (f"{starts.size} DataLoader iterator start-up(s) (DataLoader.__iter__: "
                f"worker processes started, first batches prefetched) ran {fmt_time(ran)}, "
                f"the GPU idle {fmt_time(int(idle.sum()))} in them")
        if once:
            parts.append(f"{what}: once in the window, a one-time cost, not counted.")
        else:
            parts.append(f"{what}: {starts.size / max(steps_in, 1):.1f} a step, so the loop "
                         f"starts a new iterator again and again.")
            advice = ("Create the DataLoader and its iterator once, outside the loop (a "
                      "new iterator every step restarts the worker processes and refills "
                      "their prefetch queue): iterate one iterator, or pass "
                      "persistent_workers=True so an epoch's end does not stop the "
                      "workers. Then load in the background: num_workers=N, "
                      "pin_memory=True, prefetch_factor=2 or more.")
    return " ".join(parts), advice


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
