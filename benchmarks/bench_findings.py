#!/usr/bin/env python3
"""Findings benchmark: the first ``get_findings()`` (with its coverage table) on real
traces and on a generated multi-rank job, next to the load, each in a fresh interpreter.

A user runs the findings once, in a fresh process, right after loading: so does this
script. Each run is its own ``python`` process that loads the folder
(``TraceAnalysis(cache=False)``, timed as ``load``), then times the first
``get_findings()`` and ``get_findings_coverage()`` together (``findings``: the rules, the
sharing of each rank's time, the coverage; the import of the findings modules included).
Per folder it reports the minimum and the median of ``--repeat`` runs, the trace events
(the ``traceEvents`` entries of the files), the rows (the events loaded into the ranks'
tables: flow arrows, metadata and counters are not rows), the findings' time per million
of each, and findings / load. Issue 42 counts its events as rows (a generated 256-rank
job of 20,000 trace events a rank is "3.1M events"): its target, 1 s per million events,
is ``s/M row``. On generated jobs a rank holds about 0.61 rows a trace event.

With ``--without-replay``, each folder also gets as many runs of
``get_findings(replay=False)`` (the rules' own estimates: no replay graph, no replayed
changes), and the replay's share of the findings' median.

With ``--whole``, each folder also gets ``hta summary`` and ``hta report`` timed as whole
processes (interpreter, imports, load from the cache, filled beforehand, everything), with
each one's peak resident memory (its own, and the largest of the worker processes it
started) and the report's size: what a user waits for and what the machine must hold.

    python benchmarks/bench_findings.py                       # the shared real traces
    python benchmarks/bench_findings.py ../shared/traces/hta/df_index_resolver -n 9
    python benchmarks/bench_findings.py --job-ranks 8 --job-events-per-rank 216000 \\
        --tmp-dir /tmp/bench_findings
    # issue 42's shapes: generated jobs of 64, 256 and 1,024 ranks of 20k events and one
    # rank of 1M events, findings and the whole summary and report
    python benchmarks/bench_findings.py --no-shared --job-ranks 64,256,1024 \\
        --job-events-per-rank 20000 --big-rank 1000000 --whole -n 1 --tmp-dir /tmp/bf
    git archive OLD hta | tar -x -C /tmp/old && \\
        python benchmarks/bench_findings.py --root /tmp/old          # before/after

Timings on a shared machine are noisy: compare figures from the same run (or runs
alternated in time), and quote the minimum next to the median. It reports, never asserts.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared" / "traces" / "hta"
#: The real traces of the speed acceptance (folders under the shared traces).
DEFAULT_TRACES = ("df_index_resolver", "trace_diff/control", "trace_diff/test",
                  "ns_resolution_trace", "nccl_parser_config", "mtia_trace_single_rank")

_WORKER = """
import json, sys, time, warnings
warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
ta = TraceAnalysis(trace_dir=sys.argv[1], cache=False)
t1 = time.perf_counter()
ta.get_findings(replay=sys.argv[2] == "replay")
ta.get_findings_coverage()
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "findings_s": t2 - t1,
                  "rows": sum(len(ta.t.rank(r).events) for r in ta.t.get_ranks())}))
"""


def trace_events(folder: Path) -> int:
    """The ``traceEvents`` entries of the folder's trace files."""
    total = 0
    for path in sorted(folder.iterdir()):
        if not path.name.endswith((".json", ".json.gz")):
            continue
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt") as f:
            doc = json.load(f)
        if isinstance(doc, dict):
            total += len(doc.get("traceEvents", []))
    return total


