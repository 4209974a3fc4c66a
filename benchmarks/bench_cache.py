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

Then, in this process, what checking the cache costs on a reopen (medians of 9 timings,
page cache warm): the key of each trace file (every byte read for its checksums: the
cache's ``fingerprint``), the sampled-blocks key used before it (for comparison), and
the check of each cached entry against its manifest (``entry_damage``), each beside the
reopen's time to answer.

Usage::

    python benchmarks/bench_cache.py TRACE_DIR [-n RUNS] [--cache-dir DIR]
    python -m hta.synthetic /tmp/big --ranks 1 --events-per-rank 1000000
    python benchmarks/bench_cache.py /tmp/big -n 5
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

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
    key_costs(args.trace_dir, med["reopen"][0])


def _median_ms(fn: Callable[[], object], runs: int = 9) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def _sampled_key(path: Path) -> str:
    """The key before whole-file checksums: size and 17 sampled 64 KiB blocks."""
    size = path.stat().st_size
    h = hashlib.blake2b(digest_size=12)
    h.update(str(size).encode())
    with path.open("rb") as fh:
        if size <= (1 << 16) * 17:
            h.update(fh.read())
        else:
            for i in range(17):
                fh.seek((size - (1 << 16)) * i // 16)
                h.update(fh.read(1 << 16))
    return h.hexdigest()


def key_costs(trace_dir: str, reopen_s: float) -> None:
    """Time the cache's checks of one reopen, in this process (see the module doc)."""
    from hta.job.cache import entry_damage, fingerprint
    from hta.kineto.discovery import discover

    files, _ = discover(trace_dir)
    cache_dir = tempfile.mkdtemp(prefix="hta-bench-key-")
    try:
        run_child(trace_dir, "write", cache_dir)
        entries = [p for p in Path(cache_dir).iterdir() if p.is_dir()]
        whole = sum(_median_ms(lambda f=f: fingerprint(f)) for f in files)
        sampled = sum(_median_ms(lambda f=f: _sampled_key(f)) for f in files)
        manifest = sum(_median_ms(lambda e=e: entry_damage(e)) for e in entries)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    size = sum(f.stat().st_size for f in files) / 2**20
    print(f"cache checks of one reopen ({len(files)} file(s), {size:.1f} MiB of trace; "
          f"medians of 9):")
    print(f"  key, every byte of the trace   {whole:8.2f} ms  "
          f"({100 * whole / 1000 / reopen_s:.1f}% of the reopen's answer)")
    print(f"  key, 17 sampled blocks (before) {sampled:7.2f} ms")
    print(f"  entries against their manifest {manifest:8.2f} ms  "
          f"({100 * manifest / 1000 / reopen_s:.1f}% of the reopen's answer)")


if __name__ == "__main__":
    main()
