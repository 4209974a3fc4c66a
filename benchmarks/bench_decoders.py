"""Benchmark: orjson (dicts) against msgspec (typed structs) for decoding Kineto traces.

Both paths produce the same thing, the core columns of the complete events (ts, dur,
name, cat, pid, tid, correlation, External id), from the same decompressed bytes:

* ``orjson``: ``orjson.loads`` into dicts, then one list per column from the dicts;
* ``msgspec-typed``: ``msgspec.json.decode`` straight into ``hta.loading.structs.Event``
  (unknown keys are skipped without being allocated), then one list per column.

Run: ``python benchmarks/bench_decoders.py [TRACE_FILE ...] [-n 5]``. Prints the median
seconds, MB/s of uncompressed JSON and the peak RSS growth of each path. It is a
benchmark, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from hta.loading.structs import Event

DEFAULT = Path(__file__).resolve().parents[2] / "shared/traces/hta/df_index_resolver"


def _columns_orjson(data: bytes) -> int:
    import orjson

    events = orjson.loads(data)["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X"]
    cols = [[e.get(k) for e in xs] for k in ("ts", "dur", "name", "cat", "pid", "tid")]
    args = [e.get("args") or {} for e in xs]
    cols += [[a.get(k, -1) for a in args] for k in ("correlation", "External id")]
    return len(cols[0])


class _Trace(msgspec.Struct):
    traceEvents: list[Event] = []  # noqa: N815 - the JSON key


def _columns_msgspec(data: bytes) -> int:
    events = msgspec.json.decode(data, type=_Trace).traceEvents
    xs = [e for e in events if e.ph == "X"]
    cols = [[getattr(e, k) for e in xs] for k in ("ts", "dur", "name", "cat", "pid", "tid")]
    args = [e.args for e in xs]
    cols += [[a.correlation for a in args], [a.external_id for a in args]]
    return len(cols[0])


PATHS = {"orjson": _columns_orjson, "msgspec-typed": _columns_msgspec}


def _child(method: str, path: str) -> None:
    from hta.loading.decode import read_bytes

    data = read_bytes(Path(path))
    gc.disable()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    rows = PATHS[method](data)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{elapsed} {len(data)} {(peak - before) / 1024:.0f} {rows}")


def main(argv: list[str] | None = None) -> int:
    """Run each method in fresh processes and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path, default=None)
    parser.add_argument("-n", "--repeat", type=int, default=5)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    files = args.traces or sorted(DEFAULT.glob("*.json*"))
    print(f"{'file':40} {'method':14} {'median s':>9} {'MB/s':>7} {'+RSS MiB':>9} {'rows':>8}")
    for path in files:
        for method in PATHS:
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", method, str(path)],
                    check=True, capture_output=True, text=True,
                ).stdout.split()
                runs.append(out)
            secs = statistics.median(float(r[0]) for r in runs)
            size = int(runs[0][1])
            rss = statistics.median(float(r[2]) for r in runs)
            print(f"{path.name[:40]:40} {method:14} {secs:9.3f} {size / secs / 1e6:7.1f} "
                  f"{rss:9.0f} {runs[0][3]:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
