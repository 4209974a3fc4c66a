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
from hta.common.trace_symbol_table import TraceSymbolTable
from hta.configs.parser_config import ParserConfig
from hta.kineto.discovery import discover
from hta.kineto.rank import peek_rank, rank_from_filename
from hta.model.job import Job
from hta.model.trace import SymbolView
from hta.model.trace import Trace as ModelTrace
from hta.trace_analysis import TraceAnalysis

logger = logging.getLogger(__name__)

__all__ = ["RankNotLoadedError", "Trace", "TraceSymbolTable", "rank_files"]


class RankNotLoadedError(KeyError, ValueError):
    """A rank that is not loaded: a ``KeyError`` (a missing key of ``traces``) and the
    ``ValueError`` HTA's ``Trace.get_trace`` raises."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def rank_files(trace_dir: str, trace_files: Mapping[int, str] | Iterable[str] | None
               ) -> dict[int, str]:
    """Rank -> file of the traces a ``Trace`` will load, as HTA's ``Trace.trace_files``.

    A mapping gives its ranks; a list of files or a folder gives each file's
    ``distributedInfo.rank`` from the head of the file, else the rank in its name
    (``rank-3``), else 0 for a lone file (:mod:`hta.kineto.rank`'s rules). Files whose rank
    only a full load can tell are left out until :meth:`Trace.parse_traces`, which
    replaces this mapping with the loaded ranks' files. A folder or file that cannot be
    found gives an empty mapping here; ``parse_traces`` then raises the loader's error.
    """
    try:
        files, explicit = discover(trace_dir or None, trace_files)
    except Exception:  # noqa: BLE001 - parse_traces reports what is wrong, with the loader's words
        return {}
    out: dict[int, str] = {}
    for path in files:
        rank = explicit.get(path)
        if rank is None and isinstance(path, Path):
            rank = peek_rank(path)
        if rank is None:
            rank = rank_from_filename(path)
        if rank is None and len(files) == 1:
            rank = 0
        if rank is not None:
            out.setdefault(rank, str(path))
    return dict(sorted(out.items()))


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
        if trace_files is not None and (isinstance(trace_files, (str, bytes))
                                        or not isinstance(trace_files, Iterable)):
            raise TypeError("trace_files must be a list of trace files or a mapping rank -> "
                            f"file, got {type(trace_files).__name__}: {trace_files!r}")
        self.trace_path = str(Path(str(trace_dir)).expanduser()) if trace_dir else ""
        self._given_files = trace_files
        # rank -> file, found when first asked for (it peeks into every file's head)
        self._trace_files: Any = None
        self._found_files: dict[int, str] | None = {}
        self.parser_config = parser_config
        self.cache = cache
        self.include_last_profiler_step = include_last_profiler_step
        self.analyzer: TraceAnalysis | None = None
        self.traces: dict[int, pd.DataFrame] = {}
        self.is_parsed = False

    @property
    def trace_files(self) -> Any:
        """Rank -> trace file, as HTA's ``Trace.trace_files``: before :meth:`parse_traces`
        the files it will load (:func:`rank_files`), after it the loaded ranks' files.
        Assign a mapping (or edit this one) before :meth:`parse_traces` to choose the
        files to load."""
        if self._trace_files is None:
            self._trace_files = rank_files(self.trace_path, self._given_files)
            self._found_files = dict(self._trace_files)
        return self._trace_files

    @trace_files.setter
    def trace_files(self, value: Any) -> None:
        self._trace_files = value
        self._found_files = None  # the caller chose

    def _chosen_files(self) -> Any:
        """The files the caller chose (assigned, or edited in place) since the mapping was
        found, or None when it chose none."""
        if self._trace_files is None or self._trace_files == self._found_files:
            return None
        return self._trace_files

    def _set_loaded_files(self, model: Job) -> None:
        self._trace_files = {r: str(model.meta(r).get("source", "")) for r in model.get_ranks()}
        self._found_files = dict(self._trace_files)

    @classmethod
    def from_model(cls, trace: ModelTrace) -> Trace:
        """Wrap an already loaded trace (``analyzer.t``) without reading anything again."""
        out = cls(trace_dir=getattr(trace, "trace_dir", ""))
        out._model = trace
        out.traces = trace.get_all_traces()
        out._set_loaded_files(trace)
        out.is_parsed = True
        return out

    def parse_traces(self, max_ranks: int = -1, use_multiprocessing: bool = True,
                     use_memory_profiling: bool = True) -> None:
        """Load the traces (the first ``max_ranks`` ranks when it is positive).

        The files are those given to the constructor, or ``trace_files`` when the caller
        changed that mapping since (HTA's way to choose files after construction).

        ``use_multiprocessing`` and ``use_memory_profiling`` are accepted for HTA's
        signature; the loader decides how to spread the work.
        """
        del use_multiprocessing, use_memory_profiling
        ranks = None
        given = self._given_files
        chosen = self._chosen_files()
        if chosen is not None:  # the caller assigned or edited trace_files
            if not isinstance(chosen, Mapping) or not chosen:
                raise ValueError("trace_files holds no trace file to parse: give a mapping "
                                 f"rank -> file, got {chosen!r}")
            given = dict(chosen)
        if max_ranks > 0 and isinstance(given, Mapping):
            ranks = sorted(int(r) for r in given)[:max_ranks]
        self.analyzer = TraceAnalysis(
            trace_dir=self.trace_path or None, trace_files=given, ranks=ranks,
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
        self._set_loaded_files(model)
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
            raise RankNotLoadedError(
                f"rank {rank} is not loaded; loaded ranks: {self.get_ranks()}")
        return self.traces[rank]

    def get_all_traces(self) -> dict[int, pd.DataFrame]:
        """rank -> events table."""
        return dict(self.traces)

    def get_iterations(self, rank: int | None = None) -> list[int]:
        """The profiler steps of a rank (the first loaded rank by default), ascending;
        ``[]`` for a table without an ``iteration`` column."""
        rank = self.get_ranks()[0] if rank is None else rank
        events = self.get_trace(rank)
        if "iteration" not in events.columns:
            return []
        return sorted(int(i) for i in events["iteration"].unique() if i >= 0)

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
