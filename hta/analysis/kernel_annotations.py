"""GPU kernels with the GPU user annotation they ran under (HTA main's
``get_gpu_kernels_with_user_annotations``).

For one rank: every GPU work event (kinds in ``GPU_WORK_KINDS``: kernels, copies,
memsets) with all the events table's columns, plus ``user_annotation``: the symbol id of
the ``gpu_user_annotation`` range (kind ``gpu_annotation``) on the same ``pid`` and
``tid`` (device and stream) that overlaps the kernel (``a.ts < k.end`` and
``k.ts < a.end``; a zero-length kernel counts when ``a.ts <= k.ts < a.end``), the
shortest such range when several do (the innermost of nested ranges; on equal lengths
the later-starting one), -1 when none. ``user_annotation_count`` is how many ranges
overlap the kernel (2 or more: nested ranges, or a kernel straddling two siblings).

With ``expand_names``: ``s_name``, ``s_cat`` and ``s_user_annotation`` hold the text
(``""`` for -1), kernel names shortened (:func:`hta.analysis.names.short_name`) when
``shorten_names``. ``None`` (and a warning) when the rank has no GPU annotation, as HTA.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from hta.analysis.names import short_name
from hta.model.job import Job
from hta.model.rules import GPU_WORK_KINDS, MEMORY_KINDS

logger = logging.getLogger(__name__)


def _assign(k_ts: np.ndarray, k_end: np.ndarray, a_ts: np.ndarray, a_end: np.ndarray,
            a_name: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For kernels of one stream (sorted by start) the name of the shortest overlapping
    annotation and the number of overlapping annotations."""
    label = np.full(k_ts.shape[0], -1, dtype=np.int64)
    count = np.zeros(k_ts.shape[0], dtype=np.int64)
    reach = np.maximum.accumulate(k_end) if k_end.size else k_end
    # Longest first, so that the shortest (innermost) range is written last.
    order = np.lexsort((a_ts, -(a_end - a_ts)))
    for i in order:
        lo = int(np.searchsorted(reach, a_ts[i], side="left"))
        hi = int(np.searchsorted(k_ts, a_end[i], side="left"))
        if hi <= lo:
            continue
        s, e = k_ts[lo:hi], k_end[lo:hi]
        hit = (e > a_ts[i]) | ((e == s) & (s >= a_ts[i]))
        where = np.flatnonzero(hit) + lo
        label[where] = a_name[i]
        count[where] += 1
    return label, count


def gpu_kernels_with_user_annotations(trace: Job, rank: int, expand_names: bool = True,
                                      shorten_names: bool = True) -> pd.DataFrame | None:
    """The rank's GPU work events with their GPU user annotation (module docstring)."""
    rt = trace.rank(rank)
    ev = rt.events
    kind = ev["kind"]
    annos = ev[(kind == "gpu_annotation").to_numpy()]
    if not len(annos):
        logger.warning("rank %d has no GPU user annotations (gpu_user_annotation)", rank)
        return None
    kernels = ev[kind.isin(GPU_WORK_KINDS).to_numpy()].copy()
    label = np.full(len(kernels), -1, dtype=np.int64)
    count = np.zeros(len(kernels), dtype=np.int64)
    k_pid, k_tid = kernels["pid"].to_numpy(), kernels["tid"].to_numpy()
    k_ts, k_end = kernels["ts"].to_numpy(), kernels["end"].to_numpy()
    for (pid, tid), group in annos.groupby(["pid", "tid"], sort=False):
        rows = np.flatnonzero((k_pid == pid) & (k_tid == tid))
        if not rows.size:
            continue
        rows = rows[np.argsort(k_ts[rows], kind="stable")]
        lab, cnt = _assign(k_ts[rows], k_end[rows], group["ts"].to_numpy(),
                           group["end"].to_numpy(), group["name"].to_numpy(dtype=np.int64))
        label[rows], count[rows] = lab, cnt
    kernels["user_annotation"] = label
    kernels["user_annotation_count"] = count
    if expand_names:
        sym = np.asarray(list(rt.symbols) + [""], dtype=object)
        names = sym[kernels["name"].to_numpy()]
        if shorten_names:
            memory = kernels["kind"].isin(MEMORY_KINDS).to_numpy()
            names = np.array([n if m else short_name(n) for n, m in zip(names, memory)],
                             dtype=object)
        kernels["s_name"] = names
        kernels["s_cat"] = sym[kernels["cat"].to_numpy()]
        kernels["s_user_annotation"] = sym[np.where(label >= 0, label, len(sym) - 1)]
    return kernels.reset_index(drop=True)
