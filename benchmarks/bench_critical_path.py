#!/usr/bin/env python3
"""Critical path benchmark on one large rank: graph, longest path, attribution, overlay.

Loads one rank (not timed), then times, ``--repeat`` times each, for the whole trace and
for one ``ProfilerStep`` window:

* ``build``: :func:`hta.analysis.critical_path.build_graph` (nodes, edges, weights);
* ``longest``: :func:`hta.analysis.critical_path.longest_path`;
* ``analysis``: :func:`hta.analysis.critical_path.critical_path_analysis` end to end
  (graph, longest path and the path table);
* ``summary``: the bound and event summaries of that table;
* ``overlay`` (with ``--overlay``): writing the overlaid trace.

With ``--hta`` the same analysis also runs in Holistic Trace Analysis (its own
interpreter, ``--hta-python``, in isolated mode so this repository's ``hta`` cannot
shadow it), under ``--hta-timeout`` seconds. The input is a trace folder, or with
``--generate-events N`` a synthetic rank of about N events made by
``python -m hta.synthetic``. A benchmark: it reports, it asserts nothing.

    python benchmarks/bench_critical_path.py --generate-events 1000000
    python benchmarks/bench_critical_path.py /tmp/synth1m --overlay --repeat 5
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from timing import timed

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
HTA_PYTHON = REPO_ROOT.parent / "venv-hta" / "bin" / "python"

HTA_CODE = r"""
import json, sys, time
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
t1 = time.perf_counter()
g, ok = a.critical_path_analysis(rank=a.t.get_ranks()[0], annotation=sys.argv[2],
                                 instance_id=0)
t2 = time.perf_counter()
print("@@" + json.dumps({"load_s": t1 - t0, "analysis_s": t2 - t1, "ok": bool(ok),
                         "nodes": g.number_of_nodes(), "edges": g.number_of_edges()}))
"""


def generate(events: int, out: Path, seed: int) -> Path:
    cmd = [sys.executable, "-m", "hta.synthetic", str(out), "--ranks", "1",
           "--events-per-rank", str(events), "--seed", str(seed)]
    subprocess.run(cmd, check=True, cwd=REPO_ROOT)
    return out


def run_hta(python: Path, folder: Path, annotation: str, timeout: float) -> dict[str, Any]:
    if not python.exists():
        return {"error": f"no HTA interpreter at {python}"}
    try:
        proc = subprocess.run([str(python), "-I", "-c", HTA_CODE, str(folder), annotation],
                              capture_output=True, text=True, timeout=timeout,
                              cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("trace_dir", nargs="?", help="folder with one rank's trace")
    parser.add_argument("--generate-events", type=int, default=0,
                        help="generate a synthetic rank of about this many events instead")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--overlay", action="store_true", help="also time the overlay writer")
    parser.add_argument("--hta", action="store_true", help="also run HTA's analysis")
    parser.add_argument("--hta-python", type=Path, default=HTA_PYTHON)
    parser.add_argument("--hta-timeout", type=float, default=600.0)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    from hta.analysis.critical_path import (
        build_graph,
        critical_path_analysis,
        critical_path_summary,
        longest_path,
    )
    from hta.export.critical_path_overlay import write_critical_path_overlay
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        if args.generate_events:
            folder = generate(args.generate_events, Path(tmp) / "trace", args.seed)
        elif args.trace_dir:
            folder = Path(args.trace_dir)
        else:
            parser.error("give a trace folder or --generate-events N")
        t0 = time.perf_counter()
        a = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
        load_s = time.perf_counter() - t0
        rank = a.ranks[0]
        rt = a.t.rank(rank)
        report: dict[str, Any] = {"trace_dir": str(folder), "rank": rank,
                                  "complete_events": len(rt.events), "load_s": load_s,
                                  "cases": []}
        print(f"{folder}: rank {rank}, {len(rt.events):,} complete events, "
              f"loaded in {load_s:.1f} s (not counted)")
        for annotation in ("", "ProfilerStep"):
            label = annotation or "whole trace"
            build_s, g = timed(lambda ann=annotation: build_graph(rt, ann), args.repeat)
            longest_s, _ = timed(lambda g=g: longest_path(g.num_nodes, g.edge_src, g.edge_dst,
                                                          g.node_weight), args.repeat)
            total_s, (g, df) = timed(lambda ann=annotation: critical_path_analysis(rt, ann),
                                     args.repeat)
            summary_s, _ = timed(lambda df=df: critical_path_summary(df), args.repeat)
            case = {"window": label, "nodes": g.num_nodes, "edges": g.num_edges,
                    "path_edges": len(df), "path_length_ns": g.path_length_ns,
                    "span_ns": g.span_ns, "build_s": build_s, "longest_s": longest_s,
                    "analysis_s": total_s, "summary_s": summary_s}
            if args.overlay:
                case["overlay_s"], _ = timed(
                    lambda g=g: write_critical_path_overlay(rt, g, Path(tmp) / "out",
                                                            only_show_critical_events=False),
                    1)
            if args.hta:
                case["hta"] = run_hta(args.hta_python, folder, annotation, args.hta_timeout)
            report["cases"].append(case)
            extra = f", overlay {case['overlay_s']:.2f} s" if args.overlay else ""
            print(f"  {label:12s} {g.num_nodes:>10,} nodes {g.num_edges:>10,} edges | "
                  f"build {build_s:.2f} s, longest path {longest_s:.2f} s, analysis "
                  f"{total_s:.2f} s, summary {summary_s:.2f} s{extra} | path "
                  f"{g.path_length_ns / 1e6:,.3f} ms of {g.span_ns / 1e6:,.3f} ms")
            if args.hta:
                print(f"  {'':12s} HTA: {case['hta']}")
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
