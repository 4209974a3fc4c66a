"""Frequent GPU kernel sequences launched under an operator.

Definition
----------
*Roots* are the CPU operators (kind ``cpu_op`` or ``user_annotation``) whose name contains
``operator_name`` (plain substring, case-sensitive) and that have no such operator among
their ancestors: a match nested in another match belongs to the outer one.

A root's *sequence* is the GPU work (kernels, memcpy, memset; see
:mod:`hta.analysis.launch` for the pairing) whose launch call is a descendant of the root
on its thread's call stack, in GPU start order (ties: launch order). Roots with fewer
than ``min_pattern_len`` GPU events are left out. Its *pattern* is the root's name
followed by the GPU events' names, joined with ``|``.

Per pattern: ``count`` (roots with that pattern), ``GPU kernel duration (us)`` (sum of the
GPU events' durations over those roots), ``CPU op duration (us)`` (sum of the roots'
durations), ``kernels`` (GPU events in one occurrence) and ``event_indices`` (sorted
``index`` values of every event of every occurrence: the roots, the CPU events on the
call stack between a root and its launches, the launches, and the GPU events), which the
overlaid trace marks. Sorted by count (descending), then pattern.

Example: two ``aten::linear`` calls each launching ``gemm`` then ``bias``, with
``min_pattern_len=2``: one pattern ``aten::linear|gemm|bias``, count 2.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.analysis.launch import rank_launch_pairs
from hta.analysis.rowmap import ancestor_pairs
from hta.model.arrays import distinct
from hta.model.declared import Analysis, Columns
from hta.model.rules import KIND_CODE, codes_in
from hta.model.selection import Selection
from hta.model.trace import RankMapper, RankTrace

PATTERN_COLUMNS = ["pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)",
                   "kernels", "event_indices"]
PATTERNS = Columns.typed(PATTERN_COLUMNS)

_ROOT_CODES = [KIND_CODE["cpu_op"], KIND_CODE["user_annotation"]]


def frequent_cuda_kernel_sequences(trace: RankMapper, operator_name: str, rank: int = 0,
                                   min_pattern_len: int = 3) -> pd.DataFrame:
    """Patterns of GPU work under operators named like ``operator_name`` (one rank).

    Columns :data:`PATTERN_COLUMNS`, defined in this module's docstring. Raises
    ``ValueError`` when ``operator_name`` is empty or matches no operator of the rank; an
    empty table means the operators exist but launched fewer than ``min_pattern_len`` GPU
    events each. Computed where the rank is; only the patterns travel.
    """
    if not operator_name:
        raise ValueError("operator_name is empty: give (part of) an operator name, "
                         "e.g. 'aten::linear'")
    return KERNEL_SEQUENCES.run(trace, Selection.of([rank]), operator_name, min_pattern_len)


def rank_kernel_sequences(rank: RankTrace, operator_name: str, min_pattern_len: int
                          ) -> pd.DataFrame:
    """One rank's patterns of :func:`frequent_cuda_kernel_sequences` (no ``rank`` column)."""
    return _rank_patterns(rank, operator_name, min_pattern_len)


KERNEL_SEQUENCES = Analysis("Kernel sequences", rank_kernel_sequences, PATTERNS)


