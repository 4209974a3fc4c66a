"""``import hta.trace_analysis`` stays light: the analyses, the loader and the exporters are
imported when first used, and the names HTA users import from there still resolve."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT
from kineto_builder import TraceBuilder

#: Modules a bare ``import hta.trace_analysis`` must not import (each costs 10-70 ms).
HEAVY = ("hta.analysis.findings", "hta.analysis.critical_path", "hta.analysis.perf",
         "hta.analysis.summary", "hta.analysis.collectives", "hta.job.load",
         "hta.kineto.decode", "hta.export.counters_trace", "hta.plots", "plotly",
         "ctypes.util")


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_the_facade_import_leaves_the_heavy_modules_out() -> None:
    code = ("import sys, hta.trace_analysis\n"
            f"print(sorted(m for m in sys.modules if m.startswith({HEAVY!r})))")
    assert _run(code) == "[]"


def test_names_imported_from_the_facade_still_resolve() -> None:
    code = ("from hta.trace_analysis import (TimeSeriesTypes, UNCLASSIFIED_COLUMNS, Job,\n"
            "    RankTrace, Executor, sorted_unclassified, unclassified_kernels, Rule)\n"
            "import hta.trace_analysis as ta\n"
            "from hta.export.counters_trace import TimeSeriesTypes as T\n"
            "print(TimeSeriesTypes is T, ta.RankTrace.__name__, callable(unclassified_kernels))\n"
            "try:\n    ta.no_such_name\nexcept AttributeError as e:\n    print('missing')\n")
    assert _run(code).splitlines() == ["True RankTrace True", "missing"]


def test_loading_and_analysing_import_what_they_need(tmp_path: Path) -> None:
    """In a fresh process, the lazy imports are found when a trace is loaded and analysed:
    one rank with one 50 µs kernel after a 20 µs launch."""
    b = TraceBuilder()
    b.launch_kernel("sm80_xmma_gemm_f16", cpu_ts=1_000_000, cpu_dur=20_000,
                    gpu_ts=1_030_000, gpu_dur=50_000)
    path = b.write(tmp_path / "rank0.json")
    code = ("from hta.trace_analysis import TraceAnalysis\n"
            f"ta = TraceAnalysis(trace_dir={str(path.parent)!r}, cache=False, progress=False,"
            " max_workers=1)\n"
            "s = ta.get_rank_summary()\n"
            "print(len(s), list(ta.get_findings().columns)[:1],"
            " len(ta.get_unclassified_kernels()))")
    assert _run(code) == "1 ['rule'] 0"


#: Modules a small job loaded in this process must not import: the process pool (with
#: multiprocessing), the job whose ranks stay out of memory, and the protobuf converter's
#: JSON library (a few ms each, paid inside ``TraceAnalysis(...)``).
NOT_FOR_A_SMALL_LOAD = ("concurrent.futures.process", "multiprocessing", "hta.job.distributed",
                        "orjson")


def test_a_small_job_loads_without_the_process_pool(tmp_path: Path) -> None:
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2)
        b.launch_kernel("sm80_xmma_gemm_f16", cpu_ts=1_000_000, cpu_dur=20_000,
                        gpu_ts=1_030_000, gpu_dur=50_000)
        b.write(tmp_path / f"rank{rank}.json")
    code = ("import sys\n"
            "from hta.trace_analysis import TraceAnalysis\n"
            f"ta = TraceAnalysis(trace_dir={str(tmp_path)!r}, cache=False, progress=False)\n"
            f"print(ta.ranks, sorted(m for m in sys.modules if m.startswith("
            f"{NOT_FOR_A_SMALL_LOAD!r})))")
    assert _run(code) == "[0, 1] []"
