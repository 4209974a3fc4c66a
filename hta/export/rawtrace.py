"""Reading a rank's original trace file again and writing an amended copy of it.

The copy keeps every original byte of every value: the file's top level is split into raw
JSON values (``msgspec.Raw``), events are added or replaced as JSON text, and the top
level is written back in its original key order. Nothing is parsed into Python objects
and dumped again, so numbers (19-digit ids, µs decimals), key order and unusual fields
survive exactly.
"""

from __future__ import annotations

import gzip
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import msgspec
import numpy as np
import pandas as pd

from hta.kineto.decode import parse_top_level, read_bytes, timestamps_ns
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

try:  # ISA-L compresses gzip several times faster than zlib when installed
    from isal import igzip as _fast_gzip
except ImportError:  # pragma: no cover - optional dependency
    _fast_gzip = None

_TS = re.compile(rb'"ts"\s*:\s*"?(-?[0-9][0-9.eE+-]*)')
#: Fast enough to write a 1 GB trace in about a second, about the profiler's own ratio.
GZIP_LEVEL_ISAL = 2
GZIP_LEVEL_ZLIB = 6
Buffer = Union[bytes, memoryview]  # noqa: UP007 (a runtime alias, Python 3.10 friendly)
_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_dumps = msgspec.json.Encoder().encode


@dataclass
class RawTrace:
    """A trace file split into its raw top-level values."""

    path: Path
    gzipped: bool
    top: dict[str, msgspec.Raw]

    @property
    def events_text(self) -> memoryview:
        """The ``traceEvents`` array's text (a view into the file's bytes, no copy)."""
        return memoryview(self.top["traceEvents"])


def source_of(rt: RankTrace) -> Path:
    """The rank's trace file, or a clear error when it cannot be read again."""
    source = rt.meta.get("source")
    path = Path(str(source)) if source else None
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"rank {rt.rank}: the original trace file {source!r} is not a readable local "
            "file; the augmented trace is a copy of it, so it must still exist")
    return path


def read_raw(path: Path) -> RawTrace:
    """Split a trace file (JSON or gzip, repaired like the loader does) into raw values."""
    data = read_bytes(path)
    with path.open("rb") as fh:
        gzipped = fh.read(2) == b"\x1f\x8b"
    try:
        top = _top_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        top, _, repairs = parse_top_level(path, data)
        logger.warning("%s: rewritten with the loader's repairs: %s", path, ", ".join(repairs))
    if "traceEvents" not in top:
        raise ValueError(f"{path}: no 'traceEvents' key; not a Kineto trace")
    del data
    return RawTrace(path=path, gzipped=gzipped, top=top)


def event_items(raw: RawTrace) -> list[msgspec.Raw]:
    """The raw text of each element of ``traceEvents``, in file order."""
    return msgspec.json.decode(raw.events_text, type=list[msgspec.Raw])


class _Head(msgspec.Struct, gc=False):
    ph: str = ""
    ts: msgspec.Raw = msgspec.Raw()
    name: Any = ""


def row_items(items: list[msgspec.Raw], rt: RankTrace, origin_ns: int) -> np.ndarray:
    """Position in ``items`` of each row of ``rt.events`` (row order).

    The loader keeps the ``X`` events that have a usable ``ts``, in file order, and sorts
    them by ``ts`` (stable); this repeats that and checks that the timestamps agree. When
    rows were dropped after loading (e.g. the last profiler step), rows are matched on
    (ts, name, occurrence). Raises ``ValueError`` when the file no longer matches.
    """
    heads = msgspec.json.decode(b"[" + b",".join(items) + b"]", type=list[_Head])
    complete = np.flatnonzero(np.fromiter((h.ph == "X" for h in heads), dtype=bool,
                                          count=len(heads)))
    ts, present = timestamps_ns([heads[i].ts for i in complete], [])
    complete, ts = complete[present], ts[present] + origin_ns
    order = np.argsort(ts, kind="stable")
    complete, ts = complete[order], ts[order]
    ev = rt.events
    loaded_ts = ev["ts"].to_numpy()
    if complete.size == len(ev) and np.array_equal(ts, loaded_ts):
        return complete
    names = np.asarray(rt.symbols, dtype=object)[ev["name"].to_numpy()]
    raw = pd.DataFrame({"ts": ts, "name": [_text(heads[i].name) for i in complete],
                        "item": complete})
    loaded = pd.DataFrame({"ts": loaded_ts, "name": names})
    for frame in (raw, loaded):
        frame["occurrence"] = frame.groupby(["ts", "name"], sort=False).cumcount()
    merged = loaded.merge(raw, on=["ts", "name", "occurrence"], how="left")
    if merged["item"].isna().any():
        raise ValueError(f"rank {rt.rank}: {int(merged['item'].isna().sum())} loaded event(s) "
                         f"are not in {rt.meta.get('source')}; was it changed after loading?")
    return merged["item"].to_numpy(dtype=np.int64)


