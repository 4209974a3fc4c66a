"""The one presenter of the terminal (``hta summary``, ``hta diff``, ...) and the report's
page: how a number, a time, a list of ranks, a kernel or operator name and a finding read.

* numbers: :func:`number` (``1,234.5``, ``-`` when missing, signed on request);
* times: the analyses' µs, shown in ms with 3 decimals: :func:`ms` for a table column
  headed ``(ms)``, :func:`time_text` in a sentence (``1,234.567 ms``; µs or s on request);
* ranks and steps: :func:`ranges_text` (``0-3,5``), :func:`ranks_text` (``ranks 0-3``);
  the overview's figures: :func:`metric_label`, :func:`slowest_rank_text`;
* names: :func:`display_name` (demangled; shortened to a width when it reads as a C++
  signature, else cut), :func:`printable` and :func:`full_text` (control characters
  escaped, for the terminal);
* findings: :func:`finding_what` (title and subject), :func:`finding_saving`,
  :func:`finding_share` and :func:`saving_text` (the estimated saving and its share of
  the analysed time; ``note`` for an info finding, which has none).

Nothing here escapes HTML: the page does (Jinja2 autoescape, :mod:`hta.report.builder`).
The module imports nothing heavy (``hta --help`` loads no pandas); name shortening imports
what it needs when called.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

#: Longest text a terminal table cell shows in full; a longer one keeps its start and its
#: end.
LONGEST_CELL = 400
#: Text cells longer than this are shown shortened in the report, the full text on hover.
LONG_NAME = 60


# -- numbers and times ------------------------------------------------------------------------
def number(value: Any, digits: int = 1, unit: str = "", *, signed: bool = False) -> str:
    """``1,234.5`` (thousands separators; ``+1,234.5`` when ``signed``), ``-`` for a
    missing value; a text is returned as it is."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:{'+' if signed else ''},.{digits}f}{unit}"


def ms(us: Any, digits: int = 3) -> str:
    """A time of the analyses (µs) in ms for a column headed ``(ms)``: ``1,234.567``."""
    if us is None or (isinstance(us, float) and not math.isfinite(us)):
        return "-"
    return number(us / 1e3, digits)


#: What a time in µs is divided by to read in each unit of :func:`time_text`.
TIME_UNITS = {"µs": 1.0, "ms": 1e3, "s": 1e6}


def time_text(us: float, digits: int = 3, unit: str = "ms") -> str:
    """A time (µs) in a sentence, with its unit: ``1,234.567 ms`` (as ``hta summary``
    says every time); ``unit="µs"`` or ``"s"`` where a figure needs that scale."""
    return f"{number(us / TIME_UNITS[unit], digits)} {unit}"


#: The overview's figures (:mod:`hta.report.overview`) in words.
METRIC_LABELS = {"step_time_mean(us)": "mean step time", "kernel_time(us)": "GPU span",
                 "busy_time(us)": "GPU busy", "compute_time(us)": "compute",
                 "exposed_comm_time(us)": "exposed communication",
                 "idle_time(us)": "GPU idle"}


def metric_label(metric: object) -> str:
    """An overview figure in words (:data:`METRIC_LABELS`); another name as it is."""
    return METRIC_LABELS.get(str(metric), str(metric))


#: Ranks whose figure (compute time, else mean step) differs by less than this (%) are
#: alike: no rank is called the slowest (run-to-run noise of the same work on the same
#: kind of GPU is of this order).
ALIKE_PCT = 2.0


def slowest_rank_text(job: Mapping[str, Any]) -> str | None:
    """``Slowest rank: 1 (compute 1.235 ms; fastest rank 0: 1.000 ms, +23.5%)``, from an
    overview's job figures (:data:`hta.report.overview.JobFacts`); when the ranks differ by
    less than :data:`ALIKE_PCT`, ``No slowest rank: compute 1.191-1.194 ms on every rank
    (+0.3%)``; ``None`` without a figure. The one notion of the slowest rank in the
    summary and the report (the spread table gives every figure's longest rank)."""
    if job.get("slowest_rank") is None:
        return None
    lo, hi = job["fastest_rank_value"], job["slowest_rank_value"]
    pct = 100.0 * (hi - lo) / lo if lo > 0 else math.inf
    more = f", {pct:+.1f}%" if lo > 0 else ""
    label = metric_label(job["slowest_rank_by"])
    if pct < ALIKE_PCT:
        return (f"No slowest rank: {label} {time_text(lo)} to {time_text(hi)} on every rank "
                f"({pct:+.1f}%, under {ALIKE_PCT:g}%)")
    return (f"Slowest rank: {job['slowest_rank']} ({label} "
            f"{time_text(hi)}; fastest rank {job['fastest_rank']}: {time_text(lo)}{more})")


