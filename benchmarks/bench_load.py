#!/usr/bin/env python3
"""Loading benchmark: Holistic Trace Analysis (HTA) versus our ``hta`` loader.

Every measurement runs in a fresh subprocess, so no run profits from another's warm
interpreter, imports or allocator state. Cases:

* ``HTA``: ``hta.trace_analysis.TraceAnalysis(trace_dir=DIR)`` from the pip package
  ``holistictraceanalysis``, run with the interpreter of a separate virtual environment
  (``--hta-python``), in isolated mode (``-I``) so that this repository's own ``hta``
  package can never shadow it.
* ``ours``: ``TraceAnalysis(trace_dir=DIR, cache=False, progress=False)`` from this
  repository, run with the current interpreter and the repository root first on
  ``PYTHONPATH``.
* ``ours cached``: one load with the cache enabled (the default) warms the cache in a
  temporary, writable copy of the folder (and in a temporary ``cache_dir=`` when the
  loader accepts one); that first load is reported on its own, then the reloads are timed.

For each case the child process prints a JSON line with the wall time measured around
the load call only (``time.perf_counter``), and the time from the same start to the
first ``get_temporal_breakdown(visualize=False)`` returned ("1st answer"). Runs of the
cases take turns (HTA, ours, HTA, ours...), so a drift of the machine hits them alike,
and the ratios of HTA to ours are printed at the end. The parent records:

* the median (and min / max) of that load time over ``--repeat`` runs;
* throughput: uncompressed JSON bytes of all trace files in the folder / median load time;
* peak RSS: ``ru_maxrss`` from ``os.wait4`` on the child, i.e. the largest resident set of
  any single process in the child's tree (the child or one of its pool workers);
* peak tree PSS: the largest sum of PSS over the child and all its live descendants,
  sampled from ``/proc`` every ``--sample-interval`` seconds (Linux only). This is the
  figure that shows the cost of parsing in worker processes and shipping results back;
* the child's import time and its end-to-end process time (start to exit).

Modes: a trace folder (the default), ``--replicate K`` (adds the folder's first file
written K times over as one rank, each copy shifted in time and its ids offset),
``--generate-events N`` (one synthetic rank of
about N events from ``python -m hta.synthetic``) and ``--ranks-parallel`` (the first
trace file alone versus the same file plus a copy relabelled as another rank, to show
whether two ranks load in parallel). This is a benchmark: it reports, it never asserts.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE_DIR = REPO_ROOT.parent / "shared" / "traces" / "hta" / "df_index_resolver"
HTA_PYTHON_CANDIDATES = (
    REPO_ROOT / ".venv-hta" / "bin" / "python",
    REPO_ROOT.parent / "venv-hta" / "bin" / "python",
)
SENTINEL = "@@BENCH_LOAD_RESULT@@"
MB = 1_000_000  # throughput and sizes use decimal megabytes; RSS uses MiB
MIB = 1024 * 1024

# Code run by every child. argv: trace_dir, json kwargs, json optional kwargs.
# Optional kwargs are passed only when TraceAnalysis.__init__ accepts them.
CHILD_CODE = r"""
import json, sys, time, traceback
SENTINEL = "@@BENCH_LOAD_RESULT@@"

def emit(payload):
    sys.stdout.flush()
    print(SENTINEL + json.dumps(payload), flush=True)

trace_dir, kwargs, optional = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
t0 = time.perf_counter()
try:
    import hta
    from hta.trace_analysis import TraceAnalysis
except BaseException as exc:
    emit({"ok": False, "stage": "import", "error": f"{type(exc).__name__}: {exc}",
          "traceback": traceback.format_exc()[-4000:]})
    sys.exit(3)
t1 = time.perf_counter()
try:
    import inspect
    params = inspect.signature(TraceAnalysis.__init__).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    for key, value in optional.items():
        if takes_any or key in params:
            kwargs[key] = value
except (TypeError, ValueError):
    pass
try:
    t2 = time.perf_counter()
    ta = TraceAnalysis(trace_dir=trace_dir, **kwargs)
    t3 = time.perf_counter()
except BaseException as exc:
    emit({"ok": False, "stage": "load", "error": f"{type(exc).__name__}: {exc}",
          "traceback": traceback.format_exc()[-4000:], "kwargs": sorted(kwargs)})
    sys.exit(4)
