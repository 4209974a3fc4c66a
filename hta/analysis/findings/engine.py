"""The findings engine: rules are data, each computes its evidence and a saving.

A :class:`FindingRule` names a problem (``id``, ``title``), where its evidence lives in
the report (``section``), what to try (``advice``), and how its saving is estimated
(``saving``, one sentence that the docs repeat). Its ``check`` looks at the trace and
returns :class:`Finding` objects: the ranks and steps affected, the evidence (numbers a
reader can check by hand in the tables), and ``est_saving_ns``, the wall time the step
would lose if the problem went away.

Rules come in two scopes:

* ``"rank"``: ``check(rank_trace, iterations) -> list[Finding]``, one rank at a time, run
  next to the data by the runner (:func:`hta.model.runner.run`: Dask workers, ranks
  kept on disk);
* ``"job"``: ``check(trace, ranks, iterations) -> list[Finding]``, for what needs several
  ranks at once (stragglers).

:func:`find` runs the rules, shares each rank's time out among its findings, merges the
per-rank findings of one rule and subject into a single row, grades each by its share of
the analysed time and sorts by saving. :func:`analyse` also returns what the findings
explain of each rank's idle and exposed time (:mod:`hta.analysis.findings.coverage`).

**Claims.** A finding names the time its saving comes from (``Finding.claim``, a
:class:`~hta.analysis.findings.claims.Claim`: intervals of the rank's timeline, and the
saving inside each). Per rank (:mod:`hta.analysis.findings.sharing`), the findings are
taken in :data:`CLAIM_ORDER` (the stronger, more specific cause first; within a rule the
larger estimate first); each nanosecond can be claimed once in all, each finding gets
what it claims up to what earlier findings left, and its saving becomes ``min(estimate,
amount kept)`` (:func:`hta.analysis.findings.claims.resolve`). A finding whose claimed
intervals run, for :data:`MERGE_SHARE` (half) or more of their length, where an earlier
finding of the same rule keeps time is the same problem seen twice (a collective counted
once per process group and once per stream, nested sync calls of one wait): it is merged
into that finding, whose saving gains what it kept and whose evidence says so. A finding
that loses time to another rule keeps its row with the reduced saving, and its evidence
names the finding holding the rest. ``Finding.budget`` names a resource several findings
may draw on (the free computation exposed collectives would hide under): their savings
add up to it at most, and a same-rule finding left with under half merges likewise. A
finding without a claim (a rule that declares none) is capped by the window time that no
claimed finding holds. So, by construction, no nanosecond of a rank is counted twice and
the savings of a rank add up to at most its window (widened to the kernels its steps
launched that run after it). Findings under ``min_share`` of the rank's window are dropped
before and after sharing (their time then counts as unexplained).

**Merging.** Findings of the same rule and ``subject`` on several ranks become one row:
``ranks`` and ``steps`` are the sorted unions, ``est_saving(us)`` is the *largest* saving
of one rank, and the evidence is that rank's. In a job whose ranks run in lock-step the
step ends when the slowest rank ends, so the wall-time saving of a fix applied everywhere
is bounded by one rank's saving, not the sum over ranks.

**Severity** is the saving's share of the analysed window of the rank it came from
(``window_ns``, the span of the selected steps, see :func:`analysis_window`):
``high`` at 10% or more, ``medium`` at 3% or more, ``low`` below. Findings under
``min_share`` (default 0.5%) are dropped as noise, on each rank. A rule marked ``info``
states a fact about the trace, not a problem with a saving (a trace that holds only
CUDA-graph captures): its findings have severity ``info``, no saving and no claim, and
are always kept.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.findings import coverage
from hta.analysis.findings.base import (  # noqa: F401 - re-exported: the rule types
    Finding,
    FindingRule,
    JobCheck,
    RankCheck,
    analysis_window,
    step_table,
)
from hta.analysis.findings.catalog import RULE_MODULES, default_rules  # noqa: F401
from hta.analysis.findings.sharing import (  # noqa: F401 - re-exported: the order and share
    CLAIM_ORDER,
    MERGE_SHARE,
    KeptTime,
    resolve_rank,
)
from hta.analysis.gpu_work import as_list
from hta.analysis.select import rank_numbers
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.job import Job
from hta.model.runner import RankWork, remember_together, run_one
from hta.model.selection import EVERYTHING, Selection, StepList
from hta.model.trace import RankTrace, Trace

logger = logging.getLogger(__name__)

#: The columns of :func:`find`'s table, the issue's seven first.
COLUMNS = ["rule", "severity", "ranks", "steps", "evidence", "est_saving(us)", "advice",
           "title", "subject", "section", "share_pctg"]
#: Columns of the per-rank table that :func:`rank_findings` returns (one row a finding).
RAW_COLUMNS = ["rule", "rank", "ranks", "steps", "evidence", "est_saving_ns", "window_ns",
               "subject", "advice", "claimed"]
SEVERITIES = ("high", "medium", "low", "info")
HIGH_SHARE = 0.10
MEDIUM_SHARE = 0.03
DEFAULT_MIN_SHARE = 0.005


def describe_rules(rules: Sequence[FindingRule] | None = None) -> pd.DataFrame:
    """The rule table: id, title, scope, report section, saving definition, advice."""
    rules = default_rules() if rules is None else list(rules)
    return pd.DataFrame(
        [{"rule": r.id, "title": r.title, "scope": r.scope, "section": r.section,
          "saving": r.saving, "advice": r.advice} for r in rules],
        columns=["rule", "title", "scope", "section", "saving", "advice"],
    )


# -- running the rules ------------------------------------------------------------------
@dataclass(frozen=True)
class FindingsResult:
    """What :func:`analyse` returns: the findings table (:data:`COLUMNS`), the coverage
    per rank (:data:`hta.analysis.findings.coverage.COLUMNS`) and the largest unexplained
    pieces (:data:`hta.analysis.findings.coverage.PIECE_COLUMNS`)."""

    findings: pd.DataFrame
    coverage: pd.DataFrame
    unexplained: pd.DataFrame


def rank_analysis(trace: Trace, selection: Selection = EVERYTHING,
                  rules: Sequence[FindingRule] | None = None,
                  min_share: float = DEFAULT_MIN_SHARE,
                  reserved: dict[int, list[tuple[str, Finding]]] | None = None
                  ) -> pd.DataFrame:
    """Per rank: the rank-scope rules' findings after the claims are shared out
    (:func:`resolve_rank`) and the coverage of the idle and exposed time.

    One row per rank: ``rank``, ``findings`` (a list of :data:`RAW_COLUMNS` dicts),
    ``coverage`` (a dict) and ``pieces`` (a list of dicts). Per rank, so
    :mod:`hta.model.runner` runs it next to the data; no claim travels back.
    ``reserved``: per rank, the job findings that claim time on it, which go first.
    """
    return RANK_ANALYSIS.run(trace, selection, rules, min_share, reserved)


#: Columns of :func:`rank_analysis`.
ANALYSIS_COLUMNS = ["rank", "findings", "coverage", "pieces"]


def analysis_of_rank(rt: RankTrace, iterations: StepList = None,
                     rules: Sequence[FindingRule] | None = None,
                     min_share: float = DEFAULT_MIN_SHARE,
                     reserved: dict[int, list[tuple[str, Finding]]] | None = None
                     ) -> pd.DataFrame:
    """One rank's row of :func:`rank_analysis` (the runner's per-rank function)."""
    return pd.DataFrame([_analysis_row(rt, iterations, rules, min_share, reserved)],
                        columns=ANALYSIS_COLUMNS)


#: :func:`analysis_of_rank`, declared: costly per rank, small answers (spread over forked
#: workers on an in-memory job of many ranks).
RANK_ANALYSIS = Analysis("Findings", analysis_of_rank, Columns.typed(ANALYSIS_COLUMNS),
                         steps=PER_STEP, add_rank=True, spread=True)


def _analysis_row(rt: RankTrace, iterations: StepList,
                  rules: Sequence[FindingRule] | None, min_share: float,
                  reserved: dict[int, list[tuple[str, Finding]]] | None) -> dict[str, Any]:
    rank_rules = [r for r in (default_rules() if rules is None else rules)
                  if r.scope == "rank"]
    iters = None if iterations is None else as_list(iterations)
    window = analysis_window(rt, iters)
    found = [(rule, f) for rule in rank_rules
             for f in rule.check(rt, iters)]  # type: ignore[arg-type]
    # Notes (info rules) claim no time and have no saving: kept as they are.
    notes = [_raw_row(rule, rt.rank, f) for rule, f in found if rule.info]
    # A note with a claim (warm-up) holds its time first: no saving counts it.
    held = [(rule.id, replace(f, est_saving_ns=_claim_length(f)))
            for rule, f in found if rule.info and f.claim is not None]
    found = [(rule, f) for rule, f in found if not rule.info]
    raw, kept = resolve_rank(rt.rank, found, window, min_share,
                             held + list((reserved or {}).get(rt.rank, [])))
    cov, pieces = coverage.rank_coverage(rt, iters, window, kept)
    cov["note"] = coverage.with_notes(cov["note"], [str(n["rule"]) for n in notes])
    cov["saving_ns"] = int(sum(int(r["est_saving_ns"]) for r in raw))
    cov["free_ns"] = max(cov["window_ns"] - kept.kept_total - sum(
        int(r["est_saving_ns"]) for r in raw if not r["claimed"]), 0)
    return {"rank": rt.rank, "findings": raw + notes, "coverage": cov, "pieces": pieces}


def rank_findings(trace: Trace, selection: Selection = EVERYTHING,
                  rules: Sequence[FindingRule] | None = None,
                  min_share: float = DEFAULT_MIN_SHARE) -> pd.DataFrame:
    """The rank-scope rules' findings, one row per finding and rank (:data:`RAW_COLUMNS`),
    after :func:`resolve_rank`."""
    per_rank = rank_analysis(trace, selection, rules=rules, min_share=min_share)
    rows = [r for found in per_rank["findings"] for r in found]
    return pd.DataFrame(rows, columns=RAW_COLUMNS)


def analyse(trace: Job, selection: Selection = EVERYTHING,
            rules: Sequence[FindingRule] | None = None,
            min_share: float = DEFAULT_MIN_SHARE) -> FindingsResult:
    """Run the rules; the findings, largest saving first, with the coverage per rank.

    ``rules`` defaults to :func:`default_rules`. A job rule that raises is logged and
    skipped: one broken rule must not hide the others' findings.
    """
    return run_one(trace, findings_plan(trace, selection, rules, min_share),
                   selection.every_event())


def findings_plan(trace: Job, selection: Selection = EVERYTHING,
                  rules: Sequence[FindingRule] | None = None,
                  min_share: float = DEFAULT_MIN_SHARE) -> RankWork:
    """:func:`analyse` as a :class:`~hta.model.runner.RankWork`: the job rules run now
    (they need several ranks at once), the rank rules and the sharing of each rank's
    time where the rank is, with the other per-rank analyses of one visit
    (:func:`hta.model.runner.run`); ``finish`` merges the rows into the
    :class:`FindingsResult`. Run it over the same selection's ranks."""
    rules = default_rules() if rules is None else list(rules)
    iters = selection.iteration_list
    _read_job_inputs(trace, selection, rules)
    job = _job_findings(trace, selection, rules)
    reserved: dict[int, list[tuple[str, Finding]]] = {}
    for rule, f in job:
        for r, claim in (f.rank_claims or {}).items():
            reserved.setdefault(int(r), []).append((rule.id, replace(
                f, claim=claim, est_saving_ns=int(claim.amount.sum()) if claim.amount is not
                None else int((claim.end - claim.start).sum()), rank_claims=None)))

    def finish(per_rank: pd.DataFrame) -> FindingsResult:
        raw_rows = [r for found in per_rank["findings"] for r in found]
        covs = {int(c["rank"]): c for c in per_rank["coverage"]}
        for rule, f in job:
            raw_rows.append(_cap_job_finding(_raw_row(rule, -1, f), f, covs))
        table = pd.DataFrame(raw_rows, columns=RAW_COLUMNS)
        findings = merge(table, rules, min_share)
        pieces = [p for ps in per_rank["pieces"] for p in ps]
        return FindingsResult(findings, coverage.coverage_table(list(covs.values())),
                              coverage.piece_table(pieces))

    return RANK_ANALYSIS.work(iters, rules, min_share, reserved).then(finish)


