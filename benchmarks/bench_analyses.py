#!/usr/bin/env python3
"""Breakdown analyses benchmark: time each analysis on a large rank and on a multi-rank job.

By default it generates two synthetic jobs with ``python -m hta.synthetic`` (kept in a
temporary folder unless ``--tmp-dir`` is given, where they are reused on the next run):

* one rank of about ``--events-per-rank`` trace events (1 000 000 by default);
* a job of ``--job-ranks`` ranks (8) of ``--job-events-per-rank`` events each (1 000 000).

``--trace-dir DIR`` benchmarks an existing folder instead. Each job is loaded once
(``TraceAnalysis(cache=False)``, timed apart), then every analysis runs ``--repeat`` times
in this process; the median wall time is reported, with the time per million complete
(``X``) events of the job and per million GPU work events (kernels, memcpy, memset).
The target is under 1 s per analysis per million events. This is a benchmark: it reports,
it never asserts.

    python benchmarks/bench_analyses.py
    python benchmarks/bench_analyses.py --tmp-dir bench_out/traces --repeat 5 --json out.json
    python benchmarks/bench_analyses.py --trace-dir ../shared/traces/hta/trace_diff/control
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from hta.analysis import (  # noqa: E402
    annotations,
    idle,
    kernels,
    overlap,
    stragglers,
    temporal,
    timeline,
)
from hta.analysis import findings as findings_engine  # noqa: E402
from hta.analysis.findings.engine import FindingRule, rank_findings  # noqa: E402
from hta.model.rules import GPU_WORK_KINDS  # noqa: E402
from hta.model.selection import Selection  # noqa: E402
from hta.model.trace import Trace  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402

ANALYSES: dict[str, Callable[[Trace], Any]] = {
    "temporal_breakdown": lambda t: temporal.temporal_breakdown(t),
    "temporal_detail (per iteration)": lambda t: temporal.temporal_breakdown_detail(
        t, per_iteration=True),
    "idle_time_breakdown (+ interval stats)": lambda t: idle.idle_time_breakdown_and_stats(
        t, show_idle_interval_stats=True),
    "gpu_kernel_breakdown (pair)": lambda t: kernels.gpu_kernel_breakdown(t),
    "comm_comp_overlap": lambda t: overlap.comm_comp_overlap(t),
    "user_annotation_breakdown (GPU)": lambda t: annotations.user_annotation_breakdown(t),
    "user_annotation_breakdown (CPU)": lambda t: annotations.user_annotation_breakdown(
        t, use_gpu_annotation=False),
    "timeline_segments (20k segments)": lambda t: timeline.timeline_segments(t),
    "stragglers (arrivals + summary)": lambda t: stragglers.straggler_summary(
        stragglers.collective_arrivals(t)),
    "findings (every rule)": lambda t: findings_engine.find(t),
}


def _one_rule(rule: FindingRule) -> Callable[[Trace], Any]:
    if rule.scope == "rank":
        return lambda t: rank_findings(t, rules=[rule])
    return lambda t: rule.check(t, Selection.of(t.get_ranks()))  # type: ignore[arg-type]


ANALYSES.update({f"  finding rule {r.id}": _one_rule(r) for r in findings_engine.default_rules()})


def generate(out: Path, ranks: int, events: int, seed: int) -> Path:
    """Synthetic job in ``out`` (reused when it already has ``ranks`` files)."""
    if out.is_dir() and len(list(out.glob("rank-*.json*"))) == ranks:
        print(f"reusing {out}")
        return out
    cmd = [sys.executable, "-m", "hta.synthetic", str(out), "--ranks", str(ranks),
           "--events-per-rank", str(events), "--seed", str(seed), "--workers", "2"]
    print("generating:", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO_ROOT)
    return out


def bench_job(name: str, folder: Path, repeat: int) -> dict[str, Any]:
    """Load ``folder`` once, then time every analysis ``repeat`` times."""
    t0 = time.perf_counter()
    analyzer = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    load_s = time.perf_counter() - t0
    trace = analyzer.t
    events = sum(len(rt.events) for rt in trace)
    gpu = sum(int(rt.events["kind"].isin(GPU_WORK_KINDS).sum()) for rt in trace)
    result: dict[str, Any] = {"job": name, "folder": str(folder), "ranks": len(trace),
                              "events": events, "gpu_work_events": gpu, "load_s": load_s,
                              "analyses": {}}
    for label, fn in ANALYSES.items():
        runs = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn(trace)
            runs.append(time.perf_counter() - t)
        med = statistics.median(runs)
        result["analyses"][label] = {"median_s": med, "min_s": min(runs), "max_s": max(runs),
                                     "s_per_M_events": med / events * 1e6,
                                     "s_per_M_gpu_events": med / max(gpu, 1) * 1e6}
    return result


def report(result: dict[str, Any]) -> None:
    print(f"\n## {result['job']}: {result['ranks']} rank(s), {result['events']:,} complete "
          f"events, {result['gpu_work_events']:,} GPU work events (load {result['load_s']:.1f}"
          " s, not counted)")
    print("| analysis | median s | min-max s | s per 1M events | s per 1M GPU events |")
    print("| --- | --- | --- | --- | --- |")
    for label, r in result["analyses"].items():
        print(f"| {label} | {r['median_s']:.3f} | {r['min_s']:.3f}-{r['max_s']:.3f} | "
              f"{r['s_per_M_events']:.3f} | {r['s_per_M_gpu_events']:.3f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace-dir", type=Path, help="benchmark this folder instead")
    parser.add_argument("--events-per-rank", type=int, default=1_000_000,
                        help="trace events of the single large rank (default 1 000 000)")
    parser.add_argument("--job-ranks", type=int, default=8, help="ranks of the job (8)")
    parser.add_argument("--job-events-per-rank", type=int, default=1_000_000,
                        help="trace events per rank of the job (default 1 000 000)")
    parser.add_argument("--repeat", "-n", type=int, default=3, help="runs per analysis (3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tmp-dir", type=Path, help="where generated traces go (kept)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        root = args.tmp_dir or Path(scratch)
        if args.trace_dir is not None:
            jobs = [(args.trace_dir.name, args.trace_dir)]
        else:
            jobs = [
                ("1 rank", generate(root / f"r1-{args.events_per_rank}", 1,
                                    args.events_per_rank, args.seed)),
                (f"{args.job_ranks} ranks", generate(
                    root / f"r{args.job_ranks}-{args.job_events_per_rank}", args.job_ranks,
                    args.job_events_per_rank, args.seed)),
            ]
        for name, folder in jobs:
            results.append(bench_job(name, folder, args.repeat))
            report(results[-1])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
        print(f"\nWrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
