"""What every finding rule reads of a rank, computed once per rank: its ``ProfilerStep``
spans (:func:`step_table`) and its event links (:func:`link`). The bottom of the rules'
modules: it imports none of them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.model.derived import derived
from hta.model.selection import rank_steps
from hta.model.trace import RankTrace


def step_table(rt: RankTrace) -> pd.DataFrame:
    """The rank's ``ProfilerStep#N`` spans (the model's step table,
    :func:`hta.model.selection.rank_steps`, the spans that give events their
    ``iteration``): columns ``step``, ``start_ns``, ``end_ns``.

    Every rule asks for it: computed once per rank (:func:`hta.model.derived.derived`)."""
    return derived(rt, "findings.step_table", lambda: _step_table(rt))


def step_numbers(rt: RankTrace) -> np.ndarray:
    """The ``step`` column of :func:`step_table` (read-only; an array, for the many callers
    that need no frame)."""
    return derived(rt, "findings.step_numbers", lambda: step_table(rt)["step"].to_numpy())


def _step_table(rt: RankTrace) -> pd.DataFrame:
    if not len(rt.events):
        return pd.DataFrame({"step": [], "start_ns": [], "end_ns": []}, dtype=np.int64)
    spans = rank_steps(rt)
    return pd.DataFrame({"step": spans["step"].to_numpy(np.int64),
                         "start_ns": spans["ts"].to_numpy(np.int64),
                         "end_ns": spans["end"].to_numpy(np.int64)})


def link(rt: RankTrace, name: str) -> np.ndarray:
    """A link column of the rank's events (``parent``, ``index_correlation``,
    ``op_index``) as row positions (:meth:`~hta.model.trace.RankTrace.link`; -1: no
    link), computed once per rank (a read-only array)."""
    return derived(rt, ("findings.link", name), lambda: rt.link(name))


__all__ = ["link", "step_numbers", "step_table"]
