"""Exact conversion of Kineto's microsecond decimals to integer nanoseconds.

Kineto writes ``ts`` as microseconds with up to three decimals ("1712195495519689.047").
At epoch scale a float64 has a resolution of 0.25 µs, so parsing the number as a float
and multiplying by 1000 loses the nanoseconds. We decode ``ts`` as raw JSON text and
combine two cheap vectorised parses:

* the float value ``f`` (error below 0.125 µs for any timestamp before the year 2255);
* the fraction digits read straight from the text (``frac_ns``, at most 3 digits).

The integer microseconds are then ``round(f - frac_ns / 1000)``, exact because the float
error is below half a microsecond, and the result is ``us * 1000 + frac_ns``. Digits
beyond the third decimal (sub-nanosecond) are truncated.
"""

from __future__ import annotations

import numpy as np

_DOT = ord(".")
_SEP = ord(",")
_ZERO = ord("0")


def decimal_us_to_ns(joined: bytes, count: int, limit_us: float = 9.0e15) -> np.ndarray:
    """Parse ``count`` comma-separated JSON numbers (µs) into int64 nanoseconds.

    Empty tokens are not allowed; numbers may be integers, decimals or use an exponent
    (exponent forms fall back to float precision). Raises ``ValueError`` when a value is
    not finite or reaches ``limit_us`` in magnitude (its ns would not fit int64).
    """
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    values = np.array(joined.split(b","), dtype=np.float64) if b"e" in joined or b"E" in joined \
        else np.fromstring(joined, sep=",", dtype=np.float64)  # noqa: NPY201
    if values.shape[0] != count:
        raise ValueError(f"expected {count} timestamps, parsed {values.shape[0]}")
    if not (np.abs(values) < limit_us).all():  # NaN fails the test too
        raise ValueError("a timestamp is not finite or outside the int64 nanosecond range")
    if b"." not in joined:
        # whole microseconds: exact as float64 below 2**53 µs, so scale as integers
        return np.rint(values).astype(np.int64) * 1000
    buf = np.frombuffer(joined, dtype=np.uint8)
    dots = np.flatnonzero(buf == _DOT)
    seps = np.flatnonzero(buf == _SEP)
    token_of_dot = np.searchsorted(seps, dots)
    # Up to three fraction digits after each dot; a non-digit ends the fraction.
    frac = np.zeros(dots.shape[0], dtype=np.int64)
    alive = np.ones(dots.shape[0], dtype=bool)
    n = buf.shape[0]
    for k, scale in ((1, 100), (2, 10), (3, 1)):
        pos = dots + k
        inside = pos < n
        digit = np.full(dots.shape[0], 255, dtype=np.int64)
        digit[inside] = buf[pos[inside]].astype(np.int64) - _ZERO
        alive &= (digit >= 0) & (digit <= 9)
        frac += np.where(alive, digit, 0) * scale
    frac_ns = np.zeros(count, dtype=np.int64)
    frac_ns[token_of_dot] = frac
    negative = values < 0
    signed_frac = np.where(negative, -frac_ns, frac_ns)
    whole_us = np.rint(values - signed_frac / 1000.0)
    return whole_us.astype(np.int64) * 1000 + signed_frac
