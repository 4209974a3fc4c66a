"""Why a facade method's result is empty: said once per analyzer, instead of silence.

An empty table is a correct answer that a user cannot tell from a bug: a trace recorded
without ``profile_memory=True`` has no ``[memory]`` events, and stragglers need at least
two ranks. The reason is logged as a warning (shown by Jupyter and by a plain script)
the first time, and not again for the same analyzer.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("hta")

NO_MEMORY_EVENTS = ("no [memory] events in the trace, so no memory figures: record them "
                    "with torch.profiler.profile(profile_memory=True)")


def one_rank(ranks: int) -> str:
    """Why stragglers are empty with fewer than two ranks."""
    return (f"stragglers compare ranks, and {ranks} rank{'s' if ranks != 1 else ''} "
            "selected: load at least two ranks of the job")


def say_why_empty(owner: Any, key: str, reason: str) -> None:
    """Log ``reason`` the first time ``key`` comes up on ``owner``."""
    said = owner.__dict__.setdefault("_said_why_empty", set())
    if key not in said:
        said.add(key)
        logger.warning("empty result: %s", reason)


__all__ = ["NO_MEMORY_EVENTS", "one_rank", "say_why_empty"]
