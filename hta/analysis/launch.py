"""Kernel launch statistics: how long each launch call took, how long its GPU work ran,
and how long the work waited between the end of the call and its start on the GPU.

Pairs
-----
A *launch* is an event whose ``kind`` is ``runtime_launch`` (the rule table in
:mod:`hta.model.rules` decides which runtime and driver calls that covers: CUDA
``cudaLaunchKernel``/``cudaLaunchKernelExC``/cooperative launches, driver ``cuLaunchKernel``,
``cudaGraphLaunch``, async memcpy/memset calls, and their HIP equivalents). A *GPU event*
is an event whose kind is in :data:`~hta.model.rules.GPU_WORK_KINDS` (kernels, memcpy,
memset). A GPU event is *paired* when its ``index_correlation`` names a launch. A graph
launch enqueues many kernels under one correlation id: each of them is paired with the
same launch, so a graph launch gives one row per kernel.

*Unpaired launches* (no GPU event in the trace, e.g. the kernel ran after the profiler
stopped) and *unpaired GPU events* (no launch in the trace, or linked to a runtime call the
rule table does not call a launch) are counted by :func:`launch_pairing_summary` and left
out of the statistics.

Columns of :func:`cuda_kernel_launch_stats` (times in µs, computed from integer ns):

* ``cpu_duration(us)``: duration of the launch call;
* ``gpu_duration(us)``: duration of the GPU event;
* ``launch_delay(us)``: GPU event start minus launch call end. It is negative when the GPU
  starts the work before the call returns, which happens; it is kept as is.
* ``short_kernel``: ``gpu_duration < cpu_duration`` and ``cpu_duration <= runtime_cutoff``
  (the GPU finished the work faster than the CPU took to issue it);
* ``runtime_outlier``: ``cpu_duration > runtime_cutoff``;
* ``launch_delay_outlier``: ``launch_delay > launch_delay_cutoff``.

The three flags judge a *launch call*, so a graph launch is judged once, on the row of its
first GPU event (in start order), its other rows have all three false: ``short_kernel``
there compares the GPU time of all the graph's events with the call, and the launch delay
is that of the first event. (Flagging each replayed kernel would repeat the one call's
duration hundreds of times, and the delay of the graph's last kernel is the graph's
runtime, not a launch delay.)

Example: ``cudaLaunchKernel`` at 100 ns lasting 4000 ns, its kernel at 5000 ns lasting
2000 ns: ``cpu_duration`` 4.0, ``gpu_duration`` 2.0, ``launch_delay`` 0.9 µs
(5000 - 4100 ns); with the default cutoffs it is a short kernel and no outlier.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import index_positions
from hta.model.declared import WHOLE, Analysis, Columns
from hta.model.derived import derived
from hta.model.rules import GPU_WORK_KINDS, KIND_CODE, KINDS, MEMORY_KINDS, codes_in, kind_codes
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankMapper, RankTrace

logger = logging.getLogger(__name__)

#: HTA's defaults, in µs.
RUNTIME_CUTOFF_US = 50
LAUNCH_DELAY_CUTOFF_US = 100

LAUNCH_STATS_COLUMNS = [
    "rank", "correlation", "launch_index", "gpu_index", "launch_name", "name", "kind",
    "stream", "cpu_duration(us)", "gpu_duration(us)", "launch_delay(us)", "short_kernel",
    "runtime_outlier", "launch_delay_outlier",
]
PAIRING_COLUMNS = [
    "rank", "launches", "paired_launches", "unpaired_launches", "gpu_events",
    "paired_gpu_events", "unpaired_gpu_events", "gpu_before_launch",
]
STATS = Columns.typed(LAUNCH_STATS_COLUMNS, "float64")
PAIRING = Columns.typed(PAIRING_COLUMNS)

_GPU_WORK_CODES = kind_codes(GPU_WORK_KINDS)
_MEMORY_CODES = kind_codes(MEMORY_KINDS)
_LAUNCH_CODE = KIND_CODE["runtime_launch"]


@dataclass(frozen=True)
class LaunchPairs:
    """Row positions of the paired (launch, GPU event) rows of one events table.

    ``launch[i]`` enqueued ``gpu[i]``; a graph launch appears once per kernel. The
    unpaired rows are listed apart.
    """

    launch: np.ndarray
    gpu: np.ndarray
    unpaired_launches: np.ndarray
    unpaired_gpu: np.ndarray


def launch_pairs(events: pd.DataFrame) -> LaunchPairs:
    """Pair GPU work rows with their ``runtime_launch`` rows (see the module docstring);
    ``index_correlation`` read as positions by
    :func:`~hta.analysis.gpu_work.index_positions`."""
    codes = events["kind"].array.codes
    is_launch = codes == _LAUNCH_CODE
    gpu_rows = np.flatnonzero(codes_in(codes, _GPU_WORK_CODES))
    partner = index_positions(events, events["index_correlation"].to_numpy()[gpu_rows])
    ok = partner >= 0
    ok[ok] = is_launch[partner[ok]]
    launch = partner[ok]
    paired_launch = np.zeros(len(codes), dtype=bool)
    paired_launch[launch] = True
    return LaunchPairs(
        launch=launch,
        gpu=gpu_rows[ok],
        unpaired_launches=np.flatnonzero(is_launch & ~paired_launch),
        unpaired_gpu=gpu_rows[~ok],
    )


def rank_launch_pairs(rt: RankTrace) -> LaunchPairs:
    """:func:`launch_pairs` of a rank, computed once per rank (the queue series, the
    launch statistics and the pairing summary of one visit share it:
    :func:`hta.model.derived.derived`); its arrays are read-only."""
    def compute() -> LaunchPairs:
        pairs = launch_pairs(rt.events)
        for values in (pairs.launch, pairs.gpu, pairs.unpaired_launches, pairs.unpaired_gpu):
            values.flags.writeable = False
        return pairs

    return derived(rt, "launch_pairs", compute)


def launch_pairing_summary(trace: RankMapper, selection: Selection = EVERYTHING
                           ) -> pd.DataFrame:
    """Per rank, how many launches and GPU events were paired (columns :data:`PAIRING_COLUMNS`).

    ``launches``: rows of kind ``runtime_launch``; ``paired_launches``: those with at
    least one GPU event; ``gpu_events``: GPU work rows; ``paired_gpu_events``: those with
    a launch (a graph launch pairs with all its kernels, so this can exceed
    ``paired_launches``); ``gpu_before_launch``: paired GPU events that start before their
    launch call starts (clock skew between the CPU and GPU timelines). Counted per rank,
    where the rank is.
    """
    return LAUNCH_PAIRING.run(trace, selection)


def rank_launch_pairing(rt: RankTrace) -> pd.DataFrame:
    """One rank's row of :func:`launch_pairing_summary`: its launches and GPU events
    with and without a partner."""
    pairs = rank_launch_pairs(rt)
    ts = rt.column("ts")
    n_launch = int(np.count_nonzero(rt.kind_codes() == _LAUNCH_CODE))
    return pd.DataFrame([{
        "rank": rt.rank,
        "launches": n_launch,
        "paired_launches": n_launch - len(pairs.unpaired_launches),
        "unpaired_launches": len(pairs.unpaired_launches),
        "gpu_events": len(pairs.gpu) + len(pairs.unpaired_gpu),
        "paired_gpu_events": len(pairs.gpu),
        "unpaired_gpu_events": len(pairs.unpaired_gpu),
        "gpu_before_launch": int(np.count_nonzero(ts[pairs.gpu] < ts[pairs.launch])),
    }], columns=PAIRING_COLUMNS)


LAUNCH_PAIRING = Analysis("Launch pairing", rank_launch_pairing, PAIRING, steps=WHOLE)


def cuda_kernel_launch_stats(
    trace: RankMapper,
    selection: Selection = EVERYTHING,
    runtime_cutoff: float = RUNTIME_CUTOFF_US,
    launch_delay_cutoff: float = LAUNCH_DELAY_CUTOFF_US,
    include_memory_events: bool = True,
) -> pd.DataFrame:
    """One row per paired (launch, GPU event), columns :data:`LAUNCH_STATS_COLUMNS`.

    Definitions in this module's docstring. ``runtime_cutoff`` and ``launch_delay_cutoff``
    are in µs and only set the three flag columns. ``include_memory_events=False`` leaves
    out GPU events of memory kinds (memcpy, memset). Rows are in launch order (launch start,
    then GPU start); ``launch_index`` and ``gpu_index`` are the events' ``index`` values.
    Computed per rank, where the rank is; only the rows travel.
    """
    return LAUNCH_STATS.run(trace, selection, runtime_cutoff, launch_delay_cutoff,
                            include_memory_events)


def rank_launch_stats(rt: RankTrace, runtime_cutoff: float, launch_delay_cutoff: float,
                      include_memory_events: bool) -> pd.DataFrame:
    """One rank's rows of :func:`cuda_kernel_launch_stats`: one per paired (launch, GPU
    event)."""
    stats = _rank_launch_stats(rt, runtime_cutoff, launch_delay_cutoff, include_memory_events)
    return stats if len(stats) else STATS.empty()


LAUNCH_STATS = Analysis("Launch statistics", rank_launch_stats, STATS, steps=WHOLE)


#: The three flag columns of :func:`cuda_kernel_launch_stats`.
FLAG_COLUMNS = ["short_kernel", "runtime_outlier", "launch_delay_outlier"]


#: Columns of :func:`flagged_launch_histograms`.
HISTOGRAM_COLUMNS = ["rank", "flag", "value", "lo(us)", "hi(us)", "launches"]
HISTOGRAMS = Columns.of({"rank": "int64", "flag": "object", "value": "object",
                         "lo(us)": "float64", "hi(us)": "float64", "launches": "int64"})
#: Which value each flag's histogram counts.
FLAG_VALUES = {"short_kernel": "cpu_duration(us)", "runtime_outlier": "cpu_duration(us)",
               "launch_delay_outlier": "launch_delay(us)"}
#: Histogram bins per decade (bin edges at 10 ** (k / BINS_PER_DECADE) µs, the same for
#: every rank, so ranks' bins line up without a second pass).
BINS_PER_DECADE = 20
_LOWEST_EDGE_EXP = -3  # 0.001 µs: smaller values (and zero) count in the first bin


def flagged_launch_histograms(trace: RankMapper, selection: Selection = EVERYTHING,
                              runtime_cutoff: float = RUNTIME_CUTOFF_US,
                              launch_delay_cutoff: float = LAUNCH_DELAY_CUTOFF_US
                              ) -> pd.DataFrame:
    """Per rank and flag of :func:`cuda_kernel_launch_stats`, the histogram of the flagged
    launches' value (:data:`FLAG_VALUES`: the launch call's duration for ``short_kernel``
    and ``runtime_outlier``, the launch delay for ``launch_delay_outlier``): one row per
    non-empty bin, ``lo(us)`` <= value < ``hi(us)``, ``launches`` in it.

    Bins are log-spaced, :data:`BINS_PER_DECADE` a decade, on one grid for every rank;
    a value under 0.001 µs counts in the lowest bin. The launches of a rank and flag sum to
    its count of flagged rows. Computed where each rank is: what travels is a few hundred
    numbers a rank, whatever its number of launches (the report's launch section)."""
    return FLAGGED_HISTOGRAMS.run(trace, selection, runtime_cutoff, launch_delay_cutoff)


def flag_counts(hist: pd.DataFrame, ranks: Iterable[int]) -> pd.DataFrame:
    """Per rank of ``ranks``: how many launches carry each flag (:data:`FLAG_COLUMNS`),
    from :func:`flagged_launch_histograms` (a rank's bins of one flag add up to its
    flagged launches; a rank without flagged launches counts zero)."""
    ranks = [int(r) for r in ranks]
    counts = (hist.groupby(["rank", "flag"])["launches"].sum().unstack("flag")
              if len(hist) else pd.DataFrame())
    counts = counts.reindex(index=ranks, columns=FLAG_COLUMNS).fillna(0).astype(np.int64)
    return counts.rename_axis(index="rank", columns=None).reset_index()


def rank_flagged_histograms(rt: RankTrace, runtime_cutoff: float, launch_delay_cutoff: float
                            ) -> pd.DataFrame:
    """One rank's rows of :func:`flagged_launch_histograms`: per flag, the non-empty bins
    of its flagged launches."""
    stats = _rank_launch_stats(rt, runtime_cutoff, launch_delay_cutoff, True)
    frames = []
    for flag, column in FLAG_VALUES.items():
        values = stats.loc[stats[flag].to_numpy(dtype=bool), column].to_numpy(float)
        if values.size:
            frames.append(_bins(rt.rank, flag, column, values))
    if not frames:
        return HISTOGRAMS.empty()
    return pd.concat(frames, ignore_index=True)[HISTOGRAM_COLUMNS]


FLAGGED_HISTOGRAMS = Analysis("Launch histograms", rank_flagged_histograms, HISTOGRAMS,
                              steps=WHOLE)


def _bins(rank: int, flag: str, column: str, values: np.ndarray) -> pd.DataFrame:
    """The non-empty bins of ``values`` on the shared log grid."""
    low = 10.0 ** _LOWEST_EDGE_EXP
    k = np.floor(np.log10(np.maximum(values, low)) * BINS_PER_DECADE).astype(np.int64)
    # a value exactly on an edge can land one bin low through rounding: move it up
    k += values >= 10.0 ** ((k + 1) / BINS_PER_DECADE)
    bins, counts = np.unique(k, return_counts=True)
    return pd.DataFrame({
        "rank": np.int64(rank), "flag": flag, "value": column,
        "lo(us)": 10.0 ** (bins / BINS_PER_DECADE),
        "hi(us)": 10.0 ** ((bins + 1) / BINS_PER_DECADE),
        "launches": counts.astype(np.int64)})


def _rank_launch_stats(rt: RankTrace, runtime_cutoff: float, launch_delay_cutoff: float,
                       include_memory_events: bool) -> pd.DataFrame:
    pairs = rank_launch_pairs(rt)
    launch, gpu = pairs.launch, pairs.gpu
    codes = rt.kind_codes()
    if not include_memory_events:
        keep = ~codes_in(codes[gpu], _MEMORY_CODES)
        launch, gpu = launch[keep], gpu[keep]
    if pairs.unpaired_launches.size or pairs.unpaired_gpu.size:
        logger.info("rank %d: %d launch(es) without GPU event and %d GPU event(s) without "
                    "launch left out of the launch statistics", rt.rank,
                    pairs.unpaired_launches.size, pairs.unpaired_gpu.size)
    ts = rt.column("ts")
    dur = rt.column("dur")
    end = rt.column("end")
    order = np.lexsort((ts[gpu], ts[launch]))
    launch, gpu = launch[order], gpu[order]
    cpu_dur = dur[launch]
    gpu_dur = dur[gpu]
    delay = ts[gpu] - end[launch]
    runtime_ns = runtime_cutoff * 1000.0
    first, work = _per_launch(launch, gpu_dur)
    symbols = np.asarray(rt.symbols, dtype=object)
    names = rt.column("name")
    stream = rt.column("stream")[gpu]
    stream = np.where(stream >= 0, stream, rt.column("tid")[gpu])
    index = rt.column("index")
    return pd.DataFrame({
        "rank": rt.rank,
        "correlation": rt.column("correlation")[launch],
        "launch_index": index[launch],
        "gpu_index": index[gpu],
        "launch_name": symbols[names[launch]],
        "name": symbols[names[gpu]],
        "kind": pd.Categorical.from_codes(codes[gpu], categories=list(KINDS)),
        "stream": stream,
        "cpu_duration(us)": cpu_dur / 1e3,
        "gpu_duration(us)": gpu_dur / 1e3,
        "launch_delay(us)": delay / 1e3,
        "short_kernel": first & (work < cpu_dur) & (cpu_dur <= runtime_ns),
        "runtime_outlier": first & (cpu_dur > runtime_ns),
        "launch_delay_outlier": first & (delay > launch_delay_cutoff * 1000.0),
    }, columns=LAUNCH_STATS_COLUMNS)


def _per_launch(launch: np.ndarray, gpu_dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows in (launch start, GPU start) order: whether the row is its launch's first
    GPU event, and the GPU time of all the launch's events (a graph launch enqueues many
    under one call; a plain launch, one)."""
    if launch.size == 0:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=gpu_dur.dtype)
    uniq, inverse = np.unique(launch, return_inverse=True)
    work = np.bincount(inverse, weights=gpu_dur, minlength=uniq.size)[inverse]
    first = np.zeros(launch.size, dtype=bool)
    first[np.unique(inverse, return_index=True)[1]] = True
    return first, work
