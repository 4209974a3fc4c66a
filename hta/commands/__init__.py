"""Subcommands of the ``hta`` command, one module each.

Each module has ``add_parser(subparsers)`` (which sets ``func``) and a ``run(args) -> int``.
"""

#: Subcommand modules, in the order ``hta --help`` lists them.
COMMANDS = ("summary", "report", "diff", "counters", "export")
