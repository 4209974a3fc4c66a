"""Pipeline-parallel steps of a coupled job: the schedules, the transfers, and the solver.

Stage ``s`` is rank ``s``.  Per micro-batch ``m`` a stage runs one forward kernel F(s, m) and
one backward kernel B(s, m) on the compute stream.  F(s, m) for ``s > 0`` needs the
activation received from ``s - 1``; after F(s, m) for ``s < P - 1`` the activation is sent to
``s + 1``.  B(s, m) for ``s < P - 1`` needs the gradient received from ``s + 1``; after B(s, m)
for ``s > 0`` the gradient is sent to ``s - 1``.  Sends run on stream 21, receives on
stream 22.  Each compute op carries its action label ``{stage}{F|B}{micro_batch}`` (the
``PP:`` annotation of torch.distributed.pipelining, :mod:`.coupled_events`).  A compute
kernel that needs a recv, and a send, wait for another stream: their launches are preceded
by ``cudaEventRecord`` + ``cudaStreamWaitEvent`` on the host.

GPU times (solved to a fixed point over all stages of one step, :func:`solve_pipeline_step`):

* a recv kernel starts at max(its launch + 3 us, the previous kernel's end on its stream);
* a send kernel starts at max(its launch + 3 us, the end of the compute kernel producing it,
  the previous kernel's end on its stream);
* both kernels of one transfer end at max(send start, recv start) + ``T_p2p``;
* a compute kernel starts at max(its launch + 3 us, the previous compute kernel's end, the end
  of the recv it needs).
"""

from __future__ import annotations

from collections.abc import Callable

from hta.synthetic.coupled_events import (
    COMPUTE_STREAM,
    QUEUE_NS,
    RECV_STREAM,
    SEND_STREAM,
    GpuOp,
    RankStep,
)

SCHEDULES = ("gpipe", "1f1b")
T_P2P_NS = 200_000

#: (rank, stream) -> end of the last kernel solved on that stream (previous steps).
Floors = dict[tuple[int, int], int]


def schedule(name: str, stage: int, stages: int, micro_batches: int) -> list[tuple[str, int]]:
    """The compute ops of one stage in order, as ``(phase, micro_batch)``.

    ``gpipe``: every forward, then every backward in micro-batch order (as torch's GPipe).
    ``1f1b``: ``W = min(P - s - 1, M)`` warm-up forwards, then F(W + i), B(i) alternately while
    forwards remain, then the remaining backwards (non-interleaved 1F1B).
    """
    m = micro_batches
    if name == "gpipe":
        return [("forward", i) for i in range(m)] + [("backward", i) for i in range(m)]
    if name != "1f1b":
        raise ValueError(f"unknown schedule {name!r}; expected one of {SCHEDULES}")
    warm = min(stages - stage - 1, m)
    order = [("forward", i) for i in range(warm)]
    for i in range(m - warm):
        order += [("forward", warm + i), ("backward", i)]
    order += [("backward", i) for i in range(m - warm, m)]
    return order


def stage_ops(
    stage: int,
    step: int,
    stages: int,
    order: list[tuple[str, int]],
    duration: Callable[[str], int],
) -> list[GpuOp]:
    """One stage's ops of one step in launch order: per compute op X, [its recv], X, [its
    send]; ``duration(phase)`` draws X's duration.  Links each op to what it waits for."""
    ops: list[GpuOp] = []
    for phase, mb in order:
        fwd = phase == "forward"
        src = stage - 1 if fwd else stage + 1
        dst = stage + 1 if fwd else stage - 1
        x = GpuOp(stage, step, phase, COMPUTE_STREAM, duration(phase), micro_batch=mb,
                  action=f"{stage}{'F' if fwd else 'B'}{mb}")
        if 0 <= src < stages:
            recv = GpuOp(stage, step, "recv", RECV_STREAM, micro_batch=mb, peer=src, phase=phase)
            x.waits_for = recv
            ops.append(recv)
        ops.append(x)
        if 0 <= dst < stages:
            ops.append(
                GpuOp(stage, step, "send", SEND_STREAM, micro_batch=mb, peer=dst, phase=phase,
                      waits_for=x)
            )
    return ops


def pair_transfers(steps: list[RankStep]) -> None:
    """Link every send to the recv of the same transfer (same phase, micro-batch, ends)."""
    recvs = {
        (op.phase, op.micro_batch, op.peer, op.rank): op
        for st in steps
        for op in st.ops
        if op.kind == "recv"
    }
    for st in steps:
        for op in st.ops:
            if op.kind == "send":
                recv = recvs.pop((op.phase, op.micro_batch, op.rank, op.peer))
                op.partner, recv.partner = recv, op
    if recvs:
        raise RuntimeError(f"receives without a matching send: {sorted(recvs)[:3]}")


def _ready_ns(op: GpuOp, prev: GpuOp | None, floors: Floors) -> int | None:
    """The op's start if everything it waits for has ended, else None."""
    t = op.launch_ns + QUEUE_NS
    if prev is None:
        t = max(t, floors.get((op.rank, op.stream), 0))
    elif prev.end_ns < 0:
        return None
    else:
        t = max(t, prev.end_ns)
    dep = op.waits_for
    if dep is not None:
        if dep.end_ns < 0:
            return None
        t = max(t, dep.end_ns)
    return t


def _settle(op: GpuOp, prev: GpuOp | None, floors: Floors) -> bool:
    """Solve what can be solved of ``op`` now; return whether anything changed."""
    changed = False
    if op.start_ns < 0:
        start = _ready_ns(op, prev, floors)
        if start is not None:
            op.start_ns = start
            if not op.is_comm:
                op.end_ns = start + op.dur_ns
            changed = True
    other = op.partner
    if op.end_ns < 0 and op.start_ns >= 0 and other is not None and other.start_ns >= 0:
        end = max(op.start_ns, other.start_ns) + T_P2P_NS
        for side in (op, other):
            side.end_ns = end
            side.dur_ns = end - side.start_ns
        changed = True
    return changed


def solve_pipeline_step(steps: list[RankStep], floors: Floors) -> None:
    """Solve the GPU times of one step over all stages (host times laid out already) by a
    worklist to a fixed point; update ``floors``.  Raises RuntimeError on a deadlock."""
    chain: list[tuple[GpuOp, GpuOp | None]] = []
    for st in steps:
        last: dict[int, GpuOp] = {}
        for op in st.ops:
            chain.append((op, last.get(op.stream)))
            last[op.stream] = op
    pending = chain
    while pending:
        changed = False
        for op, prev in pending:
            changed |= _settle(op, prev, floors)
        pending = [(op, prev) for op, prev in pending if op.end_ns < 0]
        if pending and not changed:
            stuck = ", ".join(f"{op.kind} {op.phase} m={op.micro_batch} on rank {op.rank}"
                              for op, _ in pending[:4])
            raise RuntimeError(f"pipeline deadlock in step {steps[0].step}: {stuck} ...")
    for st in steps:
        for op in st.ops:
            floors[(op.rank, op.stream)] = max(floors.get((op.rank, op.stream), 0), op.end_ns)
