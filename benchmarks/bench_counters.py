#!/usr/bin/env python3
"""Benchmark of the counters family: launch stats, queue length, memory bandwidth, operator
view, frequent kernel sequences, and writing the augmented and overlaid traces.

By default one synthetic rank of about ``--events`` trace events is generated with
``python -m hta.synthetic`` (in a temporary folder), loaded once (not timed against the
target), and each analysis is run ``--repeat`` times; the best and median wall times are
reported with seconds per million trace events (``traceEvents`` entries of the file, every
phase). Pass a folder to time a real trace instead. This is a benchmark: it reports, it
asserts nothing.

    python benchmarks/bench_counters.py                      # 1M-event synthetic rank
    python benchmarks/bench_counters.py --events 2000000 --repeat 5
    python benchmarks/bench_counters.py ../shared/traces/hta/trace_filter --json out.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from hta.analysis import bandwidth, launch, operators, queue, sequences  # noqa: E402
from hta.export.counters_trace import generate_trace_with_counters  # noqa: E402
from hta.export.patterns_trace import write_overlaid_trace  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402


def generate(folder: Path, events: int, seed: int) -> Path:
    """One synthetic rank of about ``events`` trace events in ``folder``."""
    subprocess.run([sys.executable, "-m", "hta.synthetic", str(folder), "--ranks", "1",
                    "--events-per-rank", str(events), "--seed", str(seed)],
                   check=True, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
    return folder


def count_trace_events(folder: Path) -> int:
    """``traceEvents`` entries over the folder's trace files (one cheap parse each)."""
    import msgspec

    total = 0
    for path in sorted(folder.glob("*.json*")):
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
        total += len(msgspec.json.decode(top["traceEvents"], type=list[msgspec.Raw]))
    return total


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return times, result


def cases(a: TraceAnalysis, out: Path, operator: str) -> list[tuple[str, Callable[[], Any]]]:
    t = a.t
    rank = t.get_ranks()[0]
    out_counters = out / "counters"
    out_overlay = out / "overlay"
    out_overlay.mkdir(parents=True, exist_ok=True)
    patterns = sequences.frequent_cuda_kernel_sequences(t, operator, rank, 1).head(5)
    return [
        ("cuda_kernel_launch_stats", lambda: launch.cuda_kernel_launch_stats(t)),
        ("launch_pairing_summary", lambda: launch.launch_pairing_summary(t)),
        ("queue_length_time_series", lambda: queue.queue_length_time_series(t)),
        ("queue_length_summary", lambda: queue.queue_length_summary(t)),
        ("time_spent_blocked_on_full_queue",
         lambda: queue.time_spent_blocked_on_full_queue(t)),
        ("memory_bw_time_series", lambda: bandwidth.memory_bw_time_series(t)),
        ("memory_bw_summary", lambda: bandwidth.memory_bw_summary(t)),
        ("operator_breakdown", lambda: operators.operator_breakdown(t)),
        ("operator_breakdown(by shape)",
         lambda: operators.operator_breakdown(t, group_by_input_shape=True)),
        (f"frequent_cuda_kernel_sequences({operator!r})",
         lambda: sequences.frequent_cuda_kernel_sequences(t, operator, rank, 1)),
        ("generate_trace_with_counters (write)",
         lambda: generate_trace_with_counters(t, output_dir=out_counters)),
        ("write_overlaid_trace (top 5 patterns)",
         lambda: write_overlaid_trace(t.rank(rank), patterns, out_overlay)),
    ]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("trace_dir", nargs="?", help="a trace folder (default: generate one)")
    p.add_argument("--events", type=int, default=1_000_000,
                   help="trace events of the generated rank")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3, help="runs per analysis")
    p.add_argument("--operator", default="ProfilerStep",
                   help="operator name for the kernel-sequence case")
    p.add_argument("--json", type=Path, help="also write the results here")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_counters_") as tmp:
        tmp_path = Path(tmp)
        if args.trace_dir:
            folder = Path(args.trace_dir)
        else:
            print(f"generating a synthetic rank of ~{args.events:,} events ...", flush=True)
            folder = generate(tmp_path / "trace", args.events, args.seed)
        n_events = count_trace_events(folder)
        start = time.perf_counter()
        a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
        load_s = time.perf_counter() - start
        complete = sum(len(rt.events) for rt in a.t)
        print(f"{folder}: {n_events:,} trace events, {complete:,} complete events, "
              f"{len(a.t)} rank(s); load {load_s:.2f} s (not part of the figures below)")
        print(f"python {platform.python_version()} on {platform.machine()}, "
              f"best / median of {args.repeat}\n")
        print(f"{'case':<44}{'best s':>9}{'median s':>10}{'s per 1M events':>17}")
        results = []
        for name, fn in cases(a, tmp_path / "out", args.operator):
            times, _ = timed(fn, args.repeat)
            best, median = min(times), statistics.median(times)
            per_m = best / n_events * 1e6
            results.append({"case": name, "best_s": best, "median_s": median,
                            "s_per_million_events": per_m, "times_s": times})
            print(f"{name:<44}{best:>9.3f}{median:>10.3f}{per_m:>17.3f}", flush=True)
        if args.json:
            args.json.write_text(json.dumps({
                "trace_dir": str(folder), "trace_events": n_events,
                "complete_events": complete, "load_s": load_s, "repeat": args.repeat,
                "python": platform.python_version(), "results": results,
            }, indent=2))
            print(f"\nWrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