answer_s = None
try:
    ta.get_temporal_breakdown(visualize=False)
    answer_s = time.perf_counter() - t2
except BaseException:
    pass
rows = None
try:
    traces = getattr(ta.t, "traces", None)  # HTA's Trace
    if traces is None:  # ours: Trace.get_all_traces(), HTA's name too
        traces = ta.t.get_all_traces()
    rows = {str(rank): int(len(df)) for rank, df in traces.items()}
except Exception:
    pass
emit({"ok": True, "load_s": t3 - t2, "answer_s": answer_s, "import_s": t1 - t0, "rows": rows,
      "kwargs": sorted(kwargs), "module": getattr(hta, "__file__", None),
      "version": getattr(hta, "__version__", None), "python": sys.version.split()[0]})
"""


# --------------------------------------------------------------------------- data


@dataclass
class TraceSet:
    """A folder of trace files and its size, measured once."""

    label: str
    path: Path
    files: list[str]
    compressed_bytes: int
    uncompressed_bytes: int
    approx_events: int


@dataclass
class Case:
    """One benchmarked configuration."""

    name: str
    impl: str  # "hta" or "ours"
    python: str
    traces: TraceSet
    load_dir: Path
    kwargs: dict[str, Any]
    optional_kwargs: dict[str, Any] = field(default_factory=dict)
    repeat: int = 3


@dataclass
class RunResult:
    """One child process."""

    ok: bool
    load_s: float | None = None
    answer_s: float | None = None  # load + first temporal breakdown
    import_s: float | None = None
    process_s: float | None = None
    peak_rss_mib: float | None = None
    peak_tree_pss_mib: float | None = None
    rows: dict[str, int] | None = None
    exit_code: int | None = None
    error: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class CaseSummary:
    """All runs of one case and their summary figures."""

    name: str
    impl: str
    trace_label: str
    trace_dir: str
    uncompressed_mb: float
    runs: list[RunResult]
    note: str | None = None

    def ok_runs(self) -> list[RunResult]:
        return [r for r in self.runs if r.ok and r.load_s is not None]

    def figures(self) -> dict[str, Any]:
        ok = self.ok_runs()
        if not ok:
            return {"n": 0}
        loads = [r.load_s for r in ok if r.load_s is not None]
        med = statistics.median(loads)
        rss = [r.peak_rss_mib for r in ok if r.peak_rss_mib is not None]
        pss = [r.peak_tree_pss_mib for r in ok if r.peak_tree_pss_mib is not None]
        imports = [r.import_s for r in ok if r.import_s is not None]
        procs = [r.process_s for r in ok if r.process_s is not None]
        answers = [r.answer_s for r in ok if r.answer_s is not None]
        return {
            "median_answer_s": statistics.median(answers) if answers else None,
            "n": len(ok),
            "median_load_s": med,
            "min_load_s": min(loads),
            "max_load_s": max(loads),
            "mb_per_s": (self.uncompressed_mb / med) if med > 0 else None,
            "peak_rss_mib": max(rss) if rss else None,
            "peak_tree_pss_mib": max(pss) if pss else None,
            "median_import_s": statistics.median(imports) if imports else None,
            "median_process_s": statistics.median(procs) if procs else None,
            "rows": ok[-1].rows,
        }


# ----------------------------------------------------------------------- helpers


def is_trace_file(name: str) -> bool:
    """HTA's rule: every file directly in the folder ending in .json or .gz."""
    return name.endswith(".json") or name.endswith(".gz")


def trace_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and is_trace_file(p.name))


