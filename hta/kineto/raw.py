"""Reading a rank's trace file again, as raw JSON values, for the writers of amended copies.

The exporters (augmented traces, the critical-path overlay) copy the original file with a
few events added or marked. They open it here, never themselves: ``source`` is what the
loader recorded in the rank's ``meta['source']`` (a local path or an fsspec URL such as
``memory://job/rank-0.json.gz`` or ``s3://bucket/job/rank-0.json.gz``), read through
:func:`hta.kineto.files.trace_location` exactly as loading read it. The file's top level
is split into ``msgspec.Raw`` values, so every byte of every value survives the copy.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from hta.kineto.files import RemotePath, trace_location
from hta.kineto.rawio import parse_top_level, read_bytes

logger = logging.getLogger(__name__)

_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])


@dataclass
class RawTrace:
    """A trace file split into its raw top-level values."""

    path: Path | RemotePath
    gzipped: bool
    top: dict[str, msgspec.Raw]

    @property
    def name(self) -> str:
        """The file's name (last component of its path or URL)."""
        return self.path.name

    @property
    def events_text(self) -> memoryview:
        """The ``traceEvents`` array's text (a view into the file's bytes, no copy)."""
        return memoryview(self.top["traceEvents"])

    def event_items(self) -> list[msgspec.Raw]:
        """The raw text of each element of ``traceEvents``, in file order."""
        return _raw_list_decoder.decode(self.events_text)


def raw_source(source: str | Path | RemotePath,
               storage_options: dict[str, Any] | None = None) -> Path | RemotePath:
    """The file a rank was loaded from (``meta['source']``: path or fsspec URL), checked
    to still exist; ``FileNotFoundError`` names it otherwise."""
    if not str(source):
        raise FileNotFoundError("the rank records no source file (was it loaded from a trace?)")
    location = trace_location(source, storage_options)
    if not location.is_file():
        raise FileNotFoundError(
            f"the original trace file {str(source)!r} cannot be read any more; an amended "
            "copy of a trace is made from it, so it needs the original file")
    return location


def read_raw_trace(source: str | Path | RemotePath,
                   storage_options: dict[str, Any] | None = None) -> RawTrace:
    """Read a trace file (local path or fsspec URL; JSON or gzip, repaired like the loader
    repairs it) and split it into raw top-level values.

    Raises ``FileNotFoundError`` when it is gone, ``ValueError`` when it has no
    ``traceEvents``.
    """
    location = raw_source(source, storage_options)
    data = read_bytes(location)
    with location.open("rb") as fh:
        gzipped = fh.read(2) == b"\x1f\x8b"
    try:
        top = _top_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        top, _, repairs = parse_top_level(location, data)
        logger.warning("%s: read with the loader's repairs: %s", location, ", ".join(repairs))
    if "traceEvents" not in top:
        raise ValueError(f"{location}: no 'traceEvents' key; not a Kineto trace")
    del data
    return RawTrace(path=location, gzipped=gzipped, top=top)


__all__ = ["RawTrace", "raw_source", "read_raw_trace"]
