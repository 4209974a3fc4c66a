"""Event boundaries of a JSON array in any layout (compact, indented, one per line).

Kineto writes one event per line, which :mod:`hta.kineto.stream` cuts at ``"\\n  {"``.
Traces re-saved by other tools (``json.dump`` with or without ``indent``, viewers,
trace mergers) have no such marker. :class:`Splitter` finds where each event of the
``traceEvents`` array ends by following the JSON grammar that matters for it: strings
(with their escapes) and the nesting of braces and brackets. It keeps its state between
calls, so a file can be cut block by block as it is inflated.

Two implementations give the same answer: a C loop (``hta.kineto._split``, built with
the package) and a NumPy one (every byte classified with whole-array operations), used
when the extension is absent or ``HTA_NATIVE=0``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

try:
    from hta.kineto import _split  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built where a C compiler is available
    _split = None

_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPEN = (ord("{"), ord("["))
_CLOSE_OBJECT, _CLOSE_ARRAY = ord("}"), ord("]")


def native_available() -> bool:
    """Whether the C splitter is built and not switched off (``HTA_NATIVE=0``)."""
    return _split is not None and os.environ.get("HTA_NATIVE", "1") not in ("0", "", "false")


@dataclass
class SplitResult:
    """What one scan found (positions in the scanned buffer)."""

    last_end: int  # one past the '}' closing the last whole event; -1: none
    array_end: int  # the ']' closing the array; -1: not reached
    scanned: int  # where the scan stopped (len(buffer), or array_end)


class Splitter:
    """Scans the inside of a JSON array (after its ``[``) incrementally.

    ``depth`` counts the braces and brackets open below the array: 0 between events.
    """

    def __init__(self, native: bool | None = None) -> None:
        self.in_string = False
        self.escaped = False
        self.depth = 0
        self.native = native_available() if native is None else native

    def scan(self, buf: bytes | bytearray | memoryview, start: int = 0) -> SplitResult:
        """Scan ``buf[start:]`` from the current state and advance the state."""
        if self.native and _split is not None:
            last, end, self.in_string, self.escaped, self.depth, scanned = _split.split(
                buf, start, self.in_string, self.escaped, self.depth)
            return SplitResult(last, end, scanned)
        return self._scan_numpy(np.frombuffer(buf, dtype=np.uint8)[start:], start)

    def _scan_numpy(self, a: np.ndarray, offset: int) -> SplitResult:
        n = a.shape[0]
        if n == 0:
            return SplitResult(-1, -1, offset)
        # Only quotes, backslashes, braces and brackets matter: classify every byte with
        # one table lookup, then work on those positions alone.
        pos = np.flatnonzero(_CLASS[a])
        cls = _CLASS[a[pos]]
        if self.escaped or (cls == _C_BACKSLASH).any():
            pos_escaped = _escaped(a, self.escaped)[pos]
        else:
            pos_escaped = np.zeros(pos.shape[0], dtype=bool)
        quote = (cls == _C_QUOTE) & ~pos_escaped
        quotes_through = np.cumsum(quote, dtype=np.int64)
        # a structural character is inside a string when an odd number of quotes
        # (counting the string open at the start) comes before it
        outside = ((quotes_through - quote + self.in_string) & 1) == 0
        opens = (cls == _C_OPEN) & outside
        closes_object = (cls == _C_CLOSE_OBJECT) & outside
        closes = (closes_object | (cls == _C_CLOSE_ARRAY)) & outside
        depth = self.depth + np.cumsum(opens.astype(np.int32) - closes.astype(np.int32),
                                       dtype=np.int64)
        below = np.flatnonzero(closes & (depth < 0))
        limit = int(below[0]) if below.size else pos.shape[0]
        ends = np.flatnonzero(closes_object[:limit] & (depth[:limit] == 0))
        last_end = int(pos[ends[-1]]) + 1 + offset if ends.size else -1
        if below.size:
            self.in_string, self.escaped, self.depth = False, False, -1
            at = int(pos[limit]) + offset
            return SplitResult(last_end, at, at)
        total_quotes = int(quotes_through[-1]) if quotes_through.size else 0
        self.in_string = bool((total_quotes + self.in_string) & 1)
        self.escaped = bool(self.in_string and _trailing_backslashes(a, self.escaped) & 1)
        if depth.size:
            self.depth = int(depth[-1])
        return SplitResult(last_end, -1, n + offset)


_C_QUOTE, _C_BACKSLASH, _C_OPEN, _C_CLOSE_OBJECT, _C_CLOSE_ARRAY = 1, 2, 3, 4, 5
_CLASS = np.zeros(256, dtype=np.uint8)
_CLASS[_QUOTE], _CLASS[_BACKSLASH] = _C_QUOTE, _C_BACKSLASH
_CLASS[list(_OPEN)] = _C_OPEN
_CLASS[_CLOSE_OBJECT], _CLASS[_CLOSE_ARRAY] = _C_CLOSE_OBJECT, _C_CLOSE_ARRAY


def _escaped(a: np.ndarray, carry: bool) -> np.ndarray:
    """Whether each byte follows an odd run of backslashes (``carry``: the text before
    ``a`` ended with an unpaired backslash). Outside strings valid JSON has no
    backslash, so the run length alone decides."""
    n = a.shape[0]
    backslash = a == _BACKSLASH
    if not backslash.any() and not carry:
        return np.zeros(n, dtype=bool)
    idx = np.arange(n, dtype=np.int64)
    last_other = np.maximum.accumulate(np.where(backslash, -1, idx))
    run = np.empty(n, dtype=np.int64)
    run[0] = int(carry)
    run[1:] = idx[:-1] - last_other[:-1]
    if carry:
        run[1:] += last_other[:-1] < 0  # the leading run continues the carried backslash
    return (run & 1).astype(bool)


def _trailing_backslashes(a: np.ndarray, carry: bool) -> int:
    """Length of the run of backslashes at the end of ``a`` (plus the carried one when
    the whole of ``a`` is backslashes)."""
    others = np.flatnonzero(a != _BACKSLASH)
    if others.size:
        return a.shape[0] - 1 - int(others[-1])
    return a.shape[0] + int(carry)
