"""Per-name comparison of two traces (HTA's ``compare_traces`` and ``ops_diff``)."""


from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hta.analysis.diff.scope import (
    _GPU_CODES,
    Iterations,
    _first_rank,
    device_type_name,
    resolve_iterations,
)
from hta.analysis.diff.vendors import paired_names
from hta.analysis.names import short_name
from hta.model.declared import PER_STEP, Analysis, Columns
from hta.model.job import Job
from hta.model.rules import codes_in
from hta.model.selection import EVERYTHING, Ranks, Selection
from hta.model.trace import RankTrace


# -- per-name comparison (HTA's compare_traces) ----------------------------------------------
def name_totals(trace: Job, selection: Selection = EVERYTHING,
                device_type: Any = "ALL", use_short_name: bool = False) -> pd.DataFrame:
    """Per name (or short name): ``counts`` and ``total_duration(ns)`` over the selected
    ranks, iterations (``None``: every event) and device type. Sorted by name."""
    per_rank = NAME_TOTALS.run(trace, selection, device_type_name(device_type))
    names, (counts, total) = summed_by_name(per_rank, ["counts", "total_duration(ns)"])
    return _group_texts(names, {"counts": counts, "total_duration(ns)": total}, use_short_name)


def rank_name_totals(rt: RankTrace, steps: list[int] | None, device: str) -> pd.DataFrame:
    """One rank's :data:`NAME_TOTALS` rows: per name (text) of its events of ``steps``
    (``None``: every event) and ``device`` (``ALL``, ``CPU``, ``GPU``), how many and their
    summed duration (ns)."""
    ev = rt.events
    keep = np.ones(len(ev), dtype=bool)
    if device != "ALL":
        on_gpu = codes_in(rt.kind_codes(), _GPU_CODES)
        keep &= on_gpu if device == "GPU" else ~on_gpu
    if steps is not None:
        keep &= np.isin(rt.column("iteration"), steps)
    names = rt.column("name")[keep]
    size = int(names.max()) + 1 if names.size else 0
    counts = np.bincount(names, minlength=size)
    total = np.bincount(names, weights=rt.column("dur")[keep],
                        minlength=size).astype(np.int64)
    ids = np.flatnonzero(counts)
    return pd.DataFrame({"name": pd.Series([rt.symbols[i] for i in ids.tolist()], dtype=object),
                         "counts": counts[ids].astype(np.int64), "total_duration(ns)": total[ids]})


#: Per rank and name, its events' count and summed duration (``name_totals`` pools them).
NAME_TOTALS = Analysis("Names' totals", rank_name_totals, Columns.of(
    {"rank": "int64", "name": "object", "counts": "int64", "total_duration(ns)": "int64"}),
    steps=PER_STEP, add_rank=True)


def summed_by_name(per_rank: pd.DataFrame, columns: list[str]
                   ) -> tuple[list[str], list[np.ndarray]]:
    """The distinct names of ``per_rank`` (rows of several ranks), and per name the sum of
    each of ``columns`` over the ranks, added in rank order (as one total per name filled
    rank after rank)."""
    if not len(per_rank):
        return [], [np.zeros(0, dtype=per_rank[c].dtype) for c in columns]
    ordered = per_rank.sort_values("rank", kind="stable")
    uniq, inverse = np.unique(ordered["name"].to_numpy(dtype=object), return_inverse=True)
    sums = []
    for c in columns:
        v = ordered[c].to_numpy()
        total = np.zeros(uniq.size, dtype=v.dtype)
        np.add.at(total, inverse.reshape(-1), v)
        sums.append(total)
    return uniq.tolist(), sums


def _group_names(symbols: list[str], ids: np.ndarray, values: dict[str, np.ndarray],
                 use_short_name: bool, extra_names: dict[int, str] | None = None
                 ) -> pd.DataFrame:
    """Sum ``values`` (one entry per id) by the name text of the ids (or its short form);
    one row per text, sorted by it."""
    return _group_texts([_text(symbols, i, extra_names) for i in ids.tolist()], values,
                        use_short_name)


def _group_texts(text: list[str], values: dict[str, np.ndarray], use_short_name: bool
                 ) -> pd.DataFrame:
    """Sum ``values`` (one entry per text) by text (or its short form); one row per text,
    sorted by it."""
    if use_short_name:
        text = [short_name(t) for t in text]
    names = np.array(text, dtype=object)
    if len(set(text)) == len(text):  # every text once: only the order to set
        order = np.argsort(names, kind="stable") if len(text) else np.zeros(0, np.int64)
        columns = {k: np.asarray(v)[order] for k, v in values.items()}
        return pd.DataFrame({"name": pd.Series(names[order], dtype=object), **columns})
    uniq, inverse = np.unique(names, return_inverse=True)
    columns = {}
    for k, v in values.items():
        v = np.asarray(v)
        total = np.zeros(len(uniq), dtype=v.dtype)
        np.add.at(total, inverse.reshape(-1), v)
        columns[k] = total
    return pd.DataFrame({"name": pd.Series(uniq, dtype=object), **columns})


