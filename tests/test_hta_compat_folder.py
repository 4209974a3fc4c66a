"""A folder our exports wrote into loads again with the same ranks."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import SHARED_TRACES, needs_shared

from hta.kineto.discovery import discover, drop_exports
from hta.trace_analysis import TraceAnalysis

SHARED = SHARED_TRACES / "trace_filter"


def test_drop_exports_leaves_out_files_written_from_a_neighbour() -> None:
    files = [Path(n) for n in ("a.json.gz", "a_with_counters.json.gz", "overlaid_a.json.gz",
                               "overlaid_critical_path_a.json.gz", "b_with_counters.json")]
    kept = [p.name for p in drop_exports(files)]
    # b_with_counters.json has no source b.json beside it: it is the trace there
    assert kept == ["a.json.gz", "b_with_counters.json"]


@needs_shared("trace_filter")
def test_folder_with_counters_written_loads_again(tmp_path: Path) -> None:
    for f in SHARED.iterdir():
        shutil.copy(f, tmp_path / f.name)
    analyzer = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    written = analyzer.generate_trace_with_counters()
    assert sorted(written) == [0, 1]
    assert all(Path(p).parent == tmp_path for p in written.values())
    files, _ = discover(tmp_path)
    assert sorted(p.name for p in files) == sorted(f.name for f in SHARED.iterdir())
    again = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    assert again.ranks == [0, 1]
    assert len(again.t.get_trace(0)) == len(analyzer.t.get_trace(0))
