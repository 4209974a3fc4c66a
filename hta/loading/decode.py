"""Deprecated alias of :mod:`hta.kineto.decode`."""

from hta._moved import alias

alias(__name__)
