"""The findings engine: rules are data, each computes its evidence and a saving.

A :class:`FindingRule` names a problem (``id``, ``title``), where its evidence lives in
the report (``section``), what to try (``advice``), and how its saving is estimated
(``saving``, one sentence that the docs repeat). Its ``check`` looks at the trace and
returns :class:`Finding` objects: the ranks and steps affected, the evidence (numbers a
reader can check by hand in the tables), and ``est_saving_ns``, the wall time the step
would lose if the problem went away.

Rules come in two scopes:

* ``"rank"``: ``check(rank_trace, iterations) -> list[Finding]``, one rank at a time, run
  next to the data through :func:`hta.model.trace.map_ranks` (Dask workers, ranks kept
  on disk);
* ``"job"``: ``check(trace, ranks, iterations) -> list[Finding]``, for what needs several
  ranks at once (stragglers).

:func:`find` runs the rules, merges the per-rank findings of one rule and subject into a
single row, grades each by its share of the analysed time and sorts by saving.

**Merging.** Findings of the same rule and ``subject`` on several ranks become one row:
``ranks`` and ``steps`` are the sorted unions, ``est_saving(us)`` is the *largest* saving
of one rank, and the evidence is that rank's. In a job whose ranks run in lock-step the
step ends when the slowest rank ends, so the wall-time saving of a fix applied everywhere
is bounded by one rank's saving, not the sum over ranks.

**Severity** is the saving's share of the analysed window of the rank it came from
(``window_ns``, the span of the selected steps, see :func:`analysis_window`):
``high`` at 10% or more, ``medium`` at 3% or more, ``low`` below. Findings under
``min_share`` (default 0.5%) are dropped as noise. A rule marked ``info`` states a fact
about the trace, not a problem with a saving (a trace that holds only CUDA-graph
captures): its findings have severity ``info`` and no saving, and are always kept.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from hta.analysis.gpu_work import as_list
from hta.analysis.select import select_ranks
from hta.analysis.steps import rank_step_spans
from hta.model.trace import RankTrace, Trace, map_ranks

logger = logging.getLogger(__name__)

#: The columns of :func:`find`'s table, the issue's seven first.
COLUMNS = ["rule", "severity", "ranks", "steps", "evidence", "est_saving(us)", "advice",
           "title", "subject", "section", "share_pctg"]
#: Columns of the per-rank table that :func:`rank_findings` returns (one row a finding).
RAW_COLUMNS = ["rule", "rank", "ranks", "steps", "evidence", "est_saving_ns", "window_ns",
               "subject", "advice"]
SEVERITIES = ("high", "medium", "low", "info")
HIGH_SHARE = 0.10
MEDIUM_SHARE = 0.03
DEFAULT_MIN_SHARE = 0.005

#: Modules holding the default rules, each with a ``RULES`` list, in report order.
RULE_MODULES: tuple[str, ...] = (
    "hta.analysis.findings.host",
    "hta.analysis.findings.launch_bound",
    "hta.analysis.findings.copies",
    "hta.analysis.findings.communication",
    "hta.analysis.findings.collective_bw",
    "hta.analysis.findings.kernels",
    "hta.analysis.findings.unclassified",
    "hta.analysis.findings.graphs",
    "hta.analysis.findings.roofline",
)


@dataclass(frozen=True)
class Finding:
    """One problem seen on one rank (or, for job rules, on several).

    ``window_ns`` is the analysed time the saving is a share of (for severity);
    ``subject`` separates several findings of one rule (a kernel, a process group);
    ``advice`` replaces the rule's advice when set.
    """

    ranks: tuple[int, ...]
    steps: tuple[int, ...]
    evidence: str
    est_saving_ns: int
    window_ns: int
    subject: str = ""
    advice: str = ""


RankCheck = Callable[[RankTrace, "list[int] | None"], "list[Finding]"]
JobCheck = Callable[[Trace, "list[int]", "list[int] | None"], "list[Finding]"]


@dataclass(frozen=True)
class FindingRule:
    """A rule: what it detects, where the evidence is, what to try, and its check.

    ``info``: the rule states a fact, not a problem; its findings have severity ``info``
    and no saving, and ``min_share`` does not drop them.
    """

    id: str
    title: str
    section: str
    advice: str
    saving: str
    check: RankCheck | JobCheck
    scope: Literal["rank", "job"] = "rank"
    tags: tuple[str, ...] = field(default=())
    info: bool = False


def default_rules() -> list[FindingRule]:
    """Every rule of :data:`RULE_MODULES`, in order."""
    rules: list[FindingRule] = []
    for name in RULE_MODULES:
        rules.extend(importlib.import_module(name).RULES)
    return rules


def describe_rules(rules: Sequence[FindingRule] | None = None) -> pd.DataFrame:
    """The rule table: id, title, scope, report section, saving definition, advice."""
    rules = default_rules() if rules is None else list(rules)
    return pd.DataFrame(
        [{"rule": r.id, "title": r.title, "scope": r.scope, "section": r.section,
          "saving": r.saving, "advice": r.advice} for r in rules],
        columns=["rule", "title", "scope", "section", "saving", "advice"],
    )


# -- the analysed window ---------------------------------------------------------------
def step_table(rt: RankTrace) -> pd.DataFrame:
    """The rank's ``ProfilerStep#N`` spans (:func:`hta.analysis.steps.rank_step_spans`, the
    spans that give events their ``iteration``): columns ``step``, ``start_ns``, ``end_ns``."""
    if not len(rt.events):
        return pd.DataFrame({"step": [], "start_ns": [], "end_ns": []}, dtype=np.int64)
    starts, ends, numbers = rank_step_spans(rt)
    table = pd.DataFrame({"step": numbers, "start_ns": starts, "end_ns": ends})
    return table.drop_duplicates("step", keep="first").reset_index(drop=True)


def analysis_window(rt: RankTrace, iterations: Iterable[int] | int | None = None
                    ) -> tuple[int, int]:
    """(start, end) in ns of what is analysed on this rank.

    With ``iterations``: from the first selected step's start to the last one's end.
    Without: the span of the steps when the trace has ``ProfilerStep`` spans, else the
    span of every event. ``(0, 0)`` for an empty rank.
    """
    steps = step_table(rt)
    if iterations is not None:
        steps = steps[steps["step"].isin(as_list(iterations))]
    if len(steps):
        return int(steps["start_ns"].min()), int(steps["end_ns"].max())
    ev = rt.events
    if not len(ev):
        return 0, 0
    return int(ev["ts"].min()), int(ev["end"].max())


# -- running the rules ------------------------------------------------------------------
def rank_findings(trace: Trace, ranks: Iterable[int] | int | None = None,
                  iterations: Iterable[int] | int | None = None,
                  rules: Sequence[FindingRule] | None = None) -> pd.DataFrame:
    """The rank-scope rules' findings, one row per finding (:data:`RAW_COLUMNS`).

    Per rank, so :func:`~hta.model.trace.map_ranks` can run it next to the data.
    """
    rules = [r for r in (default_rules() if rules is None else rules) if r.scope == "rank"]
    iters = None if iterations is None else as_list(iterations)
    rows = []
    for rt in select_ranks(trace, ranks):
        for rule in rules:
            for f in rule.check(rt, iters):  # type: ignore[call-arg,arg-type]
                rows.append(_raw_row(rule, rt.rank, f))
    return pd.DataFrame(rows, columns=RAW_COLUMNS)


def find(trace: Trace, ranks: Iterable[int] | int | None = None,
         iterations: Iterable[int] | int | None = None,
         rules: Sequence[FindingRule] | None = None,
         min_share: float = DEFAULT_MIN_SHARE) -> pd.DataFrame:
    """Run the rules and return the findings (:data:`COLUMNS`), largest saving first.

    ``rules`` defaults to :func:`default_rules`. A rule that raises is logged and
    skipped: one broken rule must not hide the others' findings.
    """
    rules = default_rules() if rules is None else list(rules)
    selected = sorted(trace.get_ranks()) if ranks is None else sorted(set(as_list(ranks)))
    iters = None if iterations is None else as_list(iterations)
    raw = [map_ranks(trace, rank_findings, selected, (iters, rules),
                     description="Findings")]
    for rule in (r for r in rules if r.scope == "job"):
        try:
            found = rule.check(trace, selected, iters)  # type: ignore[call-arg,arg-type]
        except Exception as exc:  # noqa: BLE001 - see the docstring
            logger.warning("finding rule %s failed: %s", rule.id, exc, exc_info=True)
            continue
        rank = -1
        raw.append(pd.DataFrame([_raw_row(rule, rank, f) for f in found], columns=RAW_COLUMNS))
    frames = [f for f in raw if len(f)]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=RAW_COLUMNS)
    return merge(table, rules, min_share)


def merge(raw: pd.DataFrame, rules: Sequence[FindingRule],
          min_share: float = DEFAULT_MIN_SHARE) -> pd.DataFrame:
    """One row per (rule, subject) from per-rank rows (the module docstring's rules)."""
    by_id = {r.id: r for r in rules}
    rows = []
    for (rule_id, _subject), group in raw.groupby(["rule", "subject"], sort=False):
        worst = group.loc[group["est_saving_ns"].astype(np.int64).idxmax()]
        rule = by_id[rule_id]
        ranks = sorted({int(r) for rs in group["ranks"] for r in rs})
        steps = sorted({int(s) for ss in group["steps"] for s in ss})
        saving = int(worst["est_saving_ns"])
        window = int(worst["window_ns"])
        share = saving / window if window > 0 else 0.0
        if not rule.info and (share < min_share or saving <= 0):
            continue
        evidence = str(worst["evidence"])
        if len(group) > 1 and int(worst["rank"]) >= 0:
            evidence = f"rank {int(worst['rank'])} (worst of {len(group)} ranks): {evidence}"
        elif int(worst["rank"]) >= 0:
            evidence = f"rank {int(worst['rank'])}: {evidence}"
        rows.append({
            "rule": rule_id,
            "severity": "info" if rule.info else severity(share),
            "ranks": ranks,
            "steps": steps,
            "evidence": evidence,
            "est_saving(us)": saving / 1e3,
            "advice": str(worst["advice"]) or rule.advice,
            "title": rule.title,
            "subject": str(worst["subject"]),
            "section": rule.section,
            "share_pctg": round(100.0 * share, 2),
        })
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values("est_saving(us)", ascending=False, ignore_index=True,
                           kind="stable")


def severity(share: float) -> str:
    """``high``, ``medium`` or ``low`` for a saving that is ``share`` of the window."""
    if share >= HIGH_SHARE:
        return "high"
    if share >= MEDIUM_SHARE:
        return "medium"
    return "low"


def _raw_row(rule: FindingRule, rank: int, f: Finding) -> dict[str, object]:
    return {
        "rule": rule.id, "rank": rank, "ranks": [int(r) for r in f.ranks],
        "steps": [int(s) for s in f.steps], "evidence": f.evidence,
        "est_saving_ns": int(f.est_saving_ns), "window_ns": int(f.window_ns),
        "subject": f.subject, "advice": f.advice,
    }
