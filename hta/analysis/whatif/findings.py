"""One saving per finding: what the replay predicts the finding's fix saves.

A post-processing step on the findings table (:func:`hta.analysis.findings.find`'s
columns). Each rule names the change that models the fix its advice gives
(:func:`change_for`); the job is replayed with that change (:mod:`hta.analysis.whatif`)
and, per analysed step ``k`` (the finding's steps; every step of the table when it has
none), the saving is

    ``s_k = job_replayed_k - job_predicted_k``

the job's step (its slowest rank) in the replay without and with the change: the time
the step would lose. Both sides come from the same replay, so the replay's own error
does not enter the difference; it widens the range instead. The finding then has

* ``saving_per_step(us)`` = ``median_k s_k``, the *recurring* saving of one step (the
  steps' median: a first step that would save more once, its warm-up, does not move it;
  the evidence names such a one-time excess), and ``saving_step_pctg`` = ``100 *
  median_k s_k / median_k job_replayed_k``, the share of the step; ``share_pctg`` and
  ``severity`` follow this share (the engine's thresholds, under the rule's cap for the
  subject: :attr:`~hta.analysis.findings.base.FindingRule.max_severity`);
* ``est_saving(us)`` = ``N * median_k s_k`` over the ``N`` analysed steps, at most
  ``sum_k s_k`` (what the replay saves over them; negative when the change would
  lengthen the steps). A rank without ProfilerStep whose trace repeats
  a loop is measured iteration by iteration
  (:func:`hta.analysis.findings.warmup.iteration_windows`), its iterations counted as
  its steps;
* ``saving_low(us)`` / ``saving_high(us)``: ``N * median_k s_k`` minus / plus ``N * d + sum_k
  (e_k + f * s_k)``: ``d`` half the spread of the per-step savings (max - min) / 2, ``e_k``
  the replay's error on the step (``|job_replayed_k - job_measured_k|``), ``f`` the share
  of the replay's binding edges that are inferred rather than recorded
  (:func:`hta.analysis.whatif.uncertainty.replay_uncertainty`); a change with a
  conservative variant (:func:`conservative`: ``dtype:`` with GEMMs bound by memory,
  ``cuda-graphs`` with only the launch overhead gone) takes its saving as the low end
  when that is lower. The low end is never below 0 unless the saving is, and the high
  end never above the replayed steps' total;
* ``change``, and ``saving_source`` ``"replay"``.

A rule whose fix the replay cannot model (:data:`NOT_MODELLED`: fusing kernels, raising
occupancy, faster collectives ...), or whose analysed steps the replay does not reproduce
(off by more than :data:`MAX_REPLAY_ERROR` of the measured step, the median over the
steps), keeps its own estimate, which is GPU time, not step
time: ``saving_source`` ``"gpu-time"``, the range equal to the estimate, and the evidence
ends with a sentence saying what cannot be modelled. Notes (``info``) are left as they
are. Findings are sorted by saving, a replayed one before a GPU-time one of the same size.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hta.analysis.findings.gpu_cover import GRAPHED_HOST_ADVICE
from hta.analysis.findings.hostbound import ADVICE as HOST_ADVICE
from hta.analysis.findings.sync import subject_site

if TYPE_CHECKING:
    from hta.analysis.whatif.changes import Change

#: Columns added to the findings table.
SAVING_COLUMNS = ["change", "saving_source", "saving_low(us)", "saving_high(us)",
                  "saving_per_step(us)", "saving_step_pctg"]

#: Findings rule id -> the change that models the fix its advice gives.
RULE_CHANGES: dict[str, str] = {
    "stragglers": "no-stragglers",
    "host_sync": "no-sync",
    "data_loading": "workers:4",
    "launch_bound": "cuda-graphs",
    "host_bound": "cuda-graphs",
    "comm_exposed": "overlap-comm",
    "pageable_copies": "pinned-copies",
    "fp32_gemm": "dtype",
}
#: Changes whose replay is an upper bound, and why: their saving is capped at the rule's
#: own estimate (for ``comm_exposed``, the communication the computation with no
#: communication could hide).
UPPER_BOUNDS: dict[str, str] = {
    "overlap-comm": "the graph cannot tell which computation uses a collective's result, "
                    "and overlapped kernels share the GPU",
}
#: Rules whose fix the replay cannot model, and why (the finding says so).
NOT_MODELLED: dict[str, str] = {
    "layout_conversions": "removing kernels (channels_last) is not a change the replay has "
                          "yet",
    "optimizer_passes": "fusing the optimizer removes passes over memory, and how long "
                        "the fused kernel runs is not in the trace (the fused-optimizer "
                        "change replays its launches only)",
    "elementwise_chains": "fusing kernels cannot be replayed: how long the fused kernel "
                          "runs is not in the trace",
    "small_kernels": "fusing kernels (torch.compile) cannot be replayed: which kernels "
                     "fuse and how long the fused kernel runs are not in the trace",
    "low_occupancy": "how long a kernel runs with more blocks is not in the trace",
    "ops_below_roof": "how close to its roof a better kernel would run is not in the trace",
    "collective_bw": "the bandwidth a fixed collective would reach is not in the trace",
    "copies_on_compute_stream": "moving copies to a side stream is not a change the replay "
                                "has yet",
    "fp64_work": "how long a kernel runs in fp32 or bf16 instead of fp64 is not in the trace",
    "batchnorm_inference": "removing kernels (eval(), folding) is not a change the replay "
                           "has yet",
    "unfused_attention": "how long a fused attention kernel runs is not in the trace",
    "dtype_casts": "removing kernels (converting the model once) is not a change the "
                   "replay has yet",
}
#: ``host_bound`` subjects a CUDA graph does not remove, and why.
HOST_NOT_GRAPHED = {
    "slow_op": "how much faster the slow CPU operators could run is not in the trace",
    "runtime": "other runtime calls (allocation, copies) are not what a CUDA graph removes",
}
#: Why a ``host_bound`` finding about Python on a rank that replays graphs already keeps
#: its own estimate: its advice is about the host time left outside the graphs.
PYTHON_OUTSIDE_GRAPHS = (
    "this rank replays CUDA/HIP graphs already and the Python runs outside them; "
    "cuda-graphs removes launch and dispatch time, not that Python, so how much of it a "
    "fix removes is not in the trace")
#: Why a ``host_bound`` finding about long stretches of host work with no operator keeps
#: its own estimate: its advice is to move that work off the step, not a CUDA graph.
HOST_WORK_OFF_STEP = (
    "the time is long stretches of host work with no operator recorded, which the advice "
    "moves off the step; cuda-graphs removes launch and dispatch time, not that work, so "
    "how much of it a fix removes is not in the trace")
#: Why a ``host_bound`` finding about tensors built from Python data keeps its own
#: estimate.
FROM_PYTHON_DATA = (
    "the time builds tensors from Python data, which the advice moves off the step or "
    "out of Python; cuda-graphs removes launch and dispatch time, not that conversion, so "
    "how much of it a fix removes is not in the trace")
_GRAPHED_ADVICE = GRAPHED_HOST_ADVICE.split("{n}")[0]
_STRETCH_ADVICE = HOST_ADVICE["python_stretch"][:60]
_FROM_PYTHON_ADVICE = HOST_ADVICE["from_python"][:60]


def _host_not_graphed(subject: str, advice: str) -> str:
    """Why a ``host_bound`` finding's fix is not a CUDA graph the replay can model ("" when
    it is): slow operators or runtime calls, or Python outside the graphs a rank already
    replays."""
    if subject == "python" and _GRAPHED_ADVICE in advice:
        return PYTHON_OUTSIDE_GRAPHS
    if subject == "python" and _STRETCH_ADVICE in advice:
        return HOST_WORK_OFF_STEP
    if subject == "python" and _FROM_PYTHON_ADVICE in advice:
        return FROM_PYTHON_DATA
    return HOST_NOT_GRAPHED.get(subject, "")
#: The causes of a late rank (the ``stragglers`` finding's "Why:" sentence,
#: :mod:`hta.analysis.straggler_causes`) that ``no-stragglers`` models: slower computation.
COMPUTE_CAUSES = ("slow_compute", "imbalance")
_CAUSE = re.compile(r"(?:Why: |; )(slow_compute|imbalance|host|slow_link|unexplained) in ")
#: Why a ``stragglers`` finding late for another cause keeps the rule's estimate.
STRAGGLER_NOT_MODELLED = (
    "no-stragglers models a rank's slower GPU computation; this rank is late because of "
    "its host or its link (the finding's \"Why\"), which the replay does not model")
#: The data loader's workers the ``data_loading`` saving assumes.
DATA_WORKERS = 4


#: A ``host_sync`` finding whose site blocks in uploads from pageable memory (its
#: evidence names them): pinning the memory is the fix, the ``pageable_copies`` one. A
#: download to pageable memory (``.item()``, ``.cpu()``) stays ``no-sync``: the host
#: waits for the value itself.
PAGEABLE_SITE = re.compile(r"; copies: \d+ × Memcpy HtoD \(Pageable -> Device\)")


def _late_not_for_compute(evidence: str) -> bool:
    """Whether a ``stragglers`` finding's evidence names causes, none of them slower
    computation."""
    causes = _CAUSE.findall(evidence)
    return bool(causes) and not set(causes) & set(COMPUTE_CAUSES)


def change_for(rule: str, ranks: list[int], subject: str = "", advice: str = "",
               evidence: str = "") -> str:
    """The change that models the fix of a finding of ``rule`` on ``ranks`` ("" when
    none): ``no-stragglers:RANK`` for one late rank (none when its evidence names only
    causes other than slower computation: host, link), ``no-sync:SITE`` for a host-sync
    site (its subject; ``pinned-copies`` when the site's waits are uploads from pageable
    memory, :data:`PAGEABLE_SITE`), ``dtype:TYPE`` for the type its advice
    names, none for a ``host_bound`` finding about slow CPU operators or runtime calls, or
    about Python outside the graphs its rank already replays."""
    change = RULE_CHANGES.get(rule, "")
    if rule == "host_bound" and _host_not_graphed(subject, advice):
        return ""
    if change == "no-stragglers" and _late_not_for_compute(evidence):
        return ""
    if change == "no-stragglers" and len(ranks) == 1:
        return f"no-stragglers:{int(ranks[0])}"
    if change == "no-sync":
        if PAGEABLE_SITE.search(evidence):  # the site's waits are its pageable copies
            return "pinned-copies"
        site = subject_site(subject) if subject else ""
        return f"no-sync:{_literal(site)}" if site else "no-host-sync"
    if change == "dtype":
        if "set_float32_matmul_precision" in advice:
            return "dtype:tf32"
        if "float16" in advice and "bfloat16" not in advice:
            return "dtype:fp16"
        return "dtype:bf16"
    return change


def _literal(text: str) -> str:
    """``text`` as a regular expression matching it whole (metacharacters escaped, spaces
    and ``:`` left readable)."""
    return re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", text)


def conservative(change: str) -> Change | None:
    """The change's conservative variant for the low end of the range, if it has one:
    ``dtype:`` with the GEMMs bound by memory (half their time); ``cuda-graphs`` with
    only the launch overhead gone (``no-launch-overhead``: the operators' dispatch stays,
    as where only part of the step can be captured)."""
    from hta.analysis.whatif.changes import Change

    if change.startswith("dtype:"):
        return Change("dtype", change.split(":", 1)[1], 0.5)
    if change == "cuda-graphs":
        return Change("no-launch-overhead")
    return None


Predict = Callable[[object], pd.DataFrame]


def step_savings(table: pd.DataFrame, steps: list[int] | None) -> pd.DataFrame:
    """Per step of a what-if table (those of ``steps`` when given and present):
    ``replayed``, ``measured`` and ``predicted`` of the job (its slowest rank) and
    ``saving`` = replayed - predicted (µs)."""
    t = table
    if steps:
        picked = t[t["step"].isin(steps)]
        t = picked if len(picked) else t
    g = t.groupby("step")
    out = pd.DataFrame({"replayed": g["replayed(us)"].max(),
                        "measured": g["measured(us)"].max(),
                        "predicted": g["predicted(us)"].max()})
    out["saving"] = out["replayed"] - out["predicted"]
    return out


def recurring(savings: np.ndarray) -> float:
    """The recurring saving of one step: the median of the per-step savings (a first
    step that saves more once, its warm-up, does not move it)."""
    return float(np.median(savings)) if savings.size else 0.0


def recurring_total(savings: np.ndarray) -> float:
    """The recurring saving over the steps: ``N`` times :func:`recurring`, at most what
    the replay saves over them (``sum``) when that is positive."""
    total = recurring(savings) * savings.size
    return min(total, float(savings.sum())) if savings.sum() > 0 else total


def saving_range(per_step: pd.DataFrame, inferred_share: float,
                 low_variant: pd.DataFrame | None = None) -> tuple[float, float]:
    """``(saving_low, saving_high)`` (µs) from the per-step savings (module docstring):
    around :func:`recurring_total`, the low end at most it, the high end at least it and
    at most the replayed steps' total."""
    s = per_step["saving"].to_numpy(dtype=float)
    if not s.size:
        return 0.0, 0.0
    total = recurring_total(s)
    half_spread = float(s.max() - s.min()) / 2.0
    err = np.abs(per_step["replayed"].to_numpy(float) - per_step["measured"].to_numpy(float))
    width = s.size * half_spread + float(err.sum()) + inferred_share * float(np.abs(s).sum())
    low, high = total - width, total + width
    if low_variant is not None and len(low_variant):
        low = min(low, recurring_total(low_variant["saving"].to_numpy(dtype=float)))
    if total >= 0:
        low = max(low, 0.0)
    high = max(min(high, float(per_step["replayed"].sum())), total)
    return min(low, total), high


