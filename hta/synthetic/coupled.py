"""Generated multi-rank jobs whose ranks interact, with exact ground truth.

Unlike :func:`hta.synthetic.generate_job`, where every rank is built on its own, the ranks of
a coupled job share one clock (the same ``baseTimeNanoseconds``; ``ts`` relative to it) and
wait for each other: an all-reduce ends only after the last rank started it, a pipeline stage
receives only what its neighbour sent.  All times are integer ns; the job is deterministic in
``(shape, ranks, steps, micro_batches, seed)``.

Shapes (:data:`SHAPES`)
-----------------------
Data parallel (one process group ``"0"`` of all ranks).  Per step each rank launches 8
forward kernels (200 us) and 8 backward kernels (400 us) on stream 7, then an all-reduce on
stream 20 (``T`` = 1,000 us), then synchronizes.  A compute kernel starts at max(its launch
+ 3 us, the previous kernel's end); the all-reduce starts at max(its launch + 3 us, the last
backward's end) and ends on rank ``r`` at (the latest start over all ranks) + ``T`` x the
rank's link factor.  As in a real trace, the host says why the all-reduce waits: just before
its launch call (inside its ``nccl:all_reduce`` annotation) a ``cudaEventRecord`` and a
``cudaStreamWaitEvent`` make the NCCL stream wait for the compute stream.

* ``balanced``: nothing made slow;
* ``slow_worker``: rank ``ranks - 1`` computes 1.3x slower on every step;
* ``imbalance``: on step ``s`` rank ``(3s + 1) % ranks`` computes 1.3x slower;
* ``host``: rank 1 (0 if alone) spends 3,000 us in the data loader at each step's start;
* ``slow_link``: rank ``ranks - 1`` has link factor 2 (its all-reduce ends ``T`` later, so
  its next step starts ``T`` later).

Pipeline parallel (stage ``s`` = rank ``s``, p2p in process group ``"1"``, ``"pipeline"``):
``gpipe`` and ``1f1b`` with ``micro_batches`` micro-batches, forward 1,000 us and backward
2,000 us per micro-batch and stage, 200 us per transfer (see :mod:`.coupled_pipeline`).
Each compute op is wrapped in a ``PP:{stage}F{micro_batch}`` (forward) or
``PP:{stage}B{micro_batch}`` (backward) ``user_annotation``, as torch.distributed.pipelining
names its actions, unless the job is written with ``annotate=False`` (the times are the same
either way; the truth's ``annotated`` says which).

Every compute kernel's duration is multiplied by a seeded factor uniform in [0.99, 1.01]
and rounded to ns; the truth holds the exact durations used.  The host layout and the events
are described in :mod:`.coupled_events`, the truth's keys in :mod:`.coupled_truth`.

Example::

    paths, truth = generate_coupled_job("job", "slow_worker", ranks=4, steps=4)
    truth["straggler"]  # {"rank": 3, "cause": "slow_compute", "steps": [0, 1, 2, 3]}
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from hta.synthetic.catalog import _START_OFFSET_NS
from hta.synthetic.coupled_events import (
    COMPUTE_STREAM,
    NCCL_STREAM,
    QUEUE_NS,
    GpuOp,
    Group,
    RankEvents,
    RankStep,
    finish_step,
    header,
    lay_out_host,
)
from hta.synthetic.coupled_pipeline import (
    Floors,
    pair_transfers,
    schedule,
    solve_pipeline_step,
    stage_ops,
)
from hta.synthetic.coupled_truth import Timeline, ddp_truth, pipeline_truth
from hta.synthetic.timefmt import _gc_paused
from hta.synthetic.writer import _write_stream

DDP_SHAPES = ("balanced", "slow_worker", "imbalance", "host", "slow_link")
PIPELINE_SHAPES = ("gpipe", "1f1b")
SHAPES = DDP_SHAPES + PIPELINE_SHAPES
#: Where :func:`generate_coupled_job` writes the truth, relative to its folder.
TRUTH_FILE = "truth/truth.json"

LAYERS = 8  #: forward (and backward) kernels per data-parallel step
DDP_FORWARD_NS = 200_000
DDP_BACKWARD_NS = 400_000
ALLREDUCE_NS = 1_000_000
HOST_PAUSE_NS = 3_000_000
SLOW_COMPUTE = 1.3
SLOW_LINK = 2.0
PIPE_FORWARD_NS = 1_000_000
PIPE_BACKWARD_NS = 2_000_000

_CAUSES: dict[str, str | None] = {
    "balanced": None,
    "slow_worker": "slow_compute",
    "imbalance": "imbalance",
    "host": "host",
    "slow_link": "slow_link",
}


class _Durations:
    """One rank's seeded compute-kernel durations (jitter factor uniform in [0.99, 1.01])."""

    def __init__(self, seed: int, shape: str, rank: int) -> None:
        self.rng = random.Random(f"hta.synthetic.coupled:{seed}:{shape}:{rank}")

    def draw(self, base_ns: int, slow: float = 1.0) -> int:
        """``base_ns`` x ``slow`` x the next jitter factor, rounded to ns."""
        return round(base_ns * slow * self.rng.uniform(0.99, 1.01))