def _read_job_inputs(trace: Job, selection: Selection, rules: Sequence[FindingRule]) -> None:
    """The per-rank tables the job rules read (:attr:`FindingRule.inputs`), in one visit of
    the ranks spread over forked workers when the job is in memory and large enough
    (:func:`hta.model.runner.remember_together`): read one rule at a time, they would be
    visited here, rank after rank. The rules then find them kept for the job; the
    answers are the same."""
    ranks = rank_numbers(trace, selection)
    if len(ranks) < 2:
        return
    iters = selection.iteration_list
    visits = dict(pair for rule in rules if rule.scope == "job" and rule.inputs is not None
                  for pair in rule.inputs(ranks, iters))
    if visits:
        remember_together(trace, list(visits.items()), Selection.of(ranks))


def _job_findings(trace: Job, selection: Selection, rules: Sequence[FindingRule]
                  ) -> list[tuple[FindingRule, Finding]]:
    """The job rules' findings on ``selection``; a rule that raises is logged and
    skipped."""
    out: list[tuple[FindingRule, Finding]] = []
    for rule in (r for r in rules if r.scope == "job"):
        try:
            found = rule.check(trace, selection)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - see analyse's docstring
            logger.warning("finding rule %s failed: %s", rule.id, exc, exc_info=True)
            continue
        out.extend((rule, f) for f in found)
    return out


