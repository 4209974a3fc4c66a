"""The HTML report in a real headless browser (Debian's chromium driven by Playwright).

Three reports are built once for the module: the bundled 4-rank sample, a job whose
kernel, operator and annotation names are HTML and script injections, and a job of
template kernels that differ only in their arguments. Each must load with no JavaScript
error and no request leaving the file (it works offline), draw every figure, and show the
hostile names as text without running anything; once drawn, the whole page (a full-page
screenshot) has no figure over the element after it and no subplot title over an axis.
Skips, with the reason, when chromium or the playwright package is missing (``.ci/run``
installs both).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLE_TRACES
from kineto_builder import TraceBuilder

from hta.report.builder import SECTIONS, write_report
from hta.trace_analysis import TraceAnalysis

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

SCRIPT = '<script>window.__pwned = "script"; alert("k")</script>'
IMG = "<img src=x onerror=\"window.__pwned='img'; alert('i')\">"
CLOSE = "</script><script>window.__pwned = 'close'</script>"
QUOTES = "aten::\"quoted\" 'op' & <b>bold</b>"
HOSTILE = [SCRIPT, IMG, CLOSE, QUOTES]

sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="the playwright package is not installed (pip install -e '.[dev]')")
if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM} (apt-get install chromium)",
                allow_module_level=True)


def hostile_job(folder: Path) -> Path:
    """Two ranks; every kernel, operator and annotation name is one of :data:`HOSTILE`."""
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2)
        for s in (1, 2):
            o = (s - 1) * 100_000
            b.annotation(f"ProfilerStep#{s}", o, 100_000)
            for i, name in enumerate(HOSTILE):
                at = o + 1_000 + 10_000 * i
                b.annotation(name, at, 9_000)
                b.cpu_op(name, at + 100, 8_000)
                b.launch_kernel(name, cpu_ts=at + 200, cpu_dur=500,
                                gpu_ts=at + 5_000, gpu_dur=3_000 + 500 * rank)
                b.gpu(name, "gpu_user_annotation", at + 5_000, 3_000 + 500 * rank)
        b.launch_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", cpu_ts=95_000,
                        cpu_dur=500, gpu_ts=96_000, gpu_dur=2_000, stream=20)
        b.memcpy("HtoD", cpu_ts=96_000, cpu_dur=500, gpu_ts=97_000, gpu_dur=1_000, stream=24)
        b.write(folder / f"rank-{rank}.json")
    return folder


#: Kernels whose names differ only in their template arguments, some of them long.
KERNELS = [f"void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_{tile}_nn_align4>"
           f"(cutlass_80_tensorop_s1688gemm_{tile}_nn_align4::Params)"
           for tile in ("128x128_32x3", "64x64_32x6", "256x128_32x3", "128x256_64x3")]


def kernels_job(folder: Path) -> Path:
    """Two ranks, each running the :data:`KERNELS` (so the kernel-duration figure has one
    panel per kernel) over three steps."""
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2)
        for s in (1, 2, 3):
            o = (s - 1) * 100_000
            b.annotation(f"ProfilerStep#{s}", o, 100_000)
            for i, name in enumerate(KERNELS):
                at = o + 1_000 + 20_000 * i
                b.launch_kernel(name, cpu_ts=at, cpu_dur=500, gpu_ts=at + 2_000,
                                gpu_dur=8_000 + 1_000 * i + 500 * rank)
        b.write(folder / f"rank-{rank}.json")
    return folder


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reports")
    out = {}
    for name, folder in (("sample", SAMPLE_TRACES / "synthetic_4rank"),
                         ("hostile", hostile_job(root / "hostile_job")),
                         ("kernels", kernels_job(root / "kernels_job"))):
        analyzer = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
        out[name] = write_report(analyzer, root / f"{name}.html")
    return out


@pytest.fixture(scope="module")
def browser() -> Any:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Visit:
    """A page opened on a report, recording errors, dialogs and outside requests."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}")
                     if m.type == "error" else None)
        self.page.on("dialog", self._dialog)
        self.page.route("**/*", self._route)
        self.page.goto(path.as_uri(), wait_until="load")
        self.page.wait_for_function(
            "Array.from(document.querySelectorAll('div[data-figure]'))"
            ".every(d => d.querySelector('.main-svg'))", timeout=60_000)
        self.page.wait_for_timeout(300)  # responsive figures settle to their width

    def screenshot(self, path: Path) -> Path:
        """The whole page (not the window) as PNG, every figure drawn."""
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def overlaps(self) -> list[str]:
        """Figures whose drawing (the div or anything in it) reaches below the top of the
        element that follows the figure on the page."""
        return self.page.evaluate("""() => {
            const out = [];
            document.querySelectorAll('div[data-figure]').forEach(d => {
              let bottom = d.getBoundingClientRect().bottom;
              d.querySelectorAll('svg, canvas, .plot-container').forEach(e => {
                bottom = Math.max(bottom, e.getBoundingClientRect().bottom); });
              let next = d.nextElementSibling, up = d;
              while (!next && up.parentElement) {
                up = up.parentElement; next = up.nextElementSibling; }
              if (next && bottom > next.getBoundingClientRect().top + 0.5) {
                out.push(d.id + ' (' + d.getAttribute('aria-label') + ') over '
                         + next.tagName + '.' + next.className);
              }
            });
            return out; }""")

    def title_clashes(self) -> list[str]:
        """Annotations (subplot titles) whose text box meets an axis title or a tick label
        of the same figure."""
        return self.page.evaluate("""() => {
            const meet = (a, b) => a.left < b.right && b.left < a.right
                                   && a.top < b.bottom && b.top < a.bottom;
            const out = [];
            document.querySelectorAll('div[data-figure]').forEach(d => {
              const axes = Array.from(d.querySelectorAll(
                '.g-xtitle text, .g-ytitle text, .xtick text, .ytick text'))
                .map(e => e.getBoundingClientRect()).filter(r => r.width > 0);
              d.querySelectorAll('.annotation-text-g text').forEach(t => {
                const r = t.getBoundingClientRect();
                if (r.width > 0 && axes.some(a => meet(r, a))) {
                  out.push(d.id + ': ' + t.textContent); }
              });
            });
            return out; }""")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(("file://", "data:", "blob:")):
            route.continue_()
        else:
            self.requests.append(url)
            route.abort()

    def figures(self) -> list[dict[str, Any]]:
        """Per figure div: traces in its data, SVG layers, drawn marks."""
        return self.page.evaluate("""() => Array.from(
            document.querySelectorAll('div[data-figure]')).map(d => ({
              id: d.id,
              traces: (d.data || []).length,
              svgs: d.querySelectorAll('.plot-container .main-svg').length,
              marks: d.querySelectorAll(
                'g.trace path, g.slice path, g.point path, g.trace .point').length
                + d.querySelectorAll('canvas').length,
              width: d.getBoundingClientRect().width,
              height: d.getBoundingClientRect().height,
            }))""")


