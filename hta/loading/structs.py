"""Deprecated alias of :mod:`hta.kineto.structs`."""

from hta._moved import alias

alias(__name__)
