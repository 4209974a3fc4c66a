"""One colour per kind of GPU work, in every figure (timeline, breakdown bars, pies, diff).

Computation is green, communication orange, memory work (copies and memsets) in purples
and browns, idle grey. A label that says one kind overlaps another (``"COMPUTATION
overlapping COMMUNICATION"``, from the kernel type breakdown) takes a light tint of the
first kind's colour.
"""

from __future__ import annotations

COMPUTATION = "#2ca02c"
COMMUNICATION = "#ff7f0e"
MEMORY = "#9467bd"
IDLE = "#c7c7c7"
OTHER = "#7f7f7f"

#: Colour of each GPU work kind of :data:`hta.model.rules.KINDS` (the timeline's bars).
KIND_COLORS = {
    "computation": COMPUTATION,
    "communication": COMMUNICATION,
    "memcpy_htod": MEMORY,
    "memcpy_dtoh": "#c5b0d5",
    "memcpy_dtod": "#8c564b",
    "memcpy_ptop": "#c49c94",
    "memcpy_other": OTHER,
    "memset": "#e377c2",
}
_FAMILY = {"computation": COMPUTATION, "compute": COMPUTATION,
           "communication": COMMUNICATION, "memory": MEMORY, "idle": IDLE}
_TINT = {COMPUTATION: "#98df8a", COMMUNICATION: "#ffbb78", MEMORY: "#dbcdea"}


def kind_color(label: str) -> str | None:
    """The colour of a kind's label, in any case (``"COMPUTATION"``, ``"memcpy_htod"``,
    ``"exposed communication"``...), or ``None`` for a label naming no kind."""
    text = str(label).strip().lower()
    first, sep, _ = text.partition(" overlapping ")
    if sep:
        base = kind_color(first)
        return _TINT.get(base or "", base)
    if text in KIND_COLORS:
        return KIND_COLORS[text]
    return _FAMILY.get(text.removeprefix("exposed ").strip())


__all__ = ["COMMUNICATION", "COMPUTATION", "IDLE", "KIND_COLORS", "MEMORY", "OTHER",
           "kind_color"]
