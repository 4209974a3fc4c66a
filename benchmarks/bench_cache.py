"""First load against cached reopen: time to the first temporal breakdown.

Each run is a fresh Python process that loads a trace folder with ``TraceAnalysis`` and
asks for ``get_temporal_breakdown(visualize=False)``, in one of three modes:

* ``nocache``: ``cache=False`` (the first load, writing nothing);
* ``write``: a fresh, empty cache folder (the first load, writing the cache);
* ``reopen``: the cache folder the previous ``write`` run left (a cached reopen).

The three modes run in turn (nocache, write, reopen, nocache, ...), so a drift in the
machine's speed touches them alike. Reported per mode, as medians over the runs: the time
to the answer measured inside the process (from just before ``TraceAnalysis(...)`` to the
returned breakdown: imports excluded), the whole process's wall time (interpreter start
and imports included) and its peak RSS; then the ratios that matter: the cost of writing
the cache (write / nocache) and the reopen speed-up (write / reopen, nocache / reopen).

Usage::

    python benchmarks/bench_cache.py TRACE_DIR [-n RUNS] [--cache-dir DIR]
    python -m hta.synthetic /tmp/big --ranks 1 --events-per-rank 1000000
    python benchmarks/bench_cache.py /tmp/big -n 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = """
import sys, time
from hta.trace_analysis import TraceAnalysis
folder, mode, cache_dir = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
a = TraceAnalysis(trace_dir=folder, cache=mode != "nocache", cache_dir=cache_dir,
                  progress=False)
a.get_temporal_breakdown(visualize=False)
print(f"ANSWER {time.perf_counter() - t0:.6f}")
"""

MODES = ("nocache", "write", "reopen")


def run_child(folder: str, mode: str, cache_dir: str) -> tuple[float, float, float]:
    """(time to answer s, whole-process wall s, peak RSS MiB) of one fresh process."""
    if mode == "write":
        shutil.rmtree(cache_dir, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, folder, mode, cache_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out = proc.stdout.read() if proc.stdout else ""
    err = proc.stderr.read() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} run failed ({proc.returncode}):\n{err}")
    answer = float(next(line.split()[1] for line in out.splitlines()
                        if line.startswith("ANSWER ")))
    return answer, wall, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace_dir")
    parser.add_argument("-n", "--runs", type=int, default=5)
    parser.add_argument("--cache-dir", help="where the write runs put the cache "
                        "(default: a temporary folder, removed at the end)")
    args = parser.parse_args(argv)
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="hta-bench-cache-")
    results: dict[str, list[tuple[float, float, float]]] = {m: [] for m in MODES}
    try:
        run_child(args.trace_dir, "write", cache_dir)  # warm-up: page cache, bytecode
        for _ in range(args.runs):
            for mode in MODES:
                results[mode].append(run_child(args.trace_dir, mode, cache_dir))
    finally:
        if not args.cache_dir:
            shutil.rmtree(cache_dir, ignore_errors=True)
    med = {m: [statistics.median(r[i] for r in results[m]) for i in range(3)] for m in MODES}
    print(f"{args.trace_dir}: {args.runs} runs per mode, medians")
    print(f"{'mode':8} {'answer s':>9} {'process s':>10} {'peak MiB':>9}")
    for mode in MODES:
        answer, wall, rss = med[mode]
        print(f"{mode:8} {answer:9.3f} {wall:10.3f} {rss:9.0f}")
    pair = {m: [r[0] for r in results[m]] for m in MODES}
    write_cost = statistics.median(w / n for w, n in zip(pair["write"], pair["nocache"]))
    speedup = statistics.median(w / r for w, r in zip(pair["write"], pair["reopen"]))
    speedup_nc = statistics.median(n / r for n, r in zip(pair["nocache"], pair["reopen"]))
    print(f"writing the cache: first load x{write_cost:.3f} (time to answer, paired median)")
    print(f"cached reopen: {speedup:.1f}x faster than the first load writing the cache, "
          f"{speedup_nc:.1f}x than the first load without cache (time to answer)")
    print(f"whole process: reopen {med['write'][1] / med['reopen'][1]:.2f}x faster than the "
          "first load writing the cache")


if __name__ == "__main__":
    main()
