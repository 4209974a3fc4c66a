"""``hta summary`` on a terminal of any width shows what it shows when piped: every
finding's title and every kernel's name in full, no number cut (issue: tables cut to the
terminal width)."""

from __future__ import annotations

import io
import re

import pytest
from cli_runner import run_cli
from conftest import SAMPLE_TRACES

from hta.commands.args_and_output import Column, Printer
from hta.report.present import LONGEST_CELL, full_text
from hta.trace_analysis import TraceAnalysis

SYNTHETIC = SAMPLE_TRACES / "synthetic_4rank"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
BOX = re.compile(r"[\s│┃━╇─┼]+")


def squeezed(text: str) -> str:
    """``text`` without colour codes, table rules and white space: what a name is made of,
    wherever the terminal wrapped it."""
    return BOX.sub("", ANSI.sub("", text))


@pytest.fixture(scope="module")
def expected() -> tuple[list[str], list[str]]:
    analyzer = TraceAnalysis(trace_dir=str(SYNTHETIC), cache=False, progress=False)
    findings = analyzer.get_findings().head(5)
    titles = [t + (f": {s}" if s else "") for t, s in zip(findings["title"],
                                                           findings["subject"])]
    piped = run_cli(["summary", str(SYNTHETIC), "--no-cache"]).stdout
    names = re.findall(r"^\s*\d+\s+[\d.,]+\s+[\d.]+\s+[\d,]+\s+[\d.,]+\s+\S+\s+\d+\s+[\d.]+"
                       r"\s+\S+\s+(.*)$", piped.split("Top 10 kernels")[1].split("\n\n")[0],
                       re.M)
    assert len(names) == 10
    return titles, names


@pytest.mark.parametrize("width", [60, 80, 100, 140, 250])
def test_every_title_and_name_whole_at_any_width(width: int,
                                                 expected: tuple[list[str], list[str]]) -> None:
    titles, names = expected
    proc = run_cli(["summary", str(SYNTHETIC), "--no-cache"],
                   env={"FORCE_COLOR": "1", "COLUMNS": str(width)})
    assert proc.returncode == 0, proc.stderr
    out = squeezed(proc.stdout)
    for text in titles + names:
        assert squeezed(text) in out, (width, text)
    # the only ellipses are those of names over LONGEST_CELL characters, in the middle
    assert proc.stdout.count("…") == sum(t.count("…") for t in titles + names), \
        "a cell was cut"


def test_no_line_wider_than_the_terminal_where_the_table_fits() -> None:
    proc = run_cli(["summary", str(SYNTHETIC), "--no-cache"],
                   env={"FORCE_COLOR": "1", "COLUMNS": "80"})
    lines = ANSI.sub("", proc.stdout).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Top 10 kernels"))
    table = lines[start:lines.index("", start)]
    assert max(len(line) for line in table) <= 80
    assert any(line.lstrip().startswith("1. ncclDevKernel_AllReduce") for line in table)


def _printed(width: int | None, rows: list[dict], rich: bool = True) -> str:
    buf = io.StringIO()
    out = Printer(file=buf, rich=rich, width=width)
    out.table("T", [Column("n", lambda r: str(r["n"])),
                    Column("value (ms)", lambda r: f"{r['v']:,.3f}"),
                    Column("name", lambda r: full_text(r["name"]), numeric=False, wrap=True)],
              rows)
    return buf.getvalue()


ROWS = [{"n": 1, "v": 12345.678, "name": "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_"
                                          "128x128_32x3_nn_align4>"},
        {"n": 2, "v": 0.5, "name": "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_"
                                   "64x64_32x6_nn_align4>"}]


@pytest.mark.parametrize("width", [24, 30, 40, 60, 120])
def test_printer_keeps_numbers_and_names_whole(width: int) -> None:
    text = _printed(width, ROWS)
    flat = squeezed(text)
    for r in ROWS:
        assert squeezed(r["name"]) in flat
        assert f"{r['v']:,.3f}" in text  # a number is never folded
    assert "…" not in text


def test_plain_output_has_whole_names_on_their_rows() -> None:
    text = _printed(None, ROWS, rich=False)
    for r in ROWS:
        assert any(line.endswith(r["name"]) and line.lstrip().startswith(str(r["n"]))
                   for line in text.splitlines())


def test_a_very_long_name_keeps_its_start_and_end() -> None:
    name = "k<" + "x" * 5000 + ">::tail_that_tells_apart"
    shown = full_text(name)
    assert len(shown) == LONGEST_CELL
    assert shown.startswith("k<xxx") and shown.endswith("tail_that_tells_apart")
    assert full_text("short") == "short"
    assert full_text("a\x1bb") == "a\\x1bb"