def findings_with_changes(findings: pd.DataFrame, predict_with: Predict | None,
                          inferred_share: float = 0.0) -> pd.DataFrame:
    """``findings`` with :data:`SAVING_COLUMNS` and the replayed savings (module
    docstring), largest saving first. ``predict_with(change)``: the what-if table with
    that change (:func:`hta.analysis.whatif.predict` on the job graph, or the coupled
    per-rank replays; None: no replay, every saving the rule's GPU time);
    ``inferred_share``: the share of the replay's binding edges that are inferred (the
    range's ``f``)."""
    from hta.analysis.findings.catalog import default_rules
    from hta.analysis.findings.engine import severity, severity_cap

    rules = {r.id: r for r in default_rules()}
    out = findings.copy()
    n = len(out)
    cols: dict[str, list] = {c: [] for c in SAVING_COLUMNS}
    cache: dict[str, pd.DataFrame] = {}

    def table_of(change: object) -> pd.DataFrame:
        key = change_key(change)
        if key not in cache:
            assert predict_with is not None
            cache[key] = predict_with(change)
        return cache[key]

    for i in range(n):
        row = out.iloc[i]
        rule_us = float(row["est_saving(us)"])
        change = row_change(row)
        replayed = _replayed(row, change, table_of, inferred_share) \
            if change and predict_with is not None else None
        if replayed is None or isinstance(replayed, str):
            why = replayed or NOT_MODELLED.get(str(row["rule"])) or (
                _host_not_graphed(str(row.get("subject", "")), str(row.get("advice", "")))
                if row["rule"] == "host_bound" else "") or (
                STRAGGLER_NOT_MODELLED if row["rule"] == "stragglers"
                and _late_not_for_compute(str(row["evidence"])) else "") or (
                f"the replay cannot model {change} on these traces"
                if change and predict_with is not None else "")
            _gpu_time(out, i, row, cols, rule_us, why)
            continue
        total, low, high, per_step, pct, text = replayed
        cols["change"].append(change)
        cols["saving_source"].append("replay")
        cols["saving_low(us)"].append(low)
        cols["saving_high(us)"].append(high)
        cols["saving_per_step(us)"].append(per_step)
        cols["saving_step_pctg"].append(pct)
        out.iat[i, out.columns.get_loc("est_saving(us)")] = total
        out.iat[i, out.columns.get_loc("share_pctg")] = round(pct, 2)
        out.iat[i, out.columns.get_loc("severity")] = severity(
            max(pct, 0.0) / 100.0, severity_cap(rules.get(str(row["rule"])),
                                                str(row.get("subject", ""))))
        out.iat[i, out.columns.get_loc("evidence")] = (
            f"{row['evidence']} {text} (the rule's own estimate: {rule_us / 1e3:,.3f} ms of "
            "GPU time).")
    for c in SAVING_COLUMNS:
        out[c] = cols[c]
    replay_first = (out["saving_source"] != "replay").astype(int)
    order = np.lexsort((replay_first.to_numpy(), -out["est_saving(us)"].to_numpy(float)))
    return merge_same_fix(out.iloc[order].reset_index(drop=True), findings)


