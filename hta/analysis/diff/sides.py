"""One side of a job diff: the trace, its selection and the tables both comparisons use."""


from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hta.analysis.diff.scope import resolve_iterations
from hta.model.job import Job
from hta.model.selection import ALL, Selection, step_table


@dataclass
class _Side:
    """One trace's selection: ranks, steps per rank, the iterations to analyse."""

    trace: Job
    ranks: list[int]
    steps: pd.DataFrame  # selected step spans
    n_steps: dict[int, int]  # per rank; 1 when the trace has no steps
    iterations: list[int] | None
    has_steps: bool

    @property
    def selection(self) -> Selection:
        """The side's ranks and iterations, as the analyses take them."""
        return Selection.of(self.ranks, self.iterations)

    def per_step(self, frame: pd.DataFrame, value: str) -> float:
        """Mean over the selected ranks of (rank's sum of ``value``) / (rank's steps)."""
        if not self.ranks:
            return math.nan
        sums = frame.groupby("rank")[value].sum() if len(frame) else pd.Series(dtype=float)
        return float(sum(float(sums.get(r, 0.0)) / self.n_steps[r] for r in self.ranks)
                     / len(self.ranks))


def _side(trace: Job, selection: Selection) -> _Side:
    selected = trace.selected_ranks(selection.rank_list)
    if not selected:
        raise ValueError("no rank selected; check the ranks argument against the loaded "
                         f"ranks {trace.get_ranks()}.")
    steps = step_table(trace, Selection.of(selected))
    has_steps = len(steps) > 0
    if has_steps:
        if selection.iterations is ALL:  # None or "all": every step
            wanted = sorted(set(steps["step"].tolist()))
        else:
            wanted = resolve_iterations(trace, selected, selection.iterations, steps) or []
        steps = steps[steps["step"].isin(wanted)].reset_index(drop=True)
        counts = steps.groupby("rank")["step"].nunique()
        n_steps = {r: int(counts.get(r, 0)) for r in selected}
        empty = [r for r, n in n_steps.items() if n == 0]
        if empty:
            raise ValueError(f"rank(s) {empty} hold none of the selected steps {wanted}; "
                             "select other ranks or iterations.")
        return _Side(trace, selected, steps, n_steps, wanted, True)
    if selection.iterations is not ALL:
        raise ValueError("iterations were given but the trace has no ProfilerStep; "
                         "leave them out to compare whole traces.")
    return _Side(trace, selected, steps, dict.fromkeys(selected, 1), None, False)




def _steps_rows(label: str, side: _Side) -> pd.DataFrame:
    s = side.steps
    return pd.DataFrame({"side": label, "rank": s["rank"].to_numpy(dtype=np.int64),
                         "iteration": s["step"].to_numpy(dtype=np.int64),
                         "step_time(us)": s["dur"].to_numpy() / 1e3})


def _rank_mean_steps(side: _Side) -> np.ndarray:
    if not side.has_steps:
        return np.zeros(0)
    per_rank = side.steps.groupby("rank")["dur"].mean() / 1e3
    return per_rank.to_numpy(dtype=float)
