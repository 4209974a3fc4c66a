"""HTA's parser configuration, mapped onto this package's arg tables.

This package's loader always reads the event args it knows into per-rank side tables
(``op_args``, ``kernel_args``, ``memory_args``, ``collective_args``, ``sync_args``, keyed
by the event's ``index``), whatever the configuration. A :class:`ParserConfig` here
chooses which of those columns :class:`hta.common.trace.Trace` joins onto each rank's
events table, so ``cfg.add_args(ParserConfig.ARGS_INPUT_SHAPE)`` gives the
``input_dims`` and ``input_type`` columns as in HTA's notebook.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

import pandas as pd

__all__ = ["AttributeSpec", "ParserBackend", "ParserConfig", "ValueType"]


class ValueType(Enum):
    """Type of an attribute's values."""

    Int = 1
    Float = 2
    String = 3
    Object = 4


class ParserBackend(str, Enum):
    """Accepted for HTA's API; this package has one loader."""

    JSON = "json"
    IJSON = "ijson"
    IJSON_BATCHED = "ijson_batched"
    IJSON_BATCH_AND_COMPRESS = "ijson_batch_and_compress"


@dataclass(frozen=True)
class AttributeSpec:
    """One column to join: ``name`` in the events table, read from ``table``'s
    ``column`` (``raw_name`` is the trace's arg name, for reference)."""

    name: str
    raw_name: str
    value_type: ValueType
    table: str
    column: str


def _spec(table: str, column: str, raw: str, vt: ValueType) -> AttributeSpec:
    return AttributeSpec(column, raw, vt, table, column)


class ParserConfig:
    """Which arg columns :class:`hta.common.trace.Trace` adds to the events tables."""

    ARGS_INPUT_SHAPE: ClassVar[list[AttributeSpec]] = [
        _spec("op_args", "input_dims", "Input Dims", ValueType.String),
        _spec("op_args", "input_type", "Input type", ValueType.String),
    ]
    ARGS_BANDWIDTH: ClassVar[list[AttributeSpec]] = [
        _spec("memory_args", "bytes", "bytes", ValueType.Float),
        _spec("memory_args", "bandwidth_gbps", "memory bandwidth (GB/s)", ValueType.Float),
    ]
    ARGS_SYNC: ClassVar[list[AttributeSpec]] = [
        _spec("sync_args", "wait_on_stream", "wait_on_stream", ValueType.Int),
        _spec("sync_args", "wait_on_event_correlation", "wait_on_cuda_event_record_corr_id",
              ValueType.Int),
    ]
    ARGS_COMMUNICATION: ClassVar[list[AttributeSpec]] = [
        _spec("collective_args", c, raw, vt) for c, raw, vt in (
            ("collective_name", "Collective name", ValueType.String),
            ("dtype", "dtype", ValueType.String),
            ("in_msg_nelems", "In msg nelems", ValueType.Float),
            ("out_msg_nelems", "Out msg nelems", ValueType.Float),
            ("group_size", "Group size", ValueType.Float),
            ("process_group_name", "Process Group Name", ValueType.String),
            ("process_group_ranks", "Process Group Ranks", ValueType.String),
        )
    ]
    ARGS_MINIMUM: ClassVar[list[AttributeSpec]] = []
    ARGS_DEFAULT: ClassVar[list[AttributeSpec]] = []
    _default: ClassVar[ParserConfig | None] = None

    def __init__(self, args: list[AttributeSpec] | None = None) -> None:
        self.args: list[AttributeSpec] = list(args or [])
        self.parser_backend = ParserBackend.JSON

    @classmethod
    def get_default_cfg(cls) -> ParserConfig:
        """A copy of the configuration new traces use."""
        return copy.deepcopy(cls._default or ParserConfig())

    @classmethod
    def set_default_cfg(cls, cfg: ParserConfig) -> None:
        """The configuration new :class:`hta.common.trace.Trace` objects use."""
        cls._default = copy.deepcopy(cfg)

    def get_args(self) -> list[AttributeSpec]:
        """The columns to join."""
        return list(self.args)

    def set_args(self, args: list[AttributeSpec]) -> None:
        """Replace the columns to join."""
        self.args = list(args)

    def add_args(self, args: list[AttributeSpec]) -> None:
        """Add columns to join (each once)."""
        for spec in args:
            if spec not in self.args:
                self.args.append(spec)

    def set_parser_backend(self, parser_backend: ParserBackend) -> None:
        """Accepted for HTA's API: this package has one loader."""
        self.parser_backend = ParserBackend(parser_backend)

    def join_args(self, events: pd.DataFrame, tables: dict[str, pd.DataFrame]
                  ) -> pd.DataFrame:
        """``events`` with this configuration's columns joined from ``tables`` (rows
        without a value get the column's missing value)."""
        out = events
        for table in dict.fromkeys(s.table for s in self.args):
            cols = [s.column for s in self.args if s.table == table]
            frame = tables.get(table)
            if frame is None:
                continue
            values = frame.set_index("index")[cols]
            out = out.drop(columns=[c for c in cols if c in out.columns])
            out = out.join(values, on="index")
        return out
