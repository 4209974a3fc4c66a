"""Communication/computation overlap: how much communication hides under compute.

Per rank, over its GPU work (see :mod:`hta.analysis.gpu_work`; communication is every
``communication`` kind, so RCCL, NVSHMEM, DeepEP and custom all-reduce count):

* ``comm_time(us)``: length of the union of communication kernels;
* ``overlap_time(us)``: length of the intersection of that union with the union of
  computation kernels (time when both run);
* ``comp_comm_overlap_pctg``: ``100 * overlap_time / comm_time`` (HTA's column; not
  rounded);
* ``note``: empty, or ``"no communication"`` for a rank without communication kernels in
  the selection, whose percentage is NaN (undefined, not 0).

Example: NCCL ``[0, 10)`` µs and ``[20, 30)``, compute ``[5, 25)``: comm 20, overlap 5
+ 5 = 10, 50%. Fully hidden communication gives 100, fully exposed 0.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import COMM, COMPUTE, rank_gpu_work
from hta.analysis.intervals import coverage, mask_total
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.job import Job
from hta.model.selection import EVERYTHING, Selection, StepList
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

NO_COMMUNICATION = "no communication"
COLUMNS = ["rank", "comp_comm_overlap_pctg", "comm_time(us)", "overlap_time(us)", "note"]
#: The table of no rank (:data:`COLUMNS`, object columns).
OVERLAP = Columns.typed(COLUMNS)


def comm_comp_overlap(trace: Job, selection: Selection = EVERYTHING) -> pd.DataFrame:
    """One row per rank with :data:`COLUMNS` (definitions in the module docstring)."""
    return COMM_COMP_OVERLAP.run(trace, selection)


def rank_comm_comp_overlap(rank: RankTrace, iterations: StepList = None
                           ) -> pd.DataFrame:
    """One rank's row of :func:`comm_comp_overlap` (:data:`COLUMNS`)."""
    return pd.DataFrame([_rank_row(rank, iterations)], columns=COLUMNS)


COMM_COMP_OVERLAP = Analysis("Comm/compute overlap", rank_comm_comp_overlap, OVERLAP,
                             steps=PER_STEP)


def _rank_row(rt: RankTrace, iterations: StepList) -> dict:
    w = rank_gpu_work(rt, iterations)
    sel = (w.cls == COMPUTE) | (w.cls == COMM)
    table = coverage(w.ts[sel], w.end[sel], w.cls[sel], 2)
    comm = int(mask_total(table, all_of=1 << COMM)[0])
    both = int(mask_total(table, all_of=(1 << COMM) | (1 << COMPUTE))[0])
    if not (w.cls == COMM).any():
        logger.info("rank %d: no communication kernels; overlap is undefined", rt.rank)
    return {
        "rank": rt.rank,
        "comp_comm_overlap_pctg": 100.0 * both / comm if comm else np.nan,
        "comm_time(us)": comm / 1e3,
        "overlap_time(us)": both / 1e3,
        "note": "" if comm else _why_empty(w.cls),
    }


def _why_empty(cls: np.ndarray) -> str:
    if (cls == COMM).any():
        return "communication kernels of zero duration only"
    return NO_COMMUNICATION
