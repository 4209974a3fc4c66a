"""Choosing what a diff compares: device types, ``ProfilerStep`` spans, iterations."""


from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from hta.model.job import Job
from hta.model.rules import GPU_KINDS, GPU_WORK_KINDS, KIND_CODE, KINDS
from hta.model.selection import ALL, FIRST, Selection, resolve
from hta.model.selection import Iterations as Iterations
from hta.model.selection import Ranks as Ranks

logger = logging.getLogger(__name__)


DEVICE_TYPES = ("ALL", "CPU", "GPU")
#: Operator name of GPU work whose launch is not inside any ``cpu_op``.
NO_OPERATOR = "(no operator)"
#: Relative change of GPU time per step (%) below which a name counts as unchanged.
DEFAULT_THRESHOLD_PCT = 5.0
#: Change of GPU time per step (µs) below which a name counts as unchanged whatever its
#: relative change: below a microsecond per step, a kernel's time moves with the timer's
#: resolution and run-to-run jitter, not with the code.
MIN_DELTA_US = 1.0
STATUSES = ("added", "removed", "slower", "faster", "unchanged")

_GPU_CODES = np.array([KIND_CODE[k] for k in KINDS if k in GPU_KINDS], dtype=np.int64)
_WORK_CODES = np.array([KIND_CODE[k] for k in KINDS if k in GPU_WORK_KINDS], dtype=np.int64)



# -- selection ------------------------------------------------------------------------------
def device_type_name(value: Any) -> str:
    """``"ALL"``, ``"CPU"`` or ``"GPU"`` from a string (any case) or an enum member
    (HTA's ``DeviceType.GPU``)."""
    text = getattr(value, "name", value)
    if isinstance(text, str) and text.upper() in DEVICE_TYPES:
        return text.upper()
    raise ValueError(
        f"device_type={value!r} is not one of {', '.join(DEVICE_TYPES)}; pass e.g. "
        "device_type=\"GPU\" to compare GPU kernels only."
    )


def resolve_iterations(trace: Job, ranks: Ranks, iteration: Iterations,
                       steps: pd.DataFrame | None = None) -> list[int] | None:
    """The step numbers to compare: ``None`` means every event.

    ``iteration=None``: the first ``ProfilerStep`` of the selected ranks (HTA's default), or
    every event when the trace has no steps; ``"all"``: every event; a number or list: those
    steps, which must exist on at least one selected rank. ``steps``: the selected ranks'
    :func:`hta.model.selection.step_table`, when the caller already has it. The rules are
    :class:`hta.model.selection.Selection`'s, with ``None`` meaning :data:`FIRST`.
    """
    selection = Selection.of(ranks, iteration, none_means=FIRST)
    resolved = resolve(selection, trace, steps)
    if selection.iterations is FIRST and resolved.iterations is ALL:
        logger.info("no ProfilerStep in the selected ranks: comparing every event")
    return resolved.iteration_list


def _first_rank(trace: Job, rank: Ranks) -> list[int]:
    if rank is None:
        loaded = trace.get_ranks()
        if not loaded:
            raise ValueError("the trace holds no rank; load a folder with trace files.")
        return loaded[:1]
    return trace.selected_ranks(Selection.of(rank).rank_list)
