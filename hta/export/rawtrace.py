"""Writing an amended copy of a rank's original trace file (read again through
:mod:`hta.kineto.raw`, local path or fsspec URL alike).

The copy keeps every original byte of every value: the file's top level is split into raw
JSON values (``msgspec.Raw``), events are added or replaced as JSON text, and the top
level is written back in its original key order. Nothing is parsed into Python objects
and dumped again, so numbers (19-digit ids, µs decimals), key order and unusual fields
survive exactly.
"""

from __future__ import annotations

import gzip
import logging
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Union

import msgspec
import numpy as np
import pandas as pd

from hta.kineto.columns import timestamps_ns
from hta.kineto.files import RemotePath
from hta.kineto.raw import RawTrace, raw_source, read_raw_trace
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

_fast_gzip: ModuleType | None
try:  # ISA-L compresses gzip several times faster than zlib when installed
    from isal import igzip as _fast_gzip
except ImportError:  # pragma: no cover - optional dependency
    _fast_gzip = None

#: Fast enough to write a 1 GB trace in about a second, about the profiler's own ratio.
GZIP_LEVEL_ISAL = 2
GZIP_LEVEL_ZLIB = 6
Buffer = Union[bytes, memoryview]  # noqa: UP007 (a runtime alias, Python 3.10 friendly)
_dumps = msgspec.json.Encoder().encode


def source_of(rt: RankTrace, storage_options: dict[str, Any] | None = None
              ) -> Path | RemotePath:
    """The rank's trace file (local path or fsspec URL), or a clear error when it cannot
    be read again."""
    try:
        return raw_source(str(rt.meta.get("source") or ""), storage_options)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"rank {rt.rank}: {exc}") from None


def read_raw(path: Path | RemotePath, storage_options: dict[str, Any] | None = None
             ) -> RawTrace:
    """Split a trace file into raw values (see :func:`hta.kineto.raw.read_raw_trace`)."""
    return read_raw_trace(path, storage_options)


def event_items(raw: RawTrace) -> list[msgspec.Raw]:
    """The raw text of each element of ``traceEvents``, in file order."""
    return raw.event_items()


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
    loaded_ts = rt.column("ts")
    if complete.size == len(ev) and np.array_equal(ts, loaded_ts):
        return complete
    names = np.asarray(rt.symbols, dtype=object)[rt.column("name")]
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


def write_raw(raw: RawTrace, events_parts: Sequence[Buffer], out: Path, *,
              gzipped: bool, extra_top: dict[str, bytes] | None = None) -> Path:
    """Write ``raw``'s top level with ``traceEvents`` replaced by the concatenation of
    ``events_parts`` (streamed to the file: nothing is joined in memory), and the keys of
    ``extra_top`` (JSON texts) added after the original keys."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    try:
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
    except BaseException:  # a full disk, a size limit: leave no partial file behind
        tmp.unlink(missing_ok=True)
        raise
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


def output_path(source: Path | RemotePath, *, suffix: str = "", prefix: str = "",
                output_dir: str | Path | None = None) -> Path:
    """``<prefix><stem><suffix>.json[.gz]`` beside ``source`` or in ``output_dir``.

    The suffix goes before the first ``.json`` of the name (``rank-0.pt.trace.json.gz``
    -> ``rank-0.pt.trace<suffix>.json.gz``); a name without ``.json`` gets ``.json``.
    A trace read from a URL has no local folder: ``output_dir`` is then required.
    Raises ``ValueError`` when the result would be ``source`` itself.
    """
    name = source.name
    at = name.find(".json")
    stem, ext = (name[:at], name[at:]) if at >= 0 else (name, ".json")
    if output_dir is not None:
        folder = Path(output_dir)
    elif isinstance(source, RemotePath):
        raise ValueError(f"{source} was read from a URL; give output_dir, a local folder "
                         "for the written trace")
    else:
        folder = source.parent
    out = folder / f"{prefix}{stem}{suffix}{ext}"
    if isinstance(source, Path) and out.resolve() == source.resolve():
        raise ValueError(f"refusing to overwrite the input trace {source}; give a non-empty "
                         "suffix/prefix or another output_dir")
    return out
