"""How sure a replay is: what the trace leaves the replay to guess.

Per rank of a job graph (:func:`replay_uncertainty`):

* ``unresolved_syncs``: synchronizations the critical path graph could not tie to the
  GPU work they waited for (no ``cuda_sync`` record, a stream wait without its record);
  the replay makes each wait for all the work enqueued before it, which may be more
  than it really waited for;
* ``inferred_edges``: the waits added for them (``sync`` and ``event_wait`` edges the
  trace does not record);
* ``inferred_binding_pctg``: the share of the replay's *binding* edges (the dependency
  each node waited for last) that are inferred: how much of the replayed schedule rests
  on guesses. The range of a finding's saving widens by this share of the saving
  (:mod:`hta.analysis.whatif.findings`);
* ``uncertain`` and ``why``: a sentence when a rank has unresolved synchronizations on
  more than :data:`UNRESOLVED_SHARE` of its blocking calls whose inferred waits bind
  some of the schedule (over :data:`BINDING_FLOOR` of its binding edges), or more than
  :data:`INFERRED_SHARE` of its binding edges inferred; "" otherwise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.whatif.graph import EDGE, JobGraph, RankGraph

#: Columns of :func:`replay_uncertainty`.
COLUMNS = ["rank", "unresolved_syncs", "inferred_edges", "binding_edges",
           "inferred_binding_pctg", "uncertain", "why"]
#: Above this share of binding edges inferred, a replay is uncertain.
INFERRED_SHARE = 0.05
#: Above this share of unresolved synchronizations among the sync edges, uncertain...
UNRESOLVED_SHARE = 0.05
#: ... when the waits inferred for them bind more than this share of the schedule.
BINDING_FLOOR = 0.001


def replay_uncertainty(jg: JobGraph) -> pd.DataFrame:
    """One row per rank of ``jg`` (module docstring)."""
    return uncertainty_table([rank_uncertainty(g) for g in jg.ranks])


def uncertainty_table(rows: list[dict[str, object]]) -> pd.DataFrame:
    """:data:`COLUMNS` from :func:`rank_uncertainty` rows."""
    return pd.DataFrame(rows, columns=COLUMNS)


def coupled_rank_uncertainty(coupled: object, _: object = None) -> dict[str, object]:
    """:func:`rank_uncertainty` of a :class:`~hta.analysis.whatif.coupled.CoupledRank`
    (run where the rank is kept)."""
    return rank_uncertainty(coupled.jg.ranks[0])  # type: ignore[attr-defined]


def rank_uncertainty(g: RankGraph) -> dict[str, object]:
    """One rank's row of :func:`replay_uncertainty`."""
    unresolved = g.unresolved
    inferred = g.inferred if g.inferred.size == g.src.size else \
        np.zeros(g.src.size, dtype=bool)
    binding = int(g.binding.sum())
    inf_binding = int((g.binding & inferred).sum())
    share = inf_binding / binding if binding else 0.0
    n_sync = int(np.count_nonzero(g.type == EDGE["sync"])) + unresolved
    why = []
    if n_sync and unresolved / n_sync > UNRESOLVED_SHARE and share > BINDING_FLOOR:
        why.append(f"{unresolved:,} synchronizations the trace does not tie to the GPU "
                   "work they waited for")
    if share > INFERRED_SHARE:
        why.append(f"{100 * share:.0f}% of the replay's binding waits inferred, not "
                   "recorded")
    return {"rank": g.rank, "unresolved_syncs": unresolved,
            "inferred_edges": int(inferred.sum()), "binding_edges": binding,
            "inferred_binding_pctg": round(100 * share, 2),
            "uncertain": bool(why), "why": "; ".join(why)}


def inferred_share(table: pd.DataFrame) -> float:
    """The job's share of binding edges inferred (the ranks together), 0..1."""
    if not len(table) or int(table["binding_edges"].sum()) == 0:
        return 0.0
    inferred = (table["inferred_binding_pctg"] * table["binding_edges"]).sum() / 100.0
    return float(inferred / table["binding_edges"].sum())


def uncertainty_line(table: pd.DataFrame) -> str | None:
    """One sentence for the CLI when some rank's replay is uncertain; None otherwise."""
    bad = table[table["uncertain"]] if len(table) else table
    if not len(bad):
        return None
    worst = bad.sort_values("inferred_binding_pctg", ascending=False).iloc[0]
    more = f" (and {len(bad) - 1} more rank(s))" if len(bad) > 1 else ""
    return (f"The replay is uncertain on rank {int(worst['rank'])}{more}: {worst['why']}; "
            "it makes each such call wait for all the GPU work enqueued before it "
            f"({worst['inferred_binding_pctg']:.1f}% of its binding waits are such guesses, "
            "and the ranges widen by that share only), so its predictions may be off by "
            "more than their range.")

