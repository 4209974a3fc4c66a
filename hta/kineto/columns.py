"""Turning lists of decoded values into typed NumPy columns, and side tables (dicts of
columns) while they are being accumulated."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from hta.kineto import schema
from hta.kineto.timeparse import decimal_us_to_ns

INT64_MAX = np.iinfo(np.int64).max
#: Largest magnitude of a timestamp (µs) kept: beyond it, the time in ns does not fit
#: int64 (about 285 years either side of 1970); such an event is dropped.
TS_LIMIT_US = 9.0e15
#: Longest duration kept (µs): one day. Longer (or infinite) durations are not physical
#: for a profiled activity; they are taken as 0 with a warning, like missing ones.
MAX_DURATION_US = 86_400e6


def int_column(values: list[Any], name: str, warnings: list[str]) -> np.ndarray:
    """Integers (or numeric strings such as "0x1c") to int64; unusable values become -1."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.empty(len(values), dtype=np.int64)
    bad = 0
    for i, v in enumerate(values):
        if v is None:
            out[i] = -1
            continue
        try:
            if isinstance(v, str):
                v = int(v.strip(), 0)
            elif isinstance(v, float):
                v = int(v) if math.isfinite(v) else -1
            out[i] = v if -INT64_MAX <= v <= INT64_MAX else -1
            if not -INT64_MAX <= v <= INT64_MAX:
                bad += 1
        except (TypeError, ValueError):
            out[i] = -1
            bad += 1
    if bad:
        warnings.append(f"{bad} value(s) of '{name}' were not integers in int64 range")
    return out


def float_column(values: list[Any]) -> np.ndarray:
    """Numbers (or numeric strings) to float64; unusable values become NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            out[i] = np.nan
    return out


def durations_ns(dur_us: np.ndarray) -> tuple[np.ndarray, int, int, int]:
    """Durations in µs (NaN where absent) as int64 ns, rounded to the nearest ns.

    Missing, negative and out-of-range (over :data:`MAX_DURATION_US`, infinite)
    durations become 0; returns ``(dur_ns, missing, negative, too_long)`` with the three
    counts, for the loader's warnings. Both decoders use it, so they agree.
    """
    dur_us = np.array(dur_us, dtype=np.float64)
    missing = np.isnan(dur_us)
    n_missing = int(missing.sum())
    if n_missing:
        dur_us[missing] = 0.0
    too_long = dur_us > MAX_DURATION_US  # +inf included; -inf counts as negative
    n_too_long = int(too_long.sum())
    negative = dur_us < 0
    n_negative = int(negative.sum())
    if n_too_long or n_negative:
        dur_us[too_long | negative] = 0.0
    dur = np.rint(dur_us * 1000.0).astype(np.int64)
    return dur, n_missing, n_negative, n_too_long


def raw_text(raws: list[msgspec.Raw]) -> list[str]:
    """Raw JSON values to their text ("" where absent), decoded in one C-level pass."""
    if not raws:
        return []
    text = b"\x00".join(raws).decode("utf-8", "replace")
    parts = text.split("\x00")
    if len(parts) != len(raws):  # a NUL inside a value: fall back to one at a time
        return [bytes(r).decode("utf-8", "replace") for r in raws]
    return parts


def _dims(values: list[tuple[Any, ...] | str]) -> np.ndarray:
    """``[x, y, z]`` arrays (grid, block) to an (n, 3) int64 array, -1 where absent."""
    fixed = [v if len(v) == 3 and not isinstance(v, str) else _dims3(v) for v in values]
    try:
        return np.array(fixed, dtype=np.int64).reshape(len(values), 3)
    except (TypeError, ValueError, OverflowError):
        return np.array([_dims3_int(v) for v in fixed], dtype=np.int64).reshape(len(values), 3)


def _dims3(value: tuple[Any, ...] | str) -> tuple[Any, ...]:
    if isinstance(value, str):
        return (-1, -1, -1)
    return (tuple(value) + (-1, -1, -1))[:3]


def _dims3_int(value: tuple[Any, ...]) -> tuple[int, int, int]:
    out = []
    for v in value:
        try:
            out.append(int(v, 0) if isinstance(v, str) else int(v))
        except (TypeError, ValueError):
            out.append(-1)
    return out[0], out[1], out[2]


def timestamps_ns(raws: list[msgspec.Raw], warnings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Raw ``ts`` values to int64 ns; returns (values, present mask).

    A value that is not a number, or whose time in ns does not fit int64 (beyond
    :data:`TS_LIMIT_US`), is not present; ``warnings`` gets a line counting them.
    """
    out = np.zeros(len(raws), dtype=np.int64)
    joined = b",".join(raws)
    if joined and b",," not in joined and joined[:1] != b"," and joined[-1:] != b",":
        present = np.ones(len(raws), dtype=bool)
        chosen = raws
    else:
        present = np.fromiter((len(r) > 0 for r in raws), dtype=bool, count=len(raws))
        chosen = [r for r, p in zip(raws, present) if p]
        joined = b",".join(chosen)
    if chosen:
        try:
            out[present] = decimal_us_to_ns(joined, len(chosen), TS_LIMIT_US)
        except ValueError:
            vals = float_column([_safe_float(r) for r in chosen])
            finite = np.isfinite(vals)
            ok = finite & (np.abs(np.where(finite, vals, 0.0)) < TS_LIMIT_US)
            if not finite.all():
                warnings.append(f"{int((~finite).sum())} timestamp(s) were not numbers")
            if (finite & ~ok).any():
                warnings.append(f"{int((finite & ~ok).sum())} timestamp(s) outside the int64 "
                                "nanosecond range (beyond 285 years from 1970); dropped")
            present_idx = np.flatnonzero(present)
            present[present_idx[~ok]] = False
            out[present_idx[ok]] = np.rint(vals[ok] * 1000.0).astype(np.int64)
    return out, present


def _safe_float(raw: msgspec.Raw) -> float:
    try:
        value = msgspec.json.decode(raw)
        return float(value.strip()) if isinstance(value, str) else float(value)
    except (msgspec.DecodeError, TypeError, ValueError):
        return math.nan


#: A side table while decoding: column name -> NumPy array or list (same length).
Table = dict[str, Any]


def _table_len(table: Table) -> int:
    return len(next(iter(table.values()))) if table else 0


def _mask(table: Table, keep: np.ndarray) -> Table:
    if keep.all():
        return table
    idx = np.flatnonzero(keep)
    return {c: (v[idx] if isinstance(v, np.ndarray) else [v[i] for i in idx])
            for c, v in table.items()}


def _concat_tables(parts: list[Table], columns: list[str]) -> Table:
    if not parts:
        return {c: [] for c in columns}
    out: Table = {}
    for col in parts[0]:
        values = [p[col] for p in parts]
        if isinstance(values[0], np.ndarray):
            out[col] = np.concatenate(values)
        else:
            out[col] = [x for v in values for x in v]
    return out


def _frame(name: str, table: Table) -> pd.DataFrame:
    """A finished side table as a DataFrame with the schema's columns and dtypes (the
    same for an empty table as for a full one: see :mod:`hta.kineto.schema`)."""
    return schema.frame(schema.DECODED_TABLES[name], table)
