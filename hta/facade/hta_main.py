"""Deprecated alias of :mod:`hta.facade.steps_and_ops`."""

from hta._moved import alias

alias(__name__)