@pytest.fixture(scope="module")
def kernels_page(browser: Any, reports: dict[str, Path]) -> Visit:
    return Visit(browser, reports["kernels"])


@pytest.fixture(scope="module")
def sample_page(browser: Any, reports: dict[str, Path]) -> Visit:
    return Visit(browser, reports["sample"])


@pytest.fixture(scope="module")
def hostile_page(browser: Any, reports: dict[str, Path]) -> Visit:
    return Visit(browser, reports["hostile"])


def test_loads_without_errors_and_offline(sample_page: Visit) -> None:
    assert sample_page.errors == []
    assert sample_page.dialogs == []
    assert sample_page.requests == []


def test_the_sample_report_is_small_and_works_offline(sample_page: Visit,
                                                      reports: dict[str, Path]) -> None:
    """plotly.js and the figures travel compressed: the sample's report stays under 2 MB
    and still draws every figure with no request leaving the page."""
    assert reports["sample"].stat().st_size <= 2_000_000
    assert sample_page.errors == [] and sample_page.requests == []
    assert sample_page.page.evaluate("typeof Plotly") == "object"


def test_every_figure_draws(sample_page: Visit) -> None:
    figures = sample_page.figures()
    assert len(figures) >= 15
    for fig in figures:
        assert fig["traces"] > 0, fig
        assert fig["svgs"] >= 1, fig
        assert fig["marks"] > 0, fig
        assert fig["width"] > 500 and fig["height"] > 250, fig


def test_table_of_contents_and_header(sample_page: Visit, tmp_path: Path) -> None:
    page = sample_page.page
    links = page.eval_on_selector_all("nav#toc a", "as => as.map(a => a.getAttribute('href'))")
    assert links == ["#job"] + [f"#{sid}" for sid, *_ in SECTIONS]
    for href in links:
        assert page.locator(href).count() == 1
    header = page.text_content("header#job")
    assert "4 (0-3) of world size 4" in header
    assert "NVIDIA A100-SXM4-80GB" in header
    page.click("nav#toc a[href='#queue']")
    page.wait_for_timeout(300)
    assert page.evaluate("document.querySelector('#queue').getBoundingClientRect().top") < 100
    page.screenshot(path=str(tmp_path / "report.png"))
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_first_screen_is_the_job_sentence_and_the_findings(sample_page: Visit,
                                                          tmp_path: Path) -> None:
    """In a 1400 x 900 window, before any scrolling: the sentence and the first findings,
    each with its severity, saving and a link that scrolls to its evidence."""
    page = sample_page.page
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_timeout(200)
    sentence = page.locator("header#job p.summary")
    assert sentence.inner_text().startswith("4 ranks on 4 × NVIDIA A100-SXM4-80GB, 3 steps")
    findings = page.locator("section#findings li.finding")
    assert findings.count() >= 3
    first = findings.nth(0)
    box = first.bounding_box()
    assert box is not None and box["y"] + box["height"] < 900  # on the first screen
    assert first.locator(".sev").inner_text().lower() in ("high", "medium", "low")
    assert first.locator(".saving").inner_text().startswith("~")
    href = first.locator("a.evidence-link").get_attribute("href")
    first.locator("a.evidence-link").click()
    page.wait_for_timeout(300)
    assert page.evaluate(f"document.querySelector('{href}').getBoundingClientRect().top") < 100
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(tmp_path / "first.png"))


