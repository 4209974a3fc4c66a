"""The generator's building blocks: operators, runtime calls, GPU events, memory."""

from __future__ import annotations

import random
from typing import Any

from hta.synthetic.catalog import (
    _BASE_TIME_NS,
    _CBID,
    _HIDDEN,
    _START_OFFSET_NS,
    COMPUTE_STREAM,
    STREAMS,
    _Kernel,
    kernel_args,
    step_plan,
)
from hta.synthetic.timefmt import Microseconds

# --------------------------------------------------------------------------------------------
# Builder
# --------------------------------------------------------------------------------------------

_Open = tuple[dict[str, Any], int]


class _Primitives:
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
        return kernel_args(k, ext, stream, corr, self.device)

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
