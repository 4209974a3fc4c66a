"""Reading a trace file's bytes: inflating gzip, repairing known writer bugs, and splitting
the top level into raw JSON values (with the position of any JSON error)."""

from __future__ import annotations

import gzip
import logging
import re
import zlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from hta.errors import TraceLoadError

if TYPE_CHECKING:
    from hta.kineto.files import RemotePath

logger = logging.getLogger(__name__)

_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])

_fast_gzip: ModuleType | None
_fast_gzip_zlib: ModuleType | None
try:  # Intel ISA-L inflates gzip 2-3x faster than zlib when it is installed.
    from isal import igzip as _fast_gzip
    from isal import isal_zlib as _fast_gzip_zlib
except ImportError:  # pragma: no cover - optional dependency
    _fast_gzip = None
    _fast_gzip_zlib = None


INFLATE_ERRORS: tuple[type[BaseException], ...] = (EOFError, zlib.error) + (
    (_fast_gzip_zlib.error,) if _fast_gzip_zlib is not None else ()
)


#: UTF-8 byte-order mark: some editors and Windows tools write it before the JSON.
BOM = b"\xef\xbb\xbf"
BOM_NOTE = "skipped the UTF-8 byte-order mark at the start of the file"


def read_bytes(path: Path | RemotePath, notes: list[str] | None = None) -> bytes | bytearray:
    """Read a trace file, inflating gzip (detected by its magic bytes, not its name).

    A leading UTF-8 byte-order mark is dropped (JSON has none); ``notes``, when given,
    gets :data:`BOM_NOTE` appended then.
    """
    try:
        data: bytes | bytearray = path.read_bytes()
    except OSError as exc:
        raise TraceLoadError(path, f"cannot read the file: {exc.strerror or exc}") from exc
    if data[:2] == b"\x1f\x8b":
        try:
            data = _inflate(data)
        except INFLATE_ERRORS + (ValueError,) as exc:
            raise TraceLoadError(
                path,
                f"the gzip stream is truncated or corrupt ({exc})",
                "the profiler may have been killed while writing; collect the trace again",
            ) from exc
    if data[:3] != BOM:
        return data
    if notes is not None:
        notes.append(BOM_NOTE)
    if isinstance(data, bytearray):
        del data[:3]  # in place: no second copy of the text
        return data
    return data[3:]


_INFLATE_STEP = 1 << 24
#: DEFLATE inflates at most about 1032 to 1: a trailer claiming more is not one (the
#: file was cut short), and must not size a buffer (4 GiB for a damaged 100-byte file).
MAX_INFLATE_RATIO = 1032


def _inflate(data: bytes | bytearray) -> bytes | bytearray:
    """Inflate gzip into a buffer sized from the trailer, so the text is held once.

    Growing an output buffer while inflating costs about twice the text's size at its
    peak; the gzip trailer (ISIZE) gives the size up front for single-member files
    under 4 GiB. Anything else falls back to the library's one-shot inflate.
    """
    size = int.from_bytes(data[-4:], "little")
    zlib_mod = _fast_gzip_zlib if _fast_gzip_zlib is not None else zlib
    if size > MAX_INFLATE_RATIO * len(data):  # no true trailer: a truncated or odd file
        return _fast_gzip.decompress(data) if _fast_gzip is not None else gzip.decompress(data)
    out = bytearray(size)
    view = memoryview(out)
    inflater = zlib_mod.decompressobj(31)
    pos = 0
    pending = data
    while True:
        chunk = inflater.decompress(pending, _INFLATE_STEP)
        if pos + len(chunk) > size:
            break  # larger than the trailer says (over 4 GiB or several members)
        view[pos:pos + len(chunk)] = chunk
        pos += len(chunk)
        pending = inflater.unconsumed_tail
        if inflater.eof or (not chunk and not pending):
            break
    view.release()
    if inflater.eof and pos == size and not inflater.unused_data:
        return out
    if not inflater.eof and pos < size and not pending:
        raise EOFError("compressed file ended before the end-of-stream marker was reached")
    del out
    return _fast_gzip.decompress(data) if _fast_gzip is not None else gzip.decompress(data)


_CONTROL = bytes(range(32))
_CONTROL_TO_SPACE = bytes.maketrans(_CONTROL, b" " * 32)
_BARE_NONFINITE = re.compile(rb"(?<=[:,\[\s])(-?Infinity|NaN)(?=[\s,\]}])")