def test_full_page_has_no_figure_over_what_follows(sample_page: Visit, kernels_page: Visit,
                                                  tmp_path: Path) -> None:
    """Once every figure has drawn, the whole page (a full-page screenshot, not the window):
    no figure reaches into the element after it, no subplot title sits on an axis label."""
    for visit, name in ((sample_page, "sample"), (kernels_page, "kernels")):
        shot = visit.screenshot(tmp_path / f"{name}.png")
        height = visit.page.evaluate("document.documentElement.scrollHeight")
        assert height > 5_000 and shot.stat().st_size > 100_000
        assert png_size(shot)[1] >= height - 1  # the whole page, not one screen
        assert visit.overlaps() == [], name
        assert visit.title_clashes() == [], name


def png_size(path: Path) -> tuple[int, int]:
    """Width and height of a PNG, from its header."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_table_headers_are_words_that_never_break(sample_page: Visit) -> None:
    """Headers are words with their unit (``not computing (µs)``), not column names, and
    a header wraps between words, never inside one; the column name is its hover title."""
    page = sample_page.page
    headers = page.eval_on_selector_all("table.data th", "hs => hs.map(h => h.textContent)")
    assert len(headers) > 100
    assert not [h for h in headers if "_" in h or "(us)" in h], headers
    assert "not computing (µs)" in headers
    broken = page.evaluate(r"""() => {
        const out = [];
        document.querySelectorAll('table.data th').forEach(th => {
          const node = th.firstChild;
          if (!node || node.nodeType !== Node.TEXT_NODE) { return; }
          const re = /\S+/g; let m;
          while ((m = re.exec(node.textContent)) !== null) {
            const range = document.createRange();
            range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
            const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
            if (tops.size > 1) { out.push(th.textContent + ' breaks ' + m[0]); }
          }
        });
        return out; }""")
    assert broken == []
    assert page.get_attribute("table.data th[title='not_computing(us)']", "title")


def test_no_table_is_wider_than_the_page(sample_page: Visit) -> None:
    """Every table fits its section (cells wrap): no horizontal scroll anywhere."""
    wide = sample_page.page.evaluate("""() => Array.from(
        document.querySelectorAll('div.scroll')).filter(
          d => d.scrollWidth > d.clientWidth + 1).map(
          d => d.closest('section').id + ': ' + d.previousElementSibling.textContent)""")
    assert wide == []
    assert sample_page.page.evaluate(
        "document.documentElement.scrollWidth <= window.innerWidth")


def test_new_sections_draw(sample_page: Visit) -> None:
    """Timeline (WebGL), memory and straggler figures are in the page and drawn."""
    figures = {f["id"]: f for f in sample_page.figures()}
    page = sample_page.page
    for sid in ("timeline", "memory", "stragglers"):
        ids = page.eval_on_selector_all(f"section#{sid} div[data-figure]",
                                        "ds => ds.map(d => d.id)")
        assert ids, sid
        for fid in ids:
            assert figures[fid]["traces"] > 0 and figures[fid]["marks"] > 0, (sid, fid)


def test_hostile_names_are_text_and_run_nothing(hostile_page: Visit) -> None:
    page = hostile_page.page
    assert hostile_page.errors == []
    assert hostile_page.dialogs == []
    assert hostile_page.requests == []
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("document.querySelectorAll('main b').length") == 0
    # one <script> block per kind: the packed sections, figure data, config, packed
    # plotly.js, ours, and the one ours adds to run plotly.js once inflated; the sections,
    # opened by ours, hold none
    assert page.evaluate("document.scripts.length") == 6
    text = page.inner_text("main")
    for name in HOSTILE:
        assert name in text, name
    overview_kernels = page.inner_text("#overview")
    for name in HOSTILE:
        assert name in overview_kernels
    for fig in hostile_page.figures():
        assert fig["traces"] > 0 and fig["marks"] > 0, fig
