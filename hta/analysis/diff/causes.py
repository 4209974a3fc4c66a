"""What changed between two jobs, in terms of causes: host syncs, copies, kernels.

:func:`change_causes` compares a control and a test job over their analysed steps (every
``ProfilerStep``, or the given ones; a trace without steps is one step) and returns one
row per cause that changed, columns :data:`COLUMNS`:

* ``sync``, one row per *site* of blocking calls (the outermost operator around the call,
  as the ``host_sync`` finding names it, ``aten::item``; else the call itself,
  ``cudaDeviceSynchronize``): ``control``/``test`` are the calls per step (mean over the
  ranks' steps) and ``control(us)``/``test(us)`` the host time blocked in them per step.
  ``verdict``: ``removed`` (none left), ``fewer``, ``added`` (none before), ``more``;
  a site with the same count is listed only when its time moved beyond the noise;
* ``copy``, one row per direction (host to device, device to host): copies per step,
  bytes per step (``note``), time per step, and their bandwidth. When the bytes per step
  are the same (within 2 %) and the bandwidth moved, the verdict is ``same bytes,
  faster`` or ``same bytes, slower`` (with the memory kinds when they changed: pageable
  to pinned); the copy did not disappear;
* ``kernel``: kernels (by name) that ran on one side only: ``gone`` or ``new``, with
  their GPU time per step; the :data:`TOP` largest each way, at least :data:`MIN_SHARE`
  of the step.

**Noise.** ``spread(us)`` is the standard error of the difference of the two means:
``sqrt(s_c^2 / n_c + s_t^2 / n_t)``, ``s`` the standard deviation of the row's time across
a side's analysed (rank, step) slots and ``n`` their number (0 with one slot each). A row
whose ``|delta(us)|`` is at most twice that has verdict ``noise`` (a count that changed is
never noise: a call that is gone is gone).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hta.model.arrays import distinct
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.job import Job
from hta.model.rules import KIND_CODE, kind_mask
from hta.model.selection import Selection
from hta.model.trace import RankTrace

#: Columns of :func:`change_causes`.
COLUMNS = ["cause", "what", "control", "test", "control(us)", "test(us)", "delta(us)",
           "spread(us)", "verdict", "note"]
#: Kernels that appear or disappear: the largest this many each way.
TOP = 5
#: ... of at least this share of the control's (or test's) step.
MIN_SHARE = 0.005
#: Bytes per step equal within this share are "the same bytes".
SAME_BYTES = 0.02
_DIRECTIONS = {"memcpy_htod": "host to device", "memcpy_dtoh": "device to host"}


def _steps(rt: RankTrace, iterations: Sequence[int] | None) -> np.ndarray:
    """Per event, its step when it is analysed, else -2 (steps: every one >= 0, or the
    given ones; a rank without steps: all events, step -1)."""
    it = rt.column("iteration").astype(np.int64)
    if not (it >= 0).any():
        return np.full(it.size, -1, dtype=np.int64)
    keep = it >= 0 if iterations is None else np.isin(it, list(iterations))
    return np.where(keep, it, -2)


class _Side:
    """One job's causes per (rank, step) slot: sync sites, copies, kernels, from each
    rank's rows (:data:`CAUSE_ROWS`, read where the rank is)."""

    def __init__(self, trace: Job, iterations: Sequence[int] | None) -> None:
        rows = CAUSE_ROWS.run(trace, Selection.of(None, iterations))
        rows = rows.sort_values("rank", kind="stable")
        part = rows["part"].to_numpy(dtype=object)
        self.slots: list[int] = rows["slot"].to_numpy()[part == "slot"].tolist()
        self.memory: dict[str, set[str]] = {}
        copies = rows[part == "copy"]
        for d, m in zip(copies["key"].tolist(), copies["memory"].tolist(), strict=True):
            self.memory.setdefault(d, set()).add(m)
        self.sync = _parts(rows[part == "sync"], with_bytes=False)
        self.copy = _parts(copies, with_bytes=True)
        self.kernel = _parts(rows[part == "kernel"], with_bytes=False)
        self.n_slots = max(len(self.slots), 1)

    def table(self, kind: str) -> pd.DataFrame:
        """Per key: ``count`` and ``time`` per step (mean over the slots), ``spread`` (the
        standard error of that mean: the standard deviation of the time per slot over the
        square root of the number of slots), and ``bytes`` per step for copies."""
        parts = getattr(self, kind)
        if not parts:
            return pd.DataFrame(columns=["count", "time", "spread", "bytes"])
        frame = pd.concat(parts, ignore_index=True)
        if "bytes" not in frame:
            frame["bytes"] = 0.0
        by_slot = frame.groupby(["key", "slot"]).agg(
            count=("value", "size"), time=("value", "sum"), bytes=("bytes", "sum"))
        full = pd.MultiIndex.from_product([by_slot.index.get_level_values(0).unique(),
                                           sorted(set(self.slots))], names=["key", "slot"])
        by_slot = by_slot.reindex(full, fill_value=0)
        g = by_slot.groupby(level="key")
        n = len(set(self.slots)) or 1
        return pd.DataFrame({"count": g["count"].mean(), "time": g["time"].mean(),
                             "spread": g["time"].std(ddof=0).fillna(0.0) / np.sqrt(n),
                             "bytes": g["bytes"].mean()})


