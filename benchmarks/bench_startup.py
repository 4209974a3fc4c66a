#!/usr/bin/env python3
"""Start-up benchmark: what a user waits for before the first answer, whole process.

Times, as separate processes (median wall and CPU seconds over ``--repeat`` runs, after one
warm-up run):

* ``import pandas`` (the yardstick), ``import hta.trace_analysis`` (the facade) and
  ``hta --help``, with their ratios to ``import pandas``;
* ``hta summary FILE`` on a 1 MB trace: a one-rank synthetic trace of about 1 MB of JSON
  (``python -m hta.synthetic --no-gzip``, written to ``--tmp-dir``), or ``--trace FILE``;
  cold (``--no-cache``) and from the cache.

Goals (issue 18): the facade at most 1.2x ``import pandas``, ``hta --help`` at most half
of it, ``hta summary`` on a 1 MB trace under 0.49 s wall (AMD TraceLens's first GPU
timeline on such a file). A benchmark: it reports, it never asserts. For a ratio that
holds on a noisy machine, time the two imports in turn (A B A B ...) and take the ratio
pair by pair.

    python benchmarks/bench_startup.py --tmp-dir /tmp/bench-startup
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Median (wall, cpu) seconds of ``cmd`` over ``repeat`` runs after one warm-up."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    walls, cpus = [], []
    for i in range(repeat + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if i:
            walls.append(wall)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def one_mb_trace(tmp_dir: Path) -> Path:
    """A one-rank synthetic trace of about 1 MB of JSON (made once in ``tmp_dir``)."""
    out = tmp_dir / "one_mb"
    files = sorted(out.glob("*.json")) if out.exists() else []
    if not files:
        subprocess.run([sys.executable, "-m", "hta.synthetic", str(out), "--ranks", "1",
                        "--events-per-rank", "4500", "--no-gzip"], check=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL)
        files = sorted(out.glob("*.json"))
    return files[0]


def main() -> None:
    """Run the benchmark and print one line per command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--tmp-dir", type=Path, default=Path("/tmp/bench-startup"))
    parser.add_argument("--trace", type=Path, help="trace file for hta summary")
    args = parser.parse_args()
    args.tmp_dir.mkdir(parents=True, exist_ok=True)
    trace = args.trace or one_mb_trace(args.tmp_dir)
    py = sys.executable
    cases = {
        "import pandas": [py, "-c", "import pandas"],
        "import hta.trace_analysis": [py, "-c", "import hta.trace_analysis"],
        "hta --help": [py, "-m", "hta.cli", "--help"],
        f"hta summary ({trace.stat().st_size / 1e6:.2f} MB, no cache)":
            [py, "-m", "hta.cli", "summary", str(trace), "--no-cache", "-q"],
        f"hta summary ({trace.stat().st_size / 1e6:.2f} MB, cached)":
            [py, "-m", "hta.cli", "summary", str(trace), "-q"],
    }
    base = None
    print(f"{'command':<42}{'wall s':>9}{'cpu s':>9}{'cpu / pandas':>14}")
    for name, cmd in cases.items():
        wall, cpu = timed(cmd, args.repeat)
        base = base or cpu
        print(f"{name:<42}{wall:>9.3f}{cpu:>9.3f}{cpu / base:>14.2f}")


if __name__ == "__main__":
    main()
