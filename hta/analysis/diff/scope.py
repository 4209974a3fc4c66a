"""Choosing what a diff compares: device types, ``ProfilerStep`` spans, iterations."""


from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.select import select_ranks
from hta.analysis.steps import rank_step_spans
from hta.model.rules import GPU_KINDS, GPU_WORK_KINDS, KIND_CODE, KINDS
from hta.model.trace import RankTrace, Trace

logger = logging.getLogger(__name__)


DEVICE_TYPES = ("ALL", "CPU", "GPU")
#: Operator name of GPU work whose launch is not inside any ``cpu_op``.
NO_OPERATOR = "(no operator)"
#: Relative change of GPU time per step (%) below which a name counts as unchanged.
DEFAULT_THRESHOLD_PCT = 5.0
STATUSES = ("added", "removed", "slower", "faster", "unchanged")

_GPU_CODES = np.array([KIND_CODE[k] for k in KINDS if k in GPU_KINDS], dtype=np.int64)
_WORK_CODES = np.array([KIND_CODE[k] for k in KINDS if k in GPU_WORK_KINDS], dtype=np.int64)

Ranks = Iterable[int] | int | None
Iterations = Iterable[int] | int | str | None


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


def step_table(trace: Trace, ranks: Ranks = None) -> pd.DataFrame:
    """Every ``ProfilerStep#N`` span of the selected ranks.

    Columns: ``rank``, ``iteration`` (N), ``start``, ``end`` (absolute ns) and
    ``step_time(ns)`` (``end - start``, the CPU span of the step annotation). Steps are the
    ``user_annotation`` or ``cpu_op`` events named exactly ``ProfilerStep#N``, the same spans
    that define the ``iteration`` column. Sorted by rank, then start.
    """
    frames = [_rank_steps(rt) for rt in select_ranks(trace, ranks)]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in
                             ("rank", "iteration", "start", "end", "step_time(ns)")})
    return pd.concat(frames, ignore_index=True)


def _rank_steps(rt: RankTrace) -> pd.DataFrame:
    starts, ends, numbers = rank_step_spans(rt)
    return pd.DataFrame({"rank": np.full(starts.size, rt.rank, dtype=np.int64),
                         "iteration": numbers, "start": starts, "end": ends,
                         "step_time(ns)": ends - starts})


def resolve_iterations(trace: Trace, ranks: Ranks, iteration: Iterations,
                       steps: pd.DataFrame | None = None) -> list[int] | None:
    """The step numbers to compare: ``None`` means every event.

    ``iteration=None``: the first ``ProfilerStep`` of the selected ranks (HTA's default), or
    every event when the trace has no steps; ``"all"``: every event; a number or list: those
    steps, which must exist on at least one selected rank. ``steps``: the selected ranks'
    :func:`step_table`, when the caller already has it.
    """
    if steps is None:
        steps = step_table(trace, ranks)
    available = sorted(set(steps["iteration"].tolist()))
    if isinstance(iteration, str):
        if iteration.lower() != "all":
            raise ValueError(f"iteration={iteration!r}: pass a step number, a list of them, "
                             "None (the first step) or \"all\" (every event).")
        return None
    if iteration is None:
        if not available:
            logger.info("no ProfilerStep in the selected ranks: comparing every event")
            return None
        return available[:1]
    wanted = [int(iteration)] if isinstance(iteration, (int, np.integer)) else [
        int(i) for i in iteration]
    missing = [i for i in wanted if i not in available]
    if missing:
        raise ValueError(
            f"iteration(s) {missing} not found; the selected ranks hold ProfilerStep "
            f"{_brief(available) or 'none'}. Pass one of those, or \"all\" for every event."
        )
    return wanted


def _brief(values: list[int]) -> str:
    return ", ".join(map(str, values[:20])) + (" ..." if len(values) > 20 else "")


def _first_rank(trace: Trace, rank: Ranks) -> list[int]:
    if rank is None:
        loaded = trace.get_ranks()
        if not loaded:
            raise ValueError("the trace holds no rank; load a folder with trace files.")
        return loaded[:1]
    return [rt.rank for rt in select_ranks(trace, rank)]
