"""A rank's device, as the job header and the summary name it.

Kineto writes ``deviceProperties`` with each GPU's name; some writers leave the name
empty or the list out. A rank that lists a device without a name, or that ran GPU work
with no device listed, is said to run on an ``"unknown device"`` rather than on nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

UNKNOWN_DEVICE = "unknown device"


def device_name(meta: Mapping[str, Any]) -> str | None:
    """The name of a rank's first device (``meta``: its ``RankTrace.meta``),
    :data:`UNKNOWN_DEVICE` when it has no name, ``None`` for a rank without GPU."""
    names = device_names(meta)
    return names[0] if names else None


def device_names(meta: Mapping[str, Any]) -> list[str]:
    """The names of every device a rank lists (unnamed ones as :data:`UNKNOWN_DEVICE`),
    or ``[UNKNOWN_DEVICE]`` for a rank with GPU work and no device listed."""
    props = [d for d in (meta.get("device_properties") or []) if isinstance(d, Mapping)]
    names = [str(d.get("name") or "").strip() or UNKNOWN_DEVICE for d in props]
    if not names and meta.get("has_gpu_events"):
        return [UNKNOWN_DEVICE]
    return names


__all__ = ["UNKNOWN_DEVICE", "device_name", "device_names"]
