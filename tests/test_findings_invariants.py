"""Invariants every findings table must keep, checked on every real trace we have.

The traces are the folders of ``../shared/traces/hta`` that hold trace files (skipped when
that folder is absent). Each is loaded once for the module and its findings computed once.
The invariants (issue 17):

* **bounded savings**: on every rank, the savings of all findings that name the rank add
  up to no more than the rank's analysed window (``analysis_window``): a fix cannot save
  more time than was analysed;
* **no time claimed twice**: no two rows share a rule and subject, and no two rows of one
  rule claim exactly the same saving on a common rank under different subjects (the same
  interval reported once per process group and once per stream);
* **evidence a reader can find**: every ``high`` finding's evidence names at least one
  event of the trace by name and states a time.

A case that fails on today's code is marked ``xfail(strict=False)`` with what is wrong, so
the suite shows it and turns green when the findings are fixed. ``HTA_MORE_TRACES`` adds
folders of jobs (e.g. ``/work/public_traces``, issue 17's public traces; not in the
default run because they take longer and are not in every checkout).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import SHARED_TRACES, absent_reason

from hta.analysis.findings.engine import analysis_window
from hta.trace_analysis import TraceAnalysis

#: Folders that cannot be analysed as one job, and why (they are checked elsewhere).
NOT_A_JOB = {
    "memory_analysis": "holds a memory timeline, not a Kineto trace",
}
#: A time as the findings print it: a number and a unit.
TIME = re.compile(r"\d[\d,]*(?:\.\d+)?\s*(?:ns|µs|us|ms|s)\b")
#: Shortest event-name stem that counts as naming an event (shorter stems match by chance).
MIN_STEM = 5


#: More folders of jobs to check (``os.pathsep``-separated), e.g. the public traces of
#: issue 17: ``HTA_MORE_TRACES=/work/public_traces``. Their jobs are named by full path.
MORE_TRACES = os.environ.get("HTA_MORE_TRACES", "")


def _job_dirs() -> list[str]:
    """Every folder holding trace files: relative to the shared traces, or absolute for
    the folders of :data:`MORE_TRACES`."""
    dirs = set()
    roots = [SHARED_TRACES] + [Path(p) for p in MORE_TRACES.split(os.pathsep) if p]
    for root in roots:
        if not root.is_dir():
            continue
        for pattern in ("*.json", "*.json.gz"):
            for path in root.rglob(pattern):
                folder = path.parent.relative_to(root).as_posix()
                hidden = any(part.startswith((".", "_")) for part in Path(folder).parts)
                if folder in NOT_A_JOB or hidden:  # caches, staging folders
                    continue
                dirs.add(folder if root == SHARED_TRACES else path.parent.as_posix())
    return sorted(dirs)


JOBS = _job_dirs()
#: Known failures today: (job, invariant) -> what is wrong. Empty since the issue-17 work
#: (the comm_exposed and launch_bound rows of 2026-11-24, FINDINGS_BEFORE.md pattern P8,
#: name their kernels now); a new known failure goes here with what is wrong.
KNOWN: dict[tuple[str, str], str] = {}


@functools.cache
def _analysed(job: str) -> tuple[TraceAnalysis, pd.DataFrame]:
    """The job loaded once, with its findings (skips a folder that does not load)."""
    try:
        analyzer = TraceAnalysis(trace_dir=str(SHARED_TRACES / job), cache=False)
    except Exception as exc:  # noqa: BLE001 - a folder that is not a job is skipped
        pytest.skip(f"{job} does not load as a job: {type(exc).__name__}: {exc}")
    return analyzer, analyzer.get_findings()


def _case(job: str, invariant: str):
    key = (Path(job).name if Path(job).is_absolute() else job, invariant)
    marks = []
    if key in KNOWN:
        marks.append(pytest.mark.xfail(reason=KNOWN[key], strict=False))
    return pytest.param(job, marks=marks, id=job)


def _cases(invariant: str) -> list:
    if not JOBS:
        return [pytest.param("", marks=pytest.mark.skip(
            reason=absent_reason(SHARED_TRACES)), id="absent")]
    return [_case(job, invariant) for job in JOBS]


def _window_ns(analyzer: TraceAnalysis, rank: int) -> int:
    start, end = analysis_window(analyzer.t.rank(rank))
    return end - start


@pytest.mark.parametrize("job", _cases("bounded"))
def test_savings_per_rank_within_window(job: str) -> None:
    analyzer, findings = _analysed(job)
    for rank in analyzer.ranks:
        names_rank = [rank in ranks for ranks in findings["ranks"]]
        named = findings.loc[pd.Series(names_rank, index=findings.index, dtype=bool)]
        claimed_ns = float(named["est_saving(us)"].sum()) * 1e3
        window = _window_ns(analyzer, rank)
        assert claimed_ns <= window + 1, (
            f"rank {rank}: findings claim {claimed_ns / 1e3:.1f} µs of a "
            f"{window / 1e3:.1f} µs window: {named[['rule', 'subject', 'est_saving(us)']]}")


@pytest.mark.parametrize("job", _cases("twice"))
def test_no_time_claimed_twice(job: str) -> None:
    _, findings = _analysed(job)
    keys = findings[["rule", "subject"]].astype(str)
    repeated = keys.duplicated(keep=False)
    assert not repeated.any(), f"repeated rule+subject rows:\n{findings[repeated]}"
    for (rule, saving), group in findings.groupby(["rule", "est_saving(us)"]):
        ranks = [set(r) for r in group["ranks"]]
        shared = [i for i in range(len(ranks)) for j in range(i) if ranks[i] & ranks[j]]
        assert not shared, (
            f"{rule}: {len(group)} rows with different subjects claim the same "
            f"{saving} µs on the same ranks: {group['subject'].tolist()}")


def _stems(analyzer: TraceAnalysis, ranks: list[int]) -> set[str]:
    """The event names on ``ranks`` as a finding may print them: whole, or their short
    form (see :func:`_stem`)."""
    stems: set[str] = set()
    for rank in ranks or analyzer.ranks:
        rt = analyzer.t.rank(rank)
        symbols = rt.symbols
        for sym_id in pd.unique(rt.events["name"].to_numpy()):
            name = str(symbols[int(sym_id)])
            stems.update(s for s in (_stem(name), _distinctive(name)) if s)
    return stems


def _distinctive(text: str) -> str:
    """``text`` stripped, or "" when it is too short or a plain lower-case word."""
    text = text.strip()
    if len(text) < MIN_STEM or re.fullmatch(r"[a-z ]+", text):
        return ""
    return text


def _stem(name: str) -> str:
    """A name as a finding would print it: without ``void ``, arguments and templates.

    Plain lower-case words (``forward``, ``merge``) are not kept: they appear in evidence
    sentences by chance.
    """
    stem = re.sub(r"^void\s+", "", name.strip())
    return _distinctive(re.split(r"[<(]", stem, maxsplit=1)[0])


@pytest.mark.parametrize("job", _cases("evidence"))
def test_high_findings_name_an_event_and_a_time(job: str) -> None:
    analyzer, findings = _analysed(job)
    high = findings[findings["severity"] == "high"]
    problems = []
    for _, row in high.iterrows():
        evidence = str(row["evidence"])
        if not TIME.search(evidence):
            problems.append(f"{row['rule']} ({row['subject']}): no time: {evidence}")
        stems = _stems(analyzer, list(row["ranks"]))
        if not any(stem in evidence for stem in stems):
            problems.append(f"{row['rule']} ({row['subject']}): no event named: {evidence}")
    assert not problems, "\n".join(problems)


def test_stem_keeps_what_findings_print() -> None:
    """The event-name check matches the short names the rules print, and not plain words."""
    assert _stem("void cutlass::device_kernel<dpsk::Gemm>(Params)") == "cutlass::device_kernel"
    assert _stem("cudaDeviceSynchronize") == "cudaDeviceSynchronize"
    assert _stem("## sparse_data_dist ##") == "## sparse_data_dist ##"
    assert _stem("forward") == ""
    assert _stem("merge") == ""
    assert _stem("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__") == ""
    assert _distinctive("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
    assert TIME.search("blocked the host 14.103 ms")
    assert TIME.search("ran 1,316.4 µs")
    assert not TIME.search("stream 84 on rank 0")


def test_shared_traces_found() -> None:
    """The job list is not silently empty when the shared traces are there."""
    if not Path(SHARED_TRACES).is_dir():
        pytest.skip(absent_reason(SHARED_TRACES))
    assert len(JOBS) >= 10, JOBS
