"""Trace diff: what changed between a control trace and a test trace.

**Per-name comparison** (:func:`compare_traces`, HTA's ``TraceDiff.compare_traces``). The
events of the selected ranks and ``ProfilerStep`` iterations of each trace are grouped by
name (or by :func:`~hta.analysis.names.short_name`); per name:

* ``{label}_counts``: number of complete events with that name;
* ``{label}_total_duration``: sum of their durations, in µs (HTA's unit and column name);
* ``diff_counts`` = test counts - control counts, ``diff_duration`` = test total - control
  total (µs);
* ``counts_change_categories``: ``"+"`` when ``diff_counts > 0``, ``"-"`` when < 0, else
  ``"="``.

Rows are indexed by ``name`` (or ``short_name``), sorted by that text; a name missing on
one side has 0 counts and duration there. ``device_type`` picks the events: ``"GPU"`` the
events on the GPU timeline (kinds in :data:`hta.model.rules.GPU_KINDS`: kernels, copies,
memsets, GPU sync records, GPU annotations), ``"CPU"`` every other event (operators,
annotations including ``ProfilerStep#N``, Python frames, runtime calls), ``"ALL"`` both.
Iterations: an event belongs to the step it starts in; a GPU event belongs to the step of
its launch call (see :mod:`hta.model.build`). ``iteration=None`` takes the first
``ProfilerStep`` of the selected ranks (HTA's default), ``"all"`` every event, a number or a
list those steps. A trace without ``ProfilerStep`` has every event in iteration 0.

Example: control has ``aten::mm`` twice (3 µs, 5 µs), test once (4 µs) plus ``aten::add``
(1 µs): ``aten::add`` 0 -> 1 (``+``, +1 µs), ``aten::mm`` 2 -> 1 (``-``, 8 -> 4 µs, -4 µs).
:func:`ops_diff` sorts the names into ``added`` (0 -> n), ``deleted`` (n -> 0),
``increased``, ``decreased`` and ``unchanged`` (counts on both sides).

**Job-level comparison** (:func:`job_diff`): step time, the GPU time breakdowns and the GPU
time per kernel and per operator, every figure *per step*, so that traces holding different
numbers of steps compare. Definitions in :func:`job_diff`.

Modules: :mod:`.common` (selection of steps and devices), :mod:`.per_name` (the per-name
tables), :mod:`.sides`, :mod:`.metrics` and :mod:`.job` (the job-level comparison).
"""

from hta.analysis.diff.job import JobDiff, format_time_pair, job_diff
from hta.analysis.diff.per_name import (
    compare_name_totals,
    compare_traces,
    labels_of,
    name_totals,
    ops_diff,
)
from hta.analysis.diff.scope import (
    DEFAULT_THRESHOLD_PCT,
    DEVICE_TYPES,
    NO_OPERATOR,
    STATUSES,
    device_type_name,
    resolve_iterations,
)

__all__ = [
    "DEFAULT_THRESHOLD_PCT",
    "DEVICE_TYPES",
    "NO_OPERATOR",
    "STATUSES",
    "JobDiff",
    "compare_name_totals",
    "compare_traces",
    "device_type_name",
    "format_time_pair",
    "job_diff",
    "labels_of",
    "name_totals",
    "ops_diff",
    "resolve_iterations",
]
