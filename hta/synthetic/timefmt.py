"""Exact microsecond times for the generator, and the JSON writer that keeps them exact."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

import orjson


class Microseconds(float):
    """A time in µs (the float value) that also carries its exact integer nanoseconds (``ns``).

    ``float(x)`` is the correctly rounded double of ``ns / 1000``, i.e. exactly what a JSON parser
    returns for the 3-decimal text the writers emit; ``x.ns`` keeps the exact value.
    """

    __slots__ = ("ns",)
    ns: int

    def __new__(cls, ns: int) -> Microseconds:
        self = float.__new__(cls, ns / 1000)
        self.ns = ns
        return self

    def __reduce__(self) -> tuple[type[Microseconds], tuple[int]]:
        return (type(self), (self.ns,))

    def text(self) -> str:
        """The value as written to JSON: µs with exactly three decimals."""
        return format_us(self.ns)


def format_us(ns: int) -> str:
    """Format integer nanoseconds as a µs decimal string with exactly three decimals."""
    sign = "-" if ns < 0 else ""
    q, r = divmod(abs(ns), 1000)
    return f"{sign}{q}.{r:03d}"


def _orjson_default(obj: Any) -> orjson.Fragment:
    if type(obj) is Microseconds:
        ns = obj.ns
        if ns >= 0:
            return orjson.Fragment(b"%d.%03d" % divmod(ns, 1000))
        return orjson.Fragment(b"-%d.%03d" % divmod(-ns, 1000))
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_orjson_default)


def _events_body(events: list[dict[str, Any]]) -> bytes:
    """Events in Kineto's layout: one compact event per line, each line "  {...}"."""
    return b",".join([b"\n  " + _dumps(event) for event in events])


def dumps_trace(trace: dict[str, Any]) -> bytes:
    """Serialize a trace dict to JSON bytes, writing every time with three decimals.

    ``traceEvents`` is laid out as Kineto writes it, one event per line starting with
    ``"\n  {"``; everything else is compact.
    """
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        return _dumps(trace)
    before, after = _dumps({**trace, "traceEvents": []}).split(b'"traceEvents":[]', 1)
    tail = b"\n]" if events else b"]"
    return before + b'"traceEvents":[' + _events_body(events) + tail + after


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC: the events hold no cycles, and collections over millions of
    freshly built dicts would otherwise dominate the run time (about 3x)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _time_ns(value: Any) -> int:
    """Exact ns of a ``ts``/``dur`` value (``Microseconds`` exact; plain floats rounded)."""
    if type(value) is Microseconds:
        return value.ns
    return round(value * 1000)