def _parts(rows: pd.DataFrame, with_bytes: bool) -> list[pd.DataFrame]:
    """The rows of one kind as :meth:`_Side.table` reads them (none: an empty list)."""
    if not len(rows):
        return []
    columns = ["key", "slot", "value"] + (["bytes"] if with_bytes else [])
    return [rows[columns].reset_index(drop=True)]


def _slot(rank: int, step: np.ndarray) -> np.ndarray:
    return rank * (1 << 32) + step


def rank_cause_rows(rt: RankTrace, iterations: list[int] | None) -> pd.DataFrame:
    """One rank's :data:`CAUSE_ROWS`: its analysed (rank, step) slots (``part`` ``slot``),
    its blocking calls by site (``sync``), its host copies by direction with their bytes
    and memory (``copy``) and its kernels by name (``kernel``), each with its slot and
    duration (``value``, ns)."""
    from hta.analysis.findings.sync import blocking_rows
    from hta.analysis.findings.sync_sites import find_sites

    ev = rt.events
    step = _steps(rt, iterations)
    live = distinct(step[step >= -1])
    parts = [pd.DataFrame({"part": "slot", "key": "", "slot": _slot(rt.rank, live),
                           "value": 0.0})]
    names = rt.column("name")
    dur = rt.column("dur").astype(np.float64)
    rows = np.asarray(blocking_rows(rt))
    rows = rows[step[rows] >= -1] if rows.size else rows
    if rows.size:
        op = find_sites(rt, rows).op
        site = [rt.symbols[names[o]] if o >= 0 else rt.symbols[names[r]]
                for r, o in zip(rows.tolist(), op.tolist(), strict=True)]
        parts.append(pd.DataFrame({"part": "sync", "key": site,
                                   "slot": _slot(rt.rank, step[rows]), "value": dur[rows]}))
    codes = rt.kind_codes()
    copies = np.flatnonzero(kind_mask(codes, tuple(_DIRECTIONS)) & (step >= -1))
    if copies.size:
        from hta.analysis.findings.rule_tools import bytes_of

        kinds = ev["kind"].astype(str).to_numpy()[copies]
        texts = [rt.symbols[n] for n in names[copies].tolist()]
        parts.append(pd.DataFrame({
            "part": "copy", "key": [_DIRECTIONS[k] for k in kinds],
            "slot": _slot(rt.rank, step[copies]), "value": dur[copies],
            "bytes": np.nan_to_num(bytes_of(rt, copies)),
            "memory": ["pageable" if "Pageable" in t else "pinned" if "Pinned" in t else "?"
                       for t in texts]}))
    kernels = np.flatnonzero((codes == KIND_CODE["computation"]) & (step >= -1))
    if kernels.size:
        parts.append(pd.DataFrame({
            "part": "kernel", "key": [rt.symbols[n] for n in names[kernels].tolist()],
            "slot": _slot(rt.rank, step[kernels]), "value": dur[kernels]}))
    out = pd.concat(parts, ignore_index=True)
    out["bytes"] = out["bytes"].fillna(0.0) if "bytes" in out else 0.0
    out["memory"] = out["memory"].fillna("") if "memory" in out else ""
    return out[list(CAUSE_COLUMNS.names[1:])].astype(
        dict(zip(CAUSE_COLUMNS.names[1:], CAUSE_COLUMNS.dtypes[1:], strict=True)))


