"""Build small Kineto traces in code, for tests whose answers are known by construction.

Times are given in integer nanoseconds and written as microseconds with three decimals,
exactly as Kineto writes them, so a test can assert nanosecond-exact results::

    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=10_000):
        op = b.cpu_op("aten::mm", ts=100, dur=2_000)
        b.launch_kernel("sgemm", cpu_ts=200, cpu_dur=500, gpu_ts=1_000, gpu_dur=3_000)
    path = b.write(tmp_path / "rank-0.json")
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CPU_PID = 1000
CPU_TID = 1000
GPU_DEVICE = 0
COMPUTE_STREAM = 7


def us(ns: int) -> float:
    """Nanoseconds to the µs float Kineto writes (exact to the ns in the JSON text)."""
    return round(ns / 1000.0, 3)


@dataclass
class TraceBuilder:
    """Accumulates events of one rank; ``write`` produces the trace file."""

    rank: int | None = 0
    world_size: int = 1
    base_time_ns: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    extra_top_level: dict[str, Any] = field(default_factory=dict)
    _next_corr: int = 1
    _next_ext: int = 1

    # -- generic --------------------------------------------------------------------
    def complete(self, name: str, cat: str, ts: int, dur: int, *, pid: Any = CPU_PID,
                 tid: Any = CPU_TID, **args: Any) -> dict[str, Any]:
        """Add an ``X`` event; keyword args become its ``args``."""
        event: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                                 "ts": us(ts), "dur": us(dur)}
        if args:
            event["args"] = args
        self.events.append(event)
        return event

    # -- CPU side -------------------------------------------------------------------
    def cpu_op(self, name: str, ts: int, dur: int, *, tid: Any = CPU_TID,
               **args: Any) -> dict[str, Any]:
        """A ``cpu_op`` with a fresh External id."""
        ext = self._next_ext
        self._next_ext += 1
        return self.complete(name, "cpu_op", ts, dur, tid=tid, **{"External id": ext, **args})

    def annotation(self, name: str, ts: int, dur: int, **args: Any) -> dict[str, Any]:
        """A ``user_annotation`` range."""
        return self.complete(name, "user_annotation", ts, dur, **args)

    @contextmanager
    def step(self, number: int, ts: int, dur: int) -> Iterator[dict[str, Any]]:
        """A ``ProfilerStep#number`` annotation (a context only for readability)."""
        yield self.annotation(f"ProfilerStep#{number}", ts, dur)

    def runtime(self, name: str, ts: int, dur: int, *, correlation: int | None = None,
                tid: Any = CPU_TID, cat: str = "cuda_runtime", **args: Any) -> dict[str, Any]:
        """A runtime call (``cuda_runtime``), with a correlation id when given."""
        if correlation is not None:
            args["correlation"] = correlation
        return self.complete(name, cat, ts, dur, tid=tid, **args)

    # -- GPU side -------------------------------------------------------------------
    def gpu(self, name: str, cat: str, ts: int, dur: int, *, stream: int = COMPUTE_STREAM,
            device: int = GPU_DEVICE, correlation: int | None = None,
            **args: Any) -> dict[str, Any]:
        """A GPU event on ``pid = device``, ``tid = stream``."""
        full = {"device": device, "stream": stream, **args}
        if correlation is not None:
            full["correlation"] = correlation
        return self.complete(name, cat, ts, dur, pid=device, tid=stream, **full)

    def kernel(self, name: str, ts: int, dur: int, **kw: Any) -> dict[str, Any]:
        """A GPU kernel."""
        return self.gpu(name, "kernel", ts, dur, **kw)

    def launch(self, name: str, cat: str, *, cpu_ts: int, cpu_dur: int, gpu_ts: int,
               gpu_dur: int, launcher: str = "cudaLaunchKernel", stream: int = COMPUTE_STREAM,
               tid: Any = CPU_TID, **gpu_args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """A runtime call and the GPU event it enqueued, sharing a fresh correlation id."""
        corr = self._next_corr
        self._next_corr += 1
        rt = self.runtime(launcher, cpu_ts, cpu_dur, correlation=corr, tid=tid)
        g = self.gpu(name, cat, gpu_ts, gpu_dur, stream=stream, correlation=corr, **gpu_args)
        return rt, g

    def launch_kernel(self, name: str, *, cpu_ts: int, cpu_dur: int, gpu_ts: int, gpu_dur: int,
                      **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """``cudaLaunchKernel`` + kernel."""
        return self.launch(name, "kernel", cpu_ts=cpu_ts, cpu_dur=cpu_dur, gpu_ts=gpu_ts,
                           gpu_dur=gpu_dur, **kw)

    def memcpy(self, direction: str, *, cpu_ts: int, cpu_dur: int, gpu_ts: int, gpu_dur: int,
               nbytes: int = 1 << 20, **kw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """``cudaMemcpyAsync`` + ``Memcpy <direction>`` (HtoD, DtoH, DtoD, PtoP)."""
        return self.launch(f"Memcpy {direction}", "gpu_memcpy", cpu_ts=cpu_ts,
                           cpu_dur=cpu_dur, gpu_ts=gpu_ts, gpu_dur=gpu_dur,
                           launcher="cudaMemcpyAsync", bytes=nbytes, **kw)

    def graph_launch(self, kernels: list[tuple[str, int, int, int]], *, cpu_ts: int,
                     cpu_dur: int, launcher: str = "cudaGraphLaunch", tid: Any = CPU_TID,
                     graph_id: int = 1) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """One graph launch and its kernels ``(name, gpu_ts, gpu_dur, stream)``, all sharing
        the launch's fresh correlation id, as Kineto writes CUDA graph replays."""
        corr = self._next_corr
        self._next_corr += 1
        rt = self.runtime(launcher, cpu_ts, cpu_dur, correlation=corr, tid=tid)
        gpu = [self.kernel(name, ts, dur, stream=stream, correlation=corr,
                           **{"graph id": graph_id, "graph node id": node})
               for node, (name, ts, dur, stream) in enumerate(kernels)]
        return rt, gpu

    # -- other phases ---------------------------------------------------------------
    def instant(self, name: str, ts: int, **args: Any) -> dict[str, Any]:
        """An ``i`` event (``[memory]`` events use cat ``cpu_instant_event``)."""
        event = {"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": name,
                 "pid": CPU_PID, "tid": CPU_TID, "ts": us(ts)}
        if args:
            event["args"] = args
        self.events.append(event)
        return event

    def flow(self, ph: str, flow_id: int, ts: int, *, pid: Any, tid: Any,
             cat: str = "ac2g") -> dict[str, Any]:
        """A flow start (``s``) or finish (``f``)."""
        event = {"ph": ph, "id": flow_id, "pid": pid, "tid": tid, "ts": us(ts), "cat": cat,
                 "name": cat}
        if ph == "f":
            event["bp"] = "e"
        self.events.append(event)
        return event

    # -- output ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The whole trace as a JSON-ready dict."""
        top: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": []}
        if self.rank is not None:
            top["distributedInfo"] = {"backend": "nccl", "rank": self.rank,
                                      "world_size": self.world_size}
        top.update(self.extra_top_level)
        events = self.events
        if self.base_time_ns is not None:
            top["baseTimeNanoseconds"] = self.base_time_ns
        top["traceEvents"] = events
        top["traceName"] = "built-by-tests"
        return top

    def write(self, path: str | Path) -> Path:
        """Write JSON (gzipped when the name ends in ``.gz``)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict()).encode()
        if path.name.endswith(".gz"):
            path.write_bytes(gzip.compress(text))
        else:
            path.write_bytes(text)
        return path
