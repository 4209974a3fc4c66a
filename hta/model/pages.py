"""Which pages NumPy's large arrays get, for the work that writes them once.

NumPy asks Linux for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every array
of 4 MB or more. Where the kernel's ``transparent_hugepage/defrag`` setting is
``madvise`` (a common default) and no huge page is free, the first touch of such an
array waits for the kernel to reclaim and compact memory. On this project's 2-core
virtual machine, 320 MB of fresh arrays took 0.36-0.49 s to fill with the hint and
0.10-0.19 s without (``np.ones`` of 40M int64, alternated); the job graph of a 256-rank
job (``hta.analysis.whatif.graph.job_graph``, about 420 MB of arrays written once) spent
about 0.8 s of system time in it. Huge pages pay back on random reads of a large array
(the schedule's: 0.03 s a replay against 0.07 s on 4 KB pages), which is why the hint is
dropped only around work that writes large arrays once: :func:`small_pages`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

try:  # numpy 2
    from numpy._core import multiarray as _multiarray
except ImportError:  # numpy 1.26
    from numpy.core import multiarray as _multiarray  # type: ignore[no-redef]

#: NumPy's switch of the hint (its value before is returned); None where it has none.
_SET_HINT: Callable[[bool], bool] | None = getattr(_multiarray, "_set_madvise_hugepage", None)

_LOCK = threading.Lock()
#: Blocks of :func:`small_pages` running now (in any thread), and the hint before the
#: first of them.
_INSIDE = [0, True]


@contextmanager
def small_pages() -> Iterator[None]:
    """Inside the block, NumPy's new large arrays do not ask for huge pages (module
    docstring); the hint is as it was once the last block running ends (blocks may nest
    or run in several threads at once). The switch is NumPy's, for the whole process:
    an array another thread makes meanwhile gets 4 KB pages too, which changes its
    speed, never its values."""
    if _SET_HINT is None:
        yield
        return
    with _LOCK:
        if _INSIDE[0] == 0:
            _INSIDE[1] = _SET_HINT(False)
        _INSIDE[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _INSIDE[0] -= 1
            if _INSIDE[0] == 0:
                _SET_HINT(bool(_INSIDE[1]))


__all__ = ["small_pages"]
