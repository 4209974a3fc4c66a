"""The default findings rules, in report order: every rule module, imported by name.

The engine (:mod:`.engine`) takes its default rules from here; rule modules import only
:mod:`.base`, :mod:`.rule_tools`, :mod:`.claims` and one another, never the engine, so
the import graph has no circle (a test checks it). A new rule module is added to
:data:`RULE_MODULES` below and to the import list.
"""

from __future__ import annotations

from types import ModuleType

from hta.analysis.findings import (
    collective_bw,
    communication,
    copies,
    elementwise,
    fp64,
    fusion,
    graphs,
    host,
    hostbound,
    kernels,
    launch_bound,
    layout,
    optimizer,
    roofline,
    warmup,
)
from hta.analysis.findings.base import FindingRule

#: The modules holding the default rules, each with a ``RULES`` list, in report order.
MODULES: tuple[ModuleType, ...] = (warmup, host, launch_bound, hostbound, copies,
                                   communication, collective_bw, kernels, fp64, fusion,
                                   elementwise, optimizer, layout, graphs, roofline)
#: Their names (for the docs and the rule table).
RULE_MODULES: tuple[str, ...] = tuple(m.__name__ for m in MODULES)


def default_rules() -> list[FindingRule]:
    """Every rule of :data:`MODULES`, in order."""
    return [rule for module in MODULES for rule in module.RULES]


__all__ = ["MODULES", "RULE_MODULES", "default_rules"]
