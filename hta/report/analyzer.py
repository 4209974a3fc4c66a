"""What the report and the CLI need of a loaded job: :class:`Analyzer`, the part of
:class:`~hta.trace_analysis.TraceAnalysis` they call, as a :class:`typing.Protocol`.

The report sits beside ``TraceAnalysis`` in the layers (``pyproject.toml``,
``[tool.importlinter]``) and may not import it; it types its analyzer with this protocol
instead, and mypy checks at each call site (``hta report``, ``hta summary``) that a
``TraceAnalysis`` is one. Arguments are typed as narrowly as the report and the CLI pass
them (a list of ranks or steps, or ``None``), so any wider signature of the facade fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd

    from hta.analysis.whatif import Change
    from hta.analysis.whatif.replayer import Replay
    from hta.model.job import Job
    from hta.model.rules import RuleSet


class Analyzer(Protocol):
    """A loaded job with the analyses the report and the CLI read (a ``TraceAnalysis``)."""

    @property
    def t(self) -> Job:
        """The loaded job (in memory or distributed)."""

    @property
    def trace_dir(self) -> str | None:
        """The folder the traces were read from (``None``: files given one by one)."""

    @property
    def ranks(self) -> list[int]:
        """The loaded ranks, ascending."""

    @property
    def missing_ranks(self) -> list[int]:
        """Ranks of the job's world size with no loaded trace."""

    @property
    def skipped(self) -> dict[str, str]:
        """Files that could not be loaded, with the reason."""

    @property
    def rules(self) -> RuleSet:
        """The event-kind rules in force."""

    def metadata(self, rank: int | None = None) -> dict[str, Any]:
        """Metadata of one rank (default: the first loaded)."""

    def merge_capture_traces(self) -> pd.DataFrame:
        """Merge ``capture_traces/`` into the analyses; per rank, what matched."""

    def get_findings(self, ranks: list[int] | None = None,
                     iterations: list[int] | None = None) -> pd.DataFrame:
        """The findings table (:data:`hta.analysis.findings.engine.COLUMNS`)."""

    def get_timeline_segments(self, ranks: list[int] | None = None,
                              iterations: list[int] | None = None, *,
                              max_segments: int, resolution_ns: int | None = None
                              ) -> pd.DataFrame:
        """The GPU timeline's segments (:mod:`hta.analysis.timeline`)."""

    def get_memory_timeline(self, ranks: list[int] | None = None) -> pd.DataFrame:
        """Allocated and reserved bytes over time per rank and device."""

    def get_memory_summary(self, ranks: list[int] | None = None) -> pd.DataFrame:
        """The peak allocation per rank and device."""

    def get_collective_arrivals(self, ranks: list[int] | None = None,
                                iterations: list[int] | None = None) -> pd.DataFrame:
        """When each rank arrived at each collective (:mod:`hta.analysis.stragglers`)."""

    def get_collective_performance(self, ranks: list[int] | None = None,
                                   iterations: list[int] | None = None) -> pd.DataFrame:
        """Bus bandwidth of every collective (:mod:`hta.analysis.collectives`)."""

    def get_straggler_causes(self, ranks: list[int] | None = None,
                             iterations: list[int] | None = None,
                             replay: bool = True) -> pd.DataFrame:
        """Why each late rank is late (:mod:`hta.analysis.straggler_causes`)."""

    def get_pipeline_bubbles(self, ranks: list[int] | None = None,
                             iterations: list[int] | None = None,
                             per: str = "micro_batch") -> pd.DataFrame:
        """Where each pipeline stage's computation idles (:mod:`hta.analysis.pipeline`)."""

    def replay(self) -> Replay:
        """The job's replay (:class:`~hta.analysis.whatif.replayer.Replay`)."""

    def replay_findings(self, findings: pd.DataFrame, together: bool = False
                        ) -> pd.DataFrame:
        """The findings with each fix's replayed saving (:mod:`hta.analysis.whatif.findings`)."""

    def get_replay_uncertainty(self) -> pd.DataFrame:
        """Per rank, what the replay guesses (:mod:`hta.analysis.whatif.uncertainty`)."""

    def get_job_step_bound(self, iterations: list[int] | None = None
                           ) -> dict[str, Any] | None:
        """What bounds the job's step (:func:`hta.analysis.whatif.jobpath.job_step_bound`)."""

    def get_step_bounds(self, iterations: list[int] | None = None) -> pd.DataFrame:
        """What bounds each step, one row per step."""

    def what_if(self, changes: Sequence[Change] | None = None) -> pd.DataFrame:
        """The replay of the job with ``changes`` (:mod:`hta.analysis.whatif`)."""


__all__ = ["Analyzer"]
