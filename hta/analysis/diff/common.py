"""Deprecated alias of :mod:`hta.analysis.diff.scope`."""

from hta._moved import alias

alias(__name__)
