#!/usr/bin/env python3
"""Trace diff benchmark: compare two generated ~1M-event traces.

By default it generates two synthetic single-rank jobs with ``python -m hta.synthetic``
(kept in a temporary folder unless ``--tmp-dir`` is given, where they are reused): a
control of ``--events-per-rank`` events (1 000 000) over 3 steps, and a test of as many
events over 4 steps with another seed, so names match but counts, timings and the step
count differ. ``--control DIR --test DIR`` compares existing folders instead.

Each job is loaded once (``TraceAnalysis(cache=False)``, timed apart). Then, ``--repeat``
times each, in this process: ``compare_traces`` on the first step, ``compare_traces`` on
every event with short names, ``ops_diff``, the job-level ``job_diff`` (which runs the
temporal, kernel-type, overlap and idle breakdowns on both sides) and its figure. The
median wall time is reported, with the time per million complete events of both traces
together. Finally ``hta diff --json --no-cache`` runs once end to end (loading included).
This is a benchmark: it reports, it never asserts.

    python benchmarks/bench_diff.py
    python benchmarks/bench_diff.py --tmp-dir bench_out/diff --repeat 5 --json out.json
    python benchmarks/bench_diff.py --control ../shared/traces/hta/trace_diff/control \\
        --test ../shared/traces/hta/trace_diff/test
"""

from __future__ import annotations

import argparse
import json
import logging
import os
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

from hta.analysis import diff  # noqa: E402
from hta.model.trace import Trace  # noqa: E402
from hta.plots.diff import job_diff_figure  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402

CASES: dict[str, Callable[[Trace, Trace], Any]] = {
    "compare_traces (first step, full names)": lambda c, t: diff.compare_traces(c, t),
    "compare_traces (every event, short names)": lambda c, t: diff.compare_traces(
        c, t, control_iteration="all", test_iteration="all", use_short_name=True),
    "ops_diff (every event)": lambda c, t: diff.ops_diff(diff.compare_traces(
        c, t, control_iteration="all", test_iteration="all")),
    "job_diff (all steps, all ranks)": lambda c, t: diff.job_diff(c, t),
    "job_diff + figure": lambda c, t: job_diff_figure(diff.job_diff(c, t)),
}


def generate(out: Path, steps: int, events: int, seed: int) -> Path:
    """Synthetic single-rank job in ``out`` (reused when it already holds one file)."""
    if out.is_dir() and len(list(out.glob("rank-*.json*"))) == 1:
        print(f"reusing {out}")
        return out
    cmd = [sys.executable, "-m", "hta.synthetic", str(out), "--ranks", "1", "--steps",
           str(steps), "--events-per-rank", str(events), "--seed", str(seed)]
    print("generating:", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO_ROOT)
    return out


def load(folder: Path) -> tuple[Trace, float, int]:
    t0 = time.perf_counter()
    trace = TraceAnalysis(trace_dir=folder, cache=False, progress=False).t
    return trace, time.perf_counter() - t0, sum(len(rt.events) for rt in trace)


def bench(control: Path, test: Path, repeat: int) -> dict[str, Any]:
    c, load_c, n_c = load(control)
    t, load_t, n_t = load(test)
    events = n_c + n_t
    result: dict[str, Any] = {"control": str(control), "test": str(test),
                              "control_events": n_c, "test_events": n_t,
                              "load_s": {"control": load_c, "test": load_t}, "cases": {}}
    for label, fn in CASES.items():
        runs = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn(c, t)
            runs.append(time.perf_counter() - t0)
        med = statistics.median(runs)
        result["cases"][label] = {"median_s": med, "min_s": min(runs), "max_s": max(runs),
                                  "s_per_M_events": med / events * 1e6}
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hta.cli", "diff", str(control), str(test),
                           "--json", "--no-cache", "-q"], capture_output=True, text=True,
                          cwd=REPO_ROOT, env=env)
    result["cli_s"] = time.perf_counter() - t0
    result["cli_ok"] = proc.returncode == 0
    result["verdict"] = json.loads(proc.stdout)["verdict"] if proc.returncode == 0 else (
        proc.stderr.strip())
    return result


def report(r: dict[str, Any]) -> None:
    print(f"\ncontrol {r['control_events']:,} complete events (load {r['load_s']['control']:.1f}"
          f" s), test {r['test_events']:,} (load {r['load_s']['test']:.1f} s); loading not "
          "counted below")
    print("| case | median s | min-max s | s per 1M events (both traces) |")
    print("| --- | --- | --- | --- |")
    for label, x in r["cases"].items():
        print(f"| {label} | {x['median_s']:.3f} | {x['min_s']:.3f}-{x['max_s']:.3f} | "
              f"{x['s_per_M_events']:.3f} |")
    print(f"\n`hta diff --json --no-cache` end to end (loading both): {r['cli_s']:.1f} s; "
          f"verdict: {r['verdict']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--control", type=Path, help="compare this folder (with --test)")
    parser.add_argument("--test", type=Path, help="against this folder")
    parser.add_argument("--events-per-rank", type=int, default=1_000_000,
                        help="trace events of each generated trace (default 1 000 000)")
    parser.add_argument("--repeat", "-n", type=int, default=3, help="runs per case (3)")
    parser.add_argument("--tmp-dir", type=Path, help="where generated traces go (kept)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    if (args.control is None) != (args.test is None):
        parser.error("pass both --control and --test, or neither")
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as scratch:
        root = args.tmp_dir or Path(scratch)
        if args.control is not None:
            control, test = args.control, args.test
        else:
            n = args.events_per_rank
            control = generate(root / f"control-{n}", 3, n, 0)
            test = generate(root / f"test-{n}", 4, n, 1)
        result = bench(control, test, args.repeat)
        report(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
        print(f"\nWrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
