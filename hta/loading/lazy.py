"""Deprecated alias of :mod:`hta.job.distributed`."""

from hta._moved import alias

alias(__name__)
