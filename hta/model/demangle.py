"""Mangled C++ names as people read them, for display.

Most profilers write kernel names demangled (``void cutlass::Kernel2<...>(...)``), but some
traces carry the linker's Itanium form (``_ZN7cutlass13device_kernel...``): a vLLM trace on
a GB10 showed its top kernel, 81 % of GPU time, that way. :func:`demangle` turns such a name
into its C++ form with the C++ runtime's own demangler (``abi::__cxa_demangle`` of the
process's libstdc++ or libc++, loaded through :mod:`ctypes` on first use: the same code as
``c++filt``). Tables keep the raw name; only what is shown to a person is demangled.

A name that is not an Itanium name (it does not start with ``_Z``), that the runtime cannot
demangle, or that is longer than :data:`LONGEST_MANGLED` characters comes back unchanged,
as it does where no C++ runtime can be loaded (the display then shows the raw name).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import sys
from collections.abc import Callable

logger = logging.getLogger(__name__)

#: Longer names are shown raw: real kernel names are at most a few kB mangled, and the
#: runtime's parser recurses on nesting.
LONGEST_MANGLED = 8192
#: C++ runtimes that export ``__cxa_demangle``, tried in order.
_RUNTIMES = ("libstdc++.so.6", "libc++.so.1", "libc++abi.so.1", "libc++.1.dylib",
             "libc++abi.dylib")

_Demangler = Callable[[bytes], "str | None"]


@functools.lru_cache(maxsize=1)
def _runtime_demangler() -> _Demangler | None:
    """``__cxa_demangle`` of the first C++ runtime that loads, wrapped; ``None`` if none."""
    if sys.platform == "win32":
        return None
    try:
        libc = ctypes.CDLL(None)
        free = libc.free
    except (OSError, AttributeError):
        return None
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    for library in _RUNTIMES:
        try:
            runtime = ctypes.CDLL(library)
            cxa = runtime.__cxa_demangle
        except (OSError, AttributeError):
            continue
        cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                        ctypes.POINTER(ctypes.c_int)]
        cxa.restype = ctypes.c_void_p

        def call(mangled: bytes, cxa: Callable = cxa) -> str | None:
            status = ctypes.c_int(1)
            out = cxa(mangled, None, None, ctypes.byref(status))
            if not out:
                return None
            try:
                text = ctypes.string_at(out)
            finally:
                free(out)
            return text.decode("utf-8", "replace") if status.value == 0 else None

        return call
    logger.info("no C++ runtime with __cxa_demangle: mangled names are shown as they are")
    return None


def demangler_available() -> bool:
    """True when a C++ runtime's demangler could be loaded."""
    return _runtime_demangler() is not None


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """``name`` demangled when it is an Itanium C++ name the runtime can read, else as is.

    ``_Z3fooi`` -> ``foo(int)``; ``aten::mm``, ``void k<1>(float*)`` and names over
    :data:`LONGEST_MANGLED` characters come back unchanged."""
    if not name.startswith("_Z") or len(name) > LONGEST_MANGLED:
        return name
    call = _runtime_demangler()
    if call is None:
        return name
    try:
        raw = name.encode("ascii")
    except UnicodeEncodeError:
        return name
    if b"\x00" in raw:
        return name
    return call(raw) or name


__all__ = ["LONGEST_MANGLED", "demangle", "demangler_available"]
