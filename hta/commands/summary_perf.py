"""The hardware-efficiency lines of ``hta summary``: GPU time per category and the five
operators (by shape) with the most time below half of their roof. Definitions:
:mod:`hta.analysis.perf` and ``docs/analyses/performance.md``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hta.commands.args_and_output import Column, Printer, UsageError, records
from hta.report.present import full_text, ms, number

if TYPE_CHECKING:
    import pandas as pd

OPS_SHOWN = 5
SHAPES_WIDTH = 40


def add_device_option(p: argparse.ArgumentParser) -> None:
    """``--device NAME``: the device table entry to judge operators against."""
    p.add_argument("--device", metavar="NAME",
                   help="device whose peaks operators are compared with, e.g. 'H100 SXM' "
                        "(default: matched from the trace's deviceProperties)")


def device_arg(text: str | None) -> Any:
    """``--device`` as a table entry (a usage error names the known devices)."""
    if text is None:
        return None
    from hta.model.devices import device_by_name

    try:
        return device_by_name(text)
    except ValueError as err:
        raise UsageError(f"--device: {err}") from None


@dataclass
class Hardware:
    """What the hardware-efficiency lines say: GPU time by category
    (``get_category_time``), the operators furthest below half their roof, whether shapes
    were recorded, the devices operators were judged against (``""``: none matched), and
    whether the job is CPU-only (no GPU work: nothing to judge)."""

    category_time: pd.DataFrame
    below_roof: pd.DataFrame
    shapes_recorded: bool
    devices: list[str] = field(default_factory=list)
    cpu_only: bool = False


def hardware(op_summary: pd.DataFrame, category_time: pd.DataFrame,
             cpu_only: bool = False) -> Hardware:
    """Category split, the ops furthest below their roof, and what was not measurable,
    from the operator summary (``get_op_performance_summary``) and ``get_category_time``."""
    from hta.analysis.perf.summary import below_roof

    return Hardware(category_time, below_roof(op_summary, 0.5, OPS_SHOWN),
                    bool((op_summary["input_dims"] != "").any()) if len(op_summary) else False,
                    sorted(set(op_summary["device"])) if len(op_summary) else [], cpu_only)


def hardware_json(h: Hardware) -> dict[str, Any]:
    """The same, JSON-ready."""
    return {"category_time": records(h.category_time),
            "ops_below_half_roof": records(h.below_roof),
            "shapes_recorded": h.shapes_recorded, "devices": h.devices}


def print_hardware(out: Printer, h: Hardware) -> None:
    """Print the category split and the ops below half their roof."""
    cats = h.category_time
    if len(cats):
        total = cats.groupby("category", sort=False)["kernel_time(us)"].sum()
        share = 100 * total / total.sum()
        text = ", ".join(f"{c} {share[c]:.1f}%" for c in share.sort_values(
            ascending=False).index)
        out.line(f"GPU time by category (all ranks): {text}")
    if h.cpu_only or not len(h.category_time):
        out.line("Operator FLOPs and % of peak: no operator launched GPU work in these "
                 "traces, so there is no kernel time to judge.", style="yellow")
        return
    if not h.shapes_recorded:
        out.line("Operator FLOPs and % of peak: no shapes recorded; profile with "
                 "torch.profiler.profile(record_shapes=True).", style="yellow")
        return
    if h.devices == [""]:
        out.line("Operator % of peak: no device matched (deviceProperties absent, or a part "
                 "the peak table lacks); pass --device NAME.",
                 style="yellow")
        return
    low = h.below_roof
    if not len(low):
        out.line("No operator with a model is below half of its roof.")
        return
    out.table(f"Operators with the most time below half of their roof "
              f"({', '.join(h.devices)})", [
        Column("rank", lambda r: str(r["rank"])),
        Column("time (ms)", lambda r: ms(r["kernel_time(us)"])),
        Column("calls", lambda r: f"{r['calls']:,}"),
        Column("TFLOP/s", lambda r: number(r["tflops_per_s"], 2)),
        Column("TB/s", lambda r: number(r["tb_per_s"], 3)),
        Column("% of roof", lambda r: number(r["pct_of_peak"])),
        Column("bound", lambda r: str(r["bound"]), numeric=False),
        Column("op", lambda r: full_text(r["op"]), numeric=False, wrap=True),
        Column("shapes", lambda r: full_text(r["input_dims"]), numeric=False, wrap=True),
    ], low.to_dict("records"))
