#!/usr/bin/env python3
"""Scaling benchmark: jobs larger than memory, and time / memory against job size.

A benchmark, not a test: it reports figures and asserts nothing. Every measurement runs
in a fresh child process; the parent samples the memory of the child and all its
descendants (worker processes included) from ``/proc/PID/smaps_rollup`` every 0.2 s and
reports the peak of the sum of their PSS ("peak tree PSS": resident memory with pages
shared by forked workers counted once), and the wall time of the child's work.

Subcommands::

    # (a) one big job: load it and run the breakdown analyses, ranks kept out of memory
    python -m hta.synthetic /tmp/hta-scale/big8 --ranks 8 --events-per-rank 6800000 \\
        --workers 2
    python benchmarks/bench_scale.py big /tmp/hta-scale/big8 --modes lazy,auto --hta

    # (b) scaling tables: events per rank (one rank), and number of small ranks
    python benchmarks/bench_scale.py table --work /tmp/hta-scale/table \\
        --events 100000,1000000,10000000 --ranks 1,2,4,8,16,32,64

What one measurement does (``run`` mode in the child): ``TraceAnalysis(trace_dir=DIR,
cache=False, in_memory=...)``, then ``get_rank_summary``, ``get_temporal_breakdown``,
``get_comm_comp_overlap``, ``get_idle_time_breakdown`` and ``get_gpu_kernel_breakdown``
(no figures). Modes: ``lazy`` (``in_memory=False``: ranks stay as Parquet entries, read
one at a time; the per-rank breakdowns run in worker processes), ``memory``
(``in_memory=True``), ``auto`` (the default rule: in memory when the ranks take at most
half the available memory), ``dask`` (a ``distributed.LocalCluster`` of two worker
processes started in the child: the workers load and keep the ranks).

HTA (``--hta``): the same analyses with Holistic Trace Analysis 0.5.0 from its own
virtual environment (``--hta-python``, run from ``/tmp`` so this repository's ``hta``
cannot shadow it). Its process tree is stopped when its memory (tree PSS) passes
``--hta-rss-cap-gb`` (default 60% of the machine's memory), and the report says so: a
job HTA cannot hold is reported as such instead of pushing the machine into the OOM
killer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
HTA_PYTHON = Path("/work/venv-hta/bin/python")
SENTINEL = "@@BENCH_SCALE@@"
GB = 1e9

OURS_CODE = r"""
import json, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
from hta.job.distributed import DistributedJob
trace_dir, mode = sys.argv[1], sys.argv[2]
in_memory = {"lazy": False, "memory": True, "auto": None, "dask": None}[mode]
times = {"import_s": time.perf_counter() - t0}
client = None
if mode == "dask":  # a local two-process cluster, as a user would start one
    import logging
    from distributed import Client, LocalCluster
    logging.getLogger("distributed").setLevel(logging.ERROR)
    t = time.perf_counter()
    client = Client(LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                 dashboard_address=None, silence_logs=logging.ERROR))
    times["cluster_start_s"] = time.perf_counter() - t
def phase(name):
    print("@@PHASE@@" + name, flush=True)
phase("load")
t = time.perf_counter()
a = TraceAnalysis(trace_dir=trace_dir, cache=False, progress=False, in_memory=in_memory,
                  client=client)
times["load_s"] = time.perf_counter() - t
phase("mapped breakdowns")
t = time.perf_counter()
a.get_rank_summary()
a.get_temporal_breakdown(visualize=False)
a.get_comm_comp_overlap(visualize=False)
times["mapped_breakdowns_s"] = time.perf_counter() - t
phase("other breakdowns")
t = time.perf_counter()
a.get_idle_time_breakdown(visualize=False)
a.get_gpu_kernel_breakdown(visualize=False)
times["other_breakdowns_s"] = time.perf_counter() - t
phase("end")
events = int(a.get_rank_summary()["events"].sum())
lazy = isinstance(a.t, DistributedJob)
a.close()
print("@@BENCH_SCALE@@" + json.dumps({**times, "ranks": len(a.ranks), "events": events,
                                      "kept_out_of_memory": lazy}), flush=True)
"""

HTA_CODE = r"""
import json, os, re, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
times = {"import_s": time.perf_counter() - t0}
def phase(name):
    print("@@PHASE@@" + name, flush=True)
folder = sys.argv[1]
# HTA finds a rank only as '"rank": N' with a space; give it the ranks from the names.
files = {int(re.search(r"rank-(\d+)", f).group(1)): os.path.join(folder, f)
         for f in sorted(os.listdir(folder)) if re.search(r"rank-(\d+)\.json", f)}
