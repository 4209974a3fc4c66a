"""Deprecated alias of :mod:`hta.kineto.stream`."""

from hta._moved import alias

alias(__name__)
