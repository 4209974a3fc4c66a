"""Deprecated alias of :mod:`hta.job.executors`."""

from hta._moved import alias

alias(__name__)
