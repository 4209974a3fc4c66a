"""Why a late rank is late, in the words of the ``stragglers`` finding: the causes of
:mod:`hta.analysis.straggler_causes`, one sentence and one piece of advice per cause."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from hta.analysis.findings.rule_tools import fmt_steps, fmt_time
from hta.analysis.select import rank_numbers
from hta.analysis.straggler_causes import CAUSE_MEASURE, job_straggler_causes
from hta.model.selection import Selection
from hta.model.trace import Trace

#: What to do, per cause.
CAUSE_ADVICE = {
    "slow_compute": (
        "This rank's GPU work is slower on most steps while its host keeps up: check that "
        "GPU (clocks and temperature: nvidia-smi -q -d PERFORMANCE,CLOCK; a throttled or "
        "faulty part), and that it gets no more work than the others (uneven shards, a "
        "rank that also logs, evaluates or checkpoints)."),
    "imbalance": (
        "Which rank is late changes from step to step, each time because its GPU work is "
        "longer: the work is uneven across ranks (data or sequence lengths, MoE routing). "
        "Balance it: bucket or pack sequences to equal token counts per rank, or balance "
        "the routing."),
    "host": (
        "This rank's GPU waits for its host while the others' do not: its data loading, "
        "Python work or garbage collection is slower. Compare its data-loader and host "
        "spans with another rank's (more DataLoader workers, pinned memory, no logging or "
        "gc.collect() in the step, a host that is not shared with other jobs)."),
    "slow_link": (
        "This rank's transfers take longer than the others': check its links (NCCL_DEBUG="
        "INFO for the rings and channels it uses, NVLink/PCIe errors, a NIC on a slower "
        "path or shared with another job)."),
    "unexplained": (
        "Neither its GPU work, its GPU idle time nor its transfers differ enough from the "
        "other ranks' to say why: look at what this rank does outside the profiled steps "
        "and between them (checkpointing, evaluation, logging)."),
}

#: How the finding says each measure.
_SAID = {"compute": "GPU computation", "idle": "GPU idle time waiting for its host",
         "transfer": "transfer time"}


def why_late(trace: Trace, selection: Selection, arrivals: pd.DataFrame,
             offsets: Mapping[int, int]) -> dict[int, tuple[str, str]]:
    """Per late rank: ``(sentence, advice)`` naming its causes, the steps and the evidence
    (:func:`hta.analysis.straggler_causes.job_straggler_causes`; ``arrivals`` on one
    clock, ``offsets`` the ones that put them there); empty when no rank is late above
    noise."""
    if len(rank_numbers(trace, selection)) < 2:
        return {}
    causes = job_straggler_causes(trace, selection, arrivals, offsets)
    out: dict[int, tuple[str, str]] = {}
    for rank, part in causes.groupby("rank", sort=False):
        rows = part.to_dict("records")
        sentence = "why: " + "; ".join(_cause_sentence(r) for r in rows)
        out[int(rank)] = (sentence, CAUSE_ADVICE[str(rows[0]["cause"])])
    return out


def _cause_sentence(row: dict) -> str:
    """``slow_compute in steps 0-3 (recurring): GPU computation 6.2 ms a step against
    4.8 ms for the median rank``."""
    cause = str(row["cause"])
    steps = tuple(int(s) for s in row["steps"])
    head = f"{cause} in {fmt_steps(steps)}{' (recurring)' if row['recurring'] else ''}"
    m = CAUSE_MEASURE.get(cause)
    if m is None:
        return head
    return (f"{head}: {_SAID[m]} {fmt_time(row[f'{m}(us)'] * 1e3)} a step against "
            f"{fmt_time(row[f'median_{m}(us)'] * 1e3)} for the median rank")