def open_trace(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def measure_traces(folder: Path, label: str) -> TraceSet:
    """Uncompressed size and an approximate event count (number of ``"ph"`` keys)."""
    files = trace_files(folder)
    if not files:
        raise SystemExit(f"error: no *.json / *.gz trace files in {folder}")
    total = compressed = events = 0
    for path in files:
        compressed += path.stat().st_size
        tail = b""
        with open_trace(path) as fh:
            while chunk := fh.read(8 * MIB):
                total += len(chunk)
                events += (tail + chunk).count(b'"ph"')
                tail = chunk[-3:]
    return TraceSet(label, folder, [p.name for p in files], compressed, total, events)


def copy_trace_folder(src: Path, dst: Path) -> Path:
    """Copy the trace files (contents only, so the copy is writable) into ``dst``."""
    dst.mkdir(parents=True, exist_ok=True)
    for path in trace_files(src):
        shutil.copyfile(path, dst / path.name)
    return dst


def dir_bytes(folder: Path) -> int:
    if not folder.exists():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def resolve_hta_python(arg: str | None) -> Path | None:
    """``--hta-python``, else ``$HTA_PYTHON``, else a known venv location."""
    for candidate in (arg, os.environ.get("HTA_PYTHON")):
        if candidate:
            path = Path(candidate).expanduser()
            return path if path.exists() else None
    for path in HTA_PYTHON_CANDIDATES:
        if path.exists():
            return path
    return None


def ours_env() -> dict[str, str]:
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + old if old else "")
    return env


def relabel_rank(src: Path, dst: Path, rank: int) -> None:
    """Write ``src`` to ``dst`` with ``distributedInfo.rank`` set to ``rank``.

    A byte-level edit keeps the formatting, so both files parse the same way. HTA finds
    the rank with the regex ``"rank":\\s+(\\d+)``, hence the space after the colon.
    """
    with open_trace(src) as fh:
        data = fh.read()
    block = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*\}')
    match = block.search(data)
    new_rank = b'"rank": %d' % rank
    if match:
        inner = match.group(0)
        if re.search(rb'"rank"\s*:\s*-?\d+', inner):
            inner = re.sub(rb'"rank"\s*:\s*-?\d+', new_rank, inner, count=1)
        else:
            inner = inner[:-1].rstrip() + b", " + new_rank + b"}"
        data = data[: match.start()] + inner + data[match.end() :]
    else:
        brace = data.index(b"{")
        insert = b'\n  "distributedInfo": {' + new_rank + b"},"
        data = data[: brace + 1] + insert + data[brace + 1 :]
    if dst.name.endswith(".gz"):
        with gzip.open(dst, "wb", compresslevel=6) as out:
            out.write(data)
    else:
        dst.write_bytes(data)


_SHIFTED = re.compile(rb'("(?:ts|correlation|External id|external id|id)": )(-?\d+)')


def replicate_trace(src: Path, dst: Path, times: int) -> None:
    """Write ``src``'s events ``times`` times over into ``dst`` (gzip), each copy shifted
    after the previous one in time, with its correlation, External id and flow ids offset,
    so the result is one plausible rank ``times`` as long. Kineto's layout is kept."""
    with open_trace(src) as fh:
        data = fh.read()
    start = re.search(rb'"traceEvents"\s*:\s*\[', data).end()
    end = data.rindex(b"]", start, data.rindex(b"}"))
    events = data[start:end].rstrip().rstrip(b",")
    stamps = [int(m) for m in re.findall(rb'"ts": (\d+)', events)]
    span_us = max(stamps) - min(stamps) + 1000 if stamps else 0
    id_step = 10 ** (len(str(max(map(int, re.findall(rb'"correlation": (\d+)', events)),
                                 default=0))) + 1)
    with gzip.open(dst, "wb", compresslevel=1) as out:
        out.write(data[:start])
        for k in range(times):
            def shift(m: re.Match, k: int = k) -> bytes:
                step = span_us if m.group(1) == b'"ts": ' else id_step
                value = int(m.group(2))
                return m.group(1) + str(value + k * step if value > 0 else value).encode()
            if k:
                out.write(b",")
            out.write(_SHIFTED.sub(shift, events) if k else events)
        out.write(data[end:])


def read_rank(path: Path) -> int:
    """The rank HTA would see in ``path`` (first ``"rank": N``), 0 when absent."""
    with open_trace(path) as fh:
        head = fh.read(1 * MIB)
    match = re.search(rb'"rank":\s+(\d+)', head)
    return int(match.group(1)) if match else 0


# ----------------------------------------------------------------- child running


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                kids.extend(int(x) for x in fh.read().split())
    except OSError:
        pass
    return kids


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    try:  # fall back to RSS
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError):
        return 0