def constructed_rank(shape: str, step: int, ranks: int) -> int | None:
    """The rank a data-parallel shape makes late on ``step`` (None for ``balanced``)."""
    if shape in ("slow_worker", "slow_link"):
        return ranks - 1
    if shape == "imbalance":
        return (3 * step + 1) % ranks
    if shape == "host":
        return 1 if ranks > 1 else 0
    return None


def _ddp_step(shape: str, st: RankStep, durs: _Durations, ranks: int) -> None:
    """Fill one data-parallel rank step: its ops (drawing the durations) and its pause."""
    late = constructed_rank(shape, st.step, ranks) == st.rank
    slow = SLOW_COMPUTE if late and shape in ("slow_worker", "imbalance") else 1.0
    r, s = st.rank, st.step
    st.ops = [GpuOp(r, s, "forward", COMPUTE_STREAM, durs.draw(DDP_FORWARD_NS, slow))
              for _ in range(LAYERS)]
    st.ops += [GpuOp(r, s, "backward", COMPUTE_STREAM, durs.draw(DDP_BACKWARD_NS, slow))
               for _ in range(LAYERS)]
    st.ops.append(GpuOp(r, s, "allreduce", NCCL_STREAM, waits_for=st.ops[-1]))
    st.pause_ns = HOST_PAUSE_NS if late and shape == "host" else 0


def _solve_ddp_step(shape: str, steps: list[RankStep], floors: Floors) -> None:
    """GPU times of one data-parallel step over all ranks (host laid out already)."""
    for st in steps:
        prev_end = floors.get((st.rank, COMPUTE_STREAM), 0)
        for op in st.ops[:-1]:
            op.start_ns = max(op.launch_ns + QUEUE_NS, prev_end)
            op.end_ns = prev_end = op.start_ns + op.dur_ns
        ar = st.ops[-1]
        ar.start_ns = max(ar.launch_ns + QUEUE_NS, prev_end, floors.get((st.rank, NCCL_STREAM), 0))
    latest = max(st.ops[-1].start_ns for st in steps)
    ranks = len(steps)
    for st in steps:
        ar = st.ops[-1]
        slow_link = shape == "slow_link" and st.rank == constructed_rank(shape, st.step, ranks)
        ar.end_ns = latest + round(ALLREDUCE_NS * (SLOW_LINK if slow_link else 1.0))
        ar.dur_ns = ar.end_ns - ar.start_ns
        for op in st.ops:
            key = (op.rank, op.stream)
            floors[key] = max(floors.get(key, 0), op.end_ns)


def _pipeline_step(shape: str, st: RankStep, durs: _Durations, ranks: int, mbs: int) -> None:
    """Fill one pipeline stage's step with its ops in launch order (drawing the durations)."""

    def duration(phase: str) -> int:
        return durs.draw(PIPE_FORWARD_NS if phase == "forward" else PIPE_BACKWARD_NS)

    order = schedule(shape, st.rank, ranks, mbs)
    st.ops = stage_ops(st.rank, st.step, ranks, order, duration)


def _timeline(shape: str, ranks: int, steps: int, micro_batches: int, seed: int) -> Timeline:
    """Solve the whole job step by step: ``timeline[rank][step]``."""
    durs = [_Durations(seed, shape, r) for r in range(ranks)]
    starts = [_START_OFFSET_NS] * ranks
    floors: Floors = {}
    out: Timeline = [[] for _ in range(ranks)]
    for s in range(steps):
        sts = [RankStep(r, s, starts[r], []) for r in range(ranks)]
        for st in sts:
            if shape in PIPELINE_SHAPES:
                _pipeline_step(shape, st, durs[st.rank], ranks, micro_batches)
            else:
                _ddp_step(shape, st, durs[st.rank], ranks)
            lay_out_host(st)
        if shape in PIPELINE_SHAPES:
            pair_transfers(sts)
            solve_pipeline_step(sts, floors)
        else:
            _solve_ddp_step(shape, sts, floors)
        for st in sts:
            starts[st.rank] = finish_step(st)
            out[st.rank].append(st)
    return out


