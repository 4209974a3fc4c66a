"""A whole rank: the steps, the top-level keys, and the trailing events."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from hta.synthetic.catalog import (
    _BASE_TIME_NS,
    _DEVICE_PROPERTIES,
    _HIDDEN,
    STREAMS,
    process_metadata,
)
from hta.synthetic.timefmt import Microseconds
from hta.synthetic.training_step import _StepBuilder


class _RankBuilder(_StepBuilder):
    """Builds one rank's events in program order, as integer-ns times, in chunks."""

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

        out = process_metadata(ts, pid, dev)
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
