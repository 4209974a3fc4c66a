"""Deprecated alias of :mod:`hta.kineto.files`."""

from hta._moved import alias

alias(__name__)