def find(trace: Job, selection: Selection = EVERYTHING,
         rules: Sequence[FindingRule] | None = None,
         min_share: float = DEFAULT_MIN_SHARE) -> pd.DataFrame:
    """Run the rules and return the findings (:data:`COLUMNS`), largest saving first
    (:func:`analyse`'s ``findings``)."""
    return analyse(trace, selection, rules=rules, min_share=min_share).findings


def _cap_job_finding(row: dict[str, Any], f: Finding,
                     covs: dict[int, dict]) -> dict[str, object]:
    """A job finding about one rank takes at most the window time of that rank that no
    other finding holds (and leaves less for the next). A finding whose time lies on the
    other ranks (``rank_claims``: a straggler's saving is the others' wait, reserved on
    them before their rules ran) keeps its saving, though the rank's own findings may
    hold its time (a late rank's slow fp32 GEMMs); its rank's coverage counts what is
    free of them."""
    if len(f.ranks) == 1 and int(f.ranks[0]) in covs:
        cov = covs[int(f.ranks[0])]
        saving = min(int(row["est_saving_ns"]), int(cov["free_ns"]))
        cov["free_ns"] = int(cov["free_ns"]) - saving
        cov["saving_ns"] = int(cov["saving_ns"]) + saving
        if not f.rank_claims:
            row["est_saving_ns"] = saving
    return row


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
            "severity": "info" if rule.info else severity(
                share, severity_cap(rule, str(worst["subject"]))),
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