def _rank_patterns(rt: RankTrace, operator_name: str, min_pattern_len: int) -> pd.DataFrame:
    ev = rt.events
    codes = rt.kind_codes()
    names = rt.column("name")
    matching = pd.Series(rt.symbols, dtype=object).str.contains(operator_name, regex=False)
    matching_ids = np.flatnonzero(matching.to_numpy(dtype=bool))
    candidate = codes_in(codes, _ROOT_CODES) & np.isin(names, matching_ids)
    if not candidate.any():
        raise ValueError(f"rank {rt.rank}: no operator name contains {operator_name!r}; "
                         "check the spelling (the match is case-sensitive)")
    parent = rt.link("parent")
    cand_rows = np.flatnonzero(candidate)
    row, anc = ancestor_pairs(parent, cand_rows)
    nested = np.zeros(len(ev), dtype=bool)
    nested[row[(anc != row) & candidate[anc]]] = True
    is_root = candidate & ~nested
    pairs = rank_launch_pairs(rt)
    # the root above each launch (at most one: roots do not nest)
    l_row, l_anc = ancestor_pairs(parent, distinct(pairs.launch))
    hit = is_root[l_anc]
    root_of = np.full(len(ev), -1, dtype=np.int64)
    root_of[l_row[hit]] = l_anc[hit]
    gpu_root = root_of[pairs.launch]
    under = gpu_root >= 0
    gpu, launch, gpu_root = pairs.gpu[under], pairs.launch[under], gpu_root[under]
    ts = rt.column("ts")
    order = np.lexsort((ts[launch], ts[gpu], gpu_root))
    gpu, launch, gpu_root = gpu[order], launch[order], gpu_root[order]
    roots, first, sizes = np.unique(gpu_root, return_index=True, return_counts=True)
    keep = sizes >= min_pattern_len
    if not keep.any():
        return pd.DataFrame({c: [] for c in PATTERN_COLUMNS})
    dur = rt.column("dur")
    gpu_dur = np.add.reduceat(dur[gpu], first) if gpu.size else np.zeros(0, np.int64)
    name_seqs = np.split(names[gpu], first[1:])
    pattern_id: dict[tuple[int, ...], int] = {}
    pattern_of = np.full(roots.size, -1, dtype=np.int64)
    for i in np.flatnonzero(keep):  # one iteration per root: bounded, needs tuples
        key = (int(names[roots[i]]), *name_seqs[i].tolist())
        pattern_of[i] = pattern_id.setdefault(key, len(pattern_id))
    n_patterns = len(pattern_id)
    kept = pattern_of >= 0
    count = np.bincount(pattern_of[kept], minlength=n_patterns)
    gpu_total = np.bincount(pattern_of[kept], weights=gpu_dur[kept], minlength=n_patterns)
    cpu_total = np.bincount(pattern_of[kept], weights=dur[roots[kept]], minlength=n_patterns)
    depth = rt.column("depth")
    occ = _occurrence_rows(depth, roots[kept], launch, gpu, gpu_root, l_row, l_anc, root_of)
    pattern_by_row = np.full(len(ev), -1, dtype=np.int64)
    pattern_by_row[roots] = pattern_of
    occ_pattern = pattern_by_row[occ[:, 0]]
    occ, occ_pattern = occ[occ_pattern >= 0], occ_pattern[occ_pattern >= 0]
    order = np.argsort(occ_pattern, kind="stable")
    index = rt.column("index")
    members = np.split(index[occ[order, 1]],
                       np.searchsorted(occ_pattern[order], np.arange(1, n_patterns)))
    symbols = rt.symbols
    keys = list(pattern_id)
    frame = pd.DataFrame({
        "pattern": ["|".join(symbols[s] for s in key) for key in keys],
        "count": count.astype(np.int64),
        "GPU kernel duration (us)": np.rint(gpu_total) / 1e3,
        "CPU op duration (us)": np.rint(cpu_total) / 1e3,
        "kernels": np.array([len(key) - 1 for key in keys], dtype=np.int64),
        "event_indices": [distinct(m) for m in members],
    }, columns=PATTERN_COLUMNS)
    return frame.sort_values(["count", "pattern"], ascending=[False, True],
                             ignore_index=True)


def _occurrence_rows(depth: np.ndarray, roots: np.ndarray, launch: np.ndarray,
                     gpu: np.ndarray, gpu_root: np.ndarray, l_row: np.ndarray,
                     l_anc: np.ndarray, root_of: np.ndarray) -> np.ndarray:
    """(root, row) pairs: each root with its GPU events, its launches and the CPU events
    on the call stack between the root and those launches (the launches' ancestors that
    are not above the root)."""
    used = np.isin(l_row, launch)
    l_row, l_anc = l_row[used], l_anc[used]
    r = root_of[l_row]
    between = depth[l_anc] >= depth[r]
    both = np.concatenate([
        np.stack([r[between], l_anc[between]], axis=1),
        np.stack([gpu_root, gpu], axis=1),
        np.stack([roots, roots], axis=1),
    ])
    return np.unique(both, axis=0)
