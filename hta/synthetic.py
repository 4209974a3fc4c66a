"""Synthetic PyTorch-profiler (Kineto) traces with exact, by-construction ground truth.

The generator models one data-parallel training job: every rank runs the same small MLP for
``steps`` iterations, so the structure (names, counts, collective arguments) is identical on
all ranks and only the OS pid/tid, the GPU index, memory addresses and the timings differ.

Each rank's trace follows the format that Kineto writes (see ``KINETO.md``):

* top level: ``schemaVersion``, ``deviceProperties`` (one A100-like entry), ``distributedInfo``
  (nccl, rank, world_size, pg_count, pg_config, nccl_version), profiler settings,
  ``displayTimeUnit`` ``"ns"``, ``baseTimeNanoseconds`` (relative mode only), ``traceEvents`` and
  ``traceName`` (last);
* a main CPU thread and an autograd thread (``pt_autograd_0``) with ``ProfilerStep#N``
  user annotations, nested ``cpu_op`` events (``aten::linear`` > ``aten::addmm``, ...) carrying
  ``External id``, ``Sequence number``, ``Input Dims`` and ``Input type``, and
  ``record_param_comms`` ops with the collective arguments;
* ``cuda_runtime`` calls (``cudaLaunchKernel``, ``cudaLaunchKernelExC``, ``cudaMemcpyAsync``,
  ``cudaMemsetAsync``, one ``cudaGraphLaunch`` per step whose correlation is shared by several
  graph kernels, ``cudaEventRecord``/``cudaStreamWaitEvent``, ``cudaStreamSynchronize`` per step
  and one final ``cudaDeviceSynchronize``), plus one trailing launch whose kernel fell outside
  the profiling window (an unlinked launch with an unmatched ``ac2g`` start);
* GPU events on ``pid = device``, ``tid = stream`` on three streams (compute ``7``, NCCL ``20``,
  copy ``24``): kernels with launch-configuration args, NCCL kernels with the collective args
  copied on them, ``gpu_memcpy`` (HtoD, DtoH, DtoD), ``gpu_memset`` and ``gpu_user_annotation``;
* ``ac2g`` and ``fwdbwd`` flow events, ``[memory]`` instant events, ``M`` metadata, a ``Trace``
  span (pid ``"Spans"``), an ``Iteration Start: PyTorch Profiler`` and a ``Record Window End``
  instant (pids ``"Traces"`` and ``""``).

The GPU timeline has host-bound idle gaps (data loading, synchronisation), gradient all-reduces
on the NCCL stream that overlap backward compute, back-to-back kernels that touch exactly,
sub-microsecond kernels and exactly one zero-duration kernel.  A GPU event never starts before
its launch call starts, and the kernels of one stream never overlap.

Time representation
-------------------
All times are built as integer nanoseconds.  In the returned dict every ``ts``/``dur`` is a
:class:`Microseconds`: a ``float`` holding the value in µs (the same double a JSON parser reads
from the file) that also remembers the exact integer ``ns``.  The writers format these values
with exactly three decimals (``519689.047``; ``1712195495519689.047`` in absolute mode), so the
text value times 1000 is the integer ns exactly, even at epoch scale where a double cannot hold
nanoseconds.  With ``relative_time=True`` (default) ``ts`` is relative to
``baseTimeNanoseconds``; otherwise ``ts`` is absolute epoch µs and there is no
``baseTimeNanoseconds`` key.

Size
----
``kernels_per_step`` (K, at least :data:`MIN_KERNELS_PER_STEP`) is the exact number of GPU
activities (kernels + memcpy + memset) per step.  A rank has about ``6.6 * K * steps`` events
(6.58 per GPU activity at K=40, 6.57 for large K, plus 24 per trace); :func:`events_per_rank_for`
gives the exact count and :func:`kernels_per_step_for_events` inverts it.  Writing streams the
events in chunks, so memory stays bounded for multi-million-event ranks.

CLI::

    python -m hta.synthetic OUT_DIR --ranks 4 --steps 3 --kernels-per-step 40 --seed 0 [--no-gzip]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import math
import os
import random
import sys
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import orjson

try:  # optional: isal compresses gzip ~4x faster than zlib at a similar ratio
    from isal import isal_zlib as _gzlib
except ImportError:  # pragma: no cover - depends on the environment
    _gzlib = zlib  # type: ignore[misc]

__all__ = [
    "COMPUTE_STREAM",
    "COPY_STREAM",
    "GPU_CATS",
    "LAUNCH_NAMES",
    "MIN_KERNELS_PER_STEP",
    "NCCL_STREAM",
    "STREAMS",
    "Microseconds",
    "dumps_trace",
    "events_per_rank_for",
    "format_us",
    "generate_job",
    "generate_rank",
    "gpu_kind",
    "iter_rank_chunks",
    "kernels_per_step_for_events",
    "main",
    "step_plan",
    "summarize_truth",
    "write_rank",
]

COMPUTE_STREAM = 7
NCCL_STREAM = 20
COPY_STREAM = 24
STREAMS = (COMPUTE_STREAM, NCCL_STREAM, COPY_STREAM)

#: Runtime calls that enqueue GPU work (the ones the ground truth counts as launches).
LAUNCH_NAMES = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "cudaGraphLaunch",
    }
)
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})

#: GPU activities per step that do not scale with the layer count: HtoD, memset, loss forward,
#: loss backward, 4 graph kernels, all-gather, DtoD, DtoH.
_FIXED_GPU_OPS = 11
_GPU_OPS_PER_LAYER = 5  # addmm, relu (forward); threshold_backward, 2 x mm (backward)
_LAYERS_PER_BUCKET = 4  # one gradient all-reduce per 4 layers (after a first 1-layer bucket)
_GRAPH_KERNELS = 4
MIN_KERNELS_PER_STEP = _FIXED_GPU_OPS + _GPU_OPS_PER_LAYER + 1

# Exact event counts (checked by the tests against len(traceEvents)).
_EV_TRACE_CONST = 24  # metadata, Trace span, instants, final sync, trailing unlinked launch
_EV_STEP_CONST = 70
_EV_PER_LAYER = 35  # 14 forward (ops, launches, kernels, flows, alloc) + 21 backward
_EV_PER_BUCKET = 9  # record_param_comms, annotation, 2 sync calls, launch + s, kernel + f, gpu ann
_EV_PER_EXTRA = 5  # aten::add, cudaLaunchKernel, ac2g s, kernel, ac2g f

_BASE_TIME_NS = 1_712_195_495_000_000_000
_START_OFFSET_NS = 519_689_047
_HIDDEN = 1024
_BATCH = 256
_NUM_SMS = 108
_CHUNK_EVENTS = 65_536
_GRAPH_ID = 1

_DEVICE_PROPERTIES: dict[str, Any] = {
    "name": "NVIDIA A100-SXM4-80GB",
    "totalGlobalMem": 85_097_971_712,
    "computeMajor": 8,
    "computeMinor": 0,
    "maxThreadsPerBlock": 1024,
    "maxThreadsPerMultiprocessor": 2048,
    "regsPerBlock": 65536,
    "regsPerMultiprocessor": 65536,
    "warpSize": 32,
    "sharedMemPerBlock": 49152,
    "sharedMemPerMultiprocessor": 167936,
    "numSms": _NUM_SMS,
    "sharedMemPerBlockOptin": 166912,
}


class Microseconds(float):
    """A time in µs (the float value) that also carries its exact integer nanoseconds (``ns``).

    ``float(x)`` is the correctly rounded double of ``ns / 1000``, i.e. exactly what a JSON parser
    returns for the 3-decimal text the writers emit; ``x.ns`` keeps the exact value.
    """

    __slots__ = ("ns",)
    ns: int

    def __new__(cls, ns: int) -> Microseconds:
        self = float.__new__(cls, ns / 1000)
        self.ns = ns
        return self

    def __reduce__(self) -> tuple[type[Microseconds], tuple[int]]:
        return (type(self), (self.ns,))

    def text(self) -> str:
        """The value as written to JSON: µs with exactly three decimals."""
        return format_us(self.ns)


def format_us(ns: int) -> str:
    """Format integer nanoseconds as a µs decimal string with exactly three decimals."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(ns), 1000)
    return f"{sign}{q}.{r:03d}"


