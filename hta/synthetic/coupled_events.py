"""The timeline of a coupled job (:mod:`hta.synthetic.coupled`) and its Kineto events.

A coupled job is solved as plain integer-ns records, :class:`GpuOp` (one GPU kernel and the
host op that launched it) and :class:`RankStep` (one rank's step: its host layout and its
ops); :class:`RankEvents` then writes one rank's records as Kineto events, the way
:mod:`hta.synthetic.training_step` writes them, so the project's loader reads them.

Host layout of a step on the rank's one CPU thread (see :func:`lay_out_host`):

* ``ProfilerStep#N`` spans ``[step start, step end]``;
* an optional data-loader ``cpu_op`` of ``pause_ns`` at the step's start;
* each compute kernel: ``aten::mm`` of 7 us holding its 5 us ``cudaLaunchKernel`` (2 us in);
* each NCCL kernel: ``record_param_comms`` of 9 us > ``nccl:*`` annotation (1 us in, 7 us)
  > 5 us ``cudaLaunchKernel`` (2 us in);
* a kernel that waits for work on another stream (:attr:`GpuOp.waits_on_stream`: the
  all-reduce for the last backward, a pipeline compute kernel for its recv, a send for its
  compute kernel) has, just before its launch call and inside the same op (the ``aten::mm``,
  or the ``nccl:*`` annotation), a 2 us ``cudaEventRecord`` then a 2 us
  ``cudaStreamWaitEvent`` (``cbid`` 135 and 147, a ``correlation`` from the launches'
  counter, no flow and no GPU event, as :mod:`hta.synthetic.primitives` writes them): its
  op is 4 us longer and its launch 4 us later;
* a pipeline compute op (:attr:`GpuOp.action` set) sits in a slot 2 us longer than the op,
  the op 1 us in: the slot is the ``PP:{stage}{F|B}{micro-batch}`` ``user_annotation`` of
  torch.distributed.pipelining (written only when the job is annotated; the layout is the
  same either way);
* ``cudaStreamSynchronize`` from the end of the last op until the rank's GPU is done + 10 us;
  the step ends 20 us later, where the next step starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from hta.synthetic.catalog import (
    _BASE_TIME_NS,
    _BATCH,
    _CBID,
    _DATALOADER,
    _DEVICE_PROPERTIES,
    _HIDDEN,
    _K_GEMM_DGRAD,
    _K_GEMM_FWD,
    _Kernel,
    _kernel,
    kernel_args,
    process_metadata,
)
from hta.synthetic.timefmt import Microseconds

US = 1_000
COMPUTE_STREAM = 7
NCCL_STREAM = 20
SEND_STREAM = 21
RECV_STREAM = 22
OP_NS = 7 * US  #: a compute op: 2 us, then its 5 us launch call
COMM_NS = 9 * US  #: a collective op: 2 us, its 5 us launch call, 2 us
LAUNCH_OFFSET_NS = 2 * US  #: from the start of an op to the start of its launch call
LAUNCH_NS = 5 * US  #: every launch call
QUEUE_NS = 3 * US  #: a kernel starts at the earliest 3 us after its launch call starts
EVENT_CALL_NS = 2 * US  #: cudaEventRecord and cudaStreamWaitEvent
WAIT_CALLS_NS = 2 * EVENT_CALL_NS  #: the two event calls before a launch that waits
PP_PAD_NS = 1 * US  #: a PP action annotation starts 1 us before its op and ends 1 us after
SYNC_TAIL_NS = 10 * US  #: cudaStreamSynchronize returns 10 us after the GPU is done
STEP_TAIL_NS = 20 * US  #: the step ends 20 us after the synchronize
P2P_NELEMS = 1_048_576
ALLREDUCE_NELEMS = 16_777_216

COMPUTE_KINDS = ("forward", "backward")
COMM_KINDS = ("allreduce", "send", "recv")

K_ALLREDUCE = _kernel(
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    (16, 1, 1),
    (640, 1, 1),
    96,
    87568,
    0,
)
K_SENDRECV = _kernel(
    "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)",
    (1, 1, 1),
    (640, 1, 1),
    96,
    87568,
    0,
)
_KERNELS: dict[str, _Kernel] = {
    "forward": _K_GEMM_FWD,
    "backward": _K_GEMM_DGRAD,
    "allreduce": K_ALLREDUCE,
    "send": K_SENDRECV,
    "recv": K_SENDRECV,
}


class Group(NamedTuple):
    """A process group: its name, description and (global) ranks."""

    name: str
    desc: str
    ranks: tuple[int, ...]

    def config(self) -> dict[str, Any]:
        """The group's ``distributedInfo.pg_config`` entry."""
        return {
            "pg_name": self.name,
            "pg_desc": self.desc,
            "backend_config": "cuda:nccl",
            "pg_size": len(self.ranks),
            "ranks": list(self.ranks),
        }