class TreeSampler(threading.Thread):
    """Samples the summed PSS of a process and its live descendants from /proc."""

    def __init__(self, pid: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self.stop_event = threading.Event()
        self.available = (
            Path(f"/proc/{pid}/smaps_rollup").exists() or Path(f"/proc/{pid}/statm").exists()
        )

    def run(self) -> None:
        while not self.stop_event.is_set():
            pids, todo = [], [self.pid]
            while todo:
                pid = todo.pop()
                pids.append(pid)
                todo.extend(_children(pid))
            total = sum(_pss_kib(pid) for pid in pids)
            self.peak_kib = max(self.peak_kib, total)
            self.stop_event.wait(self.interval)


def maxrss_mib(ru_maxrss: int) -> float:
    # Linux reports KiB, macOS bytes.
    return ru_maxrss / MIB if sys.platform == "darwin" else ru_maxrss / 1024


def run_child(case: Case, timeout: float, sample_interval: float, workdir: Path) -> RunResult:
    """Run one load in a fresh process and collect its timing and memory figures."""
    if case.impl == "hta":
        cmd = [case.python, "-I", "-c", CHILD_CODE]  # -I: never pick up our hta package
        env = None
    else:
        cmd = [case.python, "-c", CHILD_CODE]
        env = ours_env()
    cmd += [str(case.load_dir), json.dumps(case.kwargs), json.dumps(case.optional_kwargs)]
    out_path, err_path = workdir / "child.stdout", workdir / "child.stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=workdir, env=env
        )
        sampler = TreeSampler(proc.pid, sample_interval) if sample_interval > 0 else None
        if sampler is not None and sampler.available:
            sampler.start()
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, rusage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        elapsed = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code  # reaped by wait4; keeps Popen from waiting again
        if sampler is not None and sampler.is_alive():
            sampler.stop_event.set()
            sampler.join()
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    payload: dict[str, Any] | None = None
    for line in stdout.splitlines():
        if line.startswith(SENTINEL):
            payload = json.loads(line[len(SENTINEL) :])
    result = RunResult(
        ok=False,
        process_s=elapsed,
        peak_rss_mib=maxrss_mib(rusage.ru_maxrss),
        peak_tree_pss_mib=(sampler.peak_kib / 1024) if sampler and sampler.peak_kib else None,
        exit_code=code,
    )
    if payload is None:
        why = "killed after --timeout" if code < 0 and elapsed >= timeout else f"exit {code}"
        tail = stderr.strip().splitlines()[-5:]
        result.error = f"no result from child ({why}): " + " | ".join(tail)
        return result
    if not payload.get("ok"):
        result.error = f"{payload.get('stage')} failed: {payload.get('error')}"
        result.info = {"traceback": payload.get("traceback")}
        return result
    result.ok = True
    result.load_s = payload["load_s"]
    result.answer_s = payload.get("answer_s")
    result.import_s = payload["import_s"]
    result.rows = payload.get("rows")
    result.info = {k: payload.get(k) for k in ("module", "version", "python", "kwargs")}
    return result


# ------------------------------------------------------------------- synthetic


def synthetic_help(python: str) -> str | None:
    proc = subprocess.run(
        [python, "-m", "hta.synthetic", "--help"],
        capture_output=True,
        text=True,
        env=ours_env(),
        cwd=REPO_ROOT,
        timeout=120,
    )
    return proc.stdout + proc.stderr if proc.returncode == 0 else None


def run_synthetic(
    python: str, out_dir: Path, help_text: str, ranks: int, steps: int, kernels: int, seed: int
) -> Path:
    """Call ``python -m hta.synthetic``, passing only the options its --help mentions."""
    cmd = [python, "-m", "hta.synthetic", str(out_dir)]
    for opt, value in (
        ("--ranks", ranks),
        ("--steps", steps),
        ("--kernels-per-step", kernels),
        ("--seed", seed),
    ):
        if opt in help_text:
            cmd += [opt, str(value)]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=ours_env(), cwd=REPO_ROOT, timeout=1800
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed ({proc.returncode}): "
            + " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        )
    if out_dir.is_dir() and trace_files(out_dir):
        return out_dir
    # Tolerate a generator that writes into one sub-folder.
    subdirs = [d for d in out_dir.rglob("*") if d.is_dir() and trace_files(d)]
    if len(subdirs) == 1:
        return subdirs[0]
    raise RuntimeError(f"{' '.join(cmd)} wrote no trace file into {out_dir}")