def _check(shape: str, ranks: int, steps: int, micro_batches: int) -> None:
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; expected one of {', '.join(SHAPES)}")
    for name, value in (("ranks", ranks), ("steps", steps), ("micro_batches", micro_batches)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def _groups(shape: str, ranks: int) -> tuple[list[Group], dict[str, Group]]:
    """The job's process groups (for ``pg_config``) and the group of each kind of op."""
    everyone = tuple(range(ranks))
    default = Group("0", "default_pg", everyone)
    if shape in PIPELINE_SHAPES:
        pipe = Group("1", "pipeline", everyone)
        return [default, pipe], {"p2p": pipe}
    return [default], {"allreduce": default}


def _truth(shape: str, timeline: Timeline, micro_batches: int, annotate: bool) -> dict[str, Any]:
    """The job's truth; ``annotated``: whether its traces hold ``PP:*`` action annotations
    (pipeline shapes written with ``annotate``)."""
    if shape in PIPELINE_SHAPES:
        return pipeline_truth(shape, timeline, micro_batches, annotate)
    ranks, steps = len(timeline), len(timeline[0])
    constructed = [constructed_rank(shape, s, ranks) for s in range(steps)]
    return ddp_truth(shape, timeline, constructed, _CAUSES[shape], shape != "imbalance")


def _rank_parts(
    shape: str, timeline: Timeline, annotate: bool
) -> list[tuple[dict[str, Any], list[dict[str, Any]], str]]:
    """Per rank: the top-level keys, the events, and the ``traceName``."""
    ranks = len(timeline)
    config, by_kind = _groups(shape, ranks)
    out = []
    for r, steps in enumerate(timeline):
        ev = RankEvents(r, by_kind, annotate)
        for st in steps:
            ev.add_step(st)
        name = f"/tmp/hta_synthetic_{shape}_rank-{r}.pt.trace.json"
        out.append((header(r, ranks, config), ev.events + ev.metadata(), name))
    return out


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def coupled_job(
    shape: str,
    *,
    ranks: int = 4,
    steps: int = 4,
    micro_batches: int = 4,
    seed: int = 0,
    annotate: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """In memory: one Kineto trace dict per rank (times as :class:`Microseconds`), and the
    truth (see :mod:`hta.synthetic.coupled_truth`).  ``shape`` is one of :data:`SHAPES`;
    ``micro_batches`` applies to the pipeline shapes only, and so does ``annotate`` (write
    the ``PP:*`` action annotations; without them the times are the same)."""
    _check(shape, ranks, steps, micro_batches)
    timeline = _timeline(shape, ranks, steps, micro_batches, seed)
    traces = [{**head, "traceEvents": events, "traceName": name}
              for head, events, name in _rank_parts(shape, timeline, annotate)]
    return traces, _truth(shape, timeline, micro_batches, annotate)


def generate_coupled_job(
    out_dir: str | os.PathLike[str],
    shape: str,
    *,
    ranks: int = 4,
    steps: int = 4,
    micro_batches: int = 4,
    seed: int = 0,
    gzip: bool = True,
    annotate: bool = True,
) -> tuple[list[Path], dict[str, Any]]:
    """Write ``rank-{r}.json.gz`` (``.json`` without ``gzip``) for each rank into
    ``out_dir`` and the truth into ``out_dir/truth/truth.json`` (:data:`TRUTH_FILE`, out of
    the loader's way: it reads the files directly in the folder); return (the rank files,
    the truth).  ``annotate``: as in :func:`coupled_job`.

    The files hold what :func:`coupled_job` returns (times with exactly three decimals);
    the truth is plain JSON with integer ns.
    """
    _check(shape, ranks, steps, micro_batches)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    timeline = _timeline(shape, ranks, steps, micro_batches, seed)
    suffix = ".json.gz" if gzip else ".json"
    paths = []
    with _gc_paused():
        for r, (head, events, name) in enumerate(_rank_parts(shape, timeline, annotate)):
            path = out / f"rank-{r}{suffix}"
            _write_stream(path, head, [events], name, gzip)
            paths.append(path)
    truth = _truth(shape, timeline, micro_batches, annotate)
    (out / TRUTH_FILE).parent.mkdir(exist_ok=True)
    (out / TRUTH_FILE).write_text(json.dumps(truth, indent=1) + "\n")
    return paths, truth