def _text(symbols: list[str], sid: int, extra: dict[int, str] | None) -> str:
    if extra and sid in extra:
        return extra[sid]
    return symbols[sid]


def compare_name_totals(control: pd.DataFrame, test: pd.DataFrame,
                        control_label: str = "Control", test_label: str = "Test",
                        key: str = "name") -> pd.DataFrame:
    """HTA's comparison table from two :func:`name_totals` tables (see the module docstring).

    Counts are int64; durations are µs (float).
    """
    if control_label == test_label:
        raise ValueError(f"control and test labels are both {control_label!r}; the "
                         "columns would clash. Give them different labels.")
    c, t = _totals_by_name(control), _totals_by_name(test)
    mapping = paired_names(c, t)  # cudaX on one side, hipX on the other
    if mapping:
        c = {mapping.get(n, n): v for n, v in c.items()}
        t = {mapping.get(n, n): v for n, v in t.items()}
    names = sorted(set(c) | set(t))
    zero = (0, 0)
    c_counts = np.array([c.get(n, zero)[0] for n in names], dtype=np.int64)
    c_ns = np.array([c.get(n, zero)[1] for n in names], dtype=np.int64)
    t_counts = np.array([t.get(n, zero)[0] for n in names], dtype=np.int64)
    t_ns = np.array([t.get(n, zero)[1] for n in names], dtype=np.int64)
    diff_counts = t_counts - c_counts
    change = np.where(diff_counts > 0, "+", np.where(diff_counts < 0, "-", "="))
    out = pd.DataFrame({
        f"{control_label}_counts": c_counts,
        f"{control_label}_total_duration": c_ns / 1e3,
        f"{test_label}_counts": t_counts,
        f"{test_label}_total_duration": t_ns / 1e3,
        "diff_counts": diff_counts,
        "diff_duration": (t_ns - c_ns) / 1e3,
    }, index=pd.Index(np.array(names, dtype=object), name=key, dtype=object))
    out["counts_change_categories"] = pd.Series(change, index=out.index).astype(object)
    return out


def _totals_by_name(frame: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """``name -> (counts, total_duration(ns))`` of a :func:`name_totals` table (rows of one
    name summed)."""
    out: dict[str, tuple[int, int]] = {}
    for name, count, total in zip(frame["name"].tolist(), frame["counts"].tolist(),
                                  frame["total_duration(ns)"].tolist()):
        if name in out:
            count, total = out[name][0] + count, out[name][1] + total
        out[name] = (int(count), int(total))
    return out


def compare_traces(
    control: Job, test: Job, control_rank: Ranks = None,
    test_rank: Ranks = None,
    control_iteration: Iterations = None, test_iteration: Iterations = None,
    device_type: Any = "ALL", use_short_name: bool = False,
    control_label: str = "Control", test_label: str = "Test",
) -> pd.DataFrame:
    """Counts and total durations per name in two traces, and their differences.

    ``control_rank``/``test_rank``: a rank or a list (their events are pooled); ``None`` is
    the first loaded rank. Iterations, device types and the columns are defined in the module
    docstring; the index is ``name``, or ``short_name`` with ``use_short_name``.
    """
    sides = []
    for trace, rank, iteration in ((control, control_rank, control_iteration),
                                   (test, test_rank, test_iteration)):
        ranks = _first_rank(trace, rank)
        iterations = resolve_iterations(trace, ranks, iteration)
        sides.append(name_totals(trace, Selection.of(ranks, iterations), device_type=device_type,
                                 use_short_name=use_short_name))
    return compare_name_totals(sides[0], sides[1], control_label, test_label,
                               "short_name" if use_short_name else "name")


def labels_of(table: pd.DataFrame) -> tuple[str, str]:
    """(control label, test label) of a :func:`compare_traces` table, from its columns."""
    labels = [c[: -len("_total_duration")] for c in table.columns
              if str(c).endswith("_total_duration")]
    if len(labels) != 2:
        raise ValueError("expected the table of TraceDiff.compare_traces (two "
                         "'<label>_total_duration' columns); got columns "
                         f"{list(table.columns)}.")
    return labels[0], labels[1]


def ops_diff(table: pd.DataFrame) -> dict[str, list[str]]:
    """Names of a :func:`compare_traces` table sorted into HTA's five groups:

    ``added`` (control 0, test > 0), ``deleted`` (control > 0, test 0), ``increased`` and
    ``decreased`` (both > 0, more or fewer in test), ``unchanged`` (both > 0, equal counts).
    """
    cl, tl = labels_of(table)
    c = table[f"{cl}_counts"].to_numpy()
    t = table[f"{tl}_counts"].to_numpy()
    names = np.asarray(table.index, dtype=object)
    groups = {
        "added": (c == 0) & (t > 0),
        "deleted": (c > 0) & (t == 0),
        "increased": (c > 0) & (t > c),
        "decreased": (t > 0) & (t < c),
        "unchanged": (c > 0) & (t == c),
    }
    return {k: names[mask].tolist() for k, mask in groups.items()}