# -- ranks and steps --------------------------------------------------------------------------
def ranges_text(values: Iterable[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3,5"`` (:func:`hta.model.selection.format_ranges`, imported
    when used so that ``hta --help`` loads no pandas)."""
    from hta.model.selection import format_ranges

    return format_ranges([int(v) for v in values], ",")


def ranks_text(ranks: Iterable[int] | None, labelled: bool = True) -> str:
    """``"ranks 0-3"``, ``"rank 2"`` or ``"job"`` (no rank); ``labelled=False`` (a column
    headed ranks): ``"0-3"``, ``"2"`` or ``"job"``."""
    values = [int(r) for r in ranks] if ranks is not None else []
    if not values:
        return "job"
    if not labelled:
        return ranges_text(values)
    return ("rank " if len(values) == 1 else "ranks ") + ranges_text(values)


# -- names ------------------------------------------------------------------------------------
def printable(text: object, width: int | None = None) -> str:
    """A name safe to print: control characters as ``\\xNN`` escapes, cut to ``width``."""
    out = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in str(text))
    if width is not None and len(out) > width:
        out = out[: width - 1] + "…"
    return out


def full_text(text: object, limit: int = LONGEST_CELL) -> str:
    """A name shown whole (control characters escaped); past ``limit`` characters its start
    and end are kept around ``…`` (template arguments at the end tell kernels apart)."""
    out = printable(text)
    if len(out) <= limit:
        return out
    tail = limit // 4
    return f"{out[: limit - tail - 1]}…{out[-tail:]}"


def display_name(text: str, width: int = LONG_NAME) -> str:
    """``text`` as a table shows it (:func:`hta.plots._figure_parts.display_short`):
    whole up to ``width`` characters, else a C++ signature by its function and key
    template parameters, anything still too long cut; the hover, ``--json`` and the
    tables returned in Python keep the whole name."""
    from hta.plots._figure_parts import display_short

    return display_short(text, width)


def demangled(text: object) -> str:
    """A kernel or operator name demangled (``_ZN...``; others unchanged), whole."""
    from hta.model.demangle import demangle

    return demangle(str(text))


# -- findings ---------------------------------------------------------------------------------
def is_note(finding: Mapping[str, Any]) -> bool:
    """An info finding: a note, with no saving."""
    return bool(finding["severity"] == "info")


def finding_what(finding: Mapping[str, Any]) -> str:
    """A finding's title, with its subject after a colon when it has one."""
    subject = finding.get("subject")
    return str(finding["title"]) + (f": {subject}" if subject else "")


def finding_saving(finding: Mapping[str, Any]) -> str:
    """The saving in ms (:func:`ms`), ``GPU`` after a GPU-time one (not replayed), or
    ``note`` for an info finding."""
    if is_note(finding):
        return "note"
    gpu = " GPU" if finding.get("saving_source") == "gpu-time" else ""
    return ms(finding["est_saving(us)"]) + gpu


def finding_range(finding: Mapping[str, Any]) -> str:
    """``low-high`` in ms of a replayed saving; ``-`` otherwise."""
    if is_note(finding) or finding.get("saving_source") != "replay":
        return "-"
    return f"{ms(finding['saving_low(us)'])}-{ms(finding['saving_high(us)'])}"


def finding_share(finding: Mapping[str, Any]) -> str:
    """The saving's share (%) of the analysed time, or ``note`` for an info finding."""
    return "note" if is_note(finding) else number(finding["share_pctg"])


def saving_text(saving_us: float | None, share_pctg: float | None) -> str:
    """``"~1.234 ms (4.5%)"``: an estimated saving and its share of the analysed time."""
    if saving_us is None or not math.isfinite(float(saving_us)):
        return "-"
    share = "" if share_pctg is None or not math.isfinite(float(share_pctg)) else \
        f" ({float(share_pctg):.1f}%)"
    return f"~{time_text(float(saving_us))}{share}"


def finding_saving_text(finding: Mapping[str, Any]) -> str:
    """:func:`saving_text` of a finding, or ``note (no saving)`` for an info finding."""
    if is_note(finding):
        return "note (no saving)"
    text = saving_text(finding["est_saving(us)"], finding["share_pctg"])
    if finding.get("saving_source") == "replay":
        return (f"{text}, range {time_text(float(finding['saving_low(us)']))} to "
                f"{time_text(float(finding['saving_high(us)']))}, replayed with "
                f"{finding['change']}")
    if finding.get("saving_source") == "gpu-time":
        return f"{text} of GPU time (not replayed)"
    return text


def together_text(together: Mapping[str, Any]) -> str:
    """The sentence on the replayed fixes at once (a row of
    :func:`hta.analysis.whatif.together.together`): their saving, its range and share, set
    against the sum of their own savings (its ``versus_sum``)."""
    n, total = int(together["findings"]), float(together["est_saving(us)"])
    parts = time_text(float(together["sum_of_savings(us)"]))
    versus = {
        "less": f"less than the sum of their savings ({parts}): they overlap, so each "
                "saves less once the others are made",
        "more": f"more than the sum of their savings ({parts}): each makes room for the "
                "others",
    }.get(str(together["versus_sum"]),
          f"about the sum of their savings ({parts}): they do not overlap")
    text = (f"Together, the {n} replayed fixes ({together['changes']}) would save "
            f"{saving_text(total, together['saving_step_pctg'])}, range "
            f"{time_text(float(together['saving_low(us)']))} to "
            f"{time_text(float(together['saving_high(us)']))}. That is {versus}.")
    if together.get("left_out"):
        text += f" Not combined: {together['left_out']}."
    gpu = int(together.get("gpu_time_findings") or 0)
    if gpu:
        text += (f" Not in it: the GPU-time saving{'s' if gpu > 1 else ''} of {gpu} "
                 f"finding{'s' if gpu > 1 else ''} (fixes the replay cannot model).")
    return text


__all__ = ["LONGEST_CELL", "LONG_NAME", "METRIC_LABELS", "TIME_UNITS", "demangled",
           "display_name", "finding_range", "finding_saving", "finding_saving_text",
           "finding_share", "finding_what",
           "full_text", "is_note", "metric_label", "ms", "number", "printable", "ranges_text",
           "ranks_text", "saving_text", "slowest_rank_text", "time_text",
           "together_text"]