phase("load")
t = time.perf_counter()
a = TraceAnalysis(trace_files=files, trace_dir=folder)
times["load_s"] = time.perf_counter() - t
phase("mapped breakdowns")
t = time.perf_counter()
a.get_temporal_breakdown(visualize=False)
a.get_comm_comp_overlap(visualize=False)
times["mapped_breakdowns_s"] = time.perf_counter() - t
phase("other breakdowns")
t = time.perf_counter()
a.get_idle_time_breakdown(ranks=list(a.t.get_ranks()), visualize=False)
a.get_gpu_kernel_breakdown(visualize=False)
times["other_breakdowns_s"] = time.perf_counter() - t
print("@@BENCH_SCALE@@" + json.dumps({**times, "ranks": len(a.t.get_ranks())}), flush=True)
"""


# -- measuring a process tree ------------------------------------------------------------

def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def tree_pss(root: int) -> int:
    """Proportional set size (bytes) of ``root`` and all its descendants: resident memory
    with pages shared between processes (forked workers) counted once in total."""
    tree = _children()
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        stack.extend(tree.get(pid, ()))
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            continue
    return total


def measure(cmd: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
            rss_cap: int | None = None, timeout: float = 3600) -> dict[str, Any]:
    """Run ``cmd``; its JSON result line, wall time, peak tree RSS, and how it ended."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    peak = 0
    stopped = ""
    phase = ["start"]
    phase_peaks: dict[str, int] = {}
    out: list[str] = []
    err: list[str] = []

    def read_out() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("@@PHASE@@"):
                phase[0] = line[len("@@PHASE@@"):].strip()
            out.append(line)

    readers = [threading.Thread(target=read_out, daemon=True),
               threading.Thread(target=lambda: err.extend(proc.stderr),  # type: ignore[arg-type]
                                daemon=True)]
    for r in readers:
        r.start()
    while proc.poll() is None:
        now = tree_pss(proc.pid)
        peak = max(peak, now)
        phase_peaks[phase[0]] = max(phase_peaks.get(phase[0], 0), now)
        if rss_cap is not None and peak > rss_cap:
            stopped = f"stopped at {peak / GB:.1f} GB in memory (cap {rss_cap / GB:.1f} GB)"
            os.killpg(proc.pid, signal.SIGKILL)
            break
        if time.perf_counter() - start > timeout:
            stopped = f"stopped after {timeout:.0f} s"
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.2)
    proc.wait()
    for r in readers:
        r.join(timeout=5)
    wall = time.perf_counter() - start
    result: dict[str, Any] = {"wall_s": round(wall, 2), "peak_tree_pss_gb": round(peak / GB, 3),
                              "returncode": proc.returncode,
                              "peak_gb_by_phase": {k: round(v / GB, 2)
                                                   for k, v in phase_peaks.items()}}
    lines = [line for line in "".join(out).splitlines() if line.startswith(SENTINEL)]
    if lines:
        result.update(json.loads(lines[-1][len(SENTINEL):]))
    elif stopped:
        result["failed"] = stopped
    else:
        tail = "".join(err).strip().splitlines()[-3:]
        result["failed"] = " | ".join(tail) or f"exit code {proc.returncode}"
    return result


