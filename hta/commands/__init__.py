"""Subcommands of the ``hta`` command, one module each.

Each module has ``add_parser(subparsers)`` (which sets ``func``) and a ``run(args) -> int``.
The ``hta`` entry point (:mod:`hta.cli`) imports them explicitly, in the order ``hta
--help`` lists them, so the layer contract sees every dependency.
"""