def change_key(change: object) -> str:
    """The key a change's what-if table is kept under (its text; a ``Change``'s repr)."""
    return change if isinstance(change, str) else repr(change)


def row_change(row: pd.Series) -> str:
    """The change that models a finding's fix ("" for a note or a rule without one)."""
    if row["severity"] == "info":
        return ""
    return change_for(row["rule"], list(row["ranks"]), str(row.get("subject", "")),
                      str(row.get("advice", "")), str(row.get("evidence", "")))


def changes_to_replay(findings: pd.DataFrame) -> list[object]:
    """Every change :func:`findings_with_changes` replays for ``findings`` (each finding's
    change and its conservative variant), once each, in the order it asks for them: what
    a caller may predict ahead, all at once."""
    asked: dict[str, object] = {}
    for i in range(len(findings)):
        change = row_change(findings.iloc[i])
        if not change:
            continue
        for c in (change, conservative(change)):
            if c is not None:
                asked.setdefault(change_key(c), c)
    return list(asked.values())


def merge_same_fix(out: pd.DataFrame, original: pd.DataFrame) -> pd.DataFrame:
    """One row per replayed change: a finding whose fix is the change of a finding above
    it is the same saving seen twice; it is folded into that finding, whose evidence
    names it (``original``: the findings before the replay, for their own evidence)."""
    first: dict[str, int] = {}
    drop = []
    own = dict(zip(zip(original["rule"], original["subject"], strict=True),
                   original["evidence"], strict=True))
    for i, (change, source) in enumerate(zip(out["change"], out["saving_source"],
                                             strict=True)):
        if source != "replay":
            continue
        if change not in first:
            first[change] = i
            continue
        k = first[change]
        row = out.iloc[i]
        text = own.get((row["rule"], row["subject"]), row["evidence"])
        out.iat[k, out.columns.get_loc("evidence")] = (
            f"{out.iat[k, out.columns.get_loc('evidence')]} The same change answers "
            f"'{row['title']}' ({row['rule']}), counted once: {text}")
        drop.append(i)
    return out.drop(index=drop).reset_index(drop=True) if drop else out


