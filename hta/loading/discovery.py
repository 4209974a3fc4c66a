"""Deprecated alias of :mod:`hta.kineto.discovery`."""

from hta._moved import alias

alias(__name__)