def _orjson_default(obj: Any) -> orjson.Fragment:
    if type(obj) is Microseconds:
        ns = obj.ns
        if ns >= 0:
            return orjson.Fragment(b"%d.%03d" % divmod(ns, 1000))
        return orjson.Fragment(b"-%d.%03d" % divmod(-ns, 1000))
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_orjson_default)


def _events_body(events: list[dict[str, Any]]) -> bytes:
    """Events in Kineto's layout: one compact event per line, each line "  {...}"."""
    return b",".join([b"\n  " + _dumps(event) for event in events])


def dumps_trace(trace: dict[str, Any]) -> bytes:
    """Serialize a trace dict to JSON bytes, writing every time with three decimals.

    ``traceEvents`` is laid out as Kineto writes it, one event per line starting with
    ``"\n  {"``; everything else is compact.
    """
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        return _dumps(trace)
    before, after = _dumps({**trace, "traceEvents": []}).split(b'"traceEvents":[]', 1)
    tail = b"\n]" if events else b"]"
    return before + b'"traceEvents":[' + _events_body(events) + tail + after


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC: the events hold no cycles, and collections over millions of
    freshly built dicts would otherwise dominate the run time (about 3x)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _time_ns(value: Any) -> int:
    """Exact ns of a ``ts``/``dur`` value (``Microseconds`` exact; plain floats rounded)."""
    if type(value) is Microseconds:
        return value.ns
    return round(value * 1000)


# --------------------------------------------------------------------------------------------
# Kernel catalogue
# --------------------------------------------------------------------------------------------


class _Kernel(NamedTuple):
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    regs: int
    smem: int
    blocks_per_sm: float
    warps_per_sm: float
    occupancy: int


def _kernel(
    name: str,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    regs: int,
    smem: int,
    occupancy: int,
) -> _Kernel:
    blocks = grid[0] * grid[1] * grid[2]
    threads = block[0] * block[1] * block[2]
    bps = round(blocks / _NUM_SMS, 6)
    wps = round(bps * threads / 32, 6)
    return _Kernel(name, grid, block, regs, smem, bps, wps, occupancy)


_K_GEMM_FWD = _kernel("ampere_sgemm_128x64_tn", (8, 4, 1), (128, 1, 1), 122, 16384, 12)
_K_GEMM_DGRAD = _kernel("ampere_sgemm_64x32_sliced1x4_nn", (16, 8, 1), (128, 1, 1), 126, 8192, 25)
_K_GEMM_WGRAD = _kernel(
    "sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
    "aligna4_alignc4_execute_kernel__51_cublasLt",
    (8, 8, 1),
    (128, 1, 1),
    168,
    33280,
    12,
)
_K_RELU = _kernel(
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
    "at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::"
    "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
    "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() "
    "const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)",
    (256, 1, 1),
    (128, 1, 1),
    22,
    0,
    83,
)
_K_THRESHOLD_BWD = _kernel(
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::"
    "{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, at::native::"
    "(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)"
    "::{lambda(float, float)#1}, at::detail::Array<char*, 3>)",
    (256, 1, 1),
    (128, 1, 1),
    24,
    0,
    81,
)
_K_ADD = _kernel(
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)",
    (2, 1, 1),
    (128, 1, 1),
    20,
    0,
    2,
)
_K_LOSS_FWD = _kernel(
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >"
    "(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
    "unsigned int, float, 4>)",
    (64, 1, 1),
    (32, 16, 1),
    32,
    16,
    28,
)
_K_LOSS_BWD = _kernel(
    "void at::native::vectorized_elementwise_kernel<4, at::native::mse_backward_cuda_kernel("
    "at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#4}::"
    "operator()() const::{lambda(float, float)#1}, at::detail::Array<char*, 3> >(int, "
    "at::native::mse_backward_cuda_kernel(at::TensorIterator&, c10::Scalar const&)::"
    "{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::"
    "{lambda(float, float)#1}, at::detail::Array<char*, 3>)",
    (256, 1, 1),
    (128, 1, 1),
    26,
    0,
    80,
)
_K_GRAPH = (
    _kernel(
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
        "(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::"
        "LpNormFunctor<float, (at::native::(anonymous namespace)::NormType)1, float, float>, "
        "float*, int>(at::native::(anonymous namespace)::TensorListMetadata<1>, "
        "at::native::(anonymous namespace)::LpNormFunctor<float, (at::native::"
        "(anonymous namespace)::NormType)1, float, float>, float*, int)",
        (320, 1, 1),
        (512, 1, 1),
        32,
        2048,
        95,
    ),
    *(
        _kernel(
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
            "(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous namespace)::"
            "FusedSgdMathFunctor<float, 3>, double, double*, double, double, bool, bool, bool, "
            "float*, float const*>(at::native::(anonymous namespace)::TensorListMetadata<3>, "
            "at::native::(anonymous namespace)::FusedSgdMathFunctor<float, 3>, double, "
            "double*, double, double, bool, bool, bool, float*, float const*)",
            (432, 1, 1),
            (512, 1, 1),
            40,
            0,
            91,
        )
        for _ in range(_GRAPH_KERNELS - 1)
    ),
)
_K_ALLREDUCE = _kernel(
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    (16, 1, 1),
    (640, 1, 1),
    96,
    87568,
    0,
)
_K_ALLGATHER = _kernel(
    "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWork*)",
    (16, 1, 1),
    (544, 1, 1),
    96,
    87568,
    0,
)

_CBID = {
    "cudaLaunchKernel": 211,
    "cudaLaunchKernelExC": 430,
    "cudaMemcpyAsync": 41,
    "cudaMemsetAsync": 51,
    "cudaGraphLaunch": 311,
    "cudaStreamSynchronize": 131,
    "cudaDeviceSynchronize": 165,
    "cudaEventRecord": 135,
    "cudaStreamWaitEvent": 147,
}

_DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
_MEMCPY_NAMES = {
    "HtoD": "Memcpy HtoD (Pinned -> Device)",
    "DtoH": "Memcpy DtoH (Device -> Pageable)",
    "DtoD": "Memcpy DtoD (Device -> Device)",
}
_MEMSET_NAME = "Memset (Device)"


# --------------------------------------------------------------------------------------------
# Sizing
# --------------------------------------------------------------------------------------------


def step_plan(kernels_per_step: int) -> tuple[int, int, int]:
    """Split ``kernels_per_step`` GPU activities into ``(layers, buckets, extras)``.

    Per step: 11 fixed activities, 5 per layer, 1 all-reduce per gradient bucket (like DDP, the
    first bucket holds the last layer alone, the next ones 4 layers each, so all but the last
    all-reduce overlap backward compute) and ``extras`` small elementwise ``aten::add``
    kernels, which add up to ``kernels_per_step``.
    """
    k = int(kernels_per_step)
    if k < MIN_KERNELS_PER_STEP:
        raise ValueError(f"kernels_per_step must be >= {MIN_KERNELS_PER_STEP}, got {k}")
    layers = max(1, (k - _FIXED_GPU_OPS) // 7)
    buckets = 1 + -(-(layers - 1) // _LAYERS_PER_BUCKET)  # DDP: a small first bucket
    extras = k - _FIXED_GPU_OPS - _GPU_OPS_PER_LAYER * layers - buckets
    return layers, buckets, extras


def events_per_rank_for(steps: int = 3, kernels_per_step: int = 40) -> int:
    """Exact number of ``traceEvents`` in one rank generated with these parameters."""
    layers, buckets, extras = step_plan(kernels_per_step)
    per_step = (
        _EV_STEP_CONST + _EV_PER_LAYER * layers + _EV_PER_BUCKET * buckets + _EV_PER_EXTRA * extras
    )
    return _EV_TRACE_CONST + steps * per_step


def kernels_per_step_for_events(events_per_rank: int, steps: int = 3) -> int:
    """Smallest ``kernels_per_step`` giving at least ``events_per_rank`` events per rank."""
    if steps < 1:
        raise ValueError("steps must be >= 1")
    lo = MIN_KERNELS_PER_STEP
    hi = max(lo, math.ceil(events_per_rank / steps / 4) + lo)
    while events_per_rank_for(steps, hi) < events_per_rank:
        hi *= 2
    while lo < hi:  # event count is non-decreasing in kernels_per_step
        mid = (lo + hi) // 2
        if events_per_rank_for(steps, mid) >= events_per_rank:
            hi = mid
        else:
            lo = mid + 1
    return lo


# --------------------------------------------------------------------------------------------
# Builder
# --------------------------------------------------------------------------------------------

_Open = tuple[dict[str, Any], int]


class _RankBuilder:
    """Builds one rank's events in program order, as integer-ns times, in chunks."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        steps: int,
        kernels_per_step: int,
        seed: int,
        relative_time: bool,
    ) -> None:
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank} world={world_size}")
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self.rank = rank
        self.world_size = world_size
        self.steps = steps
        self.seed = seed
        self.layers, self.buckets, self.extras = step_plan(kernels_per_step)
        self.relative_time = relative_time
        self.offset = 0 if relative_time else _BASE_TIME_NS
        self.rnd = random.Random(f"hta.synthetic:{seed}:{rank}").random
        self.device = rank % 8
        self.pid = 100_000 + (seed * 7_919 + rank * 1_373) % 3_900_000
        self.tid_main = self.pid
        self.tid_bwd = self.pid + 9_503
        start = _START_OFFSET_NS + self._u(0, 40_000)
        self.trace_start = start
        self.cur = {self.tid_main: start + self._u(20_000, 30_000), self.tid_bwd: start}
        self.tid = self.tid_main
        self.now = self.cur[self.tid_main]
        self.stream_free = dict.fromkeys(STREAMS, 0)
        self.corr = 1_000
        self.ext = 1
        self.seqno = 100
        self.flow_id = 1
        self.coll_seq = 1
        self.pg_ranks = str(list(range(world_size)))
        self.events: list[dict[str, Any]] = []
        self.open_ops = 0
        self.zero_done = False
        # memory bookkeeping: model weights are already resident when tracing starts
        self.param_bytes = self.layers * (_HIDDEN * _HIDDEN + _HIDDEN) * 4
        self.allocated = min(3 * self.param_bytes, 16 << 30) + (64 << 20)
        self.reserved = self._round_reserved(self.allocated)
        self.addr_base = 0x7F4A_0000_0000 + rank * 0x10_0000_0000

    # --- primitives -------------------------------------------------------------------------

    def _u(self, lo: int, hi: int) -> int:
        return lo + int(self.rnd() * (hi - lo))

    def _t(self, ns: int) -> Microseconds:
        return Microseconds(ns + self.offset)

    def _next_ext(self) -> int:
        self.ext += 1
        return self.ext

    def _switch(self, tid: int, not_before: int = 0) -> None:
        """Continue on thread ``tid`` (not before ``not_before``); saves the current cursor."""
        self.cur[self.tid] = self.now
        self.tid = tid
        self.now = max(self.cur[tid], not_before)

    def _begin(self, cat: str, name: str, args: dict[str, Any]) -> _Open:
        start = self.now
        ev = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": self.pid,
            "tid": self.tid,
            "ts": Microseconds(start + self.offset),
            "dur": None,
            "args": args,
        }
        self.events.append(ev)
        self.open_ops += 1
        self.now = start + 300 + int(self.rnd() * 2_200)
        return ev, start

    def _end(self, tok: _Open) -> None:
        ev, start = tok
        self.now += 200 + int(self.rnd() * 1_300)
        ev["dur"] = Microseconds(self.now - start)
        self.open_ops -= 1

    def _op(
        self, name: str, dims: list[Any], types: list[str], seq: bool = False
    ) -> tuple[_Open, int]:
        ext = self._next_ext()
        args: dict[str, Any] = {"External id": ext}
        if seq:
            self.seqno += 1
            args["Sequence number"] = self.seqno
            args["Fwd thread id"] = 0
        args["Input Dims"] = dims
        args["Input type"] = types
        return self._begin("cpu_op", name, args), ext

    def _span(
        self,
        cat: str,
        name: str,
        start: int,
        end: int,
        args: dict[str, Any],
        pid: int | None = None,
        tid: int | None = None,
    ) -> dict[str, Any]:
        ev = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": self.pid if pid is None else pid,
            "tid": self.tid if tid is None else tid,
            "ts": self._t(start),
            "dur": Microseconds(end - start),
            "args": args,
        }
        self.events.append(ev)
        return ev

    def _runtime(self, name: str, ext: int | None, dur: int, flow: bool) -> tuple[int, int]:
        """Emit a cuda_runtime call starting now (plus its ac2g start); return (corr, start)."""
        self.corr += 1
        corr = self.corr
        t0 = self.now
        ts = Microseconds(t0 + self.offset)
        args: dict[str, Any] = {} if ext is None else {"External id": ext}
        args["cbid"] = _CBID[name]
        args["correlation"] = corr
        events = self.events
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": self.pid,
                "tid": self.tid,
                "ts": ts,
                "dur": Microseconds(dur),
                "args": args,
            }
        )
        if flow:
            events.append(
                {
                    "ph": "s",
                    "id": corr,
                    "pid": self.pid,
                    "tid": self.tid,
                    "ts": ts,
                    "cat": "ac2g",
                    "name": "ac2g",
                }
            )
        self.now = t0 + dur
        return corr, t0

    def _wait(self, ext: int | None, stream: int, on: int) -> None:
        """cudaEventRecord on ``on`` + cudaStreamWaitEvent on ``stream`` (no GPU events)."""
        self._runtime("cudaEventRecord", ext, self._u(1_500, 4_000), False)
        self.now += self._u(200, 800)
        self._runtime("cudaStreamWaitEvent", ext, self._u(1_200, 3_000), False)
        self.now += self._u(200, 800)
        if self.stream_free[on] > self.stream_free[stream]:
            self.stream_free[stream] = self.stream_free[on]

    def _gpu_start(self, stream: int, not_before: int) -> int:
        """Earliest start on ``stream``: after ``not_before`` and after the stream's last event
        (back to back in 30% of the cases, else after a 0.1-1.5 us gap)."""
        free = self.stream_free[stream]
        if free:
            r = self.rnd()
            if r >= 0.3:
                free += 100 + int(r * 1_400)
        return not_before if not_before > free else free

    def _gpu_event(
        self,
        cat: str,
        name: str,
        stream: int,
        start: int,
        dur: int,
        args: dict[str, Any],
        corr: int,
    ) -> None:
        """Append a GPU event and its ac2g finish; advance the stream."""
        ts = Microseconds(start + self.offset)
        dev = self.device
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": dev,
                "tid": stream,
                "ts": ts,
                "dur": Microseconds(dur),
                "args": args,
            }
        )
        self.events.append(
            {
                "ph": "f",
                "id": corr,
                "pid": dev,
                "tid": stream,
                "ts": ts,
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )
        self.stream_free[stream] = start + dur

    def _kernel_args(self, k: _Kernel, ext: int, stream: int, corr: int) -> dict[str, Any]:
        return {
            "External id": ext,
            "queued": 0,
            "device": self.device,
            "context": 1,
            "stream": stream,
            "correlation": corr,
            "registers per thread": k.regs,
            "shared memory": k.smem,
            "blocks per SM": k.blocks_per_sm,
            "warps per SM": k.warps_per_sm,
            "grid": list(k.grid),
            "block": list(k.block),
            "est. achieved occupancy %": k.occupancy,
        }

    def _launch(
        self,
        k: _Kernel,
        ext: int,
        dur: int,
        stream: int = COMPUTE_STREAM,
        api: str = "cudaLaunchKernel",
        extra: dict[str, Any] | None = None,
    ) -> int:
        """Launch one kernel; return its GPU start (ns)."""
        rnd = self.rnd
        corr, t0 = self._runtime(api, ext, 2_500 + int(rnd() * 6_500), True)
        start = self._gpu_start(stream, t0 + 1_500 + int(rnd() * 4_500))  # queueing delay
        args = self._kernel_args(k, ext, stream, corr)
        if extra:
            args.update(extra)
        self._gpu_event("kernel", k.name, stream, start, dur, args, corr)
        return start

    def _copy(self, cat: str, name: str, ext: int, nbytes: int, dur: int, stream: int) -> None:
        api = "cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaMemsetAsync"
        corr, t0 = self._runtime(api, ext, self._u(3_000, 12_000), True)
        start = self._gpu_start(stream, t0 + self._u(1_500, 6_000))
        args = {
            "External id": ext,
            "device": self.device,
            "context": 1,
            "stream": stream,
            "correlation": corr,
            "bytes": nbytes,
            "memory bandwidth (GB/s)": nbytes / dur,
        }
        self._gpu_event(cat, name, stream, start, dur, args, corr)

    @staticmethod
    def _round_reserved(nbytes: int) -> int:
        block = 20 * 1024 * 1024
        return -(-nbytes // block) * block

    def _memory(self, addr: int, nbytes: int) -> None:
        self.allocated += nbytes
        if self.allocated > self.reserved:
            self.reserved = self._round_reserved(self.allocated)
        self.events.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": "[memory]",
                "pid": self.pid,
                "tid": self.tid,
                "ts": self._t(self.now),
                "args": {
                    "Device Type": 1,
                    "Device Id": self.device,
                    "Addr": addr,
                    "Bytes": nbytes,
                    "Total Allocated": self.allocated,
                    "Total Reserved": self.reserved,
                },
            }
        )
        self.now += self._u(100, 600)

    def _jitter(self, ns: int, pct: float = 0.08) -> int:
        return max(1, int(ns * (1.0 + pct * (2.0 * self.rnd() - 1.0))))

    # --- composite pieces -------------------------------------------------------------------

    def _simple(
        self,
        outer: str,
        inner: str,
        dims: list[Any],
        types: list[str],
        k: _Kernel,
        dur: int,
        seq: bool = False,
    ) -> tuple[_Open, int]:
        """``outer > inner > cudaLaunchKernel -> k``; return the outer op token (closed)."""
        tok_o, _ = self._op(outer, dims, types, seq)
        tok_i, ext = self._op(inner, dims, types)
        self._launch(k, ext, dur)
        self._end(tok_i)
        self._end(tok_o)
        return tok_o, ext

    def _collective(
        self,
        coll: str,
        ann: str,
        dtype: str,
        elem: int,
        n_in: int,
        n_out: int,
        k: _Kernel,
        api: str,
    ) -> None:
        cargs: dict[str, Any] = {
            "Collective name": coll,
            "dtype": dtype,
            "In msg nelems": n_in,
            "Out msg nelems": n_out,
            "Group size": self.world_size,
            "In split size": "[]",
            "Out split size": "[]",
            "Process Group Name": "0",
            "Process Group Description": "default_pg",
            "Process Group Ranks": self.pg_ranks,
            "Seq": self.coll_seq,
        }
        self.coll_seq += 1
        ext = self._next_ext()
        tok = self._begin(
            "cpu_op",
            "record_param_comms",
            {
                "External id": ext,
                **cargs,
                "Rank": self.rank,
                "Global rank start": 0,
                "Global rank stride": 1,
            },
        )
        ext_a = self._next_ext()
        tok_a = self._begin("user_annotation", ann, {"External id": ext_a})
        self._wait(ext_a, NCCL_STREAM, COMPUTE_STREAM)
        ws = self.world_size
        nbytes = max(n_in, n_out) * elem
        dur = self._jitter(9_000 + nbytes * 2 * (ws - 1) // (ws * 45), 0.05)
        start = self._launch(k, ext_a, dur, NCCL_STREAM, api, cargs)
        self._span(
            "gpu_user_annotation",
            ann,
            start,
            start + dur,
            {"External id": ext_a},
            self.device,
            NCCL_STREAM,
        )
        self._end(tok_a)
        self._end(tok)

    # --- the training step ------------------------------------------------------------------

    def _step(self, step: int) -> Iterator[list[dict[str, Any]]]:
        h, b = _HIDDEN, _BATCH
        self._switch(self.tid_main)
        step_start = self.now
        step_ext = self._next_ext()
        layer_bytes = b * h * 4

        # host-bound data loading: the GPU is idle (previous step ended with a sync)
        t = self.now
        self.now += self._u(400_000, 1_500_000)
        self._span("user_annotation", _DATALOADER, t, self.now, {"External id": self._next_ext()})
        self.now += self._u(2_000, 8_000)

        # batch upload on the copy stream; the compute stream waits for it
        addr_in = self.addr_base + 0x4000_0000
        self._memory(addr_in, layer_bytes)
        dims = [[b, h], []]
        tok1, _ = self._op("aten::to", dims, ["float", "ScalarType"])
        tok2, _ = self._op("aten::_to_copy", dims, ["float", "ScalarType"])
        tok3, ext = self._op("aten::copy_", [[b, h], [b, h], []], ["float", "float", "Scalar"])
        self._copy(
            "gpu_memcpy",
            _MEMCPY_NAMES["HtoD"],
            ext,
            layer_bytes,
            self._jitter(layer_bytes // 22),
            COPY_STREAM,
        )
        self._end(tok3)
        self._end(tok2)
        self._end(tok1)
        self._wait(None, COMPUTE_STREAM, COPY_STREAM)

        # zero_grad -> one memset of the flat gradient buffer
        ext_z = self._next_ext()
        tok_z = self._begin(
            "user_annotation", "Optimizer.zero_grad#SGD.zero_grad", {"External id": ext_z}
        )
        grad_bytes = min(self.param_bytes, 256 * 1024 * 1024)
        tok, ext = self._op("aten::zero_", [[grad_bytes // 4]], ["float"])
        self._copy(
            "gpu_memset",
            _MEMSET_NAME,
            ext,
            grad_bytes,
            self._jitter(grad_bytes // 1_300 + 1_000),
            COMPUTE_STREAM,
        )
        self._end(tok)
        self._end(tok_z)

        # forward
        fwd_flows: list[int] = []
        seq_relu: list[int] = []
        seq_lin: list[int] = []
        extras_q, extras_r = divmod(self.extras, self.layers)
        for layer in range(self.layers):
            tok_l, _ = self._op(
                "aten::linear", [[b, h], [h, h], [h]], ["float", "float", "float"], seq=True
            )
            seq_lin.append(self.seqno)
            fid = self.flow_id
            self.flow_id += 1
            fwd_flows.append(fid)
            self.events.append(
                {
                    "ph": "s",
                    "id": fid,
                    "pid": self.pid,
                    "tid": self.tid,
                    "ts": tok_l[0]["ts"],
                    "cat": "fwdbwd",
                    "name": "fwdbwd",
                }
            )
            tok_a, ext = self._op(
                "aten::addmm",
                [[h], [b, h], [h, h], [], []],
                ["float", "float", "float", "Scalar", "Scalar"],
            )
            self._launch(_K_GEMM_FWD, ext, self._jitter(27_000))
            self._end(tok_a)
            self._end(tok_l)
            if not self.zero_done:  # exactly one zero-duration kernel in the trace
                relu_dur = 0
                self.zero_done = True
            else:
                relu_dur = self._u(2_400, 3_600)
            self._simple(
                "aten::relu", "aten::clamp_min", [[b, h]], ["float"], _K_RELU, relu_dur, seq=True
            )
            seq_relu.append(self.seqno)
            self._memory(self.addr_base + layer * layer_bytes, layer_bytes)
            for _ in range(extras_q + (1 if layer < extras_r else 0)):
                tok_e, ext = self._op("aten::add", [[h], [h], []], ["float", "float", "Scalar"])
                self._launch(_K_ADD, ext, self._u(380, 1_400))  # sub-microsecond
                self._end(tok_e)
            if self.open_ops == 0 and len(self.events) >= _CHUNK_EVENTS:
                yield self._flush()

        self._simple(
            "aten::mse_loss",
            "aten::mean",
            [[b, h], [b, h], []],
            ["float", "float", "Scalar"],
            _K_LOSS_FWD,
            self._jitter(6_000),
            seq=True,
        )
        seq_loss = self.seqno

        # backward on the autograd thread; DDP-style bucketed all-reduce on the NCCL stream
        self._switch(self.tid_bwd, self.now + self._u(5_000, 15_000))
        self._backward_node(
            "MseLossBackward0",
            seq_loss,
            "aten::mse_loss_backward",
            [[], [b, h], [b, h], []],
            ["float", "float", "float", "Scalar"],
            _K_LOSS_BWD,
            self._jitter(4_000),
        )
        in_bucket = 0
        bucket_elems = 0
        bucket_cap = 1
        for layer in reversed(range(self.layers)):
            self._backward_node(
                "ReluBackward0",
                seq_relu[layer],
                "aten::threshold_backward",
                [[b, h], [b, h], []],
                ["float", "float", "Scalar"],
                _K_THRESHOLD_BWD,
                self._u(3_000, 4_200),
            )
            ext_ev = self._next_ext()
            tok_ev = self._begin(
                "cpu_op",
                "autograd::engine::evaluate_function: AddmmBackward0",
                {"External id": ext_ev, "Sequence number": seq_lin[layer], "Fwd thread id": 1},
            )
            self.events.append(
                {
                    "ph": "f",
                    "id": fwd_flows[layer],
                    "pid": self.pid,
                    "tid": self.tid,
                    "ts": tok_ev[0]["ts"],
                    "cat": "fwdbwd",
                    "name": "fwdbwd",
                    "bp": "e",
                }
            )
            ext_n = self._next_ext()
            tok_n = self._begin(
                "cpu_op",
                "AddmmBackward0",
                {
                    "External id": ext_n,
                    "Sequence number": seq_lin[layer],
                    "Fwd thread id": 1,
                    "Input Dims": [[b, h]],
                    "Input type": ["float"],
                },
            )
            tok_m, ext = self._op("aten::mm", [[b, h], [h, h]], ["float", "float"])
            self._launch(_K_GEMM_DGRAD, ext, self._jitter(26_000))
            self._end(tok_m)
            tok_m, ext = self._op("aten::mm", [[h, b], [b, h]], ["float", "float"])
            self._launch(_K_GEMM_WGRAD, ext, self._jitter(28_000), api="cudaLaunchKernelExC")
            self._end(tok_m)
            self._end(tok_n)
            self._end(tok_ev)
            self._memory(self.addr_base + layer * layer_bytes, -layer_bytes)
            in_bucket += 1
            bucket_elems += h * h + h
            if in_bucket == bucket_cap or layer == 0:
                self._collective(
                    "allreduce",
                    "nccl:all_reduce",
                    "Float",
                    4,
                    bucket_elems,
                    bucket_elems,
                    _K_ALLREDUCE,
                    "cudaLaunchKernel",
                )
                in_bucket = 0
                bucket_elems = 0
                bucket_cap = _LAYERS_PER_BUCKET
            if self.open_ops == 0 and len(self.events) >= _CHUNK_EVENTS:
                yield self._flush()

        # optimizer: one CUDA-graph replay, after the gradient all-reduces finished
        self._switch(self.tid_main, self.now + self._u(3_000, 10_000))  # main waited in backward
        ext_o = self._next_ext()
        tok_o = self._begin("user_annotation", "Optimizer.step#SGD.step", {"External id": ext_o})
        self._wait(ext_o, COMPUTE_STREAM, NCCL_STREAM)
        corr, t0 = self._runtime("cudaGraphLaunch", ext_o, self._u(8_000, 20_000), True)
        not_before = t0 + self._u(2_000, 6_000)
        g_start = g_end = 0
        for node, k in enumerate(_K_GRAPH):
            start = self._gpu_start(COMPUTE_STREAM, not_before)
            dur = self._jitter(9_000 if node else 4_000)
            args = self._kernel_args(k, ext_o, COMPUTE_STREAM, corr)
            args["graph id"] = _GRAPH_ID
            args["graph node id"] = 4_294_967_296 + node
            self._gpu_event("kernel", k.name, COMPUTE_STREAM, start, dur, args, corr)
            if node == 0:
                g_start = start
            g_end = start + dur
        self._span(
            "gpu_user_annotation",
            "Optimizer.step#SGD.step",
            g_start,
            g_end,
            {"External id": ext_o},
            self.device,
            COMPUTE_STREAM,
        )
        self._end(tok_o)

        # metrics: all-gather of an int8 flag vector, a DtoD snapshot, a blocking .item()
        self._collective(
            "allgather",
            "nccl:all_gather",
            "Char",
            1,
            8,
            8 * self.world_size,
            _K_ALLGATHER,
            "cudaLaunchKernelExC",
        )
        tok1, _ = self._op("aten::clone", [[h, h], []], ["float", ""])
        tok2, ext = self._op("aten::copy_", [[h, h], [h, h], []], ["float", "float", "Scalar"])
        self._copy(
            "gpu_memcpy",
            _MEMCPY_NAMES["DtoD"],
            ext,
            h * h * 4,
            self._jitter(h * h * 4 // 600),
            COMPUTE_STREAM,
        )
        self._end(tok2)
        self._end(tok1)
        self._wait(None, COMPUTE_STREAM, NCCL_STREAM)
        tok1, _ = self._op("aten::item", [[]], ["float"])
        tok2, ext = self._op("aten::_local_scalar_dense", [[]], ["float"])
        self._copy(
            "gpu_memcpy", _MEMCPY_NAMES["DtoH"], ext, 4, self._u(1_100, 2_600), COMPUTE_STREAM
        )
        sync_end = max(
            self.now + self._u(800, 2_000), self.stream_free[COMPUTE_STREAM] + self._u(1_000, 4_000)
        )
        self._runtime("cudaStreamSynchronize", ext, sync_end - self.now, False)
        self._end(tok2)
        self._end(tok1)
        self._memory(addr_in, -layer_bytes)
        self.now += self._u(1_000, 5_000)
        self._span(
            "user_annotation",
            f"ProfilerStep#{step + 1}",
            step_start,
            self.now,
            {"External id": step_ext},
        )
        self.now += self._u(5_000, 30_000)
        yield self._flush()

    def _backward_node(
        self, node: str, seq: int, op: str, dims: list[Any], types: list[str], k: _Kernel, dur: int
    ) -> None:
        ext = self._next_ext()
        tok_ev = self._begin(
            "cpu_op",
            f"autograd::engine::evaluate_function: {node}",
            {"External id": ext, "Sequence number": seq, "Fwd thread id": 1},
        )
        ext = self._next_ext()
        tok_n = self._begin(
            "cpu_op",
            node,
            {
                "External id": ext,
                "Sequence number": seq,
                "Fwd thread id": 1,
                "Input Dims": dims[:1],
                "Input type": types[:1],
            },
        )
        tok, ext = self._op(op, dims, types)
        self._launch(k, ext, dur)
        self._end(tok)
        self._end(tok_n)
        self._end(tok_ev)

    def _flush(self) -> list[dict[str, Any]]:
        out = self.events
        self.events = []
        return out

    # --- whole trace ------------------------------------------------------------------------

    def header(self) -> dict[str, Any]:
        """Top-level keys before ``traceEvents`` (in Kineto's order)."""
        ws = self.world_size
        head: dict[str, Any] = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": self.device, **_DEVICE_PROPERTIES}],
            "distributedInfo": {
                "backend": "nccl",
                "rank": self.rank,
                "world_size": ws,
                "pg_count": 1,
                "pg_config": [
                    {
                        "pg_name": "0",
                        "pg_desc": "default_pg",
                        "backend_config": "cuda:nccl",
                        "pg_size": ws,
                        "ranks": list(range(ws)),
                    }
                ],
                "nccl_version": "2.21.5",
            },
            "record_shapes": 1,
            "profile_memory": 1,
            "with_stack": 0,
            "cupti_version": 24,
            "cuda_runtime_version": 12040,
            "cuda_driver_version": 12040,
            "trace_id": hashlib.md5(f"{self.seed}:{self.rank}".encode()).hexdigest().upper(),
            "host_name": f"synthetic-node{self.rank // 8:03d}",
            "displayTimeUnit": "ns",
        }
        if self.relative_time:
            head["baseTimeNanoseconds"] = _BASE_TIME_NS
        return head

    def trace_name(self) -> str:
        return f"/tmp/hta_synthetic_rank-{self.rank}.pt.trace.json"

    def iter_events(self) -> Iterator[list[dict[str, Any]]]:
        """Yield the events in chunks (program order), the metadata last."""
        for step in range(self.steps):
            yield from self._step(step)
        # drain the device, then one launch whose kernel ran after the window closed
        self._switch(self.tid_main)
        end = max(self.stream_free.values()) + self._u(2_000, 6_000)
        self._runtime("cudaDeviceSynchronize", None, max(end - self.now, 1_500), False)
        self.now += self._u(3_000, 9_000)
        tok, ext = self._op("aten::add", [[_HIDDEN], [_HIDDEN], []], ["float", "float", "Scalar"])
        self._runtime("cudaLaunchKernel", ext, self._u(2_500, 9_000), True)
        self._end(tok)
        trace_end = self.now + self._u(10_000, 40_000)
        yield self._flush() + self._trailer(trace_end)

    def _trailer(self, trace_end: int) -> list[dict[str, Any]]:
        ts = self._t(self.trace_start)
        pid, dev = self.pid, self.device

        def meta(name: str, p: int | str, t: int, args: dict[str, Any]) -> dict[str, Any]:
            return {"name": name, "ph": "M", "ts": ts, "pid": p, "tid": t, "args": args}

        out = [
            meta("process_name", pid, 0, {"name": "python3.11"}),
            meta("process_labels", pid, 0, {"labels": "CPU"}),
            meta("process_sort_index", pid, 0, {"sort_index": pid}),
            meta("process_name", dev, 0, {"name": "python3.11"}),
            meta("process_labels", dev, 0, {"labels": f"GPU {dev}"}),
            meta("process_sort_index", dev, 0, {"sort_index": 16_777_216 + dev}),
        ]
        for stream in STREAMS:
            out.append(meta("thread_name", dev, stream, {"name": f"stream {stream} "}))
            out.append(meta("thread_sort_index", dev, stream, {"sort_index": stream}))
        for tid, label in ((self.tid_main, "pt_main_thread"), (self.tid_bwd, "pt_autograd_0")):
            out.append(meta("thread_name", pid, tid, {"name": f"thread {tid} ({label})"}))
            out.append(meta("thread_sort_index", pid, tid, {"sort_index": tid}))
        out.append(
            {
                "ph": "X",
                "cat": "Trace",
                "ts": ts,
                "dur": Microseconds(trace_end - self.trace_start),
                "pid": "Spans",
                "tid": "PyTorch Profiler",
                "name": "PyTorch Profiler (0)",
                "args": {"Op count": 0},
            }
        )
        out.append(
            {
                "name": "process_sort_index",
                "ph": "M",
                "ts": ts,
                "pid": "Spans",
                "tid": 0,
                "args": {"sort_index": 536_870_912},
            }
        )
        out.append(
            {
                "name": "Iteration Start: PyTorch Profiler",
                "ph": "i",
                "s": "g",
                "pid": "Traces",
                "tid": "Trace PyTorch Profiler",
                "ts": ts,
            }
        )
        out.append(
            {
                "name": "Record Window End",
                "ph": "i",
                "s": "g",
                "pid": "",
                "tid": "",
                "ts": self._t(trace_end),
            }
        )
        return out


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def iter_rank_chunks(
    rank: int,
    world_size: int,
    *,
    steps: int = 3,
    kernels_per_step: int = 40,
    seed: int = 0,
    relative_time: bool = True,
) -> tuple[dict[str, Any], Iterator[list[dict[str, Any]]], str]:
    """Streaming form of :func:`generate_rank`: ``(header, event chunks, traceName)``.

    Concatenating the chunks gives exactly ``generate_rank(...)["traceEvents"]``.  Consumers of
    millions of events run much faster with the cyclic GC paused (``gc.disable()``).
    """
    b = _RankBuilder(rank, world_size, steps, kernels_per_step, seed, relative_time)
    return b.header(), b.iter_events(), b.trace_name()


def generate_rank(
    rank: int,
    world_size: int,
    *,
    steps: int = 3,
    kernels_per_step: int = 40,
    seed: int = 0,
    relative_time: bool = True,
) -> dict[str, Any]:
    """Generate one rank's Kineto trace as a dict (times are :class:`Microseconds`).

    Deterministic in ``(rank, world_size, steps, kernels_per_step, seed, relative_time)``.
    ``kernels_per_step`` is the exact number of GPU activities per step; the rank holds
    :func:`events_per_rank_for` events.
    """
    head, chunks, name = iter_rank_chunks(
        rank,
        world_size,
        steps=steps,
        kernels_per_step=kernels_per_step,
        seed=seed,
        relative_time=relative_time,
    )
    events: list[dict[str, Any]] = []
    with _gc_paused():
        for chunk in chunks:
            events.extend(chunk)
    return {**head, "traceEvents": events, "traceName": name}


class _Sink:
    """Writes bytes to a file, optionally through a streaming gzip compressor."""

    def __init__(self, path: Path, compress: bool) -> None:
        self.fh = open(path, "wb")  # noqa: SIM115 - closed in close()
        # wbits=31: gzip container; zlib/isal write mtime 0 and no file name -> deterministic
        self.comp = _gzlib.compressobj(1, zlib.DEFLATED, 31) if compress else None

    def write(self, data: bytes) -> None:
        self.fh.write(self.comp.compress(data) if self.comp is not None else data)

    def close(self) -> None:
        if self.comp is not None:
            self.fh.write(self.comp.flush())
        self.fh.close()


def _write_stream(
    path: Path,
    head: dict[str, Any],
    chunks: Iterable[list[dict[str, Any]]],
    name: str,
    compress: bool,
) -> None:
    skeleton = dumps_trace({**head, "traceEvents": [], "traceName": name})
    before, after = skeleton.split(b'"traceEvents":[]', 1)
    tmp = path.with_name(path.name + ".tmp")
    sink = _Sink(tmp, compress)
    try:
        sink.write(before + b'"traceEvents":[')
        first = True
        for chunk in chunks:
            if not chunk:
                continue
            body = _events_body(chunk)
            sink.write(body if first else b"," + body)
            first = False
        sink.write((b"]" if first else b"\n]") + after)
    finally:
        sink.close()
    os.replace(tmp, path)


def write_rank(
    path: str | os.PathLike[str],
    rank: int,
    world_size: int,
    *,
    steps: int = 3,
    kernels_per_step: int = 40,
    seed: int = 0,
    relative_time: bool = True,
    gzip: bool | None = None,
) -> Path:
    """Generate and stream one rank to ``path`` (gzip if ``gzip`` or the name ends in .gz).

    The (decompressed) bytes equal ``dumps_trace(generate_rank(...))``.
    """
    path = Path(path)
    compress = path.suffix == ".gz" if gzip is None else gzip
    head, chunks, name = iter_rank_chunks(
        rank,
        world_size,
        steps=steps,
        kernels_per_step=kernels_per_step,
        seed=seed,
        relative_time=relative_time,
    )
    with _gc_paused():
        _write_stream(path, head, chunks, name, compress)
    return path


def generate_job(
    out_dir: str | os.PathLike[str],
    *,
    ranks: int = 4,
    steps: int = 3,
    kernels_per_step: int = 40,
    seed: int = 0,
    gzip: bool = True,
    relative_time: bool = True,
    workers: int = 1,
) -> list[Path]:
    """Write ``rank-{r}.json.gz`` (or ``.json``) for every rank of a job into ``out_dir``.

    ``workers > 1`` writes ranks in that many processes (same bytes as serial writing).
    """
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    step_plan(kernels_per_step)  # validate before creating anything
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".json.gz" if gzip else ".json"
    kwargs = {
        "steps": steps,
        "kernels_per_step": kernels_per_step,
        "seed": seed,
        "relative_time": relative_time,
        "gzip": gzip,
    }
    paths = [out / f"rank-{r}{suffix}" for r in range(ranks)]
    if workers > 1 and ranks > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, ranks)) as pool:
            futures = [
                pool.submit(write_rank, path, r, ranks, **kwargs) for r, path in enumerate(paths)
            ]
            return [f.result() for f in futures]
    return [write_rank(path, r, ranks, **kwargs) for r, path in enumerate(paths)]


