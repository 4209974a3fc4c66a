"""The time each finding claims on its rank, and how the engine shares it out.

A rule declares, with its :class:`~hta.analysis.findings.engine.Finding`, the stretches
of the rank's timeline its saving comes from: a :class:`Claim`, intervals ``[start,
end)`` in ns with, for each, the part of it that would disappear (``amount``, at most the
interval's length; the whole interval when not given). ``host_sync`` claims its bubbles,
``comm_exposed`` the exposed communication, ``fp32_gemm`` half of each fp32 GEMM.

**Density.** Inside an interval the saving is spread evenly: the *density* of a claim at a
time ``t`` is the sum of ``amount / length`` over its intervals running at ``t``, capped at
1 (two intervals of one claim running at the same time on two streams still save at most
the wall time). :func:`segments` turns a claim into disjoint, sorted segments of constant
density, clipped to the analysed window.

**Resolution** (:func:`resolve`). Each nanosecond of the window can be claimed once: a
*level* from 0 to 1 says how much of it is already held. The findings of a rank are taken
in order (the engine's priority, strongest cause first); at each time a finding gets
``min(its density, 1 - level)`` and the level rises by that much. Its *amount kept* is
what it got, integrated over time, and its saving becomes ``min(its own estimate, the
amount kept)``. Two findings claiming all of an interval (density 1, e.g. the same exposed
collective seen per process group and per stream): the first keeps it, the second gets
nothing there. Two claiming part of it (half of an fp32 GEMM's time, then the grid-bound
share of the same kernel): each keeps its part as long as the parts add up to at most the
interval. So no nanosecond is counted twice, each saving is bounded by the time it holds,
and the savings of a rank add up to at most its window. A finding without a
claim keeps no time: its saving is capped by the window time no claimed finding keeps
(:func:`cap_unclaimed`), so the rank's total stays within its window.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hta.analysis.intervals import Cover, merge


@dataclass(frozen=True, eq=False)
class Claim:
    """Intervals of a rank's timeline a finding's saving comes from (module docstring).

    ``amount[i]`` (ns) is the saving inside ``[start[i], end[i])``; ``None`` means the
    whole interval (a saving of idle or exposed time that would disappear entirely).
    """

    start: np.ndarray
    end: np.ndarray
    amount: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", np.asarray(self.start, dtype=np.int64).ravel())
        object.__setattr__(self, "end", np.asarray(self.end, dtype=np.int64).ravel())
        if self.amount is not None:
            object.__setattr__(self, "amount",
                               np.asarray(self.amount, dtype=np.float64).ravel())


@dataclass
class Kept:
    """What one finding keeps after :func:`resolve`: disjoint sorted segments with their
    density, the amount (ns of saving) they hold, the saving, what it lost to whom (index
    of the earlier finding -> ns of its claim kept by that one), the length of its claimed
    intervals and how much of it runs where earlier claims of its group keep time."""

    start: np.ndarray
    end: np.ndarray
    density: np.ndarray
    claimed_ns: float
    amount_ns: float
    saving_ns: int
    lost_to: dict[int, int] = field(default_factory=dict)
    claim_len: int = 0
    shared_with: dict[int, int] = field(default_factory=dict)

    @property
    def kept_ns(self) -> int:
        """Length of the kept time (ns)."""
        return int((self.end - self.start).sum())


_EMPTY = np.zeros(0, dtype=np.int64)


def segments(claim: Claim, window: tuple[int, int]
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint sorted ``(start, end, density)`` segments of a claim inside ``window``."""
    s = np.maximum(claim.start, window[0])
    e = np.minimum(claim.end, window[1])
    length = (claim.end - claim.start).astype(np.float64)
    keep = e > s
    if claim.amount is None:
        ms, me = merge(s[keep], e[keep])
        return ms, me, np.ones(ms.size)
    dens = np.clip(claim.amount / np.where(length > 0, length, 1.0), 0.0, 1.0)[keep]
    s, e = s[keep], e[keep]
    keep = dens > 0
    s, e, dens = s[keep], e[keep], dens[keep]
    if s.size == 0:
        return _EMPTY, _EMPTY, np.zeros(0)
    bounds = _distinct(np.concatenate([s, e]))
    delta = np.zeros(bounds.size)
    np.add.at(delta, np.searchsorted(bounds, s), dens)
    np.add.at(delta, np.searchsorted(bounds, e), -dens)
    level = np.minimum(np.cumsum(delta)[:-1], 1.0)
    on = level > 1e-12
    return bounds[:-1][on], bounds[1:][on], level[on]


