"""Findings on ``TraceAnalysis``: why the GPU waits, what to change, and what is left
unexplained."""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING

import pandas as pd

from hta.facade.selecting import RanksOrSelection, selected
from hta.model.selection import Iterations, Ranks, Selection

if TYPE_CHECKING:
    from hta.analysis.findings import FindingsResult
    from hta.model.job import Job


class FindingsMixin:
    """``get_findings``, its coverage, and the rule table."""

    t: Job

    def _findings(self, selection: Selection, min_share: float | None) -> FindingsResult:
        """One run of the rules per selection, kept for the companion methods;
        ``min_share=None`` is the engine's default (imported here, on first use)."""
        from hta.analysis.findings import analyse
        from hta.analysis.findings.engine import DEFAULT_MIN_SHARE

        if min_share is None:
            min_share = DEFAULT_MIN_SHARE

        merge = getattr(self, "merge_capture_traces", None)
        if merge is not None:  # graph-replayed work with its captured operators
            merge()
        cache = self.__dict__.setdefault("_findings_cache", {})
        key = (selection, float(min_share))
        if key not in cache:
            cache.clear()
            cache[key] = analyse(self.t, selection, min_share=min_share)
        return cache[key]

    def get_findings(self, ranks: RanksOrSelection = None,
                     iterations: Iterations = None,
                     min_share: float | None = None,
                     replay: bool = True) -> pd.DataFrame:
        """What slows the job down, why, and what to try, largest saving first.

        Columns ``rule, severity, ranks, steps, evidence, est_saving(us), advice`` (then
        ``title``, ``subject``: what a rule firing several times is about,
        ``section``: the report section holding the evidence, ``share_pctg``: the saving
        as a share of the analysed time, and ``change, saving_source, saving_low(us),
        saving_high(us), saving_per_step(us), saving_step_pctg``).

        The saving is the replay's: each rule names the change that models its fix
        (``change``), the job is replayed with it, and ``est_saving(us)`` is the time the
        job's steps would lose over the analysed steps, with a range
        (``saving_source`` ``replay``); a fix the replay cannot model keeps the rule's
        estimate of GPU time (``gpu-time``). See :mod:`hta.analysis.whatif.findings`.
        ``replay=False``: the rules' own estimates only (no replay; every saving
        ``gpu-time``). The replay builds the job graph of every rank in this process
        (about 0.75 kB per event) unless the job runs on a Dask client: on a job of
        millions of events pass ``replay=False``, or load it with ``client=``
        (``hta summary`` does so itself above 4M events). Each rule:
        :meth:`describe_findings_rules` and the documentation page *Findings*.
        ``min_share`` drops findings smaller than that share of the analysed time
        (default 0.5%) before the replay. What they leave unexplained:
        :meth:`get_findings_coverage`.
        """
        # a graph the replay can build meanwhile, where a core would idle
        with self.replay().building_ahead() if replay else nullcontext():  # type: ignore[attr-defined]
            found = self._findings(selected(self.t, ranks, iterations), min_share).findings
        cache = self.__dict__.setdefault("_replayed_findings", {})
        key = (id(found), replay)
        if key not in cache:
            cache.clear()
            if replay:
                cache[key] = self.replay_findings(found)  # type: ignore[attr-defined]
            else:
                from hta.analysis.whatif.findings import findings_with_changes

                cache[key] = findings_with_changes(found, None)
        return cache[key].copy()

    def get_findings_together(self, ranks: RanksOrSelection = None,
                              iterations: Iterations = None,
                              min_share: float | None = None) -> pd.DataFrame:
        """What the findings' replayed fixes save made all at once: one row, or none when
        fewer than two findings have a replayed saving.

        Each finding's saving is its own fix replayed alone, and fixes overlap, so the
        savings of :meth:`get_findings` do not add up. Here the job is replayed once with
        every replayed finding's change together. Columns ``changes`` (joined by ``" +
        "``), ``findings`` (how many are combined), ``est_saving(us)``,
        ``saving_low(us)``, ``saving_high(us)``, ``saving_per_step(us)``,
        ``saving_step_pctg`` (as for a finding), ``sum_of_savings(us)`` (the combined
        findings' own savings added up) and ``left_out`` (changes not combined, and why).
        See :mod:`hta.analysis.whatif.together`.
        """
        selection = selected(self.t, ranks, iterations)
        cache = self.__dict__.setdefault("_findings_together", {})
        key = id(self._findings(selection, min_share).findings)  # as get_findings keeps it
        if key not in cache:
            cache.clear()
            found = self.get_findings(selection, min_share=min_share)
            cache[key] = self.replay().findings_together(found)  # type: ignore[attr-defined]
        return cache[key].copy()

    def get_findings_coverage(self, ranks: Ranks = None,
                              iterations: Iterations = None,
                              min_share: float | None = None) -> pd.DataFrame:
        """Per rank, how much of the idle and exposed time the findings explain.

        Columns (times in µs over the analysed window): ``not_computing`` (no computation
        kernel running: ``idle`` + ``exposed_comm`` + ``exposed_memory``), ``explained``
        (held by the findings shown), ``unexplained``, their shares, the rank's total
        ``saving``, the time in kernels of unknown kind (``unclassified``), and ``note``:
        a sentence when the GPU idles over 20% of the window and the findings explain
        less than half of it, or when kernels match no kind rule. Definitions:
        :mod:`hta.analysis.findings.coverage`. The longest unexplained pieces:
        :meth:`get_unexplained_time`.
        """
        return self._findings(selected(self.t, ranks, iterations), min_share).coverage.copy()

    def get_unexplained_time(self, ranks: Ranks = None,
                             iterations: Iterations = None,
                             min_share: float | None = None) -> pd.DataFrame:
        """The longest stretches (up to 5 per rank) of idle or exposed time no finding
        explains: ``start_ns``, ``end_ns``, ``dur(us)``, ``step``, ``gpu`` (idle or the
        exposed kind), ``cpu`` (operators and runtime calls with the most exclusive time
        in it) and ``annotations`` (the ``record_function`` ranges around it)."""
        return self._findings(selected(self.t, ranks, iterations), min_share).unexplained.copy()

    def describe_findings_rules(self) -> pd.DataFrame:
        """Every findings rule: id, title, scope, report section, saving, advice."""
        from hta.analysis.findings import describe_rules

        return describe_rules()
