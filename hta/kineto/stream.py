"""Streaming split of a trace file, in Kineto's layout or any other.

Kineto writes ``traceEvents`` one event per line, every event starting with a newline,
two spaces and ``{``. A raw newline can never occur inside a JSON string, so in such a
file ``b"\\n  {"`` only ever marks the start of an event. That lets us inflate the file
block by block and cut each block at its last event start: every piece holds whole
events, and the decompressed text never has to be in memory at once.

Files in another layout (compact one-line JSON, indented JSON, as other tools re-save
traces) are cut the same way, block by block, at the ends of events found by
:class:`hta.kineto.split.Splitter` (strings, escapes and nesting followed byte by byte,
in C or NumPy): the same bounded memory, and pieces the same decoders take.

:func:`iter_event_chunks` yields ``("events", json_array_bytes)`` pieces and finally
``("top", dict_of_top_level_raw_values)``. Only a file whose ``traceEvents`` array does
not start within its first 64 MiB is not streamed (:class:`NotStreamable`); the caller
then decodes it as a whole document.
"""

from __future__ import annotations

import queue
import re
import threading
import zlib
from collections.abc import Generator, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from hta.kineto.rawio import BOM, duplicate_key_error, require_unique_keys
from hta.kineto.split import Splitter

if TYPE_CHECKING:
    from hta.kineto.files import RemotePath

_zlib: ModuleType
try:
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - optional dependency
    _zlib = zlib

BOUNDARY = b"\n  {"
EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
READ_SIZE = 1 << 22  # compressed bytes read at a time
TARGET_CHUNK = 1 << 22  # decompressed bytes per piece of events (about 16k events)
#: From this much text on, a file is cut in pieces of ``4 * TARGET_CHUNK``: each piece
#: costs a fixed time to add to the columns, so large files gain from fewer pieces.
LARGE_TEXT_BYTES = 64 << 20


def piece_bytes(text_bytes: int) -> int:
    """About how much text one piece of a file holding ``text_bytes`` of text holds."""
    return 4 * TARGET_CHUNK if text_bytes >= LARGE_TEXT_BYTES else TARGET_CHUNK
MAX_PREFIX = 1 << 26  # give up streaming if traceEvents does not start in the first 64 MiB

T = TypeVar("T")
_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])


class NotStreamable(Exception):
    """The file is not in Kineto's layout; decode it as a whole document instead."""


def _text_blocks(path: Path | RemotePath, size: int) -> Iterator[bytes]:
    """The file's text, inflated if gzip, in blocks of about ``size`` bytes."""
    with path.open("rb") as fh:
        head = fh.read(2)
        fh.seek(0)
        if head != b"\x1f\x8b":
            while block := fh.read(size):
                yield block
            return
        inflater = _zlib.decompressobj(31)
        while True:
            compressed = fh.read(READ_SIZE)
            if not compressed:
                break
            while compressed:
                out = inflater.decompress(compressed, size)
                compressed = inflater.unconsumed_tail
                if out:
                    yield out
            if inflater.eof:
                if inflater.unused_data or fh.read(1):
                    raise NotStreamable("several gzip members")
                return
        if not inflater.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")


_SPACE = frozenset(b" \t\r\n")
_LEADING_SPACE = frozenset(b" \t\r\n\x0b\x0c")  # what bytes.lstrip strips


def _take_events(buf: bytearray, cut: int) -> bytes:
    """``buf[:cut]`` (whole events, a trailing comma) as a JSON array, removed from buf.

    Copies the text once: a piece is a few MiB and every copy shows in the load time.
    """
    end = _bare_end(buf, cut)
    with memoryview(buf) as view:
        piece = b"".join((b"[", view[:end], b"]"))
    del buf[:cut]
    return piece


def _bare_end(buf: bytes | bytearray, cut: int) -> int:
    """Where the events before ``cut`` end (the trailing comma and spaces dropped)."""
    end = cut
    while end > 0 and buf[end - 1] in _SPACE:
        end -= 1
    if end > 0 and buf[end - 1] == ord(","):
        end -= 1
    return end


def _bare_pieces(carry: bytearray, blocks: Iterator[bytes], size: int, owned: bool = False
                 ) -> Generator[tuple[str, memoryview | bytes], None, bytearray]:
    """Views of whole events, without copying the inflated blocks.

    ``carry`` holds the start of an event that continues in the next block: it is
    completed up to that block's first event start and handed out, then the block's
    events up to its last event start are handed out as a view of the block itself.
    With ``owned``, the pieces stay valid after the next is asked for: the completed
    carry is copied (bytes), the view of the (immutable) block is left open.
    Returns what is left after the last block (the last events and the file's end).
    """
    yielded = False
    for block in blocks:
        first = block.find(BOUNDARY)
        if first < 0:
            carry += block
            if not yielded and len(carry) > 4 * size:
                raise NotStreamable("no event boundaries found")
            continue
        last = block.rfind(BOUNDARY)
        with memoryview(block) as view:
            carry += view[:first]
            yielded = True
            if owned:
                yield "bare", bytes(carry[:_bare_end(carry, len(carry))])
                if last > first:  # the slice outlives ``view``, holding ``block``
                    yield "bare", view[first:_bare_end(block, last)]
                carry = bytearray(view[last:])
                continue
            with memoryview(carry) as cview, cview[:_bare_end(carry, len(carry))] as piece:
                yield "bare", piece
            if last > first:
                with view[first:_bare_end(block, last)] as piece:
                    yield "bare", piece
            carry = bytearray(view[last:])
    return carry


