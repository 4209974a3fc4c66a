"""Helpers shared by the subcommands: option parsing, errors with exit codes, output files,
JSON, and printing tables on a terminal (rich) or as plain text (pipes, files)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hta.errors import TraceError
from hta.report.present import printable

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

    from hta.report.analyzer import Analyzer
    from hta.trace_analysis import TraceAnalysis

# The ``hta`` command's exit statuses, the table of docs/cli.md; every command and
# :func:`hta.cli.main` use these names, and the errors carry theirs as ``exit_code``.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TRACE_ERROR = TraceError.exit_code  # 3: the traces cannot be read
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """An error the user can fix; the CLI prints ``hta: error: <message>`` and exits with
    :attr:`exit_code`."""

    exit_code = EXIT_ERROR


class UsageError(CommandError):
    """A bad option value (exit code 2, as argparse's own usage errors)."""

    exit_code = EXIT_USAGE


# -- options ---------------------------------------------------------------------------------
def parse_ranks(text: str | None, what: str = "--ranks") -> list[int] | None:
    """``"0,2,4-7"`` -> ``[0, 2, 4, 5, 6, 7]``; ``None`` (or empty) for all.

    Raises :class:`UsageError` naming ``what`` on anything else.
    """
    if not text:
        return None
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                lo, hi = part.split("-", 1)
                first, last = int(lo), int(hi)
                if last < first:
                    raise ValueError(part)
                out.extend(range(first, last + 1))
            elif part:
                out.append(int(part))
    except ValueError:
        raise UsageError(f"{what} {text!r}: expected numbers and ranges such as 0,2,4-7") from None
    if not out:
        raise UsageError(f"{what} {text!r}: expected numbers and ranges such as 0,2,4-7")
    return out


def add_load_options(p: argparse.ArgumentParser, ranks: bool = True,
                     quiet_help: str = "no progress bar and no missing-ranks warning") -> None:
    """``--ranks``, ``--no-cache``, ``--strict`` and ``-q`` (every command that loads;
    ``quiet_help`` says what ``-q`` leaves out in this command)."""
    if ranks:
        p.add_argument("--ranks", metavar="LIST", help="ranks to load, e.g. 0,1 or 0-7")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    p.add_argument("--strict", action="store_true",
                   help="fail on the first unreadable file instead of skipping it")
    p.add_argument("-q", "--quiet", action="store_true", help=quiet_help)


#: Jobs of this many trace files or more are analysed with their ranks kept out of this
#: process (:class:`hta.job.distributed.DistributedJob`): each per-rank analysis runs in a
#: worker process next to its rank and only its result comes back, so the command's
#: memory does not grow with the number of ranks and the analyses use every core.
OUT_OF_MEMORY_FILES = 2


def in_memory_for(trace_dir: str) -> bool | None:
    """``False`` (ranks stay out of this process) for a folder of at least
    :data:`OUT_OF_MEMORY_FILES` trace files, else ``None`` (the loader decides). A small
    local job (:func:`hta.job.load.small_local_job`, a few MB in all) stays in memory:
    its analyses take less than starting the worker processes would."""
    from hta.job.load import small_local_job
    from hta.kineto.discovery import discover

    try:
        files, _ = discover(trace_dir)
    except Exception:  # noqa: BLE001 - the load itself reports a bad folder properly
        return None
    if len(files) < OUT_OF_MEMORY_FILES or small_local_job([str(f) for f in files]):
        return None
    return False


def load(args: argparse.Namespace, trace_dir: str | None = None) -> TraceAnalysis:
    """A ``TraceAnalysis`` of ``trace_dir`` (default ``args.trace_dir``) with the load options."""
    from hta.trace_analysis import TraceAnalysis

    where = trace_dir or args.trace_dir
    return TraceAnalysis(
        trace_dir=where, ranks=parse_ranks(getattr(args, "ranks", None)),
        cache=not args.no_cache, strict=args.strict,
        progress=not args.quiet and sys.stderr.isatty(), in_memory=in_memory_for(where),
    )


def report_skipped(analyzer: Analyzer, stream: TextIO | None = None) -> None:
    """One ``hta: warning: skipped FILE: reason`` line on stderr per file that could not
    be loaded."""
    for path, reason in analyzer.skipped.items():
        print(skipped_line(path, reason), file=stream or sys.stderr)


def skipped_line(path: str, reason: str) -> str:
    """The line that tells a file was skipped, and why (as every warning: ``hta:
    warning:`` first)."""
    return f"hta: warning: skipped {printable(path)}: {printable(reason)}"


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` to a temporary file beside ``path``, renamed to ``path`` once
    complete; on any failure (a full disk, a size limit, an interrupt) the temporary
    file is removed and nothing partial is left."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_writable(paths: Sequence[Path], force: bool) -> None:
    """Refuse to overwrite existing files unless ``force``."""
    existing = [p for p in paths if p.exists()]
    if existing and not force:
        shown = (f"{existing[0]} already exists" if len(existing) == 1 else
                 f"{existing[0]} and {len(existing) - 1} more output(s) already exist")
        raise CommandError(f"{shown}; pass --force to overwrite, or choose another output "
                           "with -o")
    for p in existing:
        if p.is_dir():
            raise CommandError(f"{p} is a folder; give a file name with -o")


def check_output_place(path: Path, folder: bool = False) -> bool:
    """Refuse an output whose parent folder does not exist: a command writes into a folder
    that is there, and creates at most the one folder ``-o`` names (``folder=True``), never
    a chain of them (a typo would otherwise build ``/nonexistent_dir/...``). Returns
    whether the folder ``-o`` names must be created (its parent exists)."""
    parent = path.absolute().parent
    if not parent.is_dir():
        what = "not a folder" if parent.exists() else "does not exist"
        raise CommandError(f"{parent} {what}; create it first, or choose another place "
                           "with -o")
    return folder and not path.exists()


def create_output_folder(path: Path) -> None:
    """Create the one folder ``-o`` names (its parent exists) and say so, with the files
    written, on stdout."""
    path.mkdir()
    print(f"Created folder {path}")


# -- JSON ------------------------------------------------------------------------------------
def finite(value: Any) -> Any:
    """NaN and infinities become null so the output is valid JSON."""
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return finite(value.item())  # numpy scalars
        except (ValueError, TypeError):
            return value
    return value


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()  # numpy scalars
    return str(value)


def dumps(payload: Any) -> str:
    """JSON text for ``--json`` output."""
    return json.dumps(finite(payload), indent=2, default=_json_default)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A DataFrame as JSON-ready rows."""
    return finite(frame.to_dict(orient="records"))


# -- terminal text -----------------------------------------------------------------------------
# Numbers, times and names read the same on the terminal and the page: hta.report.present.
#: Narrowest a wrapped column may get before its text moves to a numbered list under the
#: table (on a terminal too narrow for it beside the numbers).
MIN_WRAP_WIDTH = 24


@dataclass
class Column:
    """One column of a printed table: header, cell text from a row, alignment, style.

    ``wrap`` marks a column of long text (a name, a title) that is never cut: on a
    terminal it wraps within its column, or, when the terminal is too narrow for it beside
    the other columns, each row's text follows the table as a numbered line. Piped output
    prints it whole on the row.
    """

    header: str
    cell: Callable[[dict[str, Any]], str]
    numeric: bool = True
    style: Callable[[dict[str, Any]], str | None] | None = None
    wrap: bool = False



def _cell_style(column: Column, row: dict[str, Any]) -> str:
    """The style of ``column``'s cell in ``row`` (``""``: none)."""
    return (column.style(row) if column.style else None) or ""

class Printer:
    """Writes titled tables and lines: rich tables with colour on a terminal, aligned plain
    text otherwise (a pipe, a file, ``NO_COLOR``/``TERM=dumb`` as rich decides).

    Every cell is passed to rich as :class:`rich.text.Text`, never parsed as markup, so a
    kernel named ``[bold]x[/]`` prints as written. No cell is cut at any terminal width:
    numbers keep their width (headers wrap instead), long text wraps or moves under the
    table, so a narrow terminal shows what ``| cat`` shows.
    """

    def __init__(self, file: TextIO | None = None, rich: bool | None = None,
                 width: int | None = None) -> None:
        self.file = file or sys.stdout
        #: The line width plain text keeps to: ``width``, else ``COLUMNS`` when it is set
        #: (also when the output is piped or redirected), else none.
        self.width = width or columns_from_environment()
        self.console = None
        if rich is not False:
            from rich.console import Console

            console = Console(file=self.file, highlight=False, width=width)
            if rich or console.is_terminal:
                self.console = console

    def line(self, text: str = "", style: str | None = None) -> None:
        """One line of text (styled on a terminal; wrapped to :attr:`width` when set)."""
        if self.console is None:
            print(_wrapped(text, self.width), file=self.file)
        else:
            from rich.text import Text

            self.console.print(Text(text, style=style or ""))

    def table(self, title: str, columns: Sequence[Column], rows: Sequence[dict[str, Any]],
              row_style: Callable[[dict[str, Any]], str | None] | None = None) -> None:
        """A titled table, one line per row (long text wrapped, never cut)."""
        cells = [[c.cell(r) for c in columns] for r in rows]
        if self.console is None:
            self._plain(title, columns, cells, self.width)
            return
        from rich.table import Table
        from rich.text import Text

        layout = self._layout(columns, cells, self.console.width)
        if layout is None:
            # too narrow for the numbers side by side: whole lines, as when piped (the
            # terminal wraps them), rather than a cut cell
            self._plain(title, columns, cells, self.console.width)
            return
        widths, moved = layout
        keep = [i for i in range(len(columns)) if i not in moved]
        numbered = bool(moved) and columns[0].header != "#"
        table = Table(title=Text(title, style="bold"), title_justify="left",
                      header_style="bold cyan", show_edge=False, pad_edge=False)
        if numbered:
            table.add_column(Text("#"), justify="right", no_wrap=True,
                             width=len(str(len(rows))))
        for i in keep:
            c = columns[i]
            # every width is set here: rich wraps a header between its words or a long
            # text cell, and never has to cut a number
            table.add_column(Text(c.header), justify="right" if c.numeric else "left",
                             overflow="fold", width=widths[i])
        for n, (row, texts) in enumerate(zip(rows, cells), start=1):
            styled = [Text(texts[i], style=_cell_style(columns[i], row)) for i in keep]
            if numbered:
                styled.insert(0, Text(str(n)))
            table.add_row(*styled, style=(row_style(row) if row_style else None) or "")
        self.console.print(table)
        if moved:
            self._numbered_text(self.console, columns, cells, moved, numbered)
        self.console.print()

    def _layout(self, columns: Sequence[Column], cells: list[list[str]],
                width: int) -> tuple[list[int], list[int]] | None:
        """Each column's width on this terminal (``width`` characters) and the wrapped
        columns moved under the table; ``None`` when even the narrowest layout does not fit.

        A column starts at its natural width (header or widest cell); when the row is too
        wide, wrapped text columns shrink to :data:`MIN_WRAP_WIDTH`, then the others towards
        their header's longest word, the most shrinkable first; wrapped columns that still
        do not fit move under the table."""
        natural = [max(len(c.header), _widest(cells, i)) for i, c in enumerate(columns)]
        least = [MIN_WRAP_WIDTH if c.wrap else _min_width(c, cells, i)
                 for i, c in enumerate(columns)]
        for moved in ([], [i for i, c in enumerate(columns) if c.wrap]):
            shown = [i for i in range(len(columns)) if i not in moved]
            numbered = bool(moved) and columns[0].header != "#"
            room = width - 3 * (len(shown) + numbered - 1) - \
                (len(str(len(cells))) if numbered else 0)
            if sum(least[i] for i in shown) > room:
                continue
            widths = list(natural)
            fixed = [i for i in shown if not columns[i].wrap]
            wrapped = [i for i in shown if columns[i].wrap]
            excess = sum(widths[i] for i in fixed) + \
                sum(min(natural[i], MIN_WRAP_WIDTH) for i in wrapped) - room
            _shrink(widths, least, fixed, excess)
            left = room - sum(widths[i] for i in fixed)
            for k, i in enumerate(wrapped):
                share = left // (len(wrapped) - k)
                widths[i] = max(min(natural[i], MIN_WRAP_WIDTH), min(natural[i], share))
                left -= widths[i]
            return widths, moved
        return None

    def _numbered_text(self, console: Console, columns: Sequence[Column],
                       cells: list[list[str]], moved: list[int], numbered: bool) -> None:
        """The moved columns' text under the table, one entry per row, keyed by its number
        (or the row's first cell), continuation lines indented."""
        from rich.table import Table
        from rich.text import Text

        grid = Table.grid(padding=(0, 1))
        grid.add_column(justify="right", no_wrap=True)
        grid.add_column(overflow="fold", ratio=1)
        key, heading = _moved_heading(columns, moved, numbered)
        grid.add_row(Text(key, style="bold cyan"), Text(heading, style="bold cyan"))
        for n, texts in enumerate(cells, start=1):
            key = str(n) if numbered else texts[0]
            text = "; ".join(f"{columns[i].header}: {texts[i]}" if len(moved) > 1 else texts[i]
                             for i in moved)
            grid.add_row(Text(f"{key}."), Text(text))
        console.print(grid)

    def _plain(self, title: str, columns: Sequence[Column], cells: list[list[str]],
               width: int | None = None) -> None:
        """Aligned text. Past ``width`` characters, the long-text columns move under the
        table as numbered lines (under their header), wrapped to ``width``."""
        moved: list[int] = []
        if width and _plain_width(columns, cells, range(len(columns))) > width:
            moved = [i for i, c in enumerate(columns) if c.wrap]
        numbered = bool(moved) and columns[0].header != "#"
        shown = [i for i in range(len(columns)) if i not in moved]
        heads = (["#"] if numbered else []) + [columns[i].header for i in shown]
        rows = [([str(n)] if numbered else []) + [row[i] for i in shown]
                for n, row in enumerate(cells, start=1)]
        kinds = ([True] if numbered else []) + [columns[i].numeric for i in shown]
        widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(heads)]
        header_lines = [heads]
        if width and sum(widths) + 2 * (len(widths) - 1) > width:
            widths, header_lines = _wrapped_headers(heads, rows, width)

        def fmt(values: Sequence[str]) -> str:
            parts = [v.rjust(w) if numeric else v.ljust(w)
                     for v, w, numeric in zip(values, widths, kinds)]
            return "  ".join(parts).rstrip()

        print(_wrapped(title, width), file=self.file)
        for header in header_lines:
            print(fmt(header), file=self.file)
        for row in rows:
            print(fmt(row), file=self.file)
        if moved:
            self._plain_numbered(columns, cells, moved, numbered, width or 80)
        print(file=self.file)

    def _plain_numbered(self, columns: Sequence[Column], cells: list[list[str]],
                        moved: list[int], numbered: bool, width: int) -> None:
        """The moved columns' text, one entry per row under a header line, wrapped."""
        keys = [f"{n}." if numbered else f"{row[0]}." for n, row in enumerate(cells, start=1)]
        pad = max(len(k) for k in keys) if keys else 2
        key, heading = _moved_heading(columns, moved, numbered)
        print(f"{key.rjust(pad)} {heading}", file=self.file)
        for k, row in zip(keys, cells):
            text = "; ".join(f"{columns[i].header}: {row[i]}" if len(moved) > 1 else row[i]
                             for i in moved)
            lines = textwrap.wrap(text, max(width - pad - 1, 20), break_long_words=True,
                                  break_on_hyphens=False) or [""]
            print(f"{k.rjust(pad)} {lines[0]}", file=self.file)
            for more in lines[1:]:
                print(f"{'':{pad}} {more}", file=self.file)


def _wrapped_headers(heads: list[str], rows: list[list[str]], width: int
                     ) -> tuple[list[int], list[list[str]]]:
    """Column widths and header lines when the headers wrap between their words to bring
    the table within ``width`` (the widest headers first; a cell is never cut). The
    header lines are bottom-aligned: a short header sits on the last line."""
    cells = [max([len(r[k]) for r in rows] + [1]) for k in range(len(heads))]
    least = [max(cells[k], max(len(w) for w in (h.split() or [""]))) for k, h in
             enumerate(heads)]
    widths = [max(len(h), c) for h, c in zip(heads, cells)]
    _shrink(widths, least, range(len(heads)), sum(widths) + 2 * (len(widths) - 1) - width)
    wrapped = [textwrap.wrap(h, w, break_long_words=False) or [""]
               for h, w in zip(heads, widths)]
    depth = max(len(w) for w in wrapped)
    lines = [[(w[len(w) - depth + n] if n >= depth - len(w) else "") for w in wrapped]
             for n in range(depth)]
    return widths, lines


def _shrink(widths: list[int], least: Sequence[int], which: Iterable[int],
            excess: int) -> None:
    """Take ``excess`` characters off the columns ``which``, in place, none below its
    ``least``; the columns that can give most first."""
    for i in sorted(which, key=lambda j: least[j] - widths[j]):
        if excess <= 0:
            return
        cut = min(excess, widths[i] - least[i])
        widths[i] -= cut
        excess -= cut


def _wrapped(text: str, width: int | None) -> str:
    """``text`` wrapped to ``width`` between words (continuation lines indented by two);
    as it is without a width or when it fits."""
    if not width or len(text) <= width:
        return text
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  ",
                                   break_long_words=False, break_on_hyphens=False)) or text


def columns_from_environment() -> int | None:
    """``COLUMNS`` as a width (a whole number from 20 up), else None."""
    text = os.environ.get("COLUMNS", "").strip()
    return int(text) if text.isdigit() and int(text) >= 20 else None


def _plain_width(columns: Sequence[Column], cells: list[list[str]], which: Iterable[int]
                 ) -> int:
    """Characters of the widest plain-text line with the columns ``which``."""
    which = list(which)
    return sum(max(len(columns[i].header), _widest(cells, i)) for i in which) + \
        2 * (len(which) - 1)


def _moved_heading(columns: Sequence[Column], moved: list[int], numbered: bool
                   ) -> tuple[str, str]:
    """The header line over moved columns: the key column's name, the moved headers."""
    key = "#" if numbered or columns[0].header == "#" else columns[0].header
    return key, "; ".join(columns[i].header for i in moved)


def _widest(cells: list[list[str]], i: int) -> int:
    """The widest cell of column ``i`` (1 for an empty table)."""
    return max([len(row[i]) for row in cells] + [1])


def _min_width(column: Column, cells: list[list[str]], i: int) -> int:
    """The narrowest a column may get: its widest cell and its header's longest word (a
    header wraps between words, never inside one)."""
    return max([_widest(cells, i)] + [len(w) for w in column.header.split()])
