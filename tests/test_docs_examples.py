"""Every code example in README.md, docs/**/*.md and the public docstrings runs (issue 27).

What is collected:

* every fenced ```python block of README.md and docs/**/*.md;
* every fenced ```bash / ```console / ```shell / ```sh block that holds an ``hta`` command;
* in the public API (:data:`DOCSTRING_MODULES`: ``hta/__init__.py``, ``hta/trace_analysis.py``,
  ``hta/trace_diff.py``, ``hta/facade/*.py``), the docstrings of the module and of its public
  functions, classes and methods: their ``>>>`` examples and their ``::`` literal blocks
  (how this project writes examples in docstrings).

How it runs: one test per page (or module), its blocks in order in one namespace, since a
later block uses an earlier one's variables, in a fresh temporary folder as the current
directory, so that the files an example writes (``"out/"``, ``report.html``) land there.

* Python blocks are executed. A path the example names is replaced, as a whole string
  literal, by the sample it stands for (:data:`PATHS`, the only mapping there is). A name
  a page uses without defining it (``analyzer`` on the analysis pages, ``control`` and
  ``test`` on the diff pages) is given as :data:`PRESET` says. Figures are not shown.
* In shell blocks, each ``hta ...`` command (a line, or a part of one between ``&&``) runs
  through the console script's entry point, ``hta.cli.main``, in this process, with the
  same path mapping (each whole argument), and must exit 0; ``hta ... | jq FILTER`` feeds
  the output to ``jq`` (or, without ``jq``, checks that it is JSON). The other commands of
  a shell block (``pip install``, ``pytest``, ``mkdocs``, ``jupyter``, benchmarks) set up
  or build the project and are not run here.
* A block that cannot run by nature (a Dask cluster's address, an S3 bucket, a GPU, torch)
  has ``<!-- example: skip REASON -->`` on the line before it (blank lines between are
  allowed). The page's other blocks still run, and each skipped block is a skipped test,
  ``test_skipped_example[PAGE:LINE]``, with its reason (``pytest -rs`` lists them).

The samples are copied once per run of this module to a temporary folder, so the cache the
loads write goes there and not into ``sample_traces/``.
"""

from __future__ import annotations

import ast
import doctest
import importlib.util
import io
import json
import re
import shlex
import shutil
import subprocess
import textwrap
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_runner import run_cli
from conftest import ROOT, SAMPLE_TRACES

# -- the mapping -----------------------------------------------------------------------------
#: The samples the examples run against, by name: the bundled ones, copied, and ``slowed``,
#: the bundled 4-rank job with one kernel made 2x slower (made as the diff notebook makes it),
#: the "test" side of a diff.
SAMPLES = ("synthetic_4rank", "cpu_training", "slowed")

#: Path placeholder in an example -> the sample it stands for. A Python string literal or a
#: shell argument equal to a key is replaced by the sample's path (a copy, or ``slowed``).
PATHS = {
    "path/to/traces": "synthetic_4rank",       # README, docs/index.md
    "traces/": "synthetic_4rank",              # docs: loading, coming_from_hta, report ...
    "traces": "synthetic_4rank",
    "/path/to/trace_dir": "synthetic_4rank",
    "~/traces": "synthetic_4rank",
    "sample_traces/synthetic_4rank": "synthetic_4rank",   # not the repository's own folder
    "sample_traces/cpu_training": "cpu_training",
    "DIR": "synthetic_4rank",                  # README's and docs/cli.md's command synopses
    "CONTROL_DIR": "synthetic_4rank",          # hta diff CONTROL_DIR TEST_DIR
    "TEST_DIR": "slowed",
    "runs/before": "synthetic_4rank",          # docs/diff.md
    "runs/after": "slowed",
}
#: Output placeholders in shell commands -> a name in the page's temporary folder.
OUTPUTS = {"OUT": "out"}

#: Names a page uses without defining them -> what they are: ``analyzer``, a TraceAnalysis
#: of a sample (``cpu_training`` on the pages of :data:`CPU_PAGES`, else ``synthetic_4rank``);
#: ``control`` and ``test``, the two sides of a diff; ``DIR``, the sample's path (a
#: ``str``); ``TraceAnalysis``; ``iterations``, a selection of steps (``None``: all).
PRESET = ("analyzer", "control", "test", "DIR", "TraceAnalysis", "iterations")

