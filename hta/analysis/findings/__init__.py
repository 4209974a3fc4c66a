"""Findings: why the GPU waits and what to change, with the evidence.

:func:`find` runs the rules of :data:`~hta.analysis.findings.engine.RULE_MODULES` and
returns one row per finding; see :mod:`hta.analysis.findings.engine` for the definitions.
"""

from hta.analysis.findings.engine import (
    COLUMNS,
    Finding,
    FindingRule,
    analysis_window,
    default_rules,
    describe_rules,
    find,
    step_table,
)

__all__ = ["COLUMNS", "Finding", "FindingRule", "analysis_window", "default_rules",
           "describe_rules", "find", "step_table"]