CAUSE_COLUMNS = Columns.of({"rank": "int64", "part": "object", "key": "object",
                            "slot": "int64", "value": "float64", "bytes": "float64",
                            "memory": "object"})
#: Per rank: the rows of the causes a diff compares (:func:`rank_cause_rows`).
CAUSE_ROWS = Analysis("Causes of a change", rank_cause_rows, CAUSE_COLUMNS, steps=PER_STEP,
                      add_rank=True)


def change_causes(control: Job, test: Job,
                  control_iterations: Sequence[int] | None = None,
                  test_iterations: Sequence[int] | None = None) -> pd.DataFrame:
    """The causes that changed from ``control`` to ``test`` (module docstring)."""
    c, t = _Side(control, control_iterations), _Side(test, test_iterations)
    rows = _sync_rows(c.table("sync"), t.table("sync"))
    rows += _copy_rows(c, t)
    rows += _kernel_rows(c.table("kernel"), t.table("kernel"))
    return pd.DataFrame(rows, columns=COLUMNS)


def _row(cause: str, what: str, a: pd.Series | None, b: pd.Series | None, verdict: str,
         note: str = "") -> dict[str, object]:
    ta = float(a["time"]) / 1e3 if a is not None else 0.0
    tb = float(b["time"]) / 1e3 if b is not None else 0.0
    spread = _standard_error(a, b) / 1e3
    return {"cause": cause, "what": what,
            "control": float(a["count"]) if a is not None else 0.0,
            "test": float(b["count"]) if b is not None else 0.0,
            "control(us)": ta, "test(us)": tb, "delta(us)": tb - ta, "spread(us)": spread,
            "verdict": verdict, "note": note}


def _noise(a: pd.Series | None, b: pd.Series | None) -> bool:
    ta = float(a["time"]) if a is not None else 0.0
    tb = float(b["time"]) if b is not None else 0.0
    return abs(tb - ta) <= 2 * _standard_error(a, b)


def _standard_error(a: pd.Series | None, b: pd.Series | None) -> float:
    """The standard error of the difference of the two sides' means (ns)."""
    sa = float(a["spread"]) if a is not None else 0.0
    sb = float(b["spread"]) if b is not None else 0.0
    return float(np.hypot(sa, sb))


def _sync_rows(c: pd.DataFrame, t: pd.DataFrame) -> list[dict[str, object]]:
    rows = []
    for site in sorted(set(c.index) | set(t.index)):
        a = c.loc[site] if site in c.index else None
        b = t.loc[site] if site in t.index else None
        na = float(a["count"]) if a is not None else 0.0
        nb = float(b["count"]) if b is not None else 0.0
        if nb == 0 and na > 0:
            verdict = "removed"
        elif na == 0 and nb > 0:
            verdict = "added"
        elif nb < na - 1e-9:
            verdict = "fewer"
        elif nb > na + 1e-9:
            verdict = "more"
        else:
            if _noise(a, b):
                continue
            assert a is not None and b is not None  # the same count, above 0
            verdict = "longer" if float(b["time"]) > float(a["time"]) else "shorter"
        rows.append(_row("sync", site, a, b, verdict))
    rows.sort(key=lambda r: -abs(float(r["delta(us)"])))  # type: ignore[arg-type]
    return rows


