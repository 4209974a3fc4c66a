#!/usr/bin/env python3
"""GPU timeline benchmark: segments + figure on a large rank, and the figure's HTML size.

Two inputs, each timed apart from its loading:

* ``job``: a synthetic job from ``python -m hta.synthetic`` (one rank of
  ``--events-per-rank`` trace events, 1 000 000 by default; reused from ``--tmp-dir``), or
  ``--trace-dir DIR``;
* ``gpu-dense``: a rank built in memory with ``--gpu-events`` GPU events (1 000 000) on
  four streams, so that every event is GPU work (the synthetic trace's are mostly CPU
  operators and launches).

For each: the median wall time of ``timeline_segments`` (``--max-segments`` per rank,
20 000 by default) and of ``timeline_figure`` over ``--repeat`` runs, the segment count and
merge resolution, and the HTML size of the figure (without plotly.js, which a page embeds
once: about 4.6 MB). ``--chromium`` also opens each figure in headless Chromium and
reports the time plotly.js takes to draw it and to redraw it zoomed in. A benchmark: it
reports, it never asserts.

    python benchmarks/bench_timeline.py --tmp-dir /tmp/bench-timeline
    python benchmarks/bench_timeline.py --trace-dir ../shared/traces/hta/trace_filter --chromium
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from timing import timed  # noqa: E402

from hta.analysis.timeline import timeline_segments  # noqa: E402
from hta.model.rules import GPU_WORK_KINDS, KINDS  # noqa: E402
from hta.model.trace import RankTrace, Trace  # noqa: E402
from hta.plots.timeline import timeline_figure  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402

HARNESS = """<html><head><meta charset="utf-8"><script>{js}</script></head><body>
<div id=g style="width:1400px"></div><pre id=out></pre><script>
var fig = {fig}; var t0 = performance.now();
Plotly.newPlot('g', fig.data, fig.layout).then(function() {{
  var t1 = performance.now(); var r = fig.layout.xaxis.range;
  return Plotly.relayout('g', {{'xaxis.range': [r[0], r[0] + (r[1] - r[0]) / 10]}}).then(
    function() {{ var t2 = performance.now();
      document.getElementById('out').textContent =
        'RESULT ' + (t1 - t0).toFixed(0) + ' ' + (t2 - t1).toFixed(0); }});
}});
</script></body></html>"""


def synthetic_job(out: Path, events: int) -> Path:
    """One synthetic rank in ``out`` (reused when present)."""
    if not list(out.glob("rank-*.json*")):
        subprocess.run([sys.executable, "-m", "hta.synthetic", str(out), "--ranks", "1",
                        "--events-per-rank", str(events)], check=True, cwd=REPO_ROOT)
    return out


def gpu_dense_rank(n: int, streams: int = 4, seed: int = 0) -> Trace:
    """``n`` GPU events, back to back with random gaps, mostly kernels, on ``streams``."""
    rng = np.random.default_rng(seed)
    stream = rng.integers(0, streams, n)
    dur = rng.integers(1_000, 30_000, n)
    gap = rng.choice([100, 1_000, 5_000, 500_000], n, p=[0.6, 0.3, 0.099, 0.001])
    kinds = rng.choice(["computation", "communication", "memset", "memcpy_htod"], n,
                       p=[0.9, 0.05, 0.03, 0.02])
    ts = np.empty(n, dtype=np.int64)
    for s in range(streams):
        sel = stream == s
        ts[sel] = 1_700_000_000_000_000_000 + np.cumsum(dur[sel] + gap[sel]) - dur[sel]
    order = np.argsort(ts, kind="stable")
    events = pd.DataFrame({
        "index": np.arange(n), "ts": ts[order], "dur": dur[order],
        "end": ts[order] + dur[order], "cat": np.zeros(n, np.int32),
        "name": rng.integers(0, 50, n).astype(np.int32), "stream": stream[order] + 7,
        "iteration": np.arange(n) * 20 // n,
        "kind": pd.Categorical(kinds[order], categories=list(KINDS)),
    })
    symbols = [f"void kernel_{i}<float, 128>(float*, int)" for i in range(50)]
    return Trace({0: RankTrace(rank=0, events=events, symbols=symbols, tables={}, meta={})})


def browser_times(fig: Any, tmp: Path) -> tuple[int, int] | None:
    """Milliseconds plotly.js takes to draw the figure and to redraw it zoomed, or None."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return None
    import plotly

    page = tmp / "timeline_harness.html"
    page.write_text(HARNESS.format(js=plotly.offline.get_plotlyjs(), fig=fig.to_json()),
                    encoding="utf-8")
    out = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update",
         "--virtual-time-budget=60000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=300).stdout
    found = re.search(r"RESULT (\d+) (\d+)", out)
    return (int(found.group(1)), int(found.group(2))) if found else None


def bench(label: str, trace: Trace, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    gpu = sum(int(rt.events["kind"].astype(str).isin(GPU_WORK_KINDS).sum()) for rt in trace)
    seg_s, segments = timed(lambda: timeline_segments(trace, max_segments=args.max_segments),
                            args.repeat)
    fig_s, fig = timed(lambda: timeline_figure(segments), args.repeat)
    html = fig.to_html(include_plotlyjs=False, full_html=False)
    row = {
        "input": label, "events": sum(len(rt.events) for rt in trace), "gpu_events": gpu,
        "segments": len(segments), "resolution_ns": int(segments["resolution_ns"].max()),
        "segments_s": round(seg_s, 4), "figure_s": round(fig_s, 4),
        "html_mb": round(len(html.encode()) / 1e6, 2),
    }
    if args.chromium:
        times = browser_times(fig, tmp)
        row["browser_draw_ms"], row["browser_zoom_ms"] = times if times else (None, None)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace-dir", type=Path, help="benchmark this folder")
    parser.add_argument("--tmp-dir", type=Path, help="keep generated traces here")
    parser.add_argument("--events-per-rank", type=int, default=1_000_000)
    parser.add_argument("--gpu-events", type=int, default=1_000_000)
    parser.add_argument("--max-segments", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chromium", action="store_true",
                        help="also time plotly.js drawing in headless Chromium")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.tmp_dir or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        folder = args.trace_dir or synthetic_job(tmp / "job", args.events_per_rank)
        t = time.perf_counter()
        analyzer = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
        print(f"loaded {folder} in {time.perf_counter() - t:.2f} s (not counted below)")
        rows = [bench("job", analyzer.t, args, tmp)]
        if args.gpu_events:
            rows.append(bench("gpu-dense", gpu_dense_rank(args.gpu_events), args, tmp))
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