#: Pages whose examples are about a CPU-only trace: ``analyzer`` and the paths are
#: ``cpu_training`` there. None today: no page's example is about one (an example that names
#: ``sample_traces/cpu_training`` gets it through :data:`PATHS`).
CPU_PAGES: frozenset[str] = frozenset()

#: Text in a Python block or an ``hta`` command -> the optional package (an extra) it needs.
#: Without the package that block or command is left out, the page's other examples still
#: run, and the page then skips, naming what it left out.
REQUIRES = {
    "--format perfetto": ("perfetto", "pip install -e '.[perfetto]'"),
    "write_perfetto_job": ("perfetto", "pip install -e '.[perfetto]'"),
}

#: Pages (and modules) that take about 10 s or more on two cores (README.md 9-12 s, its seven
#: commands; docs/report.md 7-8 s, three reports): marked slow.
SLOW_PAGES = frozenset({"README.md", "docs/report.md"})

#: The public API whose docstrings' examples run.
DOCSTRING_MODULES = ("hta/__init__.py", "hta/trace_analysis.py", "hta/trace_diff.py",
                     *sorted(p.relative_to(ROOT).as_posix()
                             for p in (ROOT / "hta" / "facade").glob("*.py")))

SHELL_LANGUAGES = ("bash", "console", "shell", "sh")
SKIP_MARK = re.compile(r"^\s*<!--\s*example:\s*skip\b\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)")


@dataclass(frozen=True)
class Example:
    page: str       # README.md, docs/x.md, hta/x.py
    line: int       # 1-based line of the fence (in a docstring: of the `::` or first `>>>`)
    language: str   # "python" or "shell"
    code: str
    skip: str | None = None   # the reason of an <!-- example: skip ... --> marker

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


# -- collecting ------------------------------------------------------------------------------
def markdown_examples(path: Path) -> list[Example]:
    """The python and shell fenced blocks of a Markdown page, with their skip markers."""
    page = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = textwrap.dedent("\n".join(
            line[len(indent):] if line.startswith(indent) else line
            for line in lines[i + 1:end]))
        language = "python" if lang == "python" else "shell" if lang in SHELL_LANGUAGES else ""
        if language == "python" or (language == "shell" and hta_commands(body)):
            found.append(Example(page, i + 1, language, body, skip_reason(lines, i)))
        i = end + 1
    return found


def skip_reason(lines: list[str], fence: int) -> str | None:
    """The reason of an ``<!-- example: skip REASON -->`` on the last non-blank line before
    the fence (a marker without a reason is an error)."""
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    m = SKIP_MARK.match(lines[j]) if j >= 0 else None
    if not m:
        return None
    assert m.group(1), f"line {j + 1}: an example skip marker needs a reason"
    return m.group(1)


def docstring_examples(path: Path) -> list[Example]:
    """The ``>>>`` examples and ``::`` literal blocks of a module's public docstrings, in
    the order of the source."""
    page = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes: list[ast.AST] = [tree]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and not node.name.startswith("_"):
            nodes.append(node)
            if isinstance(node, ast.ClassDef):
                nodes += [n for n in node.body
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                          and not n.name.startswith("_")]
    found = []
    for node in nodes:
        doc = ast.get_docstring(node, clean=True)
        if not doc:
            continue
        line = node.body[0].lineno   # the docstring's first line
        doctests = doctest.DocTestParser().get_examples(doc)
        if doctests:
            found.append(Example(page, line + doctests[0].lineno, "python",
                                 "".join(e.source for e in doctests)))
        for offset, block in literal_blocks(doc):
            language = "shell" if hta_commands(block) else "python"
            found.append(Example(page, line + offset, language, block))
    return found


def literal_blocks(doc: str) -> list[tuple[int, str]]:
    """The reStructuredText literal blocks (``...::`` then an indented block) of a
    docstring, less those that are ``>>>`` sessions (run as doctests), each with the
    offset of its ``::`` line in the docstring."""
    lines, blocks = doc.splitlines(), []
    for i, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        base = len(line) - len(line.lstrip())
        body, j = [], i + 1
        while j < len(lines) and (not lines[j].strip()
                                  or len(lines[j]) - len(lines[j].lstrip()) > base):
            body.append(lines[j])
            j += 1
        text = textwrap.dedent("\n".join(body)).strip("\n")
        if text and not text.lstrip().startswith(">>>"):
            blocks.append((i, text + "\n"))
    return blocks


