"""Findings: why the GPU waits and what to change, with the evidence.

:func:`find` runs the rules of :data:`~hta.analysis.findings.engine.RULE_MODULES` and
returns one row per finding; :func:`analyse` also returns what they explain of each
rank's idle and exposed time (:mod:`hta.analysis.findings.coverage`). See
:mod:`hta.analysis.findings.engine` for the definitions.
"""

from hta.analysis.findings.claims import Claim
from hta.analysis.findings.engine import (
    COLUMNS,
    Finding,
    FindingRule,
    FindingsResult,
    analyse,
    analysis_window,
    default_rules,
    describe_rules,
    find,
    step_table,
)

__all__ = ["COLUMNS", "Claim", "Finding", "FindingRule", "FindingsResult", "analyse",
           "analysis_window", "default_rules", "describe_rules", "find", "step_table"]