def _text(name: Any) -> str:
    return name if isinstance(name, str) else ("" if name is None else str(name))


def time_origin_ns(raw: RawTrace, sample: int = 1000) -> int:
    """What the loader added to the file's ``ts`` (``baseTimeNanoseconds`` or 0).

    Mirrors :func:`hta.model.build.time_origin_ns`: the base applies when the file's
    timestamps are relative to it (far below it), judged on the first ``sample``
    timestamps of the file.
    """
    try:
        base = int(msgspec.json.decode(bytes(raw.top.get("baseTimeNanoseconds", b"0"))))
    except (msgspec.DecodeError, TypeError, ValueError):
        return 0
    if base <= 0:
        return 0
    values = []
    for match in _TS.finditer(raw.events_text):
        values.append(float(match.group(1)))
        if len(values) >= sample:
            break
    if values and max(values) * 1000.0 >= base // 2:
        return 0
    return base


def write_raw(raw: RawTrace, events_parts: Sequence[Buffer], out: Path, *,
              gzipped: bool, extra_top: dict[str, bytes] | None = None) -> Path:
    """Write ``raw``'s top level with ``traceEvents`` replaced by the concatenation of
    ``events_parts`` (streamed to the file: nothing is joined in memory), and the keys of
    ``extra_top`` (JSON texts) added after the original keys."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with _open_for_writing(tmp, gzipped) as fh:
        fh.write(b"{")
        for i, (key, value) in enumerate(raw.top.items()):
            fh.write((b"," if i else b"") + _dumps(key) + b":")
            if key == "traceEvents":
                for part in events_parts:
                    fh.write(part)
            else:
                fh.write(value)
        for key, text in (extra_top or {}).items():
            if key not in raw.top:
                fh.write(b"," + _dumps(key) + b":" + text)
        fh.write(b"}")
    tmp.replace(out)
    return out


def _open_for_writing(path: Path, gzipped: bool) -> Any:
    if not gzipped:
        return path.open("wb")
    if _fast_gzip is not None:
        return _fast_gzip.open(path, "wb", compresslevel=GZIP_LEVEL_ISAL)
    return gzip.open(path, "wb", compresslevel=GZIP_LEVEL_ZLIB)


def append_events(events_text: Buffer, extra: bytes) -> list[Buffer]:
    """Parts whose concatenation is the ``traceEvents`` array with ``extra`` (event
    objects separated by commas) appended.

    The original text is not copied: the parts are a view of it up to its closing bracket,
    the new events and the bracket.
    """
    view = memoryview(events_text)
    if not extra:
        return [view]
    end = _last_non_space(view, len(view))
    if end < 0 or view[end] != ord("]"):
        raise ValueError("traceEvents is not a JSON array")
    before = _last_non_space(view, end)
    sep = b"" if before >= 0 and view[before] == ord("[") else b","
    return [view[:before + 1], sep, extra, b"]"]


def _last_non_space(view: memoryview, stop: int) -> int:
    i = stop - 1
    while i >= 0 and view[i] in b" \t\r\n":
        i -= 1
    return i


def output_path(source: Path, *, suffix: str = "", prefix: str = "",
                output_dir: str | Path | None = None) -> Path:
    """``<prefix><stem><suffix>.json[.gz]`` beside ``source`` or in ``output_dir``.

    The suffix goes before the first ``.json`` of the name (``rank-0.pt.trace.json.gz``
    -> ``rank-0.pt.trace<suffix>.json.gz``); a name without ``.json`` gets ``.json``.
    Raises ``ValueError`` when the result would be ``source`` itself.
    """
    name = source.name
    at = name.find(".json")
    stem, ext = (name[:at], name[at:]) if at >= 0 else (name, ".json")
    folder = Path(output_dir) if output_dir is not None else source.parent
    out = folder / f"{prefix}{stem}{suffix}{ext}"
    if out.resolve() == source.resolve():
        raise ValueError(f"refusing to overwrite the input trace {source}; give a non-empty "
                         "suffix/prefix or another output_dir")
    return out