def generate_events(target: int, base: Path, kernels: int, seed: int) -> Path:
    """One synthetic rank of about ``target`` events; steps found by a small calibration."""
    python = sys.executable
    help_text = synthetic_help(python)
    if help_text is None:
        raise RuntimeError("`python -m hta.synthetic --help` failed: "
                           "is the hta.synthetic package there?")
    counts = {}
    for steps in (1, 3):
        folder = run_synthetic(
            python, base / f"calibrate-{steps}", help_text, 1, steps, kernels, seed
        )
        counts[steps] = measure_traces(folder, "calibration").approx_events
    per_step = (counts[3] - counts[1]) / 2
    fixed = counts[1] - per_step
    if per_step <= 0:
        per_step, fixed = counts[3] / 3, 0.0
    steps = max(1, math.ceil((target - fixed) / per_step))
    print(
        f"synthetic: ~{per_step:.0f} events/step at {kernels} kernels/step -> {steps} steps",
        flush=True,
    )
    return run_synthetic(python, base / "synthetic", help_text, 1, steps, kernels, seed)


# ------------------------------------------------------------------ reporting


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(summaries: Sequence[CaseSummary]) -> None:
    header = (
        "case",
        "trace",
        "n",
        "median s",
        "min s",
        "max s",
        "1st answer s",
        "MB/s",
        "peak RSS MiB",
        "tree PSS MiB",
        "import s",
        "process s",
        "rows",
    )
    lines = [header]
    for summary in summaries:
        fig = summary.figures()
        rows = fig.get("rows")
        lines.append(
            (
                summary.name,
                summary.trace_label,
                str(fig["n"]),
                fmt(fig.get("median_load_s"), ".3f"),
                fmt(fig.get("min_load_s"), ".3f"),
                fmt(fig.get("max_load_s"), ".3f"),
                fmt(fig.get("median_answer_s"), ".3f"),
                fmt(fig.get("mb_per_s"), ".1f"),
                fmt(fig.get("peak_rss_mib"), ".0f"),
                fmt(fig.get("peak_tree_pss_mib"), ".0f"),
                fmt(fig.get("median_import_s"), ".2f"),
                fmt(fig.get("median_process_s"), ".2f"),
                "-" if not rows else str(sum(rows.values())),
            )
        )
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    for index, row in enumerate(lines):
        cells = [
            cell.ljust(w) if i < 2 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())
        if index == 0:
            print("  ".join("-" * w for w in widths))
    for summary in summaries:
        if summary.note:
            print(f"note [{summary.name}]: {summary.note}")
        errors = sorted({r.error for r in summary.runs if r.error})
        for error in errors:
            print(f"error [{summary.name} / {summary.trace_label}]: {error}")


def print_ratios(summaries: Sequence[CaseSummary]) -> None:
    """HTA / ours per trace (time to the first breakdown, peak RSS) and cached reopen."""
    by_key = {(s.name, s.trace_label): s.figures() for s in summaries}
    print("\nratios (median time to the first temporal breakdown; peak RSS of the process tree):")
    for label in dict.fromkeys(s.trace_label for s in summaries):
        hta, ours = by_key.get(("HTA", label), {}), by_key.get(("ours", label), {})
        if hta.get("median_answer_s") and ours.get("median_answer_s"):
            print(f"  {label}: ours is {hta['median_answer_s'] / ours['median_answer_s']:.1f}x "
                  f"faster ({hta['median_answer_s']:.2f} s -> {ours['median_answer_s']:.2f} s), "
                  f"peak RSS {ours['peak_rss_mib'] / hta['peak_rss_mib']:.0%} of HTA's "
                  f"({hta['peak_rss_mib']:.0f} -> {ours['peak_rss_mib']:.0f} MiB)")
        first = by_key.get(("ours cached: 1st load", label), {})
        reload = by_key.get(("ours cached: reload", label), {})
        if ours.get("median_load_s") and reload.get("median_load_s"):
            print(f"  {label}: cached reopen {reload['median_load_s']:.3f} s is "
                  f"{ours['median_load_s'] / reload['median_load_s']:.1f}x faster than a first "
                  f"load without cache ({ours['median_load_s']:.3f} s); first load writing the "
                  f"cache {first.get('median_load_s') or 0:.3f} s")


