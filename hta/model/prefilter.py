"""Literal prefilters for regular expressions: a cheap test that rules a pattern out.

The kind rules (:mod:`hta.model.rules`) are long case-insensitive alternations searched
in kernel names that are often hundreds of characters long; running every rule's regular
expression on every distinct name costs tens of microseconds per rule and name. Most of
the alternatives are plain words, so a pattern can only match a name that contains some
of its words. :func:`literal_filter` reads a pattern's parse tree and returns a
:data:`Filter`: an and/or tree of lower-case ASCII substrings that every match must
contain. :func:`may_match` evaluates it on the lower-cased name with Python's substring
search, which is far faster than the regular expression; the expression is then run only
on the names the filter lets through, so the answer is always the expression's own.

The filter is a necessary condition, never a sufficient one. A name is tested in the
form :func:`filter_text` gives it: lower-cased, with the four non-ASCII characters that
Python's case-insensitive matching takes for ASCII letters (the Kelvin sign for ``k``,
the long s for ``s``, the dotted and dotless i for ``i``) replaced by those letters, so
the test stays sound for any name (a 10 MB non-ASCII name used to run every expression).
Anything the reader does not understand (character classes, back references, optional
parts, lookarounds) contributes no condition, which keeps the filter sound at the cost of
letting more names through.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TypeAlias

if sys.version_info >= (3, 11):
    import re._parser as _sre_parse
else:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse

#: A literal (lower-case ASCII substring), or ``(op, literals, parts)`` with ``op`` one of
#: ``"&"`` (all required) and ``"|"`` (one required), the literal parts (tested together)
#: apart from the nested ones.
Filter: TypeAlias = "str | tuple[str, tuple[str, ...], tuple[Filter, ...]]"

_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})


def literal_filter(pattern: str, flags: int = 0) -> Filter | None:
    """The substrings any match of ``pattern`` (compiled with ``flags``) must contain
    (lower-cased), as an and/or tree, or None when the pattern requires no literal text
    (or cannot be read)."""
    try:
        parsed = _sre_parse.parse(pattern, flags)
    except (re.error, RecursionError, TypeError, ValueError):
        return None
    try:
        # typeshed's SubPattern lacks __iter__; it iterates through __getitem__
        return _sequence(list(parsed))  # type: ignore[call-overload]
    except (RecursionError, TypeError, ValueError, IndexError):
        return None


#: The non-ASCII characters that ``re.IGNORECASE`` matches with an ASCII letter (found by
#: trying every code point; ``tests/test_rules.py`` checks the list).
IGNORECASE_ASCII = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s",
                                  "\u212a": "k"})


def filter_text(name: str) -> str:
    """``name`` as :func:`may_match` takes it: lower-cased, the non-ASCII characters that
    match ASCII letters case-insensitively replaced by those letters."""
    if name.isascii():
        return name.lower()
    return name.translate(IGNORECASE_ASCII).lower()


def may_match(node: Filter | None, lowered: str) -> bool:
    """False when ``lowered`` (a name as :func:`filter_text` gives it) lacks what
    ``node`` requires: the pattern cannot match it. True means it has to be run."""
    if node is None:
        return True
    if isinstance(node, str):
        return node in lowered
    op, literals, parts = node
    if op == "&":
        if not all(map(lowered.__contains__, literals)):
            return False
        return all(may_match(part, lowered) for part in parts)
    if any(map(lowered.__contains__, literals)):
        return True
    return any(may_match(part, lowered) for part in parts)


class Prefiltered:
    """A compiled pattern whose :meth:`search` first asks the pattern's literal filter:
    the same answers as ``pattern.search``, with the regular expression run only on the
    names that contain what every match needs (for patterns searched in many long kernel
    names)."""

    __slots__ = ("regex", "filter")

    def __init__(self, regex: re.Pattern[str]) -> None:
        self.regex = regex
        self.filter = literal_filter(regex.pattern, regex.flags)

    @property
    def pattern(self) -> str:
        """The pattern's text."""
        return self.regex.pattern

    def search(self, text: str) -> re.Match[str] | None:
        """``regex.search(text)``, skipped (None) when the filter rules the text out."""
        if self.filter is not None and not may_match(self.filter, filter_text(text)):
            return None
        return self.regex.search(text)

    def __repr__(self) -> str:
        return f"Prefiltered({self.regex!r})"


def _combine(op: str, parts: list[Filter]) -> Filter | None:
    literals: list[str] = []
    nested: list[Filter] = []
    for part in parts:
        if isinstance(part, str):
            if part not in literals:
                literals.append(part)
        elif part[0] == op:  # flatten (a & b) & c
            literals.extend(p for p in part[1] if p not in literals)
            nested.extend(p for p in part[2] if p not in nested)
        elif part not in nested:
            nested.append(part)
    if len(literals) + len(nested) == 0:
        return None
    if len(literals) + len(nested) == 1:
        return literals[0] if literals else nested[0]
    if op == "&":  # the longest literals first: they fail soonest
        literals.sort(key=len, reverse=True)
    return (op, tuple(literals), tuple(nested))


def _sequence(items: list[tuple[Any, Any]]) -> Filter | None:
    """Every item of a sequence is required: the conditions of all of them."""
    parts: list[Filter] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            parts.append("".join(run).lower())
            run.clear()

    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            char = chr(av)
            if char.isascii():
                run.append(char)
                continue
            flush()
            continue
        flush()
        found: Filter | None = None
        if name == "SUBPATTERN":
            found = _sequence(list(av[-1]))
        elif name == "ATOMIC_GROUP":
            found = _sequence(list(av))
        elif name == "BRANCH":
            alternatives = [_sequence(list(alt)) for alt in av[1]]
            if alternatives and all(a is not None for a in alternatives):
                found = _combine("|", [a for a in alternatives if a is not None])
        elif name in _REPEATS and av[0] >= 1:
            found = _sequence(list(av[2]))
        # anything else (classes, anchors, lookarounds, back references) requires nothing
        if found is not None:
            parts.append(found)
    flush()
    return _combine("&", parts)
