"""HTA's name and table helpers, over this package's definitions.

``shorten_name`` is :func:`hta.analysis.names.short_name` (template and function
arguments and the return type removed).
"""

from __future__ import annotations

import pandas as pd

from hta.analysis.names import short_name
from hta.model.trace import text_name_columns

__all__ = ["flatten_column_names", "get_symbol_column_names", "shorten_name"]


def shorten_name(name: str) -> str:
    """A kernel or operator name without its template and function arguments."""
    return short_name(name)


def flatten_column_names(df: pd.DataFrame) -> None:
    """Join the levels of ``df``'s column MultiIndex with ``_``, in place (no-op on
    flat columns)."""
    if isinstance(df.columns, pd.MultiIndex):
        df.columns = ["_".join(str(p) for p in col if str(p)) for col in df.columns]


def get_symbol_column_names(df: pd.DataFrame) -> tuple[str, str]:
    """The columns holding events' names and categories as text: ``(name, cat)`` when
    they hold text, else ``(s_name, s_cat)`` (after ``Trace.decode_symbol_ids()``); ``""``
    for one that neither holds. See :func:`hta.model.trace.text_name_columns`."""
    return text_name_columns(df)
