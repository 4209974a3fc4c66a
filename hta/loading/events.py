"""Deprecated alias of :mod:`hta.kineto.pydecode`."""

from hta._moved import alias

alias(__name__)