def ours(trace_dir: Path, mode: str) -> dict[str, Any]:
    """Our loader and breakdowns in a child process (see OURS_CODE)."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return measure([sys.executable, "-c", OURS_CODE, str(trace_dir), mode], env=env)


def hta(trace_dir: Path, python: Path, rss_cap: int) -> dict[str, Any]:
    if not python.exists():
        return {"failed": f"no HTA interpreter at {python}"}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return measure([str(python), "-I", "-c", HTA_CODE, str(trace_dir)], cwd="/tmp", env=env,
                   rss_cap=rss_cap)


# -- job facts ---------------------------------------------------------------------------

def json_bytes(folder: Path) -> int:
    """Uncompressed JSON bytes of the traces (for .gz, the gzip trailer's size: exact
    below 4 GiB per file, as here)."""
    total = 0
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".json"):
            total += path.stat().st_size
        elif path.name.endswith(".json.gz"):
            with path.open("rb") as fh:
                fh.seek(-4, 2)
                total += int.from_bytes(fh.read(4), "little")
    return total


def machine() -> dict[str, Any]:
    mem = {}
    with open("/proc/meminfo", encoding="ascii") as fh:
        for line in fh:
            key, value = line.split(":", 1)
            mem[key] = int(value.split()[0]) * 1024
    return {"cpus": os.cpu_count(), "mem_total_gb": round(mem["MemTotal"] / GB, 1),
            "mem_available_gb": round(mem["MemAvailable"] / GB, 1),
            "swap_total_gb": round(mem.get("SwapTotal", 0) / GB, 1),
            "load_avg": os.getloadavg()}


def generate(folder: Path, ranks: int, events: int, workers: int = 2) -> None:
    if folder.exists() and len(list(folder.glob("rank-*.json.gz"))) == ranks:
        return
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "hta.synthetic", str(folder), "--ranks", str(ranks),
                    "--events-per-rank", str(events), "--workers", str(workers)],
                   check=True, stdout=subprocess.DEVNULL, env=dict(os.environ,
                                                                   PYTHONPATH=str(REPO_ROOT)))


# -- subcommands ---------------------------------------------------------------------------

def cmd_big(args: argparse.Namespace) -> int:
    folder = Path(args.trace_dir)
    facts = {"machine": machine(), "trace_dir": str(folder),
             "files": len(list(folder.glob("*.json*"))),
             "json_gb": round(json_bytes(folder) / GB, 2),
             "disk_gb": round(sum(p.stat().st_size for p in folder.glob("*.json*")) / GB, 2)}
    print(json.dumps(facts), flush=True)
    results = {}
    for mode in args.modes.split(","):
        results[f"ours {mode}"] = ours(folder, mode)
        print(json.dumps({f"ours {mode}": results[f"ours {mode}"]}), flush=True)
    if args.hta:
        cap = int(args.hta_rss_cap_gb * GB)
        results["HTA 0.5.0"] = hta(folder, Path(args.hta_python), cap)
        print(json.dumps({"HTA 0.5.0": results["HTA 0.5.0"]}), flush=True)
    _table(results)
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    print(json.dumps({"machine": machine()}), flush=True)
    by_events = {}
    for n in [int(float(x)) for x in args.events.split(",") if x]:
        folder = work / f"events_{n}"
        generate(folder, 1, n)
        for mode in args.modes.split(","):
            r = ours(folder, mode)
            r["json_gb"] = round(json_bytes(folder) / GB, 3)
            by_events[f"{n:.0e} events, {mode}"] = r
            print(json.dumps({f"{n} events {mode}": r}), flush=True)
    by_ranks = {}
    rank_counts = [int(x) for x in args.ranks.split(",") if x]
    if rank_counts:
        pool = work / f"ranks_pool_{args.small_events}"
        generate(pool, max(rank_counts), args.small_events)
        for count in rank_counts:
            folder = work / f"ranks_{count}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            for r in range(count):
                (folder / f"rank-{r}.json.gz").symlink_to(pool / f"rank-{r}.json.gz")
            for mode in args.modes.split(","):
                r = ours(folder, mode)
                by_ranks[f"{count} ranks, {mode}"] = r
                print(json.dumps({f"{count} ranks {mode}": r}), flush=True)
    _table(by_events)
    _table(by_ranks)
    return 0


def _table(results: dict[str, dict[str, Any]]) -> None:
    if not results:
        return
    print()
    print("| case | events | load s | breakdowns s | total s | peak memory GB (tree PSS) | note |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, r in results.items():
        if "failed" in r:
            print(f"| {name} | | | | {r.get('wall_s', '')} | {r.get('peak_tree_pss_gb', '')} "
                  f"| {r['failed']} |")
            continue
        breakdowns = r.get("mapped_breakdowns_s", 0) + r.get("other_breakdowns_s", 0)
        note = "kept out of memory" if r.get("kept_out_of_memory") else ""
        print(f"| {name} | {r.get('events', '')} | {r['load_s']:.2f} | {breakdowns:.2f} | "
              f"{r['wall_s']:.2f} | {r['peak_tree_pss_gb']:.2f} | {note} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    big = sub.add_parser("big", help="one big job, ours (and HTA)")
    big.add_argument("trace_dir")
    big.add_argument("--modes", default="lazy,auto",
                     help="lazy, memory, auto, dask (comma list)")
    big.add_argument("--hta", action="store_true", help="also run HTA 0.5.0")
    big.add_argument("--hta-python", default=str(HTA_PYTHON))
    big.add_argument("--hta-rss-cap-gb", type=float,
                     default=round(0.6 * machine()["mem_total_gb"], 1))
    big.set_defaults(func=cmd_big)
    table = sub.add_parser("table", help="time and memory against events and ranks")
    table.add_argument("--work", default="/tmp/hta-scale/table")
    table.add_argument("--events", default="100000,1000000,10000000")
    table.add_argument("--ranks", default="1,2,4,8,16,32,64")
    table.add_argument("--small-events", type=int, default=100_000,
                       help="events per rank of the ranks table")
    table.add_argument("--modes", default="auto,lazy")
    table.set_defaults(func=cmd_table)
    args = p.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
