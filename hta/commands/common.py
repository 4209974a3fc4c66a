"""Deprecated alias of :mod:`hta.commands.args_and_output`."""

from hta._moved import alias

alias(__name__)
