"""What if: replay the job from its trace and predict the step time after a change.

The modules, from the bottom up:

* :mod:`.graph`: the job graph, every rank's critical path DAG with measured edge delays,
  coupled at collectives;
* :mod:`.schedule`: its earliest-start schedule (compiled, with a NumPy path);
* :mod:`.changes` and :mod:`.fixes`: the changes, as edits of edge delays and edges;
* :mod:`.replay`: the replay itself, and the per-rank, per-step table of :func:`what_if`
  (its columns and every definition are there);
* :mod:`.coupled`: the same table from ranks kept on Dask workers;
* :mod:`.jobpath`, :mod:`.findings`, :mod:`.uncertainty`: what bounds each step, the
  findings' savings, and the prediction's range.

The names below are the package's API, from those modules.
"""

from __future__ import annotations

from hta.analysis.whatif.replay import (
    COLUMNS,
    JOB_EDGE_TYPES,
    Change,
    JobGraph,
    RankGraph,
    Schedule,
    assemble,
    build_job,
    predict,
    replay,
    what_if,
)

__all__ = ["COLUMNS", "JOB_EDGE_TYPES", "Change", "JobGraph", "RankGraph", "Schedule",
           "assemble", "build_job", "predict", "replay", "what_if"]
