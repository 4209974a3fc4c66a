"""Deprecated alias of :mod:`hta.plots._figure_parts`."""

from hta._moved import alias

alias(__name__)
