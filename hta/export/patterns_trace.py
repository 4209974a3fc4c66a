"""A copy of a rank's trace with frequent kernel sequences marked on their events.

Every event of an occurrence of one of the given patterns (see
:mod:`hta.analysis.sequences`: the root operator, the CPU events between it and the
launches, the launches and the GPU events) gets ``args["Patterns"] = {pattern: count}``
for each pattern it belongs to; search for ``Patterns`` in Perfetto or chrome://tracing to
highlight them. Every other event is kept byte for byte (HTA instead strips the args and
names of the other events to save space).

Output: ``overlaid_<name>`` in ``output_dir`` (gzip when the input is gzip); the input is
never overwritten.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from hta.export.rawtrace import (
    complete_event_items,
    event_items,
    output_path,
    read_raw,
    source_of,
    write_raw,
)
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

_encode = msgspec.json.Encoder().encode


def write_overlaid_trace(rt: RankTrace, patterns: pd.DataFrame, output_dir: str | Path
                         ) -> Path:
    """Write ``overlaid_<name>`` marking the rows of ``patterns`` (``pattern``, ``count``,
    ``event_indices`` columns, as from
    :func:`hta.analysis.sequences.frequent_cuda_kernel_sequences`)."""
    folder = Path(output_dir)
    if not folder.is_dir():
        raise NotADirectoryError(f"output_dir {folder} is not an existing folder; create it "
                                 "first")
    source = source_of(rt)
    raw = read_raw(source)
    items = event_items(raw)
    item_of_index = complete_event_items(items, _loaded_rows(rt))
    symbols = rt.symbols
    name_of_index = dict(zip(rt.events["index"].tolist(), rt.events["name"].tolist()))
    marks: dict[int, dict[str, int]] = {}
    for pattern, count, indices in zip(patterns["pattern"], patterns["count"],
                                       patterns["event_indices"]):
        indices = np.asarray(indices, dtype=np.int64)
        for index, item in zip(indices.tolist(), item_of_index[indices].tolist()):
            marks.setdefault(item, {})[str(pattern)] = int(count)
            _check_name(items[item], symbols[name_of_index[index]], source)
    for item, active in marks.items():
        items[item] = msgspec.Raw(with_arg(items[item], "Patterns", active))
    out = output_path(source, prefix="overlaid_", output_dir=folder)
    write_raw(raw, b"[" + b",".join(items) + b"]", out, gzipped=raw.gzipped)
    logger.info("Wrote %s (%d events marked); search for 'Patterns' in the trace viewer",
                out, len(marks))
    return out


def with_arg(event: bytes | msgspec.Raw, key: str, value: Any) -> bytes:
    """An event's JSON text with ``args[key] = value``; every other value kept as text."""
    fields = msgspec.json.decode(event, type=dict[str, msgspec.Raw])
    args_raw = fields.get("args")
    args = (msgspec.json.decode(args_raw, type=dict[str, msgspec.Raw])
            if args_raw is not None and bytes(args_raw).lstrip()[:1] == b"{" else {})
    args[key] = msgspec.Raw(_encode(value))
    fields["args"] = msgspec.Raw(_object(args))
    return _object(fields)


def _object(fields: dict[str, msgspec.Raw]) -> bytes:
    return b"{" + b",".join(_encode(k) + b":" + bytes(v) for k, v in fields.items()) + b"}"


class _Name(msgspec.Struct, gc=False):
    name: Any = ""


def _check_name(item: msgspec.Raw, expected: str, source: Path) -> None:
    found = msgspec.json.decode(item, type=_Name).name
    if str(found) != expected:
        raise ValueError(f"{source}: event {found!r} found where {expected!r} was loaded; was "
                         "the file changed after loading?")


def _loaded_rows(rt: RankTrace) -> int:
    """At least how many complete events the loader read: one past the largest ``index``
    (rows may have been dropped since, e.g. the last profiler step)."""
    index = rt.events["index"]
    return int(index.max()) + 1 if len(index) else 0
