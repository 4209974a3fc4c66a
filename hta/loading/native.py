"""Deprecated alias of :mod:`hta.kineto.native`."""

from hta._moved import alias

alias(__name__)