# --------------------------------------------------------------------------------------------
# Ground truth
# --------------------------------------------------------------------------------------------


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def _intersection_ns(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def gpu_kind(cat: str, name: str) -> str:
    """Kind of a GPU event: computation, communication, memcpy_HtoD/DtoH/DtoD or memset."""
    if cat == "kernel":
        return "communication" if name.startswith("nccl") else "computation"
    if cat == "gpu_memset":
        return "memset"
    return "memcpy_" + name.split(" ", 2)[1]


def summarize_truth(trace: dict[str, Any]) -> dict[str, Any]:
    """Ground truth of a generated trace dict, counted from the dict itself.

    Times are exact integer ns (``ts`` of :class:`Microseconds` values; plain floats are
    rounded).  Absolute times are epoch ns (``baseTimeNanoseconds`` + ts in relative mode).
    GPU events are the ``X`` events of cat ``kernel``, ``gpu_memcpy`` and ``gpu_memset``
    (``gpu_user_annotation`` spans are not GPU work).  ``gpu_busy_ns`` is the exact length of
    the union of their ``[ts, ts + dur)`` intervals over all streams; ``gpu_idle_ns`` is the
    span from the first start to the last end minus that union.  Launches are the runtime
    calls in :data:`LAUNCH_NAMES`; one is linked when a GPU event has its correlation.
    ``comm_compute_overlap_ns`` is the length of the intersection of the union of
    communication kernels with the union of computation kernels.
    """
    with _gc_paused():
        return _summarize(trace)


def _summarize(trace: dict[str, Any]) -> dict[str, Any]:
    events = trace["traceEvents"]
    base = int(trace.get("baseTimeNanoseconds", 0))
    by_cat: Counter[str] = Counter()
    by_ph: Counter[str] = Counter()
    flows: Counter[str] = Counter()
    kinds: dict[str, int] = dict.fromkeys(
        ("computation", "communication", "memcpy_HtoD", "memcpy_DtoH", "memcpy_DtoD", "memset"),
        0,
    )
    kind_ns = dict.fromkeys(kinds, 0)
    by_stream: Counter[int] = Counter()
    runtime_by_name: Counter[str] = Counter()
    intervals: list[tuple[int, int]] = []
    comm: list[tuple[int, int]] = []
    comp: list[tuple[int, int]] = []
    gpu_corr: set[int] = set()
    gpu_corr_list: list[int] = []
    launch_corr: list[int] = []
    steps: list[str] = []
    collectives: list[dict[str, Any]] = []
    zero = sub_us = cpu_ops = memory = 0
    for e in events:
        ph = e.get("ph")
        by_ph[ph] += 1
        cat = e.get("cat")
        if cat is None:
            continue
        by_cat[cat] += 1
        if ph in ("s", "f"):
            flows[f"{cat}_{ph}"] += 1
            continue
        if ph == "i":
            memory += e.get("name") == "[memory]"
            continue
        if ph != "X":
            continue
        name = e["name"]
        if cat in GPU_CATS:
            s = base + _time_ns(e["ts"])
            d = _time_ns(e["dur"])
            intervals.append((s, s + d))
            kind = gpu_kind(cat, name)
            kinds[kind] += 1
            kind_ns[kind] += d
            if kind == "communication":
                comm.append((s, s + d))
            elif kind == "computation":
                comp.append((s, s + d))
            by_stream[e["tid"]] += 1
            corr = e["args"]["correlation"]
            gpu_corr.add(corr)
            gpu_corr_list.append(corr)
            zero += d == 0
            sub_us += 0 < d < 1000
        elif cat == "cuda_runtime":
            runtime_by_name[name] += 1
            if name in LAUNCH_NAMES:
                launch_corr.append(e["args"]["correlation"])
        elif cat == "cpu_op":
            cpu_ops += 1
            if name == "record_param_comms":
                a = e["args"]
                collectives.append(
                    {
                        "name": a["Collective name"],
                        "seq": a["Seq"],
                        "dtype": a["dtype"],
                        "in_nelems": a["In msg nelems"],
                        "out_nelems": a["Out msg nelems"],
                        "group_size": a["Group size"],
                    }
                )
        elif cat == "user_annotation" and name.startswith("ProfilerStep#"):
            steps.append(name)
    merged = _merge(intervals)
    busy = sum(e - s for s, e in merged)
    first = min((s for s, _ in intervals), default=0)
    last = max((e for _, e in intervals), default=0)
    launch_set = set(launch_corr)
    dist = trace.get("distributedInfo", {})
    return {
        "rank": dist.get("rank"),
        "world_size": dist.get("world_size"),
        "num_events": len(events),
        "counts_by_cat": dict(sorted(by_cat.items())),
        "counts_by_ph": dict(sorted(by_ph.items())),
        "flow_counts": dict(sorted(flows.items())),
        "cpu_ops": cpu_ops,
        "memory_events": memory,
        "gpu_events": len(intervals),
        "gpu_kind_counts": dict(kinds),
        "gpu_kind_time_ns": kind_ns,
        "gpu_events_by_stream": dict(sorted(by_stream.items())),
        "zero_duration_gpu_events": zero,
        "sub_us_gpu_events": sub_us,
        "runtime_events": sum(runtime_by_name.values()),
        "runtime_by_name": dict(sorted(runtime_by_name.items())),
        "runtime_launches": len(launch_corr),
        "runtime_launches_linked": sum(c in gpu_corr for c in launch_corr),
        "gpu_events_linked": sum(c in launch_set for c in gpu_corr_list),
        "gpu_first_start_ns": first,
        "gpu_last_end_ns": last,
        "gpu_span_ns": last - first,
        "gpu_busy_ns": busy,
        "gpu_idle_ns": (last - first) - busy,
        "comm_compute_overlap_ns": _intersection_ns(_merge(comm), _merge(comp)),
        "profiler_steps": len(steps),
        "profiler_step_names": steps,
        "collectives": collectives,
    }


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hta.synthetic OUT_DIR [...]``: write a synthetic multi-rank job."""
    p = argparse.ArgumentParser(prog="python -m hta.synthetic", description=__doc__.split("\n")[0])
    p.add_argument("out_dir", type=Path)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument(
        "--kernels-per-step",
        type=int,
        default=40,
        help=f"GPU activities per step (>= {MIN_KERNELS_PER_STEP})",
    )
    p.add_argument(
        "--events-per-rank",
        type=int,
        default=None,
        help="pick --kernels-per-step to reach at least this many events per rank",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-gzip", action="store_true", help="write plain .json files")
    p.add_argument("--workers", type=int, default=1, help="write ranks in parallel processes")
    p.add_argument(
        "--absolute-time",
        action="store_true",
        help="absolute epoch-us timestamps instead of baseTimeNanoseconds-relative",
    )
    args = p.parse_args(argv)
    kps = args.kernels_per_step
    if args.events_per_rank is not None:
        kps = kernels_per_step_for_events(args.events_per_rank, args.steps)
    try:
        paths = generate_job(
            args.out_dir,
            ranks=args.ranks,
            steps=args.steps,
            kernels_per_step=kps,
            seed=args.seed,
            gzip=not args.no_gzip,
            relative_time=not args.absolute_time,
            workers=args.workers,
        )
    except ValueError as exc:
        p.error(str(exc))
    n = events_per_rank_for(args.steps, kps)
    for path in paths:
        print(f"{path}  {n} events  {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