def difference(a_start: np.ndarray, a_end: np.ndarray, b: Cover
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of the disjoint sorted intervals ``a`` outside ``b``: ``(start, end,
    index of the interval of a each part comes from)``."""
    if a_start.size == 0 or b.s.size == 0:
        return a_start, a_end, np.arange(a_start.size)
    # b's gaps, as intervals, intersected with each a interval
    gap_s = np.concatenate(([np.iinfo(np.int64).min // 4], b.e)).astype(np.int64, copy=False)
    gap_e = np.concatenate((b.s, [np.iinfo(np.int64).max // 4])).astype(np.int64, copy=False)
    first = np.searchsorted(gap_e, a_start, side="right")
    last = np.searchsorted(gap_s, a_end, side="left")
    count = np.maximum(last - first, 0)
    owner = np.repeat(np.arange(a_start.size), count)
    offset = np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
    gap = np.repeat(first, count) + offset
    s = np.maximum(a_start[owner], gap_s[gap])
    e = np.minimum(a_end[owner], gap_e[gap])
    ok = e > s
    return s[ok], e[ok], owner[ok]


def resolve(claims: list[Claim], estimates: list[int], window: tuple[int, int],
            groups: list[str] | None = None) -> list[Kept]:
    """Share the rank's time among claims taken in the given order (module docstring).

    With ``groups`` (one label a claim, the rule), each :class:`Kept` also says how long
    its claimed intervals run where an earlier claim of the same group keeps time
    (``shared_with``), whatever the densities."""
    lo, hi = _span(claims, window)
    bounds = np.array([lo, hi], dtype=np.int64)            # the level taken so far:
    level = np.zeros(1)                                    # level[k] on bounds[k:k+2]
    kept: list[Kept] = []
    for claim, estimate in zip(claims, estimates, strict=True):
        s, e, dens = segments(claim, (lo, hi))
        cuts = _distinct(np.concatenate([bounds, s, e]))
        left, width = cuts[:-1], np.diff(cuts).astype(np.float64)
        taken = level[np.clip(np.searchsorted(bounds, left, side="right") - 1, 0,
                              level.size - 1)]
        k = np.searchsorted(s, left, side="right") - 1
        kk = np.clip(k, 0, None)
        want = np.where((k >= 0) & (left < e[kk] if e.size else False),
                        dens[kk] if dens.size else 0.0, 0.0)
        got = np.minimum(want, np.maximum(1.0 - taken, 0.0))
        claimed = float((want * width).sum())
        amount = float((got * width).sum())
        lost = _lost_to(kept, left, width, want - got, taken) if amount < claimed - 0.5 \
            else {}
        on = got > 1e-12
        saving = int(min(max(int(estimate), 0), round(amount)))
        kp = Kept(left[on], cuts[1:][on], got[on], claimed, amount, saving, lost,
                  int(width[want > 0].sum()))
        if groups is not None:
            kp.shared_with = _shared(kept, groups, len(kept), s, e)
        kept.append(kp)
        level = taken + got
        change = np.r_[True, level[1:] != level[:-1]]
        bounds, level = np.r_[left[change], cuts[-1]], level[change]
    return kept


def _shared(kept: list[Kept], groups: list[str], i: int, s: np.ndarray, e: np.ndarray
            ) -> dict[int, int]:
    """Length of the segments ``[s, e)`` of claim ``i`` where each earlier claim of its
    group keeps time."""
    out = {}
    for j, other in enumerate(kept):
        if groups[j] == groups[i] and other.start.size and s.size:
            part = int(Cover(other.start, other.end).within(s, e).sum())
            if part > 0:
                out[j] = part
    return out


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (a sort: faster here than ``np.unique``'s hashing)."""
    values = np.sort(values, kind="stable")
    return values[np.r_[True, values[1:] != values[:-1]]] if values.size else values


def _span(claims: list[Claim], window: tuple[int, int]) -> tuple[int, int]:
    """The window widened to every claimed interval (work a selected step launched may
    run after the step's span)."""
    lo, hi = int(window[0]), max(int(window[1]), int(window[0]))
    for c in claims:
        if c.start.size:
            lo, hi = min(lo, int(c.start.min())), max(hi, int(c.end.max()))
    return lo, hi


def _lost_to(kept: list[Kept], left: np.ndarray, width: np.ndarray, short: np.ndarray,
             taken: np.ndarray) -> dict[int, int]:
    """How much of a claim (ns of saving) each earlier finding holds: the part it could
    not get, shared among the holders by their density there."""
    out: dict[int, int] = {}
    miss = short * width
    for j, other in enumerate(kept):
        if other.start.size == 0:
            continue
        k = np.searchsorted(other.start, left, side="right") - 1
        kk = np.clip(k, 0, None)
        dens = np.where((k >= 0) & (left < other.end[kk]), other.density[kk], 0.0)
        part = float((miss * np.where(taken > 0, dens / np.where(taken > 0, taken, 1), 0)
                      ).sum())
        if part >= 1:
            out[j] = int(round(part))
    return out


def cap_unclaimed(estimates: list[int], window_ns: int, kept_ns: int) -> list[int]:
    """Savings of findings without a claim, in order, each capped by the window time no
    claimed finding keeps and no earlier unclaimed finding took."""
    free = max(int(window_ns) - int(kept_ns), 0)
    out = []
    for estimate in estimates:
        saving = min(max(int(estimate), 0), free)
        free -= saving
        out.append(saving)
    return out


def claim_outside(start: np.ndarray, end: np.ndarray, amount: np.ndarray | None,
                  cover: Cover) -> Claim:
    """A claim on the parts of the intervals outside ``cover`` (the idle parts of gaps,
    the exposed parts of collectives); each interval's ``amount`` (default: all of what
    is left of it) goes to its parts in proportion to their length."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    s, e, owner = difference(start, end, cover)
    if amount is None:
        return Claim(s, e)
    left = (end - start) - cover.within(start, end)
    dens = np.asarray(amount, dtype=np.float64) / np.where(left > 0, left, 1)
    return Claim(s, e, (e - s) * dens[owner])


__all__ = ["Claim", "Kept", "cap_unclaimed", "claim_outside", "difference",
           "resolve", "segments"]
