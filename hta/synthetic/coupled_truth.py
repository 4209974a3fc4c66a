"""The ground truth of a coupled job (:mod:`hta.synthetic.coupled`), from its solved timeline.

Every time is an integer in epoch ns (``baseTimeNanoseconds + ts * 1000``), the clock the
project's loader gives in its ``ts``/``end`` columns; ``base_time_ns`` is in the truth too.
``annotated`` says whether the traces hold the ``PP:*`` action annotations (pipeline shapes
written with ``annotate=True``; always False for the data-parallel shapes).
"""

from __future__ import annotations

from typing import Any

from hta.synthetic.catalog import _BASE_TIME_NS
from hta.synthetic.coupled_events import COMPUTE_KINDS, GpuOp, RankStep

#: A solved job: ``timeline[rank][step]``.
Timeline = list[list[RankStep]]


def _abs(ns: int) -> int:
    return _BASE_TIME_NS + ns


def _compute_ns(st: RankStep) -> int:
    return sum(op.dur_ns for op in st.ops if op.kind in COMPUTE_KINDS)


def _step_row(st: RankStep) -> dict[str, Any]:
    return {
        "rank": st.rank,
        "step": st.step,
        "compute_ns": _compute_ns(st),
        "step_start_ns": _abs(st.start_ns),
        "step_end_ns": _abs(st.end_ns),
    }


def kernels(timeline: Timeline) -> list[dict[str, Any]]:
    """Every kernel of the job, by rank, step and launch order: rank, step, stream, kind
    (forward, backward, allreduce, send, recv), start_ns and end_ns."""
    return [
        {
            "rank": op.rank,
            "step": op.step,
            "stream": op.stream,
            "kind": op.kind,
            "start_ns": _abs(op.start_ns),
            "end_ns": _abs(op.end_ns),
        }
        for steps in timeline
        for st in steps
        for op in st.ops
    ]


def _late(timeline: Timeline, steps: int) -> list[dict[str, Any]]:
    """Per step: the last rank to start the all-reduce (the lowest on a tie), and its lag."""
    out = []
    for s in range(steps):
        starts = [ranks[s].ops[-1].start_ns for ranks in timeline]
        last = max(range(len(starts)), key=lambda r: (starts[r], -r))
        out.append({"step": s, "rank": last, "lag_ns": starts[last] - min(starts)})
    return out


def ddp_truth(
    shape: str,
    timeline: Timeline,
    constructed: list[int | None],
    cause: str | None,
    whole_job: bool,
) -> dict[str, Any]:
    """Truth of a data-parallel job.  ``constructed[s]``: the rank made late on step ``s``;
    ``whole_job``: the same rank on every step (else ``straggler.rank`` is None)."""
    steps = len(timeline[0])
    per_step = []
    for ranks in timeline:
        for st in ranks:
            row = _step_row(st)
            ar = st.ops[-1]
            row["allreduce_start_ns"] = _abs(ar.start_ns)
            row["allreduce_end_ns"] = _abs(ar.end_ns)
            per_step.append(row)
    late = _late(timeline, steps)
    hits = [s for s in range(steps) if constructed[s] is not None
            and late[s]["rank"] == constructed[s]]
    return {
        "shape": shape,
        "ranks": len(timeline),
        "steps": steps,
        "base_time_ns": _BASE_TIME_NS,
        "annotated": False,
        "straggler": {
            "rank": constructed[0] if whole_job else None,
            "cause": cause,
            "steps": hits,
        },
        "per_step": per_step,
        "late": late,
        "kernels": kernels(timeline),
    }


def _p2p_row(op: GpuOp) -> dict[str, Any]:
    other = op.partner
    assert other is not None
    both = max(op.start_ns, other.start_ns)
    return {
        "rank": op.rank,
        "step": op.step,
        "peer": op.peer,
        "direction": op.kind,
        "phase": op.phase,
        "micro_batch": op.micro_batch,
        "start_ns": _abs(op.start_ns),
        "end_ns": _abs(op.end_ns),
        "wait_ns": both - op.start_ns,
        "transfer_ns": op.end_ns - both,
    }


def _bubbles(timeline: Timeline, steps: int) -> list[dict[str, Any]]:
    """Per stage and step: the step's compute window over all stages minus the stage's
    compute time."""
    out = []
    for s in range(steps):
        ops = [op for ranks in timeline for op in ranks[s].ops if op.kind in COMPUTE_KINDS]
        window = max(op.end_ns for op in ops) - min(op.start_ns for op in ops)
        for ranks in timeline:
            out.append({"rank": ranks[s].rank, "step": s,
                        "bubble_ns": window - _compute_ns(ranks[s])})
    return out


def pipeline_truth(
    shape: str, timeline: Timeline, micro_batches: int, annotated: bool = True
) -> dict[str, Any]:
    """Truth of a pipeline-parallel job (``shape`` is its schedule); ``annotated``: whether
    its compute ops are wrapped in ``PP:*`` action annotations."""
    stages, steps = len(timeline), len(timeline[0])
    all_ops = [op for ranks in timeline for st in ranks for op in st.ops]
    compute = [
        {
            "rank": op.rank,
            "step": op.step,
            "phase": op.kind,
            "micro_batch": op.micro_batch,
            "start_ns": _abs(op.start_ns),
            "end_ns": _abs(op.end_ns),
        }
        for op in all_ops
        if op.kind in COMPUTE_KINDS
    ]
    return {
        "shape": shape,
        "ranks": stages,
        "steps": steps,
        "micro_batches": micro_batches,
        "schedule": shape,
        "annotated": annotated,
        "base_time_ns": _BASE_TIME_NS,
        "stage_order": list(range(stages)),
        "per_step": [_step_row(st) for ranks in timeline for st in ranks],
        "compute": compute,
        "p2p": [_p2p_row(op) for op in all_ops if op.partner is not None],
        "bubbles": _bubbles(timeline, steps),
        "theory": {"bubble_fraction": (stages - 1) / (micro_batches + stages - 1)},
        "kernels": kernels(timeline),
    }
