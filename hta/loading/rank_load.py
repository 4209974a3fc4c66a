"""Deprecated alias of :mod:`hta.job.rank_load`."""

from hta._moved import alias

alias(__name__)
