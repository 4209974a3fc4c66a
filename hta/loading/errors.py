"""Deprecated alias of :mod:`hta.errors`."""

from hta._moved import alias

alias(__name__)
