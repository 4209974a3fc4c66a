"""Helpers shared by the subcommands."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd


def parse_ranks(text: str | None) -> list[int] | None:
    """``"0,2,4-7"`` -> ``[0, 2, 4, 5, 6, 7]``; ``None`` for all ranks."""
    if not text:
        return None
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


def finite(value: Any) -> Any:
    """NaN and infinities become null so the output is valid JSON."""
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()  # numpy scalars
    return str(value)


def dumps(payload: Any) -> str:
    """JSON text for ``--json`` output."""
    return json.dumps(finite(payload), indent=2, default=_json_default)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A DataFrame as JSON-ready rows."""
    return finite(frame.to_dict(orient="records"))
