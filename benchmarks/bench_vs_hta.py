#!/usr/bin/env python3
"""Side by side with HTA 0.5: the analyses the issue tracker asked to be 3x faster, and
the load, on the same folders.

Each side runs in a child process of its own interpreter (HTA's in isolated mode, from a
temporary folder, so this repository's ``hta`` package cannot shadow HTA's). A child loads
the folder once (timed on its own: ``load``), then runs each analysis ``--repeat`` times
and reports the median wall time of a run:

=======================  ================================================================
case                     call (both sides)
=======================  ================================================================
load                     ``TraceAnalysis(trace_dir=DIR)`` (ours without the cache)
queue_length_summary     ``get_queue_length_summary(ranks=ALL)``
idle_time_breakdown      ``get_idle_time_breakdown(ranks=ALL, visualize=False)``
compare_traces           ``TraceDiff.compare_traces(control, test)`` with ``--test DIR``:
                         both sides' traces loaded beforehand (HTA's ``LabeledTrace``)
=======================  ================================================================

A benchmark: it reports, it never asserts. Set up HTA as in ``benchmarks/README.md``
(``--hta-python``, ``$HTA_PYTHON`` or ``.venv-hta``)::

    python benchmarks/bench_vs_hta.py ../shared/traces/hta/df_index_resolver
    python benchmarks/bench_vs_hta.py ../shared/traces/hta/trace_diff/control \\
        --test ../shared/traces/hta/trace_diff/test --cases compare_traces
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ("load", "queue_length_summary", "idle_time_breakdown", "compare_traces")

CHILD = r'''
import json, statistics, sys, time
side, folder, test_folder = sys.argv[1:4]
repeat, cases = int(sys.argv[4]), sys.argv[5].split(",")
from hta.trace_analysis import TraceAnalysis
from hta.trace_diff import TraceDiff

def make(path):
    if side == "hta":
        return TraceAnalysis(trace_dir=path)
    return TraceAnalysis(trace_dir=path, cache=False, progress=False)

out = {}
start = time.perf_counter()
ta = make(folder)
out["load"] = time.perf_counter() - start
ranks = sorted(ta.t.get_ranks() if side == "ours" else ta.t.traces.keys())
calls = {
    "queue_length_summary": lambda: ta.get_queue_length_summary(ranks=ranks),
    "idle_time_breakdown": lambda: ta.get_idle_time_breakdown(ranks=ranks, visualize=False),
}
if test_folder != "-" and "compare_traces" in cases:
    other = make(test_folder)
    if side == "hta":
        from hta.trace_diff import LabeledTrace
        control, test = LabeledTrace("Control", t=ta.t), LabeledTrace("Test", t=other.t)
    else:
        control, test = ta.t, other.t
    calls["compare_traces"] = lambda: TraceDiff.compare_traces(control, test)
for case in cases:
    if case == "load" or case not in calls:
        continue
    times = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        calls[case]()
        times.append(time.perf_counter() - start)
    out[case] = times[0]  # the first call: what a user waits for
    out[case + " (again)"] = statistics.median(times[1:])
print("RESULT " + json.dumps(out))
'''


def hta_python(explicit: str | None) -> str | None:
    """HTA's interpreter: the argument, ``$HTA_PYTHON``, or a venv beside the repository."""
    for candidate in (explicit, os.environ.get("HTA_PYTHON"),
                      str(ROOT / ".venv-hta/bin/python"), str(ROOT.parent / "venv-hta/bin/python")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def run_side(side: str, python: str, folder: Path, test: Path | None, repeat: int,
             cases: list[str]) -> dict[str, float]:
    """One child process; its median seconds per case."""
    args = [side, str(folder.resolve()), str(test.resolve()) if test else "-", str(repeat),
            ",".join(cases)]
    with tempfile.TemporaryDirectory() as tmp:
        if side == "hta":
            cmd, env, cwd = [python, "-I", "-c", CHILD, *args], None, tmp
        else:
            cmd = [python, "-c", CHILD, *args]
            env, cwd = dict(os.environ, PYTHONPATH=str(ROOT)), tmp
            # byte-compiled modules, as an installed package has them (HTA's are): without
            # them every module imported on first use is compiled inside the timed call
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=3600)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{side} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="trace folder (the control with --test)")
    parser.add_argument("--test", type=Path, help="second folder, for compare_traces")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated cases")
    parser.add_argument("--repeat", "-n", type=int, default=5, help="runs per analysis (5)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="child processes per side, in turn (3); medians over them")
    parser.add_argument("--hta-python", help="HTA's interpreter")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    python = hta_python(args.hta_python)
    if python is None:
        sys.exit("no HTA interpreter: see benchmarks/README.md (--hta-python, $HTA_PYTHON)")
    rounds: dict[str, list[dict[str, float]]] = {"hta": [], "ours": []}
    for _ in range(args.rounds):  # interleaved, so drift hits both sides alike
        rounds["hta"].append(run_side("hta", python, args.folder, args.test, args.repeat, cases))
        rounds["ours"].append(run_side("ours", sys.executable, args.folder, args.test,
                                       args.repeat, cases))
    import statistics

    table = {}
    print(f"{args.folder}" + (f" vs {args.test}" if args.test else "")
          + f": median of {args.rounds} processes x {args.repeat} runs (load: 1 run each)")
    print(f"{'case':32} {'HTA 0.5 (s)':>12} {'ours (s)':>10} {'HTA / ours':>11}")
    for case in [c for name in cases for c in (name, name + " (again)")]:
        values = {side: [r[case] for r in rounds[side] if case in r] for side in rounds}
        if not values["hta"] or not values["ours"]:
            continue
        theirs, ours = statistics.median(values["hta"]), statistics.median(values["ours"])
        table[case] = {"hta_s": theirs, "ours_s": ours, "ratio": theirs / ours}
        print(f"{case:32} {theirs:12.4f} {ours:10.4f} {theirs / ours:10.1f}x")
    if args.json:
        args.json.write_text(json.dumps({"folder": str(args.folder), "test": str(args.test),
                                         "cases": table}, indent=2))


if __name__ == "__main__":
    main()
