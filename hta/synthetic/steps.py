"""Deprecated alias of :mod:`hta.synthetic.training_step`."""

from hta._moved import alias

alias(__name__)
