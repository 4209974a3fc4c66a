"""Deprecated alias of :mod:`hta.job.cache`."""

from hta._moved import alias

alias(__name__)