def _copy_rows(c: _Side, t: _Side) -> list[dict[str, object]]:
    ca, ta = c.table("copy"), t.table("copy")
    rows = []
    for d in sorted(set(ca.index) | set(ta.index)):
        a = ca.loc[d] if d in ca.index else None
        b = ta.loc[d] if d in ta.index else None
        if a is None or b is None:
            rows.append(_row("copy", d, a, b, "gone" if b is None else "new"))
            continue
        ba, bb = float(a["bytes"]), float(b["bytes"])
        bw = [float(x["bytes"]) / float(x["time"]) if float(x["time"]) > 0 else np.nan
              for x in (a, b)]
        kinds = [", ".join(sorted(s.memory.get(d, set()))) for s in (c, t)]
        memory = f"{kinds[0]} -> {kinds[1]} memory; " if kinds[0] != kinds[1] else ""
        note = (f"{memory}{ba / 1e6:,.1f} -> {bb / 1e6:,.1f} MB a step at "
                f"{bw[0]:,.1f} -> {bw[1]:,.1f} GB/s")
        same = ba > 0 and abs(bb - ba) <= SAME_BYTES * ba
        if _noise(a, b):
            if same and kinds[0] == kinds[1]:
                continue
            verdict = "noise"
        elif same:
            verdict = "same bytes, faster" if bw[1] > bw[0] else "same bytes, slower"
        else:
            verdict = "more bytes" if bb > ba else "fewer bytes"
        rows.append(_row("copy", d, a, b, verdict, note))
    return rows


def _kernel_rows(c: pd.DataFrame, t: pd.DataFrame) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for side, other, verdict in ((c, t, "gone"), (t, c, "new")):
        only = side[~side.index.isin(other.index)]
        total = float(side["time"].sum()) or 1.0
        only = only[only["time"] >= MIN_SHARE * total].sort_values("time", ascending=False)
        for name, row in only.head(TOP).iterrows():
            rows.append(_row("kernel", str(name), row if verdict == "gone" else None,
                             row if verdict == "new" else None, verdict))
    return rows


#: Columns of :func:`predicted_vs_measured`.
PREDICTION_COLUMNS = ["rule", "subject", "title", "change", "predicted(us)",
                      "predicted_low(us)", "predicted_high(us)", "measured(us)",
                      "step_spread(us)", "status"]


def step_times(what_if: pd.DataFrame) -> np.ndarray:
    """The job's steps (µs, to their completion) of a what-if table."""
    if not len(what_if):
        return np.zeros(0)
    return what_if.groupby("step")["job_measured(us)"].first().to_numpy(dtype=float)


def predicted_vs_measured(control_findings: pd.DataFrame, comparison: pd.DataFrame,
                          control_steps: np.ndarray, test_steps: np.ndarray
                          ) -> pd.DataFrame:
    """For each replayed control finding that disappeared in the test job (those that
    shrank when none disappeared; ``comparison``:
    :func:`hta.analysis.findings.compare.compare_findings`), the saving
    its replay predicted per step (with its range) against the step time the test job
    really lost (``measured(us)``: mean control step - mean test step, to completion;
    the whole step, so every change between the jobs is in it). ``status``: ``unchanged``
    when the steps did not move, ``noise`` when the measured change is within twice its
    standard error (``step_spread(us)``: from the two jobs' steps' standard deviations and
    numbers), else ``improved`` or ``regressed``."""
    rows: list[dict[str, object]] = []
    if not len(control_steps) or not len(test_steps):
        return pd.DataFrame(rows, columns=PREDICTION_COLUMNS)
    measured = float(control_steps.mean() - test_steps.mean())
    spread = float(np.hypot(control_steps.std() / np.sqrt(len(control_steps)),
                            test_steps.std() / np.sqrt(len(test_steps))))
    status = "unchanged" if measured == 0 else "noise" if abs(measured) <= 2 * spread \
        else "improved" if measured > 0 else "regressed"
    gone = comparison[comparison["status"] == "disappeared"]
    shrank = comparison[(comparison["status"] == "changed") & (comparison["delta(us)"] < 0)]
    keys_gone = set(zip(gone["rule"], gone["subject"], strict=True))
    replayed = {(f["rule"], f["subject"]) for f in control_findings.to_dict("records")
                if f.get("saving_source") == "replay"}
    # a finding that disappeared is the fix; one that only shrank is named when none did
    keys = keys_gone if keys_gone & replayed else \
        set(zip(shrank["rule"], shrank["subject"], strict=True))
    for f in control_findings.to_dict("records"):
        if f.get("saving_source") != "replay" or (f["rule"], f["subject"]) not in keys:
            continue
        per_step = float(f["saving_per_step(us)"])
        total = float(f.get("est_saving(us)", per_step * len(control_steps)))
        n = total / per_step if per_step else max(len(control_steps), 1)
        rows.append({"rule": f["rule"], "subject": f["subject"], "title": f["title"],
                     "change": f["change"], "predicted(us)": per_step,
                     "predicted_low(us)": float(f["saving_low(us)"]) / n,
                     "predicted_high(us)": float(f["saving_high(us)"]) / n,
                     "measured(us)": measured, "step_spread(us)": spread, "status": status})
    return pd.DataFrame(rows, columns=PREDICTION_COLUMNS)


