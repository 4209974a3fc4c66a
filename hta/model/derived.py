"""Tables derived from one rank, computed once while the rank is being analysed.

Many analyses start from the same per-rank inputs (the ``ProfilerStep`` spans, the
operator calls with their FLOPs, the collective table). :func:`derived` keeps what was
computed for the events table most recently asked about (and the one before it), keyed
by what was asked, so the analyses run on one rank in a row (the findings rules, the
summary's sections: :func:`hta.model.runner.run`) compute each input once.

Entries follow the events table itself (a weak reference) and the rank's
``generation`` (bumped by ``classify`` and ``remap_symbols``): a rank that is filtered,
reclassified, replaced or dropped is never served a stale value (a column changed in place
by hand is not seen: call :func:`forget`), and at most :data:`KEPT_RANKS` ranks'
values are held by each thread (a visit runs in one thread; a Dask worker may run several
ranks at once), so memory does not grow with the number of ranks a process visits.
Frames are handed out as copies and arrays read-only, so a caller cannot change what the
next one gets.

Small values (at most :data:`SMALL_BYTES` each: a rank's collective table, its analysis
window, its step table) are also kept for ranks visited longer ago, up to
:data:`SMALL_BUDGET` bytes a thread (the ranks visited first are dropped first), except
the steps on the way to them that their callers mark (``small=False``: a side table's
columns, which would fill the budget: about 275 kB a rank of job256's 370). The
findings visit every rank twice (the job rules, then the rank rules): the second visit
reuses them instead of computing them again.
"""

from __future__ import annotations

import pickle
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from hta.model.trace import RankTrace

T = TypeVar("T")
#: How many ranks' derived values are kept (the rank analysed now and the one before).
KEPT_RANKS = 2
#: A value this small (bytes, as :func:`_size` counts them) is also kept beyond
#: :data:`KEPT_RANKS` ...
SMALL_BYTES = 256 * 1024
#: ... within this many bytes a thread (a rank of job256 keeps about 80 kB: some 1,600
#: ranks).
SMALL_BUDGET = 128 * 1024 * 1024

_Entries = OrderedDict[int, tuple[weakref.ref, int, dict[Hashable, Any]]]
_LOCAL = threading.local()  # one memo a thread: a Dask worker runs ranks in threads


def _entries() -> _Entries:
    entries = getattr(_LOCAL, "entries", None)
    if entries is None:
        entries = _LOCAL.entries = OrderedDict()
    return entries


def _small() -> tuple[_Entries, list[int]]:
    """This thread's store of small values, and its size in bytes (one-item list)."""
    store = getattr(_LOCAL, "small", None)
    if store is None:
        store = _LOCAL.small = (OrderedDict(), [0])
    return store


def derived(rt: RankTrace, key: Hashable, compute: Callable[[], T], *,
            small: bool = True) -> T:
    """``compute()`` for this rank and ``key``, computed on the first call only (while
    the rank's events table is the same object, unchanged by the model's in-place
    changes: ``RankTrace.generation``). ``small=False``: a value that is not kept beyond
    :data:`KEPT_RANKS` nor carried back from a worker however small it is (a step on the
    way to other values, such as a side table's column: the budget of small values is
    kept for the values later visits read)."""
    events = rt.events
    values = _slot(_entries(), rt, KEPT_RANKS)
    if key not in values:
        store, used = _small()
        kept = store.get(id(events))
        if kept is not None and _current(kept, rt) and key in kept[2]:
            value = kept[2][key]
            if isinstance(value, _Pickled):  # adopted: unpickled on its first use
                kept[2][key] = _frozen(pickle.loads(value.blob))  # noqa: S301 - our fork's
                used[0] += _size(kept[2][key]) - value.size
            values[key] = kept[2][key]
        else:
            values[key] = _frozen(compute())
            size = _size(values[key])
            if small and size <= SMALL_BYTES:
                _keep_small(rt, key, values[key], size)
    return _handed_out(values[key])


def _current(slot: tuple[weakref.ref, int, dict[Hashable, Any]], rt: RankTrace) -> bool:
    return slot[0]() is rt.events and slot[1] == rt.generation


def _slot(entries: _Entries, rt: RankTrace, most: int | None) -> dict[Hashable, Any]:
    """The values kept for ``rt`` in ``entries`` (a new, empty slot when there are none
    or they are stale), made the most recent; at most ``most`` ranks are kept."""
    events = rt.events
    slot = entries.get(id(events))
    if slot is None or not _current(slot, rt):
        slot = (weakref.ref(events), rt.generation, {})
        entries.pop(id(events), None)
        entries[id(events)] = slot
        while most is not None and len(entries) > most:
            entries.popitem(last=False)
    else:
        entries.move_to_end(id(events))
    return slot[2]


