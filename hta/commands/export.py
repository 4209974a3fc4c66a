"""``hta export DIR -o OUT``: the loaded tables as Parquet files, names as text.

For each rank, a folder ``OUT/rank-<r>/`` with:

* ``events.parquet``: the events table (one row per complete event, every column of
  :class:`hta.model.trace.RankTrace` ``events``) with ``name`` and ``cat`` as text and
  ``kind`` as a dictionary-encoded string; timestamps stay int64 ns;
* one ``<table>.parquet`` per side table (``kernel_args``, ``memory_args``,
  ``collective_args``, ``op_args``, ``sync_args``, ``instants``, ``flows``, ``counters``,
  ``metadata_events``), symbol-id columns decoded as text; ``index`` is the row of the
  event in ``events.parquet``;
* ``meta.json``: the rank's metadata (device properties, process groups, ...).

Read them back with ``pandas.read_parquet`` (or any Parquet reader).

``--format perfetto`` writes instead the whole job as one Perfetto protobuf trace at
``OUT`` (a file): see :mod:`hta.export.perfetto_job`.
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import Any

from hta.commands.args_and_output import (
    EXIT_OK,
    CommandError,
    add_load_options,
    check_output_place,
    check_writable,
    create_output_folder,
    finite,
    load,
    report_skipped,
    write_atomically,
)
from hta.commands.missing_ranks import report_missing_ranks


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        "export", help="write the events and side tables as Parquet, names decoded",
        description="Load every rank in DIR and write, per rank, OUT/rank-<r>/events.parquet "
                    "(names as text, times in int64 ns), one Parquet file per side table "
                    "(kernel args, memory args, collectives, operator args, instants, flows, "
                    "counters ...) and meta.json.",
    )
    p.add_argument("trace_dir", metavar="DIR", help="folder of trace files, or one file")
    p.add_argument("-o", "--output", metavar="OUT", required=True,
                   help="folder to write into (created if missing); with --format "
                        "perfetto, the file to write (e.g. job.pftrace)")
    p.add_argument("--format", choices=("parquet", "perfetto"), default="parquet",
                   help="parquet (default): tables per rank; perfetto: every rank on one "
                        "Perfetto timeline (protobuf; needs pip install perfetto)")
    p.add_argument("--no-findings", action="store_true",
                   help="perfetto: leave the findings' slices out")
    p.add_argument("--raw-clocks", action="store_true",
                   help="perfetto: keep each rank's own clock (no offset from the "
                        "collectives applied)")
    p.add_argument("-f", "--force", action="store_true", help="overwrite existing outputs")
    add_load_options(p)
    p.set_defaults(func=run)


def decoded_tables(rt: Any) -> dict[str, Any]:
    """The rank's events and side tables with symbol ids replaced by their text."""
    import numpy as np

    from hta.model.trace import SYMBOL_TABLE_COLUMNS

    sym = np.asarray(list(rt.symbols) + [""], dtype=object)

    def text(ids: Any) -> Any:
        values = ids.to_numpy(dtype=np.int64)
        values = np.where((values >= 0) & (values < len(sym) - 1), values, len(sym) - 1)
        return sym[values]

    events = rt.events.copy()
    for col in ("name", "cat"):
        events[col] = text(events[col])
    events["kind"] = events["kind"].astype(str).astype("category")
    out = {"events": events}
    for name, frame in rt.tables.items():
        frame = frame.copy()
        for col in SYMBOL_TABLE_COLUMNS.get(name, ()):
            if col in frame and len(frame):
                frame[col] = text(frame[col])
        out[name] = frame
    return out


def run(args: argparse.Namespace) -> int:
    """Load the job and write the Parquet files (or the Perfetto trace)."""
    if getattr(args, "format", "parquet") == "perfetto":
        return run_perfetto(args)
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise CommandError(f"{out} is a file; -o takes a folder")
    create = check_output_place(out, folder=True)
    analyzer = load(args)
    planned = {rt.rank: out / f"rank-{rt.rank}" for rt in analyzer.t}
    existing = [p / "events.parquet" for p in planned.values()]
    check_writable(existing, args.force)
    if create:
        create_output_folder(out)
    for rt in analyzer.t:
        folder = planned[rt.rank]
        folder.mkdir(parents=True, exist_ok=True)
        tables = decoded_tables(rt)
        for name, frame in tables.items():
            write_atomically(folder / f"{name}.parquet", functools.partial(_write_parquet, frame))
        meta = {k: v for k, v in rt.meta.items()}
        text = json.dumps(finite(meta), indent=1, default=_json_value) + "\n"
        write_atomically(folder / "meta.json", functools.partial(_write_text, text))
        print(f"Wrote {folder}/ (events.parquet: {len(tables['events']):,} rows, "
              f"{len(tables) - 1} side tables, meta.json)")
    report_skipped(analyzer)
    report_missing_ranks(analyzer, quiet=args.quiet)
    return EXIT_OK


def _write_parquet(frame: Any, tmp: Path) -> None:
    """A table written to ``tmp`` as Parquet (:func:`write_atomically`'s writer)."""
    frame.to_parquet(tmp, index=False)


def _write_text(text: str, tmp: Path) -> None:
    tmp.write_text(text, encoding="utf-8")


def run_perfetto(args: argparse.Namespace) -> int:
    """``--format perfetto``: the selected ranks as one Perfetto protobuf trace."""
    import time

    from hta.export.perfetto_job import protos

    out = Path(args.output)
    if out.is_dir():
        raise CommandError(f"{out} is a folder; --format perfetto writes a file "
                           "(e.g. -o job.pftrace)")
    check_output_place(out)
    check_writable([out], args.force)
    try:
        protos()
    except ImportError as exc:
        raise CommandError(str(exc)) from None
    analyzer = load(args)
    started = time.perf_counter()
    stats = analyzer.write_perfetto_job(out, findings=not args.no_findings,
                                        align_clocks=not args.raw_clocks)
    shifted = analyzer.clock_shifts(not args.raw_clocks)
    clocks = (f"; clocks aligned on {len(shifted)} rank(s) (hta: get_clock_offsets)"
              if shifted else "")
    print(f"Wrote {out} ({stats.bytes / 1e6:,.1f} MB, {len(stats.ranks)} ranks, "
          f"{stats.slices:,} slices, {stats.flows:,} flows, {stats.finding_slices:,} "
          f"finding slices, {time.perf_counter() - started:,.1f} s{clocks})")
    report_skipped(analyzer)
    report_missing_ranks(analyzer, quiet=args.quiet)
    return EXIT_OK


def _json_value(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


__all__ = ["add_parser", "decoded_tables", "run", "run_perfetto"]
