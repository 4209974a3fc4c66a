"""Deprecated alias of :mod:`hta.kineto.side_tables`."""

from hta._moved import alias

alias(__name__)
