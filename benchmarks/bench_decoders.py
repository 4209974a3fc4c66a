"""Benchmark: the candidate ways of turning a Kineto trace's bytes into columns.

All start from the same decompressed bytes. The first three produce only the core columns
of the complete events (ts, dur, name, cat, pid, tid, correlation, External id) as lists
or Arrow arrays; the last two are the loader's own column builders and produce everything
it keeps (typed NumPy columns, symbol ids, exact ns times, the side tables):

* ``orjson``: ``orjson.loads`` into dicts, then one list per column from the dicts;
* ``msgspec-typed``: ``msgspec.json.decode`` straight into ``hta.kineto.structs.Event``
  (unknown keys are skipped without being allocated), then one list per column;
* ``pyarrow-json``: Arrow's JSON reader fed newline-delimited events (the text rewritten
  first) with an explicit schema; ``ts`` as float64 (not exact), pid/tid left out (their
  type varies within a trace, which the reader rejects);
* ``python-decoder``: the loader's pure-Python decoder (msgspec structs, then columns);
* ``native``: the loader's C scanner (``hta.kineto._scan``) and ``native.py``.

Run: ``python benchmarks/bench_decoders.py [TRACE_FILE ...] [-n 5]``. Prints the median
seconds, MB/s of uncompressed JSON and the peak RSS growth of each path. It is a
benchmark, not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from hta.kineto.structs import Event

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


def _columns_pyarrow(data: bytes) -> int:
    import pyarrow as pa
    import pyarrow.json as pj

    start = re.search(rb'"traceEvents"\s*:\s*\[', data).end()
    ndjson = data[start:data.rindex(b"]")].replace(b"\n", b" ").replace(b"},   {", b"}\n{")
    ids = pa.struct([("correlation", pa.int64()), ("External id", pa.int64())])
    schema = pa.schema([("ph", pa.string()), ("cat", pa.string()), ("name", pa.string()),
                        ("ts", pa.float64()), ("dur", pa.float64()), ("args", ids)])
    table = pj.read_json(
        pa.BufferReader(ndjson),
        parse_options=pj.ParseOptions(explicit_schema=schema,
                                      unexpected_field_behavior="ignore"),
        read_options=pj.ReadOptions(block_size=1 << 24, use_threads=False))
    return table.num_rows


def _loader_columns(data: bytes, use_native: bool) -> int:
    """The loader's column builder over pieces of whole events, as the streaming reader
    cuts them (cutting included in the time)."""
    from hta.kineto.pydecode import Accumulator
    from hta.kineto.stream import BOUNDARY, TARGET_CHUNK

    os.environ["HTA_NATIVE"] = "1" if use_native else "0"
    start = re.search(rb'"traceEvents"\s*:\s*\[', data).end()
    end = data.rindex(b"]")
    acc = Accumulator()
    view = memoryview(data)
    while start < end:
        cut = data.find(BOUNDARY, start + TARGET_CHUNK, end)
        cut = end if cut < 0 else cut
        stop = cut
        while data[stop - 1] in b" \n,":
            stop -= 1
        if use_native:
            acc.decode_bare(view[start:stop])
        else:
            acc.decode_chunk(b"[" + data[start:stop] + b"]")
        start = cut
    return len(acc.partial().columns["ts"])


PATHS = {"orjson": _columns_orjson, "msgspec-typed": _columns_msgspec,
         "pyarrow-json": _columns_pyarrow,
         "python-decoder": lambda data: _loader_columns(data, False),
         "native": lambda data: _loader_columns(data, True)}


def _child(method: str, path: str) -> None:
    from hta.kineto.rawio import read_bytes

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
    parser.add_argument("--methods", default=",".join(PATHS),
                        help=f"comma list from: {', '.join(PATHS)}")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    files = args.traces or sorted(DEFAULT.glob("*.json*"))
    print(f"{'file':40} {'method':14} {'median s':>9} {'MB/s':>7} {'+RSS MiB':>9} {'rows':>8}")
    for path in files:
        for method in args.methods.split(","):
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