def _keep_small(rt: RankTrace, key: Hashable, value: Any, size: int) -> None:
    small, used = _small()
    stale = small.get(id(rt.events))
    if stale is not None and not _current(stale, rt):
        used[0] -= sum(_size(v) for v in stale[2].values())
    _slot(small, rt, None)[key] = value
    used[0] += size
    while used[0] > SMALL_BUDGET and len(small) > 1:
        _, (_, _, dropped) = small.popitem(last=False)
        used[0] -= sum(_size(v) for v in dropped.values())


def _size(value: Any) -> int:
    """Bytes a value holds, roughly: arrays, and frames at 8 bytes a cell (measuring
    their columns costs a millisecond a frame), inside tuples and dicts; anything else
    counts 0."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, _Pickled):
        return value.size
    if isinstance(value, pd.DataFrame):
        return 8 * value.shape[0] * max(value.shape[1], 1)
    if isinstance(value, pd.Series):
        return 8 * len(value)
    if isinstance(value, (tuple, list)):
        return sum(_size(v) for v in value)
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    return 0


class _Pickled:
    """A small value adopted from a forked worker (:func:`adopt`), still pickled: it is
    unpickled where it is first used (here, or in a worker forked from here), not in
    the process that receives every rank's values."""

    __slots__ = ("blob",)

    def __init__(self, blob: bytes) -> None:
        self.blob = blob

    @property
    def size(self) -> int:
        """Bytes it holds (its pickle's)."""
        return len(self.blob)


def small_values(rt: RankTrace) -> dict[Hashable, bytes]:
    """The small values this thread keeps for the rank's current events table, each
    pickled (one that does not pickle is left out: the process it goes to computes it
    when asked): what a forked worker of a spread visit sends back (:func:`adopt`), so
    that the process it was forked from, and the workers it forks next, do not compute
    them again."""
    small, _ = _small()
    kept = small.get(id(rt.events))
    if kept is None or not _current(kept, rt):
        return {}
    out: dict[Hashable, bytes] = {}
    for key, value in kept[2].items():
        if isinstance(value, _Pickled):
            out[key] = value.blob
            continue
        try:
            out[key] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - a value that does not travel is computed again
            continue
    return out


def adopt(rt: RankTrace, values: dict[Hashable, bytes]) -> None:
    """Keep ``values`` (:func:`small_values` of the same rank, computed from the same
    events table in a process forked from this one) as if they had been computed here,
    each unpickled when first asked for; a key this thread already keeps is left as it
    is."""
    small, _ = _small()
    kept = small.get(id(rt.events))
    have = kept[2] if kept is not None and _current(kept, rt) else {}
    for key, blob in values.items():
        if key not in have:
            value = _Pickled(blob)
            _keep_small(rt, key, value, value.size)


def forget() -> None:
    """Drop every value this thread keeps (tests, and callers that change an events
    table in place)."""
    _entries().clear()
    small, used = _small()
    small.clear()
    used[0] = 0


def _frozen(value: Any) -> Any:
    """Arrays made read-only, inside tuples and dicts too."""
    if isinstance(value, np.ndarray):
        value = value.view()
        value.flags.writeable = False
    elif isinstance(value, tuple):
        value = tuple(_frozen(v) for v in value)
    elif isinstance(value, dict):
        value = {k: _frozen(v) for k, v in value.items()}
    return value


#: Whether pandas copies on write (always from pandas 3): a shallow copy of a frame is
#: then as much the caller's own as a deep one, at a fraction of its cost.
_COPY_ON_WRITE = int(pd.__version__.split(".", 1)[0]) >= 3


def _handed_out(value: Any) -> Any:
    """Frames copied and dicts rebuilt (inside tuples too): what a caller changes is its
    own."""
    if isinstance(value, (pd.DataFrame, pd.Series)):
        return value.copy(deep=not _COPY_ON_WRITE)
    if isinstance(value, tuple):
        return tuple(_handed_out(v) for v in value)
    if isinstance(value, dict):
        return {k: _handed_out(v) for k, v in value.items()}
    return value


__all__ = ["KEPT_RANKS", "SMALL_BUDGET", "SMALL_BYTES", "adopt", "derived", "forget",
           "small_values"]