def severity(share: float, cap: str = "") -> str:
    """``high``, ``medium`` or ``low`` for a saving that is ``share`` of the window, at
    most ``cap`` when given (:attr:`FindingRule.max_severity`)."""
    level = "high" if share >= HIGH_SHARE else "medium" if share >= MEDIUM_SHARE else "low"
    if cap and SEVERITIES.index(level) < SEVERITIES.index(cap):
        return cap
    return level


def severity_cap(rule: FindingRule | None, subject: str) -> str:
    """The highest severity ``rule`` allows a finding about ``subject`` (``""``: none)."""
    if rule is None or rule.max_severity is None:
        return ""
    return rule.max_severity(subject)


def _claim_length(f: Finding) -> int:
    """The length of a finding's claimed intervals (ns)."""
    claim = f.claim
    if claim is None:
        return 0
    if claim.amount is not None:
        return int(claim.amount.sum())
    return int((claim.end - claim.start).sum())


def _raw_row(rule: FindingRule, rank: int, f: Finding) -> dict[str, Any]:
    return {
        "rule": rule.id, "rank": rank, "ranks": [int(r) for r in f.ranks],
        "steps": [int(s) for s in f.steps], "evidence": f.evidence,
        "est_saving_ns": int(f.est_saving_ns), "window_ns": int(f.window_ns),
        "subject": f.subject, "advice": f.advice, "claimed": f.claim is not None,
    }
