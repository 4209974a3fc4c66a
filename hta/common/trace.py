"""HTA's ``Trace`` parser object, over this package's loader.

``Trace(trace_dir=...)`` followed by ``parse_traces()`` loads the folder with
:class:`hta.trace_analysis.TraceAnalysis`; ``get_trace(rank)`` returns this package's
per-rank events table (ids in ``name``/``cat``, times in integer ns), and
``decode_symbol_ids()`` adds the ``s_name`` / ``s_cat`` text columns as HTA does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from hta.analysis.names import short_name
from hta.configs.parser_config import ParserConfig
from hta.model.trace import SymbolView
from hta.model.trace import Trace as ModelTrace
from hta.trace_analysis import TraceAnalysis

logger = logging.getLogger(__name__)

__all__ = ["Trace", "TraceSymbolTable"]

#: HTA's symbol table type; here the model's read-only view of the shared table.
TraceSymbolTable = SymbolView


class Trace:
    """A job's traces, loaded on :meth:`parse_traces` (HTA's two-step form).

    Args:
        trace_files: rank -> file mapping, or a list of files, instead of the whole folder.
        trace_dir: the folder of traces.
        parser_config: which arg columns to join onto the events tables (default:
            ``ParserConfig.get_default_cfg()``; see :mod:`hta.configs.parser_config`).
        cache: use this package's Parquet cache (off by default: HTA's parser has none).
        include_last_profiler_step: keep the last ``ProfilerStep`` (HTA's ``Trace`` keeps
            it too; its ``TraceAnalysis`` drops it).
    """

    def __init__(
        self,
        trace_files: Mapping[int, str] | Iterable[str] | None = None,
        trace_dir: str | Path = "",
        parser_config: Any = None,
        *,
        cache: bool = False,
        include_last_profiler_step: bool = True,
    ) -> None:
        self.trace_files = trace_files
        self.trace_path = str(Path(str(trace_dir)).expanduser()) if trace_dir else ""
        self.parser_config = parser_config
        self.cache = cache
        self.include_last_profiler_step = include_last_profiler_step
        self.analyzer: TraceAnalysis | None = None
        self.traces: dict[int, pd.DataFrame] = {}
        self.is_parsed = False

    @classmethod
    def from_model(cls, trace: ModelTrace) -> Trace:
        """Wrap an already loaded trace (``analyzer.t``) without reading anything again."""
        out = cls(trace_dir=getattr(trace, "trace_dir", ""))
        out._model = trace
        out.traces = trace.get_all_traces()
        out.is_parsed = True
        return out

    def parse_traces(self, max_ranks: int = -1, use_multiprocessing: bool = True,
                     use_memory_profiling: bool = True) -> None:
        """Load the traces (the first ``max_ranks`` ranks when it is positive).

        ``use_multiprocessing`` and ``use_memory_profiling`` are accepted for HTA's
        signature; the loader decides how to spread the work.
        """
        del use_multiprocessing, use_memory_profiling
        ranks = None
        if max_ranks > 0 and isinstance(self.trace_files, Mapping):
            ranks = sorted(int(r) for r in self.trace_files)[:max_ranks]
        self.analyzer = TraceAnalysis(
            trace_dir=self.trace_path or None, trace_files=self.trace_files, ranks=ranks,
            include_last_profiler_step=self.include_last_profiler_step, cache=self.cache,
            progress=False)
        model = self.analyzer.t
        keep = model.get_ranks()
        if max_ranks > 0:
            keep = keep[:max_ranks]
        cfg = self.parser_config or ParserConfig.get_default_cfg()
        self.traces = {}
        for r in keep:
            events = model.get_trace(r)
            if cfg.get_args():
                events = cfg.join_args(events, model.rank(r).tables)
            self.traces[r] = events
        self._model = model
        self.is_parsed = True

    def _loaded(self) -> ModelTrace:
        model = getattr(self, "_model", None)
        if model is None:
            raise RuntimeError("the traces are not loaded yet: call parse_traces() first")
        return model

    @property
    def symbol_table(self) -> SymbolView:
        """The shared symbol table (``get_sym_table()``, ``get_sym_id_map()`` ...)."""
        return self._loaded().symbol_table

    @property
    def t(self) -> ModelTrace:
        """This package's loaded trace, for TraceAnalysis-level functions."""
        return self._loaded()

    def get_ranks(self) -> list[int]:
        """The loaded ranks, ascending."""
        return sorted(self.traces)

    def get_trace(self, rank: int) -> pd.DataFrame:
        """One rank's events table."""
        if rank not in self.traces:
            raise KeyError(f"rank {rank} is not loaded; loaded ranks: {self.get_ranks()}")
        return self.traces[rank]

    def get_all_traces(self) -> dict[int, pd.DataFrame]:
        """rank -> events table."""
        return dict(self.traces)

    def get_iterations(self, rank: int | None = None) -> list[int]:
        """The profiler steps of a rank (the first loaded rank by default), ascending."""
        rank = self.get_ranks()[0] if rank is None else rank
        its = self.get_trace(rank)["iteration"]
        return sorted(int(i) for i in its.unique() if i >= 0)

    def get_trace_duration(self, rank: int | None = None) -> int:
        """Last end minus first start of a rank's events, in ns (HTA: µs)."""
        rank = self.get_ranks()[0] if rank is None else rank
        df = self.get_trace(rank)
        return int((df["ts"] + df["dur"]).max() - df["ts"].min())

    def decode_symbol_ids(self, use_shorten_name: bool = True) -> None:
        """Add ``s_name`` and ``s_cat`` (the text of ``name`` and ``cat``) to every rank's
        table, in place; ``use_shorten_name`` shortens ``s_name`` with
        :func:`hta.analysis.names.short_name`."""
        table = self.symbol_table
        for df in self.traces.values():
            for col in ("name", "cat"):
                df[f"s_{col}"] = df[col]
                table.add_symbols_to_trace_df(df, f"s_{col}")
            if use_shorten_name:
                df["s_name"] = df["s_name"].map(short_name)
