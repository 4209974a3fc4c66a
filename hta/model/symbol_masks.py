"""Per symbol id, a test's verdict on each name of a symbol table, kept per process.

The ranks of a job in memory share one symbol table (:class:`hta.model.trace.Trace`, as
HTA's), so a per-rank analysis that tests every name of the table (is it a
``ProfilerStep#``, a synchronize call, a graph launch) would test the whole job's names
once per rank: on a job whose ranks name things their own way, time that grows with the
number of ranks. :func:`symbol_mask` tests each name once per table and test, and when
the table has grown since (a table only grows, by appending the names of a rank that
joins the job), only the new names. :func:`symbol_verdicts` keeps the verdicts the same
way but tests a name only when a row asks for it (a rule that looks at the names of a few
rows of each rank, on a table of many long kernel names).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

import numpy as np

from hta.model.arrays import distinct

#: A test of a name: a predicate, or a compiled pattern's bound ``search``/``match``.
NameTest = Callable[[str], object]

#: Most verdicts kept (the masks' lengths summed); past it every mask is dropped. A mask
#: keeps its table alive, and the tables of ranks read one at a time come and go.
MAX_VERDICTS = 1_000_000


class _Kept:
    """A table, the verdicts on its first names, and the last name tested (a table
    rewritten in place, not only appended to, is tested again)."""

    __slots__ = ("last", "mask", "symbols")

    def __init__(self, symbols: list[str], mask: np.ndarray) -> None:
        self.symbols, self.mask = symbols, mask
        self.last = symbols[mask.size - 1] if mask.size else None

    def holds(self, symbols: list[str]) -> bool:
        n = self.mask.size
        return self.symbols is symbols and len(symbols) >= n and (
            n == 0 or symbols[n - 1] is self.last)


_MASKS: dict[tuple[int, Hashable], _Kept] = {}
_KEPT = [0]  # verdicts held in _MASKS
_LOCK = threading.Lock()


def symbol_mask(symbols: list[str], test: NameTest) -> np.ndarray:
    """Per symbol id of ``symbols``, whether ``test(name)`` is true, read-only. ``test``
    must depend on the name alone (a module-level function, or a compiled pattern's bound
    method: equal bound methods of one pattern share their verdicts)."""
    key = (id(symbols), test)
    with _LOCK:
        kept = _MASKS.get(key)
    if kept is not None and kept.holds(symbols):
        if kept.mask.size == len(symbols):
            return kept.mask
        mask = np.concatenate([kept.mask, _tested(symbols[kept.mask.size:], test)])
    else:
        mask = _tested(symbols, test)
    mask.setflags(write=False)
    with _LOCK:
        old_kept = _MASKS.pop(key, None)
        _KEPT[0] -= old_kept.mask.size if old_kept is not None else 0
        if _KEPT[0] + mask.size > MAX_VERDICTS:
            _MASKS.clear()
            _KEPT[0] = 0
        if mask.size <= MAX_VERDICTS:
            _MASKS[key] = _Kept(symbols, mask)
            _KEPT[0] += mask.size
    return mask


def symbol_ids(symbols: list[str], test: NameTest) -> np.ndarray:
    """The symbol ids of ``symbols`` whose name passes ``test`` (:func:`symbol_mask`),
    ascending, int64."""
    return np.flatnonzero(symbol_mask(symbols, test)).astype(np.int64)


#: Per (table, test key), :func:`symbol_verdicts`' verdicts: 1, 0, or -1 (not tested).
_LAZY: dict[tuple[int, object], _Kept] = {}
_LAZY_KEPT = [0]  # verdicts held in _LAZY


def symbol_verdicts(symbols: list[str], key: object, ids: np.ndarray,
                    test_names: Callable[[list[str]], list[bool]]) -> np.ndarray:
    """Per symbol id of ``ids``, whether the test ``key`` (hashable) names passes on its
    name in ``symbols``: the ids never tested for this table and key are tested now, by one call
    of ``test_names`` (their names in, one verdict each out; it must depend on the names
    alone), and their verdicts kept with the table's (as :func:`symbol_mask` keeps them,
    :data:`MAX_VERDICTS` in all)."""
    ids = np.asarray(ids)
    if ids.size == 0:
        return np.zeros(0, dtype=bool)
    need = len(symbols)
    slot = (id(symbols), key)
    with _LOCK:
        kept = _LAZY.get(slot)
        if kept is None or not kept.holds(symbols) or kept.mask.size < need:
            lut = np.full(need, -1, dtype=np.int8)
            if kept is not None and kept.holds(symbols):  # the table grew: keep what is known
                lut[:kept.mask.size] = kept.mask
            _LAZY_KEPT[0] += need - (kept.mask.size if kept is not None else 0)
            if _LAZY_KEPT[0] > MAX_VERDICTS:
                _LAZY.clear()
                _LAZY_KEPT[0] = need
            kept = _LAZY[slot] = _Kept(symbols, lut)
    lut = kept.mask
    got = lut[ids]
    untested = got < 0
    if untested.any():
        new = _distinct_ids(ids[untested], lut.size)
        lut[new] = test_names([symbols[i] for i in new.tolist()])
        got = lut[ids]
    return got > 0


def _distinct_ids(ids: np.ndarray, n_symbols: int) -> np.ndarray:
    """The distinct ids among ``ids``, ascending: marked in a mask of the table's ids
    where that mask is small beside the ids (no sort), else sorted."""
    if n_symbols <= 8 * ids.size:
        seen = np.zeros(n_symbols, dtype=bool)
        seen[ids] = True
        return np.flatnonzero(seen)
    return distinct(ids)


def _tested(names: list[str], test: NameTest) -> np.ndarray:
    return np.fromiter((bool(test(s)) for s in names), dtype=bool, count=len(names))


__all__ = ["MAX_VERDICTS", "NameTest", "symbol_ids", "symbol_mask", "symbol_verdicts"]