def _repairs(data: bytes | bytearray) -> list[tuple[str, bytes | bytearray]]:
    """Cheap, safe rewrites of text that real writers produced but JSON forbids."""
    out: list[tuple[str, bytes | bytearray]] = []
    text = data
    if any(c in text for c in (b"\x00", b"\x01", b"\x1b", b"\x7f")) or re.search(
        rb"[\x00-\x08\x0b\x0c\x0e-\x1f]", text
    ):
        text = text.translate(_CONTROL_TO_SPACE)
        out.append(("control characters replaced by spaces", text))
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        text = text.decode("utf-8", errors="replace").encode("utf-8")
        out.append(("invalid UTF-8 replaced by U+FFFD", text))
    if _BARE_NONFINITE.search(text):
        text = _BARE_NONFINITE.sub(b"null", text)
        out.append(("NaN/Infinity literals replaced by null", text))
    return out


def _position(data: bytes | bytearray, exc: Exception) -> str:
    match = re.search(r"byte (\d+)", str(exc))
    if not match:
        return ""
    offset = int(match.group(1))
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f" at line {line}, column {col}"


#: What may lie between two top-level values of an object: a separator and a key.
_BETWEEN = re.compile(rb'\s*,\s*"(?:[^"\\]|\\.)*"\s*:\s*')
_FIRST = re.compile(rb'\s*\{\s*"(?:[^"\\]|\\.)*"\s*:\s*')
_LAST = re.compile(rb"\s*\}\s*")
_KEY_AT = re.compile(rb'\s*[{,]\s*"((?:[^"\\]|\\.)*)"\s*:')


def duplicate_key(data: bytes | bytearray | memoryview,
                  top: dict[str, msgspec.Raw]) -> str | None:
    """A key that the JSON object ``data`` has more than once at its top level, or None.

    ``top`` is ``data`` decoded into raw values, which keeps the last of duplicate keys
    and drops the others silently. The raw values are views of ``data``: between two of
    them there must be only a separator and one key, so the text of a dropped value
    shows up as a gap that is more than that. Costs nothing like a second parse.
    """
    if not top:
        return None
    base = np.frombuffer(data, dtype=np.uint8)
    start = base.ctypes.data
    spans = []
    for raw in top.values():
        if len(raw) == 0:
            return None
        offset = np.frombuffer(raw, dtype=np.uint8).ctypes.data - start
        if not 0 <= offset <= len(base) - len(raw):
            return None  # not a view of data (a copy): cannot tell
        spans.append((offset, offset + len(raw)))
    spans.sort()
    view = memoryview(data)
    gaps = [(_FIRST, 0, spans[0][0])]
    gaps += [(_BETWEEN, a[1], b[0]) for a, b in zip(spans, spans[1:])]
    gaps.append((_LAST, spans[-1][1], len(base)))
    for pattern, lo, hi in gaps:
        text = bytes(view[lo:hi]) if hi - lo < 4096 else b""
        if hi - lo >= 4096 or not pattern.fullmatch(text):
            key = _KEY_AT.match(bytes(view[lo:min(hi, lo + 4096)]))
            return key.group(1).decode("utf-8", "replace") if key else "?"
    return None


def require_unique_keys(path: Path | RemotePath, data: bytes | bytearray | memoryview,
                        top: dict[str, msgspec.Raw]) -> None:
    """Raise :class:`TraceLoadError` when the file's top level repeats a key: which of
    the values the writer meant cannot be told (a second ``traceEvents`` would replace
    the events silently)."""
    key = duplicate_key(data, top)
    if key is not None:
        raise duplicate_key_error(path, key)


def duplicate_key_error(path: Path | RemotePath, key: str) -> TraceLoadError:
    """The error of a file whose top level holds ``key`` twice."""
    return TraceLoadError(
        path, f"the top level holds the key {key!r} more than once; which value is meant "
        "cannot be told",
        "a tool may have appended to the file; keep one of them",
    )


def _split(data: bytes | bytearray) -> tuple[dict[str, msgspec.Raw], list[msgspec.Raw] | None]:
    top = _top_decoder.decode(data)
    events = top.get("traceEvents")
    return top, (_raw_list_decoder.decode(events) if events is not None else None)


_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError)


