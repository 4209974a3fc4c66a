"""``--scheduler ADDRESS`` / ``--scheduler-file PATH``: run a command on a Dask cluster.

The cluster's workers load the ranks (reading the trace files themselves, so the folder
must be reachable from them: shared storage or an fsspec URL such as ``s3://...``), keep
them, and compute the per-rank figures next to them. Needs ``pip install 'hta[dask]'``.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import sys
from typing import TYPE_CHECKING, Any

from hta.commands.args_and_output import CommandError, parse_ranks
from hta.commands.args_and_output import load as load_locally

if TYPE_CHECKING:
    from hta.trace_analysis import TraceAnalysis

#: Seconds to wait for the scheduler before giving up.
CONNECT_TIMEOUT_S = 20
_clients: list[Any] = []


def add_cluster_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--scheduler`` and ``--scheduler-file`` (mutually exclusive)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--scheduler", metavar="ADDRESS",
        help="run on the Dask cluster of this scheduler, e.g. tcp://host:8786; its workers "
             "must reach DIR (pip install 'hta[dask]')")
    group.add_argument(
        "--scheduler-file", metavar="PATH",
        help="run on the Dask cluster described by this scheduler file "
             "(dask scheduler --scheduler-file PATH)")


def client_from_args(args: argparse.Namespace) -> Any | None:
    """A ``distributed.Client`` for ``--scheduler``/``--scheduler-file``; ``None`` without
    either. Errors are :class:`~hta.commands.args_and_output.CommandError` sentences."""
    address = getattr(args, "scheduler", None)
    scheduler_file = getattr(args, "scheduler_file", None)
    if not address and not scheduler_file:
        return None
    option = "--scheduler" if address else "--scheduler-file"
    try:
        from distributed import Client
    except ImportError:
        raise CommandError(f"{option} needs Dask: pip install 'hta[dask]'") from None
    where = address or scheduler_file
    try:
        if address:
            client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        else:
            client = Client(scheduler_file=scheduler_file, timeout=CONNECT_TIMEOUT_S,
                            set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise CommandError(
            f"cannot reach the Dask scheduler at {where} ({exc}); check the address, or "
            "start one with `dask scheduler` and workers with `dask worker ADDRESS`"
        ) from exc
    _clients.append(client)
    return client


def load(args: argparse.Namespace, trace_dir: str | None = None) -> TraceAnalysis:
    """:func:`hta.commands.args_and_output.load`, on the Dask cluster when the options name one."""
    client = client_from_args(args)
    if client is None:
        return load_locally(args, trace_dir)
    from hta.trace_analysis import TraceAnalysis

    return TraceAnalysis(
        trace_dir=trace_dir or args.trace_dir, ranks=parse_ranks(getattr(args, "ranks", None)),
        cache=not args.no_cache, strict=args.strict,
        progress=not args.quiet and sys.stderr.isatty(), client=client,
    )


@atexit.register
def close_clients() -> None:
    """Close the clients this module opened."""
    while _clients:
        client = _clients.pop()
        with contextlib.suppress(Exception):  # closing at exit must never raise
            client.close()
