"""Deprecated alias of :mod:`hta.job.load`."""

from hta._moved import alias

alias(__name__)