def _any_layout_pieces(buf: bytearray, blocks: Iterator[bytes], bare: bool, size: int,
                       owned: bool = False) -> Generator[tuple[str, Any], None, bytearray]:
    """Pieces of whole events of an array in any layout, cut where events end.

    ``buf`` starts just after the array's ``[``. Yields ``("bare", view)`` (``bare``;
    with ``owned`` a copy, bytes) or ``("events", bytes)`` pieces of about ``size``
    bytes; returns what is left: the last events, the array's end
    and the rest of the file.
    """
    splitter = Splitter()
    scanned = 0
    closed = False
    for block in blocks:
        buf += block
        if closed or len(buf) < size:
            continue
        found = splitter.scan(buf, scanned)
        scanned = found.scanned
        closed = found.array_end >= 0
        if found.last_end <= 0:
            continue
        first = _first_event(buf)
        if bare and owned:
            yield "bare", bytes(buf[first:found.last_end])
        elif bare:
            with memoryview(buf) as view, view[first:found.last_end] as piece:
                yield "bare", piece
        else:
            with memoryview(buf) as view:
                yield "events", b"".join((b"[", view[first:found.last_end], b"]"))
        del buf[:found.last_end]
        scanned -= found.last_end
    del buf[:_first_event(buf)]
    return buf


def _first_event(buf: bytearray) -> int:
    """Where the first event of ``buf`` starts (after a separating comma and spaces)."""
    start = 0
    while start < len(buf) and (buf[start] in _SPACE or buf[start] == ord(",")):
        start += 1
    return start


def _counted(blocks: Iterator[bytes], sizes: list[int]) -> Iterator[bytes]:
    """``blocks``, each one's length appended to ``sizes`` as it is read."""
    for block in blocks:
        sizes.append(len(block))
        yield block


def iter_event_chunks(path: Path | RemotePath, bare: bool = False, owned: bool = False,
                      piece_bytes: int = 0) -> Iterator[tuple[str, Any]]:
    """Yield ``("events", bytes)`` JSON arrays of whole events, then
    ``("top", (top_level_raw_values, uncompressed_size))``.

    With ``bare``, the pieces before the last are ``("bare", memoryview)``: the events
    separated by commas without brackets, a view of the read buffer that is valid only
    until the next piece is asked for (no copy is made). With ``owned`` as well, every
    piece stays valid for as long as it is held (views of the inflated blocks, which are
    never reused, or copies where a piece spans two blocks): pieces can be handed to
    other threads. ``piece_bytes``: about how much text a piece holds (default
    :data:`TARGET_CHUNK`).

    Raises :class:`NotStreamable` (before yielding anything) when the file does not
    look like Kineto's layout, and ``EOFError``/``zlib.error`` for broken gzip.
    """
    size = piece_bytes or TARGET_CHUNK
    sizes: list[int] = []
    blocks = _counted(_text_blocks(path, size), sizes)
    buf = bytearray()
    match = None
    for block in blocks:
        buf += block
        if buf.startswith(BOM):
            raise NotStreamable("starts with a byte-order mark")  # read whole, noted there
        match = EVENTS_KEY.search(buf)
        if match or len(buf) > MAX_PREFIX:
            break
    if match is None:
        raise NotStreamable("no traceEvents array near the start of the file")
    prefix = bytes(buf[:match.start()])
    del buf[:match.end()]
    start = 0  # past the spaces (without copying the buffer, as lstrip would)
    while start < len(buf) and buf[start] in _LEADING_SPACE:
        start += 1
    if buf[start:start + 1] != b"{" or buf[max(0, start - 3):start] != BOUNDARY[:3]:
        # not one event per line: cut at the ends of events instead
        buf = yield from _any_layout_pieces(buf, blocks, bare, size, owned)
    elif bare:
        buf = yield from _bare_pieces(buf, blocks, size, owned)
    else:
        yielded = False
        for block in blocks:
            buf += block
            if len(buf) < size:
                continue
            cut = buf.rfind(BOUNDARY)
            if cut <= 0:
                if not yielded and len(buf) > 4 * size:
                    raise NotStreamable("no event boundaries found")
                continue
            yielded = True
            yield "events", _take_events(buf, cut)
    # The rest: the last events, the end of the array, and the keys after it.
    tail = b'{"traceEvents": [' + bytes(buf)
    del buf
    top_tail = _top_decoder.decode(tail)
    head = prefix + b'"traceEvents": []}'
    top_head = _top_decoder.decode(head)
    require_unique_keys(path, tail, top_tail)
    require_unique_keys(path, head, top_head)
    twice = sorted((set(top_head) & set(top_tail)) - {"traceEvents"})
    if twice:
        raise duplicate_key_error(path, twice[0])
    last = top_tail.pop("traceEvents")
    yield "events", bytes(last)
    top = {k: v for k, v in top_head.items() if k != "traceEvents"}
    top.update(top_tail)
    yield "top", (top, sum(sizes))


def read_ahead(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """``items``, produced by a background thread up to ``depth`` items ahead.

    Inflating (zlib and ISA-L) and cutting pieces (:mod:`hta.kineto.split`) release the
    GIL, as does the native scanner, so one file's reading overlaps its decoding on a
    second core. An exception of ``items`` is raised here, in order; stopping early (a
    decode error) stops and closes ``items`` in its thread.
    """
    slots: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(("item", item)):
                    break
            else:
                put(("done", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put(("error", exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=produce, name="hta-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            kind, value = slots.get()
            if kind == "item":
                yield value
            elif kind == "done":
                return
            else:
                raise value
    finally:
        stop.set()
        worker.join()