def one_run(folder: Path, root: Path = REPO_ROOT, replay: bool = True) -> dict[str, float]:
    """Load and first findings in a fresh interpreter, with the ``hta`` package of
    ``root`` (the working folder of the run, first on its path); ``replay=False``: the
    rules' own estimates (``get_findings(replay=False)``: no replay graph, no replayed
    changes)."""
    out = subprocess.run([sys.executable, "-c", _WORKER, str(folder.resolve()),
                          "replay" if replay else "rules"], cwd=root,
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench(folder: Path, repeat: int, root: Path = REPO_ROOT,
          without_replay: bool = False) -> dict[str, Any]:
    """``repeat`` fresh-process runs on ``folder``: minimum and median of each time;
    ``without_replay``: as many runs again without the replay (``rules_*`` keys, and
    ``replay_share``: the replay's share of the findings' median)."""
    runs = [one_run(folder, root) for _ in range(repeat)]
    events = trace_events(folder)
    row: dict[str, Any] = {"trace": str(folder), "trace_events": events,
                           "rows": int(runs[0]["rows"])}
    for key in ("load_s", "findings_s"):
        values = [r[key] for r in runs]
        row[key.replace("_s", "_min_s")] = min(values)
        row[key.replace("_s", "_median_s")] = statistics.median(values)
    row["findings_s_per_M_events"] = row["findings_median_s"] / events * 1e6 if events else 0
    row["findings_s_per_M_rows"] = row["findings_median_s"] / row["rows"] * 1e6 \
        if row["rows"] else 0
    row["findings_over_load"] = row["findings_median_s"] / row["load_median_s"]
    if without_replay:
        rules = [one_run(folder, root, replay=False)["findings_s"] for _ in range(repeat)]
        row["rules_min_s"], row["rules_median_s"] = min(rules), statistics.median(rules)
        row["rules_s_per_M_rows"] = row["rules_median_s"] / row["rows"] * 1e6 \
            if row["rows"] else 0
        row["replay_share"] = 1 - row["rules_median_s"] / row["findings_median_s"]
    return row


_WHOLE = """
import resource, sys, time
from hta.cli import main
t0 = time.perf_counter()
rc = main(sys.argv[1:])
wall = time.perf_counter() - t0
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print("WHOLE", rc, wall, own, kids, file=sys.stderr)
"""


def whole(folder: Path, command: str, root: Path = REPO_ROOT) -> dict[str, float]:
    """``hta summary`` or ``hta report`` on ``folder`` in a fresh interpreter: its wall
    time (process start included), its peak resident memory (MiB) and the largest of its
    worker processes'; for the report, the file's size (MB)."""
    with tempfile.TemporaryDirectory(prefix="bench_findings_") as tmp:
        out = Path(tmp) / "report.html"
        cli = [command, str(folder.resolve()), "-q"]
        if command == "report":
            cli += ["-o", str(out)]
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _WHOLE, *cli], cwd=root,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        line = [x for x in done.stderr.splitlines() if x.startswith("WHOLE ")]
        if not line or done.returncode:
            raise RuntimeError(f"hta {command} failed on {folder}: {done.stderr[-2000:]}")
        _, rc, _, own, kids = line[-1].split()
        row = {f"{command}_s": wall, f"{command}_peak_MiB": int(own) / 1024,
               f"{command}_workers_peak_MiB": int(kids) / 1024}
        if command == "report":
            row["report_MB"] = out.stat().st_size / 1e6
        return row


def fill_cache(folder: Path, root: Path = REPO_ROOT) -> None:
    """Load ``folder`` once with the cache on (untimed), so that the summary and the
    report, both timed after it, read the same warm cache."""
    subprocess.run([sys.executable, "-c", "import sys; from hta.trace_analysis import "
                    "TraceAnalysis; TraceAnalysis(trace_dir=sys.argv[1])",
                    str(folder.resolve())], cwd=root, check=True, capture_output=True)