def print_workers(summaries: Sequence[CaseSummary], workers: Sequence[int]) -> None:
    """Median load time per ``max_workers`` and the speed-up over the first."""
    if not workers:
        return
    by_key = {(s.name, s.trace_label): s.figures() for s in summaries}
    print("\nworkers (median load time; speed-up over max_workers="
          f"{workers[0]}; this machine has {os.cpu_count()} CPUs):")
    for label in dict.fromkeys(s.trace_label for s in summaries):
        base = by_key.get((f"ours w={workers[0]}", label), {}).get("median_load_s")
        for w in workers:
            med = by_key.get((f"ours w={w}", label), {}).get("median_load_s")
            if med and base:
                print(f"  {label}: max_workers={w:<3d} {med:7.3f} s  x{base / med:.2f}")


def print_scaling(summaries: Sequence[CaseSummary]) -> None:
    by_key = {(s.impl, s.trace_label): s.figures() for s in summaries}
    print(
        "\nrank scaling (median load time, 2 ranks / 1 rank; 1.0 = fully parallel, 2.0 = serial):"
    )
    for impl, label in (("hta", "HTA"), ("ours", "ours")):
        one = by_key.get((impl, "1 rank"), {}).get("median_load_s")
        two = by_key.get((impl, "2 ranks"), {}).get("median_load_s")
        if one and two:
            print(f"  {label:5s} {one:.3f} s -> {two:.3f} s  = x{two / one:.2f}")
        else:
            print(f"  {label:5s} not measured")
    print(f"  (this machine has {os.cpu_count()} CPUs)")