#: Largest error of the replay on the analysed steps (the median over them of
#: ``|replayed - measured| / measured``) for which a replayed saving is shown: a replay
#: that does not reproduce the steps predicts nothing about them.
MAX_REPLAY_ERROR = 0.2


def _recurring_us(row: pd.Series) -> float | None:
    """The time that recurs in the finding's window (µs, as the what-if table's), as the
    rules' table gives it: their saving is ``share_pctg`` of it
    (:func:`hta.analysis.findings.sharing.recurring_ns`: the window less the idle time
    inside its one-time costs); None when the share is 0."""
    share = float(row.get("share_pctg") or 0.0)
    est = float(row.get("est_saving(us)") or 0.0)
    return est * 100.0 / share if share > 0 and est > 0 else None


def _replayed(row: pd.Series, change: str, table_of: Callable[[object], pd.DataFrame],
              inferred_share: float
              ) -> tuple[float, float, float, float, float, str] | str | None:
    """The replayed saving of one finding: None when the replay cannot model it, a
    sentence when the replay does not reproduce the analysed steps
    (:data:`MAX_REPLAY_ERROR`)."""
    from hta.errors import ChangeMatchesNothingError

    steps = [int(s) for s in row["steps"]] if len(row["steps"]) else None
    try:
        per = step_savings(table_of(change), steps)
        variant = conservative(change)
        low_per = step_savings(table_of(variant), steps) if variant is not None else None
    except (ChangeMatchesNothingError, ValueError):
        return None
    if not len(per):
        return None
    measured = per["measured"].to_numpy(dtype=float)
    error = float(np.median(np.abs(per["replayed"].to_numpy(dtype=float) - measured)
                            / np.maximum(measured, 1.0)))
    if error > MAX_REPLAY_ERROR:
        return (f"the replay does not reproduce these steps (off by {100 * error:.0f}% of "
                f"the measured step, the median over them), so it predicts nothing about "
                f"{change}")
    saved = per["saving"].to_numpy(dtype=float)
    n_steps = len(per)
    each = recurring(saved)
    total = recurring_total(saved)
    low, high = saving_range(per, inferred_share, low_per)
    bound = float(row["est_saving(us)"]) if change in UPPER_BOUNDS else np.inf
    over = total > bound
    if over:  # what the rule says could hide it bounds what the upper-bound change gains
        each, total = each * bound / total, bound
        low, high = min(low, bound), min(high, bound)
    step_ns = float(np.median(per["replayed"].to_numpy(dtype=float)))
    of = "of the step"
    if n_steps == 1 and int(per.index[0]) < 0:  # one pass: of the time that recurs in it
        repeats = _recurring_us(row)
        if repeats is not None and 0 < repeats < step_ns:
            step_ns, of = repeats, "of the pass without its one-time costs"
    pct = 100.0 * each / step_ns if step_ns > 0 else 0.0
    which = "the whole trace" if n_steps == 1 and int(per.index[0]) < 0 else \
        f"{n_steps} step{'s' if n_steps > 1 else ''}"
    capped = ("; the total is what the replay saves over the steps, less than the median "
              "times the steps" if total < each * n_steps - 1e-6 else "")
    text = (f"Replayed with {change}: the job's steps would take {total / 1e3:,.3f} ms less "
            f"over {which} ({each / 1e3:,.3f} ms a step{', the median' if n_steps > 2 else ''}"
            f"{capped}, {pct:.1f}% {of}; range {low / 1e3:,.3f} to "
            f"{high / 1e3:,.3f} ms)")
    if change.startswith("dtype:"):
        text += _dtype_scope(change.split(":", 1)[1])
    if over:
        text += (f"; capped at the rule's own estimate, the computation that could hide "
                 f"it ({bound / 1e3:,.3f} ms): {change} replays an upper bound "
                 f"({UPPER_BOUNDS[change]})")
    once = float(saved.sum()) - total
    if not over and n_steps > 2 and once > max(0.05 * abs(total), 0.005 * step_ns):
        text += (f"; the steps save {once / 1e3:,.3f} ms more in all than the median says, "
                 f"most in step {per.index[int(np.argmax(saved))]}: a one-time excess, not "
                 f"counted as recurring")
    if each <= 0.005 * step_ns:
        text += "; other work bounds the steps, so this fix alone gains (almost) nothing"
    elif n_steps == 1:
        text += ("; one window, so no spread across steps widens the range: it holds the "
                 "replay's own error only")
    return total, low, high, each, pct, text


