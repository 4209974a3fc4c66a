"""Sharing a rank's time out among its findings (the *Claims* of
:mod:`hta.analysis.findings.engine`).

:func:`resolve_rank` takes the findings of one rank in :data:`CLAIM_ORDER`, shares the
claimed time with :func:`hta.analysis.findings.claims.resolve`, merges the findings of one
rule about the same time (:data:`MERGE_SHARE`), caps the savings that draw on a shared
budget (``Finding.budget``) and those without a claim, and drops what falls under the
noise floor. Its rows are the engine's raw per-rank rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from hta.analysis.findings.claims import Kept, cap_unclaimed, resolve
from hta.analysis.findings.rule_tools import fmt_time
from hta.analysis.intervals import Cover

if TYPE_CHECKING:
    from hta.analysis.findings.base import Finding, FindingRule

#: The order in which findings keep contested time, strongest and most specific cause
#: first: a named blocking call or loader span, then a property of named copies, then
#: communication, then properties of named kernels, then the broad patterns. Rules not
#: listed come after, in rule order; within a rule the larger estimate goes first.
CLAIM_ORDER: tuple[str, ...] = (
    "host_sync", "data_loading", "pageable_copies", "copies_on_compute_stream",
    "comm_exposed", "fp32_gemm", "fp64_work", "batchnorm_inference", "unfused_attention",
    "dtype_casts", "optimizer_passes", "elementwise_chains", "layout_conversions",
    "low_occupancy", "launch_bound",
    "small_kernels",
    "host_bound",
)
#: The note holding the one-time costs' idle time.
WARMUP = "warmup"
#: Share of a finding's claimed time held by an earlier finding of the same rule from
#: which the two are one finding (merged into the earlier).
MERGE_SHARE = 0.5


# -- sharing the time out -------------------------------------------------------------------
@dataclass
class _Row:
    """A finding of one rank while its claim is being resolved."""

    rule: str
    finding: Finding
    saving: int = 0
    steps: set[int] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    kept: Kept | None = None
    into: int = -1  # index of the row it was merged into
    reserved: bool = False  # a job finding's claim on this rank: no row of its own


@dataclass(frozen=True)
class KeptTime:
    """The time the shown findings of a rank hold (union of their kept claims), and per
    rule the union of what its findings keep (``by_rule``; notes that hold time, such as
    ``warmup``, included)."""

    cover: Cover
    kept_total: int
    by_rule: dict[str, Cover] = field(default_factory=dict)


def claim_priority(rule_id: str, position: int) -> tuple[int, int]:
    """Sort key of a rule in :data:`CLAIM_ORDER` (others after it, in rule order)."""
    if rule_id in CLAIM_ORDER:
        return CLAIM_ORDER.index(rule_id), position
    return len(CLAIM_ORDER), position


def resolve_rank(rank: int, found: list[tuple[FindingRule, Finding]],
                 window: tuple[int, int], min_share: float,
                 reserved: Sequence[tuple[str, Finding]] = ()
                 ) -> tuple[list[dict[str, Any]], KeptTime]:
    """Share the rank's time among its findings (module docstring, *Claims*): the raw
    rows (:data:`RAW_COLUMNS`) of the findings kept, and the time they hold.

    ``reserved``: ``(rule id, finding)`` of job findings that claim time on this rank
    (``Finding.rank_claims``); they take it first and give no row here (their row is the
    job's)."""
    recurring = recurring_ns(reserved, window)
    floor = max(min_share * recurring, 1e-9)
    first_seen: dict[str, int] = {}
    for i, (rule, _f) in enumerate(found):
        first_seen.setdefault(rule.id, i)
    order = sorted(range(len(found)), key=lambda i: (
        claim_priority(found[i][0].id, first_seen[found[i][0].id]),
        -int(found[i][1].est_saving_ns)))
    live = [i for i in order if found[i][1].est_saving_ns >= floor]
    first = len(reserved)
    for _ in range(4):  # drop what falls under the floor, then share again
        rows = [_Row(rule_id, f, reserved=True) for rule_id, f in reserved]
        rows += [_Row(found[i][0].id, found[i][1]) for i in live]
        claimed = [k for k, r in enumerate(rows) if r.finding.claim is not None]
        kept = resolve([rows[k].finding.claim for k in claimed],  # type: ignore[misc]
                       [rows[k].finding.est_saving_ns for k in claimed], window,
                       [rows[k].rule for k in claimed])
        for k, kp in zip(claimed, kept, strict=True):
            _settle(rows, claimed, k, kp)
        budgets: dict[str, int] = {}
        _draw_budgets(rows, [rows[k] for k in claimed], budgets)
        small = {live[k - first] for k in claimed
                 if k >= first and rows[k].into < 0 and rows[k].saving < floor}
        if not small:
            break
        live = [i for i in live if i not in small]
    cover = Cover(*_kept_pieces(rows, claimed))
    kept_total = int((cover.e - cover.s).sum())
    by_rule = _kept_by_rule(rows, claimed)
    free = [r.finding.est_saving_ns for r in rows if r.finding.claim is None]
    for r, saving in zip((r for r in rows if r.finding.claim is None),
                         cap_unclaimed(free, window[1] - window[0], kept_total), strict=True):
        r.saving = saving
    _draw_budgets(rows, [r for r in rows if r.finding.claim is None], budgets)
    for r in rows:
        if r.finding.claim is None and r.saving < floor:
            r.saving = 0
    out = [_raw_row_of(rank, r, recurring) for r in rows
           if r.into < 0 and r.saving > 0 and not r.reserved]
    return out, KeptTime(cover, kept_total, by_rule)


def _kept_by_rule(rows: list[_Row], claimed: list[int]) -> dict[str, Cover]:
    """Per rule, the union of the time its rows keep (job findings' reserved time under
    their rule too)."""
    parts: dict[str, list[Kept]] = {}
    for k in claimed:
        if rows[k].kept is not None and rows[k].kept.start.size:  # type: ignore[union-attr]
            parts.setdefault(rows[k].rule, []).append(rows[k].kept)  # type: ignore[arg-type]
    return {rule: Cover(np.concatenate([p.start for p in ps]),
                        np.concatenate([p.end for p in ps])) for rule, ps in parts.items()}


def _settle(rows: list[_Row], claimed: list[int], k: int, kp: Kept) -> None:
    """Give row ``k`` its kept claim; merge it into an earlier row of its rule whose kept
    time covers most of its claimed time (:data:`MERGE_SHARE`), else note who holds what
    it lost."""
    row = rows[k]
    row.kept, row.saving = kp, kp.saving_ns
    row.steps = {int(s) for s in row.finding.steps}
    for j, part in sorted(kp.shared_with.items(), key=lambda kv: -kv[1]):
        root = _root(rows, claimed[j])
        if part >= MERGE_SHARE * max(kp.claim_len, 1) and row.into < 0:
            other = rows[root]
            row.into = root
            other.saving += row.saving
            other.steps |= row.steps
            other.notes.append(
                f"The same time also shows as {row.finding.subject or 'another finding'} "
                f"({fmt_time(part)} of its {fmt_time(kp.claim_len)} in common): its "
                f"{fmt_time(row.saving)} is counted here, not in a row of its own.")
    for j, part in sorted(kp.lost_to.items(), key=lambda kv: -kv[1]):
        other = rows[_root(rows, claimed[j])]
        if part >= 0.01 * max(kp.claimed_ns, 1) and row.into < 0:
            about = f" ({other.finding.subject})" if other.finding.subject else ""
            row.notes.append(f"{fmt_time(part)} of the time it claims is held by {other.rule}"
                             f"{about}, which counts it; the saving here leaves it out.")


def _root(rows: list[_Row], k: int) -> int:
    while rows[k].into >= 0:
        k = rows[k].into
    return k


def _draw_budgets(rows: list[_Row], todo: list[_Row], left: dict[str, int]) -> None:
    """Cap the savings that draw on a shared budget (``Finding.budget``), in order; a row
    left with under half its saving by an earlier row of its rule merges into it."""
    where = {id(x): i for i, x in enumerate(rows)}
    holder: dict[str, int] = {}
    for r in todo:
        if r.into >= 0 or r.finding.budget is None:
            continue
        key, amount = r.finding.budget
        left.setdefault(key, int(amount))
        take = min(r.saving, max(left[key], 0))
        root = rows[holder.setdefault(key, where[id(r)])]
        if take < r.saving:
            short = r.saving - take
            if root is not r and root.rule == r.rule and take < MERGE_SHARE * r.saving:
                r.into = where[id(root)]
                root.saving += take
                root.steps |= r.steps
                root.notes.append(
                    f"The same saving also shows as {r.finding.subject or 'another finding'}"
                    f" (its {fmt_time(r.saving)} draws on the same {fmt_time(amount)} of "
                    f"{key}), counted once here.")
            else:
                about = f" ({root.finding.subject})" if root.finding.subject else ""
                r.notes.append(f"{fmt_time(short)} of its saving would draw on {key} that "
                               f"{root.rule}{about} already counts.")
        r.saving = take
        left[key] -= take


def _kept_pieces(rows: list[_Row], claimed: list[int]) -> tuple[np.ndarray, np.ndarray]:
    pieces = [rows[k].kept for k in claimed if rows[k].kept is not None]
    if not pieces:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (np.concatenate([p.start for p in pieces]),  # type: ignore[union-attr]
            np.concatenate([p.end for p in pieces]))  # type: ignore[union-attr]


def recurring_ns(held: Sequence[tuple[str, Finding]], window: tuple[int, int]) -> int:
    """The window's time that recurs: its length minus the GPU idle time inside its
    one-time costs (the ``warmup`` note's claim among ``held``, which no saving may
    take). Shares and the noise floor are of this time, so a pass that one-time costs
    fill (a cold start, a compilation) still shows what it repeats at its size."""
    length = window[1] - window[0]
    for rule_id, f in held:
        if rule_id == WARMUP and f.claim is not None and length > 0:
            once = Cover(np.clip(f.claim.start, *window), np.clip(f.claim.end, *window))
            return max(length - int((once.e - once.s).sum()), 1)
    return length


def _raw_row_of(rank: int, r: _Row, recurring: int) -> dict[str, object]:
    f = r.finding
    evidence = " ".join([f.evidence, *r.notes])
    steps = sorted(r.steps) if r.steps else [int(s) for s in f.steps]
    return {"rule": r.rule, "rank": rank, "ranks": [int(x) for x in f.ranks],
            "steps": steps, "evidence": evidence, "est_saving_ns": int(r.saving),
            "window_ns": min(int(f.window_ns), recurring), "subject": f.subject,
            "advice": f.advice,
            "claimed": f.claim is not None}


__all__ = ["CLAIM_ORDER", "MERGE_SHARE", "KeptTime", "claim_priority", "resolve_rank"]
