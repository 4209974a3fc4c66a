"""Deprecated alias of :mod:`hta.kineto.columns`."""

from hta._moved import alias

alias(__name__)
