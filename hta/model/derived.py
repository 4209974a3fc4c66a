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
"""

from __future__ import annotations

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

_Entries = OrderedDict[int, tuple[weakref.ref, int, dict[Hashable, Any]]]
_LOCAL = threading.local()  # one memo a thread: a Dask worker runs ranks in threads


def _entries() -> _Entries:
    entries = getattr(_LOCAL, "entries", None)
    if entries is None:
        entries = _LOCAL.entries = OrderedDict()
    return entries


def derived(rt: RankTrace, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()`` for this rank and ``key``, computed on the first call only (while
    the rank's events table is the same object, unchanged by the model's in-place
    changes: ``RankTrace.generation``)."""
    events = rt.events
    entries = _entries()
    slot = entries.get(id(events))
    if slot is None or slot[0]() is not events or slot[1] != rt.generation:
        slot = (weakref.ref(events), rt.generation, {})
        entries[id(events)] = slot
        while len(entries) > KEPT_RANKS:
            entries.popitem(last=False)
    else:
        entries.move_to_end(id(events))
    values = slot[2]
    if key not in values:
        values[key] = _frozen(compute())
    return _handed_out(values[key])


def forget() -> None:
    """Drop every value this thread keeps (tests, and callers that change an events
    table in place)."""
    _entries().clear()


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


def _handed_out(value: Any) -> Any:
    """Frames copied and dicts rebuilt (inside tuples too): what a caller changes is its
    own."""
    if isinstance(value, (pd.DataFrame, pd.Series)):
        return value.copy()
    if isinstance(value, tuple):
        return tuple(_handed_out(v) for v in value)
    if isinstance(value, dict):
        return {k: _handed_out(v) for k, v in value.items()}
    return value


__all__ = ["KEPT_RANKS", "derived", "forget"]