@dataclass(eq=False)
class GpuOp:
    """One GPU kernel of a coupled job and the host op that launches it (times in ns).

    ``dur_ns`` is fixed in advance for compute kernels; communication kernels get theirs when
    solved.  ``waits_for`` is the op whose end the kernel waits for (a compute kernel: the
    recv it needs; a send: the compute kernel producing it; an all-reduce: the last backward);
    ``partner`` is the other side of a p2p transfer.  ``action`` is a pipeline compute op's
    label, ``{stage}{F|B}{micro_batch}`` (``""`` elsewhere).
    """

    rank: int
    step: int
    kind: str
    stream: int
    dur_ns: int = 0
    micro_batch: int = -1
    peer: int = -1
    phase: str = ""
    host_ns: int = -1
    start_ns: int = -1
    end_ns: int = -1
    waits_for: GpuOp | None = None
    partner: GpuOp | None = None
    action: str = ""

    @property
    def is_comm(self) -> bool:
        """Whether the op is an NCCL kernel (all-reduce, send, recv)."""
        return self.kind in COMM_KINDS

    @property
    def waits_on_stream(self) -> bool:
        """Whether the kernel waits for work on another stream (event record + stream wait
        before its launch)."""
        return self.waits_for is not None and self.waits_for.stream != self.stream

    @property
    def pad_ns(self) -> int:
        """From the start of the op's host slot to the start of its CPU op."""
        return PP_PAD_NS if self.action else 0

    @property
    def op_ns(self) -> int:
        """Duration of the op's CPU op (``aten::mm`` or ``record_param_comms``)."""
        wait = WAIT_CALLS_NS if self.waits_on_stream else 0
        return (COMM_NS if self.is_comm else OP_NS) + wait

    @property
    def slot_ns(self) -> int:
        """Host time the op takes on the thread (its annotation's span, if any)."""
        return self.op_ns + 2 * self.pad_ns

    @property
    def launch_ns(self) -> int:
        """Start of the launch call (after the event calls, if any)."""
        wait = WAIT_CALLS_NS if self.waits_on_stream else 0
        return self.host_ns + self.pad_ns + LAUNCH_OFFSET_NS + wait


@dataclass(eq=False)
class RankStep:
    """One rank's step: its start, an optional host pause, its ops in launch order."""

    rank: int
    step: int
    start_ns: int
    ops: list[GpuOp]
    pause_ns: int = 0
    sync_ns: int = -1
    sync_end_ns: int = -1
    end_ns: int = -1


def lay_out_host(st: RankStep) -> None:
    """Place the host ops of ``st`` back to back after the pause; set the sync's start."""
    cursor = st.start_ns + st.pause_ns
    for op in st.ops:
        op.host_ns = cursor
        cursor += op.slot_ns
    st.sync_ns = cursor


def finish_step(st: RankStep) -> int:
    """Close ``st`` once its GPU times are solved; return the next step's start."""
    gpu_done = max((op.end_ns for op in st.ops), default=st.sync_ns)
    st.sync_end_ns = max(gpu_done, st.sync_ns) + SYNC_TAIL_NS
    st.end_ns = st.sync_end_ns + STEP_TAIL_NS
    return st.end_ns


