"""ATen operators, the kernels they launch, and the delays on the way (HTA main's
``get_aten_op_kernels_and_delay``).

Definitions, per rank:

* a **launch** is a runtime call of kind ``runtime_launch`` linked
  (``index_correlation``) to GPU kernels (kinds ``computation``/``communication``;
  copies and memsets are not kernels); a graph launch brings all its kernels;
* its **ATen op** is the innermost ``cpu_op`` named ``aten::...`` among the launch's
  ancestors on its own thread (``parent`` links; other operators and annotations in
  between are skipped). Launches without one are left out;
* per ATen op *instance*, its kernels in launch order (then GPU start) form the
  ``kernel_sequence`` (names joined by ``" -> "``); the **launch delay** is the first
  launch's start minus the op's start, the **runtime delay** the start of the first
  launch's first kernel minus that launch's start;
* rows group the instances by (``aten_op_name``, ``kernel_sequence``):
  ``occurrence_count`` instances, ``avg_aten_op_launch_delay`` and ``avg_runtime_delay``
  their means, in µs rounded to 3 decimals (the ns), as HTA's columns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from hta.analysis.launch import rank_launch_pairs
from hta.model.declared import WHOLE, Analysis, Columns
from hta.model.links import enclosing_ops
from hta.model.rules import KIND_CODE, codes_in, kind_codes
from hta.model.selection import EVERYTHING, Selection
from hta.model.trace import RankTrace, Trace

COLUMNS = ["rank", "aten_op_name", "kernel_sequence", "occurrence_count",
           "avg_aten_op_launch_delay", "avg_runtime_delay"]
#: The table of no rank (typed :data:`COLUMNS`).
KERNELS_AND_DELAY = Columns.of({
    "rank": "int64", "aten_op_name": "object", "kernel_sequence": "object",
    "occurrence_count": "int64", "avg_aten_op_launch_delay": "float64",
    "avg_runtime_delay": "float64"})
KERNEL_KINDS = ("computation", "communication")
_KERNEL_CODES = kind_codes(KERNEL_KINDS)


def _rank_instances(rt) -> pd.DataFrame:  # noqa: ANN001 - RankTrace
    pairs = rank_launch_pairs(rt)
    codes = rt.kind_codes()
    kernel = codes_in(codes[pairs.gpu], _KERNEL_CODES)
    gpu, launch = pairs.gpu[kernel], pairs.launch[kernel]
    if not gpu.size:
        return pd.DataFrame()
    names = np.asarray(rt.symbols, dtype=object)
    name_ids = rt.column("name")
    aten_symbol = np.fromiter((s.startswith("aten::") for s in rt.symbols), dtype=bool,
                              count=len(rt.symbols))
    is_aten = (codes == KIND_CODE["cpu_op"]) & aten_symbol[name_ids]
    parent = rt.link("parent")
    op = enclosing_ops(parent, is_aten, launch)
    keep = op >= 0
    gpu, launch, op = gpu[keep], launch[keep], op[keep]
    ts = rt.column("ts")
    frame = pd.DataFrame({"op": op, "launch": launch, "launch_ts": ts[launch],
                          "gpu_ts": ts[gpu], "kernel": names[name_ids[gpu]]})
    return frame.sort_values(["op", "launch_ts", "launch", "gpu_ts"], kind="stable",
                             ignore_index=True)


def aten_op_kernels_and_delay(trace: Trace, selection: Selection = EVERYTHING,
                              sort_by: Sequence[str] | str | None = None) -> pd.DataFrame:
    """One row per rank, ATen op name and kernel sequence (columns :data:`COLUMNS`),
    sorted per rank by ``sort_by`` descending (default ``occurrence_count``), then by
    name and sequence. Definitions in the module docstring."""
    return ATEN_OP_KERNELS.run(trace, selection, sort_columns(sort_by))


def sort_columns(sort_by: Sequence[str] | str | None) -> list[str]:
    """The columns ``sort_by`` names (default ``occurrence_count``); unknown ones raise."""
    columns = ["occurrence_count"] if not sort_by else (
        [sort_by] if isinstance(sort_by, str) else list(sort_by))
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise ValueError(f"sort_by: unknown column(s) {unknown}; choose from {COLUMNS[1:]}")
    return columns


def rank_aten_op_kernels_and_delay(rank: RankTrace, sort_by: Sequence[str] | str | None = None
                                   ) -> pd.DataFrame:
    """One rank's rows of :func:`aten_op_kernels_and_delay` (typed and empty when its ops
    launch no kernel)."""
    sort_by = sort_columns(sort_by)
    rt = rank
    inst = _rank_instances(rt)
    if not len(inst):
        return KERNELS_AND_DELAY.empty()
    ev = rt.events
    names = np.asarray(rt.symbols, dtype=object)
    per_op = inst.groupby("op", sort=False).agg(
        kernel_sequence=("kernel", " -> ".join), launch=("launch", "first"),
        launch_ts=("launch_ts", "first"), gpu_ts=("gpu_ts", "first")).reset_index()
    op = per_op["op"].to_numpy()
    per_op["aten_op_name"] = names[ev["name"].to_numpy()[op]]
    per_op["launch_delay"] = per_op["launch_ts"] - ev["ts"].to_numpy()[op]
    per_op["runtime_delay"] = per_op["gpu_ts"] - per_op["launch_ts"]
    grouped = per_op.groupby(["aten_op_name", "kernel_sequence"], sort=True).agg(
        occurrence_count=("op", "size"), launch=("launch_delay", "mean"),
        runtime=("runtime_delay", "mean")).reset_index()
    out = pd.DataFrame({
        "rank": np.int64(rt.rank),
        "aten_op_name": grouped["aten_op_name"].astype(object),
        "kernel_sequence": grouped["kernel_sequence"].astype(object),
        "occurrence_count": grouped["occurrence_count"].astype(np.int64),
        "avg_aten_op_launch_delay": (grouped["launch"] / 1e3).round(3),
        "avg_runtime_delay": (grouped["runtime"] / 1e3).round(3),
    })
    return out.sort_values(sort_by, ascending=False, kind="stable", ignore_index=True)


ATEN_OP_KERNELS = Analysis("ATen op kernels", rank_aten_op_kernels_and_delay,
                           KERNELS_AND_DELAY, steps=WHOLE)
