"""HTA's ``HtaConfig`` and module logger names.

Only what HTA's notebooks use: the ``logger`` and :meth:`HtaConfig.get_test_data_path`.
This package ships no sample traces, so the latter names where to find them instead.
"""

from __future__ import annotations

import logging
from typing import NoReturn

__all__ = ["HtaConfig", "logger"]

#: The package's logger (HTA's notebooks log through it).
logger = logging.getLogger("hta")


class HtaConfig:
    """HTA's configuration holder; this package is configured by keyword arguments."""

    @staticmethod
    def get_test_data_path(data_folder: str) -> NoReturn:
        """Not supported: no sample traces are installed with this package."""
        raise NotImplementedError(
            f"no sample traces ship with this package, so there is no {data_folder!r} "
            "test data folder; pass the path of a trace folder (for instance HTA's "
            "tests/data/<name> from its repository) to Trace(trace_dir=...)")
