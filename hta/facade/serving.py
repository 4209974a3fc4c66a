"""Serving traces on ``TraceAnalysis``: the engine's iterations (:mod:`hta.analysis.serving`)
and graph-replayed kernels mapped to the operators that captured them
(:mod:`hta.analysis.capture`).

The capture traces are read from ``capture_dir``, by default the ``capture_traces/``
folder inside the trace folder (TraceLens's layout); each file is loaded on its own (one
file per captured batch size, all of the same rank). A folder that is absent, holds no
trace, or whose captures match no replay is said in a warning, and the analysis goes on
without it (every replayed kernel then unmatched). ``merge_capture_traces`` puts the
matches on the ranks (:mod:`hta.analysis.perf.replayed`), so the operator tables, the
roofline and the findings count replayed kernels with their captured operators; it runs
on first use of those when ``capture_traces/`` is there, and reads nothing when not.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hta.facade.selecting import RanksOrSelection, selected
from hta.model.selection import Ranks

if TYPE_CHECKING:
    from hta.model.job import Job

logger = logging.getLogger(__name__)


def _batch_sizes(folder: Path) -> dict[str, int]:
    """File name -> captured batch size, from TraceLens's ``execution_details.json`` (a
    list of ``{"file", "batch_size"}``); empty when absent or unreadable."""
    import json

    path = folder / "execution_details.json"
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
        return {str(e["file"]): int(e["batch_size"]) for e in entries
                if isinstance(e, dict) and "file" in e and "batch_size" in e}
    except (OSError, ValueError, TypeError, KeyError):
        return {}


class ServingMixin:
    """``get_captured_kernels``, ``get_captured_op_performance``, ``get_capture_summary``,
    ``merge_capture_traces``, ``get_server_iterations`` and
    ``get_server_iteration_summary``."""

    t: Job
    trace_dir: str | None

    def get_server_iterations(self, ranks: RanksOrSelection = None) -> pd.DataFrame:
        """One row per engine iteration (vLLM's ``execute_model``, SGLang's batch step, or
        a graph launch): its kind (prefill, decode, mixed where the trace says), time,
        GPU busy time, idle time and GPU time per kernel category. See
        :mod:`hta.analysis.serving`."""
        from hta.analysis.serving import SERVER_ITERATIONS

        return SERVER_ITERATIONS.run(self.t, selected(self.t, ranks),
                                     getattr(self, "rules", None))

    def get_server_iteration_summary(self, ranks: Ranks = None) -> pd.DataFrame:
        """Per iteration kind: iterations, the steady state's median time (the first
        iteration of each kind on each rank left out) and the kind's totals (prefill vs
        decode). See :func:`hta.analysis.serving.iteration_summary`."""
        from hta.analysis.serving import iteration_summary

        return iteration_summary(self.get_server_iterations(selected(self.t, ranks)))

    def _capture_windows(self, capture_dir: str | Path | None) -> list[tuple[int, Any]]:
        """(rank of the capture trace, window) of every capture file, in file order."""
        from hta.analysis.capture import capture_windows
        from hta.errors import TraceError
        from hta.job.load import load_trace
        from hta.kineto.discovery import discover

        if capture_dir is None:
            if self.trace_dir is None or not Path(self.trace_dir).is_dir():
                return []
            capture_dir = Path(self.trace_dir) / "capture_traces"
            if not capture_dir.is_dir():
                return []
        cache = self.__dict__.setdefault("_capture_cache", {})
        key = str(capture_dir)
        if key in cache:
            return cache[key]
        out: list[tuple[int, Any]] = []
        try:
            files, _ = discover(capture_dir)
        except TraceError as exc:
            logger.warning("capture traces left out: %s", exc)
            files = []
        batches = _batch_sizes(Path(capture_dir))
        for f in files:
            if f.name == "execution_details.json":  # TraceLens's list of the captures
                continue
            try:
                job = load_trace(trace_files=[f], progress=False, max_workers=1,
                                 cache=False)
            except TraceError as exc:  # e.g. TraceLens's execution_details.json
                logger.info("capture folder: %s is not a capture trace: %s", f, exc)
                continue
            for rt in job.to_memory():
                out.extend((rt.rank, w) for w in capture_windows(
                    rt, str(f), batches.get(Path(str(f)).name, -1)))
        if not out:
            logger.warning("capture traces left out: %s holds no graph capture (no "
                           "BeginCapture ... EndCapture calls)", capture_dir)
        cache[key] = out
        return out

    def get_captured_kernels(self, ranks: RanksOrSelection = None,
                             capture_dir: str | Path | None = None) -> pd.DataFrame:
        """Each graph-replayed GPU event with the operator that captured it, its shapes and
        FLOPs (columns and matching: :mod:`hta.analysis.capture`). Capture traces of the
        replay's rank are used when there are any, else all of them."""
        from hta.analysis.capture import CAPTURED_KERNELS

        windows = self._capture_windows(capture_dir)
        out = CAPTURED_KERNELS.run(self.t, selected(self.t, ranks), windows)
        out = out.reset_index(drop=True) if len(out) else CAPTURED_KERNELS.empty()
        if len(out) and windows and not out["matched"].any():
            logger.warning("the capture traces match none of the %d graph replay(s): no "
                           "capture window has as many kernel launches as a replay has "
                           "kernels; replayed kernels stay without operators",
                           out["launch"].nunique())
        return out

    def get_captured_op_performance(self, ranks: Ranks = None,
                                    capture_dir: str | Path | None = None,
                                    device: Any = None) -> pd.DataFrame:
        """The operator calls of the graph-replayed kernels (found in the capture traces),
        in :meth:`get_op_performance`'s columns: kernel time, FLOPs, bytes and the % of
        the roofline against the rank's device (``device`` overrides it, as there); the
        rows ``captured`` true of :meth:`get_op_performance` once the capture is merged.
        See :func:`hta.analysis.capture.captured_op_performance`."""
        from hta.analysis.capture import CAPTURED_OP_PERFORMANCE

        selection = selected(self.t, ranks)
        kernels = self.get_captured_kernels(selection, capture_dir)
        out = CAPTURED_OP_PERFORMANCE.run(self.t, selection, kernels, device,
                                          getattr(self, "rules", None))
        return out.reset_index(drop=True) if len(out) else CAPTURED_OP_PERFORMANCE.empty()

    def merge_capture_traces(self, capture_dir: str | Path | None = None) -> pd.DataFrame:
        """Count graph-replayed work with the operators that captured it in the operator
        tables (:meth:`get_op_performance`, its summary, :meth:`get_category_time`), the
        roofline and the findings, from now on: each replayed kernel that found its
        operator (:meth:`get_captured_kernels`) counts with that call (a row with
        ``captured`` true), the others as before (:mod:`hta.analysis.perf.replayed`).

        Done on first use of those analyses when the trace folder has ``capture_traces/``;
        call it to name another folder (``capture_dir``). ``capture_dir=None`` after a
        merge changes nothing. Returns :meth:`get_capture_summary` (empty when there is
        no capture folder: nothing is merged, nothing read)."""
        from hta.analysis.capture import COLUMNS, capture_table, merge_summary
        from hta.analysis.perf.replayed import AttachReplayed

        done = self.__dict__.get("_capture_merged")
        if capture_dir is None and done is not None:
            return done.copy()
        if capture_dir is None and not self._capture_folder_here():
            self.__dict__["_capture_merged"] = summary = merge_summary(
                pd.DataFrame(columns=COLUMNS))
            return summary.copy()
        kernels = self.get_captured_kernels(None, capture_dir)
        tables = {r: capture_table(kernels, self.t.rank(r))
                  for r in self.t.selected_ranks(None)}
        tables = {r: t for r, t in tables.items() if len(t)}
        if tables or done is not None:  # nothing to take back on a first empty merge
            self.t.add_transform(AttachReplayed(tables))
            self.__dict__.pop("_findings_cache", None)  # findings counted without it
        self.__dict__["_capture_merged"] = summary = merge_summary(kernels)
        if tables:
            logger.info("capture merge: %d replayed kernels of %d rank(s) count with their "
                        "captured operators", sum(map(len, tables.values())), len(tables))
        return summary.copy()

    def _capture_folder_here(self) -> bool:
        """Whether the trace folder has ``capture_traces/`` (one look at the disk)."""
        return (self.trace_dir is not None and Path(self.trace_dir).is_dir()
                and (Path(self.trace_dir) / "capture_traces").is_dir())

    def get_capture_summary(self, ranks: Ranks = None,
                            capture_dir: str | Path | None = None) -> pd.DataFrame:
        """Per rank: graph replays, how many matched a capture, the replayed kernels' time
        and the share that found its operator, and their GEMM GFLOP
        (:func:`hta.analysis.capture.merge_summary`)."""
        from hta.analysis.capture import merge_summary

        return merge_summary(self.get_captured_kernels(selected(self.t, ranks), capture_dir))