def synthetic_job(tmp: Path, ranks: int, events: int, seed: int) -> Path:
    """A generated job (``python -m hta.synthetic``), reused when already there."""
    out = tmp / f"job_{ranks}x{events}_s{seed}"
    if not out.exists() or not any(out.iterdir()):
        subprocess.run([sys.executable, "-m", "hta.synthetic", str(out), "--ranks",
                        str(ranks), "--events-per-rank", str(events), "--seed", str(seed)],
                       cwd=REPO_ROOT, check=True, capture_output=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path,
                        help="trace folders (default: the shared real traces of the "
                        "acceptance that are present)")
    parser.add_argument("--repeat", "-n", type=int, default=5,
                        help="fresh-process runs per folder (5)")
    parser.add_argument("--job-ranks", default="0",
                        help="also generated jobs of these many ranks, comma-separated "
                        "(0: none)")
    parser.add_argument("--job-events-per-rank", type=int, default=216_000)
    parser.add_argument("--big-rank", type=int, default=0,
                        help="also a generated job of one rank of this many events")
    parser.add_argument("--no-shared", action="store_true",
                        help="leave out the shared real traces")
    parser.add_argument("--whole", action="store_true",
                        help="also time hta summary and hta report as whole processes, "
                        "with their peak memory and the report's size")
    parser.add_argument("--without-replay", action="store_true",
                        help="also time the findings without the replay "
                        "(get_findings(replay=False): the rules' own estimates), and "
                        "report the replay's share")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tmp-dir", type=Path, help="where the generated job goes (kept)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="time the hta package of this folder (default: this "
                        "repository; e.g. an exported older commit, for before/after)")
    args = parser.parse_args(argv)

    folders = list(args.traces) or ([] if args.no_shared else [
        SHARED / t for t in DEFAULT_TRACES if (SHARED / t).exists()])
    jobs = [(int(n), args.job_events_per_rank) for n in str(args.job_ranks).split(",")
            if int(n) > 0]
    if args.big_rank:
        jobs.append((1, args.big_rank))
    if jobs:
        tmp = args.tmp_dir or Path(tempfile.mkdtemp(prefix="bench_findings_"))
        tmp.mkdir(parents=True, exist_ok=True)
        folders += [synthetic_job(tmp, n, events, args.seed) for n, events in jobs]
    rows = []
    print(f"{'trace':<42} {'events':>9} {'rows':>9} {'load s':>15} {'findings s':>15} "
          f"{'s/M ev':>7} {'s/M row':>7} {'f/load':>6}")
    for folder in folders:
        r = bench(folder, args.repeat, args.root.resolve(), args.without_replay)
        rows.append(r)
        name = str(folder.relative_to(SHARED)) if folder.is_relative_to(SHARED) else \
            folder.name
        print(f"{name:<42} {r['trace_events']:>9,} {r['rows']:>9,} "
              f"{r['load_min_s']:>6.3f} / {r['load_median_s']:<6.3f} "
              f"{r['findings_min_s']:>6.3f} / {r['findings_median_s']:<6.3f} "
              f"{r['findings_s_per_M_events']:>7.2f} {r['findings_s_per_M_rows']:>7.2f} "
              f"{r['findings_over_load']:>6.2f}")
        if args.without_replay:
            print(f"{'':<42} without the replay {r['rules_min_s']:.3f} / "
                  f"{r['rules_median_s']:.3f} s, {r['rules_s_per_M_rows']:.2f} s/M row; "
                  f"the replay {100 * r['replay_share']:.0f} % of the findings")
        if args.whole:
            fill_cache(folder, args.root.resolve())
            for command in ("summary", "report"):
                r.update(whole(folder, command, args.root.resolve()))
            print(f"{'':<42} summary {r['summary_s']:.1f} s, {r['summary_peak_MiB']:,.0f} MiB"
                  f" (workers {r['summary_workers_peak_MiB']:,.0f}); report "
                  f"{r['report_s']:.1f} s, {r['report_peak_MiB']:,.0f} MiB (workers "
                  f"{r['report_workers_peak_MiB']:,.0f}), {r['report_MB']:.2f} MB")
    print("(times: minimum / median of the runs; s/M ev (per million trace events), s/M row "
          "(per million loaded events) and f/load from the medians; summary and report: "
          "one whole process each, after the runs)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
