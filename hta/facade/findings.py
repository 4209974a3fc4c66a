"""Findings on ``TraceAnalysis``: why the GPU waits and what to change."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pandas as pd

from hta.analysis.findings import describe_rules, find
from hta.analysis.findings.engine import DEFAULT_MIN_SHARE

if TYPE_CHECKING:
    from hta.model.job import Job


class FindingsMixin:
    """``get_findings`` and the rule table."""

    t: Job

    def get_findings(self, ranks: Iterable[int] | int | None = None,
                     iterations: Iterable[int] | int | None = None,
                     min_share: float = DEFAULT_MIN_SHARE) -> pd.DataFrame:
        """What slows the job down, why, and what to try, largest estimated saving first.

        Columns ``rule, severity, ranks, steps, evidence, est_saving(us), advice`` (then
        ``title``, ``subject``: what a rule firing several times is about,
        ``section``: the report section holding the evidence, and
        ``share_pctg``: the saving as a share of the analysed time). Each rule and how
        its saving is estimated: :meth:`describe_findings_rules` and the documentation
        page *Findings*. ``min_share`` drops findings smaller than that share of the
        analysed time (default 0.5%).
        """
        return find(self.t, ranks, iterations, min_share=min_share)

    def describe_findings_rules(self) -> pd.DataFrame:
        """Every findings rule: id, title, scope, report section, saving, advice."""
        return describe_rules()