def _dtype_scope(dtype: str) -> str:
    """What a ``dtype:`` replay changes (:mod:`hta.analysis.whatif.fixes`), said beside its
    saving: more than the finding's own kernels where fp32 elementwise work runs."""
    if dtype in ("bf16", "fp16"):
        return (f"; the replay runs every fp32 GEMM and convolution at the {dtype} rate and "
                f"every fp32 elementwise kernel in half its time (fed {dtype} outputs, they "
                f"move half the bytes)")
    return f"; the replay runs every fp32 GEMM and convolution at the {dtype} rate"


def _gpu_time(out: pd.DataFrame, i: int, row: pd.Series, cols: dict[str, list],
              rule_us: float, why: str) -> None:
    """A finding that keeps the rule's own estimate, labelled GPU time."""
    info = row["severity"] == "info"
    cols["change"].append("")
    cols["saving_source"].append("" if info else "gpu-time")
    for c in ("saving_low(us)", "saving_high(us)"):
        cols[c].append(np.nan if info else rule_us)
    cols["saving_per_step(us)"].append(np.nan)
    cols["saving_step_pctg"].append(np.nan)
    if why and not info:
        out.iat[i, out.columns.get_loc("evidence")] = (
            f"{row['evidence']} The saving is GPU time, not step time: {why}.")