def hta_commands(script: str) -> list[list[str]]:
    """The ``hta`` commands of a shell block, each as its words (a pipe's later stages
    follow a ``|`` word); comments, continuation lines and ``&&`` chains understood."""
    commands = []
    lines = [line.strip() for line in script.replace("\\\n", " ").splitlines()]
    if any(line.startswith("$ ") for line in lines):   # a console session: the rest is output
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    for line in lines:
        if not line:
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
        lexer.whitespace_split = True
        words = list(lexer)
        part: list[str] = []
        for word in [*words, "&&"]:
            if word in ("&&", ";", "||"):
                if part and part[0] == "hta":
                    commands.append(part)
                part = []
            else:
                part.append(word)
    return commands


def all_examples() -> dict[str, list[Example]]:
    """Page (or module) -> its examples, in order."""
    pages = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        pages[path.relative_to(ROOT).as_posix()] = markdown_examples(path)
    for name in DOCSTRING_MODULES:
        pages[name] = docstring_examples(ROOT / name)
    return {page: examples for page, examples in pages.items() if examples}


EXAMPLES = all_examples()


def _page_params() -> list:
    return [pytest.param(page, id=page,
                         marks=[pytest.mark.slow] if page in SLOW_PAGES else [])
            for page, examples in EXAMPLES.items() if any(not e.skip for e in examples)]


# -- the samples -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Copies of the bundled samples, and ``slowed`` (see :data:`SAMPLES`)."""
    from hta import synthetic
    from hta.synthetic import Microseconds

    root = tmp_path_factory.mktemp("samples")
    out = {}
    for name in ("synthetic_4rank", "cpu_training"):
        out[name] = Path(shutil.copytree(SAMPLE_TRACES / name, root / name,
                                         ignore=shutil.ignore_patterns(".hta_cache")))
    slowed = root / "slowed"
    slowed.mkdir()
    for rank in range(4):
        trace = synthetic.generate_rank(rank, 4, steps=3, kernels_per_step=40, seed=0)
        for event in trace["traceEvents"]:
            if event.get("ph") == "X" and event["name"] == "ampere_sgemm_128x64_tn":
                event["dur"] = Microseconds(2 * event["dur"].ns)
        (slowed / f"rank-{rank}.json").write_bytes(synthetic.dumps_trace(trace))
    out["slowed"] = slowed
    assert set(out) == set(SAMPLES)
    return out


def map_python(code: str, paths: dict[str, str]) -> str:
    """``code`` with every string literal equal to a key of ``paths`` replaced."""
    tokens = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except ValueError:   # an f-string
                value = None
            if isinstance(value, str) and value in paths:
                tok = tok._replace(string=repr(paths[value]))
        tokens.append(tok)
    return tokenize.untokenize(tokens)


