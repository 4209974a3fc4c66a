"""A copy of a rank's trace with frequent kernel sequences marked on their events.

Every event of an occurrence of one of the given patterns (see
:mod:`hta.analysis.sequences`: the root operator, the CPU events between it and the
launches, the launches and the GPU events) gets ``args["Patterns"] = {label: count}``
for each pattern it belongs to; search for ``Patterns`` in Perfetto or chrome://tracing to
highlight them. The label is the pattern itself (``root|kernel|kernel...``) when it is at
most :data:`MAX_LABEL` characters, else ``pattern <i>: <its start>... (<n> GPU events)``;
the full patterns are listed once in the top-level key ``frequentKernelSequences``, so a
pattern of thousands of kernels is not copied onto each of its events. Every other event
is kept byte for byte (HTA instead strips the args and names of the other events).

Output: ``overlaid_<name>`` in ``output_dir`` (gzip when the input is gzip); the input is
never overwritten.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from hta.export.rawtrace import (
    event_items,
    output_path,
    read_raw,
    row_items,
    source_of,
    write_raw,
)
from hta.kineto.files import RemotePath
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

_encode = msgspec.json.Encoder().encode
_ARGS = re.compile(rb'"args"\s*:\s*\{')
#: Marked events whose name is compared with the loaded one (a cheap consistency check).
NAME_CHECKS = 1000
MAX_LABEL = 1000
TOP_LEVEL_KEY = "frequentKernelSequences"


def pattern_label(position: int, pattern: str, kernels: int) -> str:
    """The key that marks a pattern on its events (see the module docstring)."""
    if len(pattern) <= MAX_LABEL:
        return pattern
    return f"pattern {position}: {pattern[:100]}... ({kernels} GPU events)"


def write_overlaid_trace(rt: RankTrace, patterns: pd.DataFrame, output_dir: str | Path,
                         storage_options: dict[str, Any] | None = None) -> Path:
    """Write ``overlaid_<name>`` marking the rows of ``patterns`` (``pattern``, ``count``,
    ``event_indices`` columns, as from
    :func:`hta.analysis.sequences.frequent_cuda_kernel_sequences`)."""
    folder = Path(output_dir)
    if not folder.is_dir():
        raise NotADirectoryError(f"output_dir {folder} is not an existing folder; create it "
                                 "first")
    source = source_of(rt, storage_options)
    raw = read_raw(source, storage_options)
    items = event_items(raw)
    item_of_row = row_items(items, rt, rt.time_origin_ns)
    n_rows = len(rt.events)
    symbols = rt.symbols
    names = rt.column("name")
    listing = [
        {"label": pattern_label(i, str(p), int(k)), "pattern": str(p), "count": int(c),
         "kernels": int(k)}
        for i, (p, c, k) in enumerate(zip(patterns["pattern"], patterns["count"],
                                          patterns["kernels"]))]
    marks: dict[int, list[int]] = {}
    checked = 0
    for position, indices in enumerate(patterns["event_indices"]):
        rows = np.asarray(indices, dtype=np.int64)  # an event's ``index`` is its row
        if ((rows < 0) | (rows >= n_rows)).any():
            raise ValueError(f"rank {rt.rank}: pattern {position} names events that are not "
                             "loaded; compute the patterns on this trace")
        for row, item in zip(rows.tolist(), item_of_row[rows].tolist()):
            marks.setdefault(item, []).append(position)
            if checked < NAME_CHECKS:
                _check_name(items[item], symbols[names[row]], source)
                checked += 1
    encoded: dict[tuple[int, ...], msgspec.Raw] = {}
    for item, positions in marks.items():
        key = tuple(positions)
        value = encoded.get(key)
        if value is None:
            value = encoded[key] = msgspec.Raw(_encode(
                {listing[p]["label"]: listing[p]["count"] for p in positions}))
        items[item] = msgspec.Raw(with_arg(items[item], "Patterns", value))
    out = output_path(source, prefix="overlaid_", output_dir=folder)
    write_raw(raw, [b"[", b",".join(items), b"]"], out, gzipped=raw.gzipped,
              extra_top={TOP_LEVEL_KEY: _encode(listing)})
    logger.info("Wrote %s (%d events marked); search for 'Patterns' in the trace viewer",
                out, len(marks))
    return out


def with_arg(event: bytes | msgspec.Raw, key: str, value: Any) -> bytes:
    """An event's JSON text with ``args[key] = value``; every other value kept as text.

    ``value`` is any JSON-encodable value, or a ``msgspec.Raw`` holding JSON text. The
    common case (one ``"args": {`` and no ``key`` yet) is a text insertion; anything else
    decodes the event's keys and rebuilds it.
    """
    text = bytes(event)
    key_text = _encode(key)
    value_text = bytes(value) if isinstance(value, msgspec.Raw) else _encode(value)
    if key_text not in text:
        found = list(_ARGS.finditer(text))
        if len(found) == 1:
            at = found[0].end()
            rest = text[at:].lstrip()
            comma = b"" if rest[:1] == b"}" else b","
            return text[:at] + key_text + b":" + value_text + comma + text[at:]
        if not found and b'"args"' not in text:
            close = text.rstrip().rfind(b"}")
            inner = text[:close].rstrip()
            comma = b"" if inner.endswith(b"{") else b","
            return (inner + comma + b'"args":{' + key_text + b":" + value_text + b"}"
                    + text[close:])
    fields = msgspec.json.decode(text, type=dict[str, msgspec.Raw])
    args_raw = fields.get("args")
    args = (msgspec.json.decode(args_raw, type=dict[str, msgspec.Raw])
            if args_raw is not None and bytes(args_raw).lstrip()[:1] == b"{" else {})
    args[key] = msgspec.Raw(value_text)
    fields["args"] = msgspec.Raw(_object(args))
    return _object(fields)


def _object(fields: dict[str, msgspec.Raw]) -> bytes:
    return b"{" + b",".join(_encode(k) + b":" + bytes(v) for k, v in fields.items()) + b"}"


class _Name(msgspec.Struct, gc=False):
    name: Any = ""


def _check_name(item: msgspec.Raw, expected: str, source: Path | RemotePath) -> None:
    found = msgspec.json.decode(item, type=_Name).name
    if str(found) != expected:
        raise ValueError(f"{source}: event {found!r} found where {expected!r} was loaded; was "
                         "the file changed after loading?")
