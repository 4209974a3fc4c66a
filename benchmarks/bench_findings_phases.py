#!/usr/bin/env python3
"""Where the findings' time goes: the first ``get_findings()`` (with its coverage) on a
loaded job, cut into its phases, in a fresh interpreter per folder.

The phases, in the order they run (each one's wall time):

* ``job inputs``: the per-rank tables the job rules read, in one visit (spread over
  forked workers on a large in-memory job: ``engine._read_job_inputs``);
* ``job rules``: the rules that compare ranks (stragglers, collective bandwidth);
* ``rank rules``: the rank rules, the coverage and the sharing of each rank's time (the
  runner's visit of every rank, on the workers or here), read as what is left of the
  rules' part (``TraceAnalysis._findings``) after the two above;
* ``replay graph``: the replay's job graph, its rank graphs included (``Replay.graph``;
  on one large rank, what is left of its build after the rules);
* ``replayed changes``: the findings' changes replayed (``Replay._ahead``, on workers on a
  large job) and the savings' table;

with the wall time of the whole call, this process's CPU seconds and its worker
processes' (forked during the call). The phases are timed by wrapping the functions
named above for the run; the answers are those of an unwrapped run. A benchmark: it
reports, it never asserts.

    python benchmarks/bench_findings_phases.py /tmp/job64 /tmp/job256
    python benchmarks/bench_findings_phases.py /tmp/job64 --root /tmp/old   # another tree
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

_WORKER = """
import json, resource, sys, time, warnings
warnings.filterwarnings("ignore")
from hta.analysis.findings import engine
from hta.analysis.whatif import replayer
from hta.trace_analysis import TraceAnalysis

ta = TraceAnalysis(trace_dir=sys.argv[1], progress=False)
spent = {}

def timed(owner, name, label):
    real = getattr(owner, name)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0
    setattr(owner, name, wrapper)

timed(engine, "_read_job_inputs", "job inputs")
timed(engine, "_job_findings", "job rules")
timed(TraceAnalysis, "_findings", "rules")
timed(replayer.Replay, "graph", "replay graph")
timed(replayer.Replay, "findings_savings", "replay")
r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
t0 = time.perf_counter()
ta.get_findings()
ta.get_findings_coverage()
wall = time.perf_counter() - t0
r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({
    "events": sum(len(ta.t.rank(r).events) for r in ta.t.get_ranks()),
    "ranks": len(ta.t.get_ranks()), "wall": wall, "spent": spent,
    "cpu_here": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
    "cpu_workers": (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)}))
"""

PHASES = ("job inputs", "job rules", "rank rules", "replay graph", "replayed changes")


def phases(folder: Path, root: Path) -> dict:
    """One fresh-process run on ``folder`` with the ``hta`` package of ``root``."""
    out = subprocess.run([sys.executable, "-c", _WORKER, str(folder.resolve())], cwd=root,
                         check=True, capture_output=True, text=True)
    run = json.loads(out.stdout.strip().splitlines()[-1])
    spent = run["spent"]
    inputs, job = spent.get("job inputs", 0.0), spent.get("job rules", 0.0)
    graph = spent.get("replay graph", 0.0)
    run["phases"] = {
        "job inputs": inputs, "job rules": job,
        "rank rules": spent.get("rules", 0.0) - inputs - job,
        "replay graph": graph,
        "replayed changes": spent.get("replay", 0.0) - graph,
    }
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+", type=Path, help="trace folders")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="time the hta package of this folder (default: this "
                        "repository)")
    args = parser.parse_args(argv)
    header = "".join(f"{p:>17}" for p in PHASES)
    print(f"{'trace':<26} {'ranks':>5} {'event rows':>10} {'wall s':>7}{header} "
          f"{'CPU here':>9} {'workers':>8}")
    for folder in args.traces:
        run = phases(folder, args.root.resolve())
        cells = "".join(f"{run['phases'][p]:>17.2f}" for p in PHASES)
        print(f"{folder.name[:26]:<26} {run['ranks']:>5} {run['events']:>10,} "
              f"{run['wall']:>7.2f}{cells} {run['cpu_here']:>9.2f} {run['cpu_workers']:>8.2f}")
    print("(each phase's wall seconds; event rows: the loaded events tables'; CPU: this "
          "process and its forked workers, user + system)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