def parse_top_level(
    path: Path | RemotePath, data: bytes | bytearray
) -> tuple[dict[str, msgspec.Raw], list[msgspec.Raw] | None, list[str]]:
    """Split the file into its top-level keys and its raw events.

    Known writer bugs (control characters, invalid UTF-8, NaN literals) are repaired
    and reported; anything else raises :class:`TraceLoadError` with the position.
    """
    if not data.strip():
        raise TraceLoadError(path, "the file is empty (0 bytes)",
                             "the profiler may have failed before writing; collect it again")
    try:
        top, items = _split(data)
        require_unique_keys(path, data, top)
        return top, items, []
    except _DECODE_ERRORS as first:
        error: Exception = first
        notes: list[str] = []
        data_for_pos = data
        for what, repaired in _repairs(data):
            notes.append(what)
            data_for_pos = repaired
            try:
                top, items = _split(repaired)
                require_unique_keys(path, repaired, top)
                return top, items, notes
            except _DECODE_ERRORS as exc:
                error = exc
        if isinstance(error, msgspec.ValidationError):
            raise TraceLoadError(
                path,
                "the file is JSON but not a Kineto trace (its top level is not an object "
                "or 'traceEvents' is not a list)",
            ) from error
        not_json = not_json_problem(path, data)
        if not_json is not None:
            raise TraceLoadError(path, *not_json) from error
        truncated = not data.rstrip().endswith(b"}")
        hint = (
            "the file looks truncated; the profiler may have crashed while writing"
            if truncated
            else "a name may contain an unescaped quote, or the file was edited by hand"
        )
        raise TraceLoadError(
            path, f"invalid JSON{_position(data_for_pos, error)}: {error}{_gzip_note(path)}",
            hint,
        ) from error


def _raw_head(path: Path | RemotePath) -> bytes:
    """The file's first two bytes as stored (before any decompression)."""
    try:
        with path.open("rb") as fh:
            return bytes(fh.read(2))
    except OSError:
        return b""


def _named_gzip_but_not(path: Path | RemotePath) -> bool:
    return str(path).lower().endswith(".gz") and _raw_head(path) != b"\x1f\x8b"


def _gzip_note(path: Path | RemotePath) -> str:
    """A note for a file named ``.gz`` that holds no gzip data."""
    return ("; the file is named .gz but is not gzip (it was read as plain text)"
            if _named_gzip_but_not(path) else "")


def not_json_problem(path: Path | RemotePath, data: bytes | bytearray
                     ) -> tuple[str, str] | None:
    """(problem, hint) for a file whose text does not start as JSON does (``{`` or
    ``[``), saying what it starts with; None when it does."""
    start = bytes(data).lstrip()[:16]
    if start[:1] in (b"{", b"["):
        return None
    text = start.decode("ascii") if start.isascii() else ""
    shown = repr(text) if text.isprintable() and text else \
        "the bytes " + " ".join(f"{b:02x}" for b in start[:8])
    if _named_gzip_but_not(path):
        return (f"the file is named .gz but is not gzip (no gzip header) and not JSON either: "
                f"it starts with {shown}",
                "it is not a profiler trace; collect it again, or take it out of the folder")
    return (f"not JSON: the file starts with {shown}, where a Kineto trace starts with '{{'",
            "it is not a profiler trace; take it out of the folder, or name a Perfetto "
            "protobuf trace .pftrace")


def text_size(path: Path | RemotePath) -> int:
    """Bytes of JSON text in a file: its size, or for gzip the size in its trailer."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        if fh.read(2) != b"\x1f\x8b" or size < 18:
            return size
        fh.seek(-4, 2)
        return int.from_bytes(fh.read(4), "little")


def _top_level_values(path: Path | RemotePath, top: dict[str, msgspec.Raw]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in top.items():
        if key == "traceEvents":
            continue
        try:
            out[key] = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            logger.warning("%s: top-level key %r is not valid JSON; ignored", path, key)
    return out


def _require_events(path: Path | RemotePath, top: dict[str, msgspec.Raw],
                    items: list[msgspec.Raw] | None) -> list[msgspec.Raw]:
    """``items``, the events; a trace error when the file has none."""
    if items is None:
        keys = ", ".join(sorted(top)[:6]) or "none"
        raise TraceLoadError(
            path,
            f"the file is JSON but not a Kineto trace: no 'traceEvents' (top-level keys: {keys})",
            "point hta at the profiler's .json or .json.gz output",
        )
    return items