def preset(code: str, paths: dict[str, str]) -> dict[str, object]:
    """The names of :data:`PRESET` that ``code`` uses and does not bind itself."""
    from hta.trace_analysis import TraceAnalysis

    nodes = list(ast.walk(ast.parse(code)))
    bound = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {(a.asname or a.name).split(".")[0] for n in nodes
              if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    used = {n.id for n in nodes if isinstance(n, ast.Name)} - bound
    main = paths["traces"]
    ns: dict[str, object] = {}
    makers = {
        "analyzer": lambda: TraceAnalysis(trace_dir=main, progress=False),
        "control": lambda: TraceAnalysis(trace_dir=paths["CONTROL_DIR"], progress=False),
        "test": lambda: TraceAnalysis(trace_dir=paths["TEST_DIR"], progress=False),
        "DIR": lambda: main,
        "TraceAnalysis": lambda: TraceAnalysis,
        "iterations": lambda: None,
    }
    assert set(makers) == set(PRESET)
    for name in PRESET:
        if name in used:
            ns[name] = makers[name]()
    return ns


def run_shell(example: Example, paths: dict[str, str], cwd: Path) -> list[str]:
    """Run the ``hta`` commands of a shell block (see the module docstring); returns those
    left out for a missing extra (:data:`REQUIRES`)."""
    left_out = []
    for words in hta_commands(example.code):
        missing = missing_extra(shlex.join(words))
        if missing:
            left_out.append(f"{example.where} `{shlex.join(words)}` (needs {missing})")
            continue
        stages: list[list[str]] = [[]]
        for word in words:
            if word == "|":
                stages.append([])
            else:
                stages[-1].append(word)
        argv = [paths.get(w, OUTPUTS.get(w, w)) for w in stages[0][1:]]
        done = run_cli(argv, cwd=cwd)
        assert done.returncode == 0, (
            f"{example.where}: hta {shlex.join(argv)} exited {done.returncode}\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        for program, *args in stages[1:]:
            assert program == "jq", f"{example.where}: no rule to run `{program}` here"
            if shutil.which("jq"):
                piped = subprocess.run(["jq", *args], input=done.stdout, capture_output=True,
                                       text=True, timeout=60)
                assert piped.returncode == 0, f"{example.where}: {piped.stderr}"
            else:
                json.loads(done.stdout)
    return left_out


# -- the tests -------------------------------------------------------------------------------
@pytest.mark.parametrize("page", _page_params())
def test_page_examples_run(page, samples, tmp_path, monkeypatch):
    import plotly.basedatatypes

    shown = []
    monkeypatch.setattr(plotly.basedatatypes.BaseFigure, "show",
                        lambda self, *a, **k: shown.append(self))
    sample = "cpu_training" if page in CPU_PAGES else "synthetic_4rank"
    paths = {key: str(samples[sample if value == "synthetic_4rank" else value])
             for key, value in PATHS.items()}
    monkeypatch.chdir(tmp_path)
    examples = [e for e in EXAMPLES[page] if not e.skip]
    python = "\n".join(e.code for e in examples if e.language == "python")
    namespace = {"__name__": "__docs_example__",
                 **(preset(python, paths) if python else {})}
    left_out = []
    for example in examples:
        start = time.perf_counter()
        if example.language == "shell":
            left_out += run_shell(example, paths, tmp_path)
        elif missing := missing_extra(example.code):
            left_out.append(f"{example.where} (needs {missing})")
        else:
            code = compile(map_python(example.code, paths), example.where, "exec")
            exec(code, namespace)  # noqa: S102 - the documentation's own example
        print(f"{example.where}: {time.perf_counter() - start:.2f} s")
    if left_out:
        pytest.skip("the other blocks ran; left out: " + ", ".join(left_out))


def missing_extra(code: str) -> str | None:
    """The first package of :data:`REQUIRES` that ``code`` needs and that is missing."""
    for text, (module, install) in REQUIRES.items():
        if text in code and importlib.util.find_spec(module) is None:
            return f"{module}: {install}"
    return None


SKIPPED = [e for examples in EXAMPLES.values() for e in examples if e.skip]


@pytest.mark.parametrize("example", [pytest.param(e, id=e.where) for e in SKIPPED])
def test_skipped_example(example):
    pytest.skip(f"{example.where}: {example.skip}")


def test_collects_every_kind_of_example():
    kinds = {(e.page.split("/")[0], e.language) for v in EXAMPLES.values() for e in v}
    assert {("README.md", "python"), ("README.md", "shell"), ("docs", "python"),
            ("docs", "shell"), ("hta", "python")} <= kinds
    assert len(SKIPPED) <= 6, [e.where for e in SKIPPED]   # a few, by nature


def test_skip_markers_stand_before_a_block():
    for path in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if SKIP_MARK.match(line):
                j = i + 1
                while j < len(lines) and not lines[j].strip():
                    j += 1
                assert j < len(lines) and FENCE.match(lines[j]), f"{path}:{i + 1}"


def test_hta_commands_are_parsed():
    assert hta_commands('pip install -e ".[x]" && hta summary DIR  # note\n'
                        "hta diff A \\\n  B --json | jq .x\n") == [
        ["hta", "summary", "DIR"], ["hta", "diff", "A", "B", "--json", "|", "jq", ".x"]]
    assert hta_commands("$ hta summary DIR\nhta: error: no trace files\n") == [
        ["hta", "summary", "DIR"]]
    assert map_python('TraceAnalysis(trace_dir="traces/", x=f"{a}")', {"traces/": "/t"}) \
        == "TraceAnalysis(trace_dir='/t', x=f\"{a}\")"
