"""Deprecated alias of :mod:`hta.kineto.symbols`."""

from hta._moved import alias

alias(__name__)
