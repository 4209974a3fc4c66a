"""Deprecated alias of :mod:`hta.kineto.timeparse`."""

from hta._moved import alias

alias(__name__)