# ---------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "trace_dir",
        nargs="?",
        type=Path,
        default=DEFAULT_TRACE_DIR,
        help="folder of Kineto trace files (*.json, *.json.gz)",
    )
    parser.add_argument(
        "--repeat", "-n", type=int, default=3, help="timed runs per case (fresh process each)"
    )
    parser.add_argument(
        "--hta-python",
        default=None,
        help="interpreter of the HTA venv (default: $HTA_PYTHON, then "
        ".venv-hta/bin/python, then ../venv-hta/bin/python)",
    )
    parser.add_argument(
        "--cases", default="hta,ours,ours-cached", help="comma list from: hta, ours, ours-cached"
    )
    parser.add_argument(
        "--generate-events",
        type=int,
        metavar="N",
        default=None,
        help="benchmark one synthetic rank of about N events "
        "(python -m hta.synthetic) instead of trace_dir",
    )
    parser.add_argument(
        "--kernels-per-step", type=int, default=200, help="with --generate-events: kernels per step"
    )
    parser.add_argument("--seed", type=int, default=0, help="with --generate-events")
    parser.add_argument(
        "--replicate",
        type=int,
        metavar="K",
        default=0,
        help="also benchmark the first trace file's events written K times over "
        "(shifted in time, ids offset) as one rank",
    )
    parser.add_argument(
        "--ranks-parallel",
        action="store_true",
        help="compare 1 rank with 2 ranks (the first trace file plus a copy "
        "relabelled as another rank)",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds before a child is killed"
    )
    parser.add_argument(
        "--sample-interval",
        type=float,
        default=0.1,
        help="seconds between /proc samples of the tree PSS (0: off)",
    )
    parser.add_argument(
        "--tmp-dir",
        type=Path,
        default=None,
        help="where temporary copies, caches and synthetic traces go",
    )
    parser.add_argument(
        "--workers",
        default="",
        metavar="W,W,...",
        help="time our load with each max_workers=W (e.g. 1,2,4) instead of the default, "
        "and print the speed-up over the first W: how one big rank's decoding scales with "
        "cores",
    )
    parser.add_argument("--keep-tmp", action="store_true", help="do not delete the temp folder")
    parser.add_argument(
        "--json",
        type=Path,
        metavar="OUT",
        default=None,
        help="also write all runs and figures as JSON",
    )
    args = parser.parse_args(argv)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    try:
        args.workers = [int(w) for w in args.workers.split(",") if w.strip()]
    except ValueError:
        parser.error("--workers takes whole numbers separated by commas, e.g. 1,2,4")
    if any(w < 1 for w in args.workers):
        parser.error("--workers must be at least 1")
    unknown = set(args.cases) - {"hta", "ours", "ours-cached"}
    if unknown:
        parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def check_ours() -> str | None:
    """None if our ``hta.trace_analysis`` imports, else why not."""
    proc = subprocess.run(
        [sys.executable, "-c", "import hta.trace_analysis"],
        capture_output=True,
        text=True,
        env=ours_env(),
        cwd=tempfile.gettempdir(),
        timeout=300,
    )
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench_load_", dir=args.tmp_dir))
    try:
        return _main(args, tmp)
    finally:
        if args.keep_tmp:
            print(f"temporary files kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _main(args: argparse.Namespace, tmp: Path) -> int:
    # ---- which folders
    if args.generate_events is not None:
        try:
            source = generate_events(
                args.generate_events, tmp / "gen", args.kernels_per_step, args.seed
            )
        except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
            print(f"error: synthetic generation failed: {exc}", file=sys.stderr)
            return 2
        source_label = f"synthetic ~{args.generate_events} events"
    else:
        source = args.trace_dir.resolve()
        if not source.is_dir():
            print(f"error: {source} is not a folder", file=sys.stderr)
            return 2
        source_label = source.name

    if args.ranks_parallel:
        first = trace_files(source)[0]
        rank = read_rank(first)
        one, two = tmp / "ranks-1", tmp / "ranks-2"
        one.mkdir()
        two.mkdir()
        shutil.copyfile(first, one / first.name)
        shutil.copyfile(first, two / first.name)
        stem = first.name.split(".", 1)
        other = f"{stem[0]}_rank{rank + 1}.{stem[1]}" if len(stem) == 2 else first.name + "_1"
        relabel_rank(first, two / other, rank + 1)
        trace_sets = [measure_traces(one, "1 rank"), measure_traces(two, "2 ranks")]
    else:
        trace_sets = [measure_traces(source, source_label)]
    if args.replicate > 1:
        first = trace_files(source)[0]
        folder = tmp / f"x{args.replicate}"
        folder.mkdir()
        name = first.name if first.name.endswith(".gz") else first.name + ".gz"
        print(f"writing {first.name} {args.replicate} times over ...", flush=True)
        # In a child process: a parent that held the text would pass its resident size on
        # to every child it forks (ru_maxrss counts memory from before exec).
        subprocess.run([sys.executable, __file__, "--write-replica", str(first),
                        str(folder / name), str(args.replicate)], check=True, timeout=1800)
        trace_sets.append(measure_traces(folder, f"{source_label} x{args.replicate}"))

    # ---- interpreters
    hta_python = resolve_hta_python(args.hta_python)
    cases_wanted = list(args.cases)
    if "hta" in cases_wanted and hta_python is None:
        print(
            "note: HTA skipped: no interpreter found "
            f"(tried {args.hta_python or os.environ.get('HTA_PYTHON') or 'the default venvs'}; "
            "set --hta-python or $HTA_PYTHON, see benchmarks/README.md)"
        )
        cases_wanted.remove("hta")
    ours_problem = None
    if any(c.startswith("ours") for c in cases_wanted):
        ours_problem = check_ours()
        if ours_problem:
            print(f"note: our loader skipped: `import hta.trace_analysis` fails: {ours_problem}")
            cases_wanted = [c for c in cases_wanted if not c.startswith("ours")]
    if args.ranks_parallel and "ours-cached" in cases_wanted:
        cases_wanted.remove("ours-cached")  # the comparison is about cold parsing

    print(
        f"python {platform.python_version()} ({sys.executable}), {os.cpu_count()} CPUs, "
        f"HTA interpreter: {hta_python or 'none'}"
    )
    for ts in trace_sets:
        print(
            f"traces [{ts.label}]: {ts.path} - {len(ts.files)} file(s), "
            f"{ts.compressed_bytes / MB:.1f} MB on disk, {ts.uncompressed_bytes / MB:.1f} MB "
            f"uncompressed JSON, ~{ts.approx_events} events"
        )
    print(flush=True)

    # ---- build the cases
    cases: list[Case] = []
    for ts in trace_sets:
        if "hta" in cases_wanted and hta_python is not None:
            cases.append(Case("HTA", "hta", str(hta_python), ts, ts.path, {}, repeat=args.repeat))
        if "ours" in cases_wanted and args.workers:
            cases.extend(
                Case(f"ours w={w}", "ours", sys.executable, ts, ts.path,
                     {"cache": False, "progress": False, "max_workers": w}, repeat=args.repeat)
                for w in args.workers
            )
        elif "ours" in cases_wanted:
            cases.append(
                Case(
                    "ours",
                    "ours",
                    sys.executable,
                    ts,
                    ts.path,
                    {"cache": False, "progress": False},
                    repeat=args.repeat,
                )
            )
    summaries = {
        id(c): CaseSummary(
            c.name, c.impl, c.traces.label, str(c.traces.path), c.traces.uncompressed_bytes / MB, []
        )
        for c in cases
    }

    # ---- cached: warm once in a writable copy, then time the reloads
    cached_case: Case | None = None
    cached_first: CaseSummary | None = None
    if "ours-cached" in cases_wanted:
        ts = trace_sets[0]
        copy_dir = copy_trace_folder(ts.path, tmp / "cached" / "traces")
        cache_dir = tmp / "cached" / "cache"
        cache_dir.mkdir()
        before = dir_bytes(copy_dir)
        warm = Case(
            "ours cached: 1st load",
            "ours",
            sys.executable,
            ts,
            copy_dir,
            {"progress": False},
            {"cache_dir": str(cache_dir)},
            repeat=1,
        )
        print("warming the cache ...", flush=True)
        work = tmp / "work"
        work.mkdir(exist_ok=True)
        first = run_child(warm, args.timeout, args.sample_interval, work)
        written = dir_bytes(copy_dir) - before + dir_bytes(cache_dir)
        note = None
        if first.ok:
            used = "cache_dir" in (first.info.get("kwargs") or [])
            where = "the temp cache_dir" if used else "the temp copy of the folder"
            note = f"cache on disk after 1st load: {written / MB:.1f} MB ({where})"
            if written == 0:
                note += " - no cache file found: reloads may not be cache hits"
        cached_first = CaseSummary(
            warm.name, "ours", ts.label, str(copy_dir), ts.uncompressed_bytes / MB, [first], note
        )
        if first.ok:
            cached_case = Case(
                "ours cached: reload",
                "ours",
                sys.executable,
                ts,
                copy_dir,
                {"progress": False},
                {"cache_dir": str(cache_dir)},
                repeat=args.repeat,
            )
            summaries[id(cached_case)] = CaseSummary(
                cached_case.name, "ours", ts.label, str(copy_dir), ts.uncompressed_bytes / MB, []
            )
            cases.append(cached_case)

    # ---- run, interleaving the cases so slow drift hits all of them alike
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    for i in range(args.repeat):
        for case in cases:
            print(
                f"[{i + 1}/{args.repeat}] {case.name} ({case.traces.label}) ...",
                end=" ",
                flush=True,
            )
            result = run_child(case, args.timeout, args.sample_interval, work)
            summaries[id(case)].runs.append(result)
            if result.ok:
                print(f"{result.load_s:.3f} s, peak RSS {result.peak_rss_mib:.0f} MiB", flush=True)
            else:
                print(f"FAILED: {result.error}", flush=True)

    ordered = [summaries[id(c)] for c in cases if c is not cached_case]
    if cached_first is not None:
        ordered.append(cached_first)
    if cached_case is not None:
        ordered.append(summaries[id(cached_case)])
    print()
    if ordered:
        print_table(ordered)
    else:
        print("nothing was benchmarked")
    if ours_problem:
        print(f"note: our loader was not benchmarked (import failed: {ours_problem})")
    if args.ranks_parallel:
        print_scaling(ordered)
    print_workers(ordered, args.workers)
    print_ratios(ordered)

    if args.json is not None:
        report = {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "hta_python": str(hta_python) if hta_python else None,
            "ours_import_error": ours_problem,
            "traces": [{**asdict(ts), "path": str(ts.path)} for ts in trace_sets],
            "cases": [
                {
                    "name": s.name,
                    "impl": s.impl,
                    "trace": s.trace_label,
                    "trace_dir": s.trace_dir,
                    "uncompressed_mb": s.uncompressed_mb,
                    "note": s.note,
                    "figures": s.figures(),
                    "runs": [asdict(r) for r in s.runs],
                }
                for s in ordered
            ],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write-replica"]:
        replicate_trace(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
        sys.exit(0)
    sys.exit(main())