def with_together(predictions: pd.DataFrame, together: pd.DataFrame) -> pd.DataFrame:
    """``predictions`` (:func:`predicted_vs_measured`, two rows or more) and a last row
    (``rule`` ``together``) setting the fixes of those findings replayed at once
    (``together``: :func:`hta.analysis.whatif.together.together` of
    :func:`fixed_findings`) against the same measured change: savings that overlap do
    not add up. ``predictions`` as they are when there is no such row."""
    if len(predictions) < 2 or not len(together):
        return predictions
    t, first = together.iloc[0], predictions.iloc[0]
    per_step = float(t["saving_per_step(us)"])
    n = float(t["est_saving(us)"]) / per_step if per_step else 1.0
    row = {"rule": "together", "subject": "", "title": "The fixes together",
           "change": t["changes"], "predicted(us)": per_step,
           "predicted_low(us)": float(t["saving_low(us)"]) / n,
           "predicted_high(us)": float(t["saving_high(us)"]) / n,
           **{c: first[c] for c in ("measured(us)", "step_spread(us)", "status")}}
    return pd.concat([predictions, pd.DataFrame([row], columns=PREDICTION_COLUMNS)],
                     ignore_index=True)


def fixed_findings(control_findings: pd.DataFrame, predictions: pd.DataFrame
                   ) -> pd.DataFrame:
    """The control findings a :func:`predicted_vs_measured` table names (their fixes are
    what :func:`hta.analysis.whatif.together.together` replays at once)."""
    keys = set(zip(predictions["rule"], predictions["subject"], strict=True))
    picked = [(r, s) in keys for r, s in zip(control_findings["rule"],
                                               control_findings["subject"], strict=True)]
    return control_findings[picked]


def still_there(comparison: pd.DataFrame, causes: pd.DataFrame) -> pd.Series:
    """Per row of a findings comparison, a note when a finding that *disappeared* still
    has its cause in the test job: a ``host_sync`` site whose calls are still there (the
    causes list no ``removed`` for it), ``pageable_copies`` whose copies are still from
    pageable memory (the same bytes, at another bandwidth this run). "" otherwise: the
    finding fell under the reporting threshold without its cause going."""
    from hta.analysis.findings.sync import subject_site

    notes = []
    removed = {str(r["what"]) for r in causes.to_dict("records")
               if r["cause"] == "sync" and r["verdict"] in ("removed",)}
    copies = {str(r["what"]): r for r in causes.to_dict("records") if r["cause"] == "copy"}
    for row in comparison.to_dict("records"):
        note = ""
        if row["status"] == "disappeared" and row["rule"] == "host_sync":
            site = subject_site(str(row["subject"]))
            if site not in removed and site != "outside any operator":
                note = (f"its site {site} is still there: it fell under the reporting "
                        "threshold, it was not removed")
        elif row["status"] == "disappeared" and row["rule"] == "pageable_copies":
            pinned = [w for w, c in copies.items() if "-> pinned memory" in str(c["note"])
                      or c["verdict"] == "gone"]
            if not pinned:
                faster = [f"{w} ({c['verdict']})" for w, c in copies.items()]
                note = ("the copies are still from pageable memory"
                        + (f": {', '.join(faster)}" if faster else "")
                        + "; the finding fell under the reporting threshold, the copies are "
                        "not gone")
        notes.append(note)
    return pd.Series(notes, index=comparison.index, dtype=object)
