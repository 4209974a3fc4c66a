"""Deprecated alias of :mod:`hta.kineto.rawio`."""

from hta._moved import alias

alias(__name__)
