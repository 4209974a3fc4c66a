"""Which rank a trace file is: the one place that says it (the loader, the discovery's
early look at a file's head and the docs all follow these rules).

The first rule that gives a rank wins:

1. the rank the caller gave (``trace_files={rank: path}``);
2. ``distributedInfo.rank`` in the file, when it is a whole number from 0 below
   :data:`MAX_WORLD_SIZE` (an integer, a quoted integer such as ``"3"``, or ``3.0``);
3. the file name: ``rank`` or ``worker``, an optional ``-`` or ``_``, then digits, at the
   start of the name or after a character that is not a letter or digit, in any case
   (``rank-3.json``, ``train_rank_3.pt.trace.json.gz``, ``worker3.json``);
4. a lone file (the only file loaded) is rank 0;
5. otherwise the file has no rank: :class:`~hta.errors.TraceLoadError`.

A ``distributedInfo.rank`` that is not a rank (``-1``, ``1.5``, text, ``2**70``) is not
used, with a warning; a rank at or above a ``world_size`` over 1 is kept, with a warning
(a world size of 1 is what tools that are not distributed write, whatever the rank).
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hta.errors import TraceLoadError

if TYPE_CHECKING:
    from hta.kineto.files import RemotePath

#: Largest ``distributedInfo.world_size`` taken as one (larger: ignored, with a warning);
#: a ``distributedInfo.rank`` must be below it. Jobs have at most some hundred thousand
#: ranks.
MAX_WORLD_SIZE = 1 << 20

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])(?:rank|worker)[-_]?(\d+)(?![0-9])", re.IGNORECASE)
_NO_RANK = ("no rank found: the trace has no distributedInfo.rank and the file name has no "
            "rank-N / rank_N / workerN")
_HINT = "rename the file or pass trace_files={rank: path}"
_CLI_HINT = "rename the file to rank-N.json (N its rank)"


def rank_from_filename(path: str | Path | RemotePath) -> int | None:
    """The rank written in a file name (``rank-3``, ``rank_3``, ``rank3``, ``worker3``;
    rule 3), else None."""
    name = Path(path).name if isinstance(path, (str, Path)) else path.name
    match = _RANK_IN_NAME.search(name)
    return int(match.group(1)) if match else None


def whole_number(value: Any) -> int | None:
    """``value`` as an integer when it is one (``3``, ``"3"``, ``3.0``), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def is_rank(value: int | None) -> bool:
    """Whether ``value`` may be a rank: a whole number from 0 below :data:`MAX_WORLD_SIZE`."""
    return value is not None and 0 <= value < MAX_WORLD_SIZE


def file_rank(path: str | Path | RemotePath, top_level: dict[str, Any], *, given: int = -1,
              lone_file: bool = False) -> tuple[int, list[str]]:
    """The rank of a decoded file (its ``top_level``: every key but ``traceEvents``), by
    the rules of this module, and the warnings its ``distributedInfo`` calls for.

    ``given``: the rank the caller fixed (-1: none); ``lone_file``: it is the only file
    loaded. Raises :class:`~hta.errors.TraceLoadError` when no rule gives a rank.
    """
    if given >= 0:
        return given, []
    info = top_level.get("distributedInfo")
    if not isinstance(info, dict) or "rank" not in info:
        return _rank_without_metadata(path, lone_file), []
    raw = info["rank"]
    rank = whole_number(raw)
    if rank is not None and is_rank(rank):
        world = whole_number(info.get("world_size"))
        if world is not None and 1 < world <= rank:
            return rank, [f"distributedInfo.rank {rank} is not below its world_size {world}"]
        return rank, []
    shown = repr(raw) if len(repr(raw)) <= 40 else repr(raw)[:39] + "…"
    note = f"distributedInfo.rank {shown} is not a rank (a whole number from 0 to 2**20)"
    from_name = rank_from_filename(path)
    if from_name is not None:
        return from_name, [f"{note}; rank {from_name} taken from the file name"]
    if lone_file:
        return 0, [f"{note}; taken as rank 0 (the only file)"]
    raise TraceLoadError(str(path), f"{note}, and the file name has no rank-N / rank_N / "
                         "workerN", _HINT, _CLI_HINT)


def _rank_without_metadata(path: str | Path | RemotePath, lone_file: bool) -> int:
    """Rules 3 to 5: the file name's rank, else 0 for a lone file, else refused."""
    from_name = rank_from_filename(path)
    if from_name is not None:
        return from_name
    if lone_file:
        return 0
    raise TraceLoadError(str(path), _NO_RANK, _HINT, _CLI_HINT)


_RANK_IN_HEAD = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*"?(\d+)"?\s*[,}]')
_HEAD_BYTES = 1 << 18


def peek_rank(path: Path | RemotePath) -> int | None:
    """Rule 2 before decoding: ``distributedInfo.rank`` if it appears, and is a rank, in
    the first 256 KiB of the file's text.

    Kineto writes ``distributedInfo`` near the top, so ranks are known before a file is
    decoded: unwanted ranks are never loaded and clashing ranks fail fast. ``None``
    when the head holds no rank (the full load then applies :func:`file_rank`, which
    gives the same rank whenever this gives one).
    """
    try:
        with path.open("rb") as fh:
            raw = fh.read(_HEAD_BYTES)
        if raw[:2] == b"\x1f\x8b":
            raw = zlib.decompressobj(31).decompress(raw, _HEAD_BYTES)
    except (OSError, zlib.error):
        return None
    match = _RANK_IN_HEAD.search(raw)
    rank = int(match.group(1)) if match else None
    return rank if is_rank(rank) else None


__all__ = ["MAX_WORLD_SIZE", "file_rank", "is_rank", "peek_rank", "rank_from_filename",
           "whole_number"]