def header(rank: int, world: int, groups: list[Group]) -> dict[str, Any]:
    """Top-level keys of a rank's trace before ``traceEvents``."""
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": rank, **_DEVICE_PROPERTIES}],
        "distributedInfo": {
            "backend": "nccl",
            "rank": rank,
            "world_size": world,
            "pg_count": len(groups),
            "pg_config": [g.config() for g in groups],
            "nccl_version": "2.21.5",
        },
        "host_name": f"synthetic-node{rank // 8:03d}",
        "displayTimeUnit": "ns",
        "baseTimeNanoseconds": _BASE_TIME_NS,
    }


class RankEvents:
    """Writes one rank's solved steps as Kineto events (times relative to the base time);
    ``annotate``: write the ``PP:*`` action annotations of pipeline compute ops."""

    def __init__(self, rank: int, groups: dict[str, Group], annotate: bool = True) -> None:
        self.rank = rank
        self.annotate = annotate
        self.device = rank
        self.pid = 1000 + rank
        self.tid = 2000 + rank
        self.groups = groups
        self.ext = 0
        self.corr = 1000
        self.seq: dict[str, int] = {}
        self.events: list[dict[str, Any]] = []
        self.streams: set[int] = set()

    def _next_ext(self) -> int:
        self.ext += 1
        return self.ext

    def _next_corr(self) -> int:
        self.corr += 1
        return self.corr

    def _x(
        self, cat: str, name: str, start: int, end: int, args: dict[str, Any], gpu: int = -1
    ) -> dict[str, Any]:
        """A complete event on the CPU thread, or on GPU stream ``gpu``."""
        ev = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": self.pid if gpu < 0 else self.device,
            "tid": self.tid if gpu < 0 else gpu,
            "ts": Microseconds(start),
            "dur": Microseconds(end - start),
            "args": args,
        }
        self.events.append(ev)
        return ev

    def _flow(self, ph: str, corr: int, ts: int, gpu: int = -1) -> None:
        ev: dict[str, Any] = {
            "ph": ph,
            "id": corr,
            "pid": self.pid if gpu < 0 else self.device,
            "tid": self.tid if gpu < 0 else gpu,
            "ts": Microseconds(ts),
            "cat": "ac2g",
            "name": "ac2g",
        }
        if ph == "f":
            ev["bp"] = "e"
        self.events.append(ev)

    def add_step(self, st: RankStep) -> None:
        """Append the events of one solved step (host first, each kernel after its launch)."""
        ext = self._next_ext()
        self._x("user_annotation", f"ProfilerStep#{st.step}", st.start_ns, st.end_ns,
                {"External id": ext})
        if st.pause_ns:
            self._x("cpu_op", _DATALOADER, st.start_ns, st.start_ns + st.pause_ns,
                    {"External id": self._next_ext()})
        for op in st.ops:
            if op.is_comm:
                self._collective(op)
            else:
                self._compute(op)
        args = {"cbid": _CBID["cudaStreamSynchronize"], "correlation": self._next_corr()}
        self._x("cuda_runtime", "cudaStreamSynchronize", st.sync_ns, st.sync_end_ns, args)

    def _compute(self, op: GpuOp) -> None:
        """[``PP:*`` annotation >] ``aten::mm`` > [event calls,] launch; the kernel."""
        if op.action and self.annotate:
            self._x("user_annotation", f"PP:{op.action}", op.host_ns, op.host_ns + op.slot_ns,
                    {"External id": self._next_ext()})
        ext = self._next_ext()
        dims = [[_BATCH, _HIDDEN], [_HIDDEN, _HIDDEN]]
        args = {"External id": ext, "Input Dims": dims, "Input type": ["float", "float"]}
        t = op.host_ns + op.pad_ns
        self._x("cpu_op", "aten::mm", t, t + op.op_ns, args)
        self._launch(op, ext, {})

    def _stream_wait(self, op: GpuOp, ext: int) -> None:
        """``cudaEventRecord`` then ``cudaStreamWaitEvent``, back to back, ending where the
        launch call of ``op`` starts (no flow, no GPU event)."""
        t = op.launch_ns - WAIT_CALLS_NS
        for name in ("cudaEventRecord", "cudaStreamWaitEvent"):
            args = {"External id": ext, "cbid": _CBID[name], "correlation": self._next_corr()}
            self._x("cuda_runtime", name, t, t + EVENT_CALL_NS, args)
            t += EVENT_CALL_NS

    def _launch(self, op: GpuOp, ext: int, extra: dict[str, Any]) -> None:
        """[The event calls,] the launch call, its ac2g flow, and the kernel."""
        if op.waits_on_stream:
            self._stream_wait(op, ext)
        corr = self._next_corr()
        t0 = op.launch_ns
        args = {"External id": ext, "cbid": _CBID["cudaLaunchKernel"], "correlation": corr}
        self._x("cuda_runtime", "cudaLaunchKernel", t0, t0 + LAUNCH_NS, args)
        self._flow("s", corr, t0)
        k = _KERNELS[op.kind]
        kargs = {**kernel_args(k, ext, op.stream, corr, self.device), **extra}
        self._x("kernel", k.name, op.start_ns, op.end_ns, kargs, op.stream)
        self._flow("f", corr, op.start_ns, op.stream)
        self.streams.add(op.stream)

    def _comm_args(self, op: GpuOp) -> tuple[str, dict[str, Any]]:
        """The annotation name and the collective args of an NCCL op (without ``Rank``)."""
        group = self.groups["allreduce" if op.kind == "allreduce" else "p2p"]
        seq = self.seq.get(group.name, 0) + 1
        self.seq[group.name] = seq
        if op.kind == "allreduce":
            ann, coll, nelems = "nccl:all_reduce", "allreduce", ALLREDUCE_NELEMS
        elif op.kind == "send":
            ann, coll, nelems = f"nccl:send {self.rank}->{op.peer}", "send", P2P_NELEMS
        else:
            ann, coll, nelems = f"nccl:recv {self.rank}<-{op.peer}", "recv", P2P_NELEMS
        return ann, {
            "Collective name": coll,
            "dtype": "Float",
            "In msg nelems": nelems,
            "Out msg nelems": nelems,
            "Group size": len(group.ranks),
            "In split size": "[]",
            "Out split size": "[]",
            "Process Group Name": group.name,
            "Process Group Description": group.desc,
            "Process Group Ranks": str(list(group.ranks)),
            "Seq": seq,
        }

    def _collective(self, op: GpuOp) -> None:
        """``record_param_comms`` > ``nccl:*`` annotation > [event calls,] launch; the NCCL
        kernel and its ``gpu_user_annotation``."""
        ann, cargs = self._comm_args(op)
        peer_or_self = self.rank if op.kind == "allreduce" else op.peer
        t = op.host_ns
        ext = self._next_ext()
        self._x("cpu_op", "record_param_comms", t, t + op.op_ns,
                {"External id": ext, **cargs, "Rank": peer_or_self})
        ext_a = self._next_ext()
        self._x("user_annotation", ann, t + US, t + op.op_ns - US, {"External id": ext_a})
        self._launch(op, ext_a, cargs)
        self._x("gpu_user_annotation", ann, op.start_ns, op.end_ns, {"External id": ext_a},
                op.stream)

    def metadata(self) -> list[dict[str, Any]]:
        """Process and thread names and sort indexes, as Kineto writes them last."""
        ts = Microseconds(self.events[0]["ts"].ns if self.events else 0)
        pid, dev, tid = self.pid, self.device, self.tid

        def meta(name: str, p: int, t: int, args: dict[str, Any]) -> dict[str, Any]:
            return {"name": name, "ph": "M", "ts": ts, "pid": p, "tid": t, "args": args}

        out = process_metadata(ts, pid, dev)
        for stream in sorted(self.streams):
            out.append(meta("thread_name", dev, stream, {"name": f"stream {stream} "}))
            out.append(meta("thread_sort_index", dev, stream, {"sort_index": stream}))
        out.append(meta("thread_name", pid, tid, {"name": f"thread {tid} (pt_main_thread)"}))
        out.append(meta("thread_sort_index", pid, tid, {"sort_index": tid}))
        return out
