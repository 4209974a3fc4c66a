"""Deprecated alias of :mod:`hta.job.arrow_files`."""

from hta._moved import alias

alias(__name__)
