"""What a new user trips on (issue 18): each test failed before its fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hta.trace_analysis import TraceAnalysis

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "synthetic_4rank"


def test_cache_keeps_an_absolute_source_across_working_folders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank summarised from one working folder reads its trace again from another."""
    job = tmp_path / "repo" / "job"
    shutil.copytree(SAMPLE, job)
    monkeypatch.chdir(tmp_path / "repo")
    first = TraceAnalysis(trace_dir="job", cache_dir=str(tmp_path / "cache"), progress=False)
    assert Path(first.t.rank(0).meta["source"]).is_absolute()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    again = TraceAnalysis(trace_dir=str(job), cache_dir=str(tmp_path / "cache"),
                          progress=False)
    for rank in again.t.ranks:
        source = Path(again.t.rank(rank).meta["source"])
        assert source.is_absolute() and source.is_file(), source
        assert source.parent == job


def test_counters_from_another_folder_after_a_relative_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``hta summary job`` from one folder, then ``hta counters /abs/job`` from another:
    the cache beside the traces must not hand back the first folder's relative path."""
    from hta.cli import main

    job = tmp_path / "repo" / "job"
    shutil.copytree(SAMPLE, job)
    monkeypatch.chdir(tmp_path / "repo")
    assert main(["summary", "job", "-q"]) == 0
    assert (job / ".hta_cache").is_dir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["counters", str(job), "-o", str(tmp_path / "out")]) == 0
    assert len(list((tmp_path / "out").glob("*_with_counters*"))) == 4


@pytest.mark.parametrize("use_native", [False, True])
@pytest.mark.parametrize("gz", [False, True])
def test_a_utf8_byte_order_mark_is_skipped_with_one_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        use_native: bool, gz: bool) -> None:
    """Both decoders read a trace that starts with a BOM like the same trace without it."""
    import gzip
    import logging

    import numpy as np

    from hta.kineto.decode import decode_trace

    monkeypatch.setenv("HTA_NATIVE", "1" if use_native else "0")
    text = gzip.decompress((SAMPLE / "rank-1.json.gz").read_bytes())
    plain = tmp_path / "plain.json"
    plain.write_bytes(text)
    marked = tmp_path / ("bom.json.gz" if gz else "bom.json")
    body = b"\xef\xbb\xbf" + text
    marked.write_bytes(gzip.compress(body) if gz else body)
    reference = decode_trace(plain)
    with caplog.at_level(logging.WARNING, logger="hta.kineto.decode"):
        decoded = decode_trace(marked)
    for column in ("ts", "dur", "name"):
        np.testing.assert_array_equal(decoded.columns[column], reference.columns[column])
    assert [w for w in decoded.warnings if "byte-order mark" in w] == [
        "repaired: skipped the UTF-8 byte-order mark at the start of the file"]
    assert sum("byte-order mark" in r.getMessage() for r in caplog.records) == 1


def _job_with_negative_durations(folder: Path) -> Path:
    """Two ranks; rank 0 has 2 events with a negative duration, rank 1 has 1."""
    from kineto_builder import TraceBuilder

    for rank, bad in ((0, 2), (1, 1)):
        b = TraceBuilder(rank=rank, world_size=2)
        with b.step(1, ts=0, dur=100_000):
            b.launch_kernel("sgemm", cpu_ts=1_000, cpu_dur=500, gpu_ts=2_000, gpu_dur=30_000)
            for i in range(bad):
                b.cpu_op(f"aten::odd{i}", ts=5_000 + i * 1_000, dur=-3_000)
        b.write(folder / f"rank-{rank}.json")
    return folder


def test_summary_prints_load_warnings_once_per_kind(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Negative durations are clamped: said on stderr (one line for both ranks), listed
    in ``--json``, hidden by ``-q``."""
    import json

    from hta.cli import main

    job = _job_with_negative_durations(tmp_path / "job")
    assert main(["summary", str(job), "--no-cache"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "negative 'dur'" in line]
    assert lines == ["hta: warning: 3 complete event(s) had a negative 'dur'; clamped to 0 "
                     "(all 2 ranks)"], err
    assert main(["summary", str(job), "--no-cache", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [(w["count"], w["ranks"]) for w in payload["load_warnings"]
            if "negative 'dur'" in w["kind"]] == [(3, [0, 1])]
    assert main(["summary", str(job), "--no-cache", "-q"]) == 0
    assert "negative" not in capsys.readouterr().err


class _ClosedPipe:
    """A stdout whose reader has gone away."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("argv", [
    ["summary", str(SAMPLE), "--no-cache", "-q"],
    ["diff", str(SAMPLE), str(SAMPLE), "--no-cache", "-q"],
    ["export", str(SAMPLE), "-o", "{out}", "--no-cache", "-q"],
], ids=["summary", "diff", "export"])
def test_every_subcommand_ends_quietly_on_a_closed_pipe(
        argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from hta.cli import main

    monkeypatch.setattr("sys.stdout", _ClosedPipe())
    assert main([a.replace("{out}", str(tmp_path / "out")) for a in argv]) == 0
    assert capsys.readouterr().err == ""


def test_empty_memory_summary_and_stragglers_say_why_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """No ``[memory]`` events, one rank: the empty answers are explained, once each."""
    import logging

    job = _job_with_negative_durations(tmp_path / "job")
    analyzer = TraceAnalysis(trace_dir=str(job), ranks=[0], cache=False, progress=False)
    with caplog.at_level(logging.WARNING, logger="hta"):
        assert analyzer.get_memory_summary().empty
        assert analyzer.get_memory_summary().empty
        assert analyzer.get_potential_stragglers() == []
        assert analyzer.get_potential_stragglers() == []
    said = [r.getMessage() for r in caplog.records if "empty result" in r.getMessage()]
    assert len(said) == 2, said
    assert "profile_memory=True" in said[0]
    assert "1 rank selected" in said[1]


def test_docs_first_screen_points_to_findings_and_idle() -> None:
    """The first screen of docs/index.md (its first 20 lines) links the findings and the
    idle page, and describes ``hta summary`` as it prints (findings first)."""
    index = Path(__file__).resolve().parent.parent / "docs" / "index.md"
    first_screen = "\n".join(index.read_text().splitlines()[:20])
    assert "(analyses/findings.md)" in first_screen
    assert "(analyses/idle.md)" in first_screen
    assert "findings first" in first_screen
    assert "one line per rank" not in index.read_text()


def _one_rank_of_64_on_an_unnamed_device(folder: Path) -> Path:
    from kineto_builder import TraceBuilder

    b = TraceBuilder(rank=5, world_size=64)
    b.extra_top_level["deviceProperties"] = [{"id": 0, "name": ""}]
    with b.step(1, ts=0, dur=100_000):
        b.launch_kernel("sgemm", cpu_ts=1_000, cpu_dur=500, gpu_ts=2_000, gpu_dur=30_000)
    b.write(folder / "rank-5.json")
    return folder


def test_headline_world_size_and_unknown_device(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Summary and report agree: 1 rank of world size 64, on an unknown device; the report
    command says where it wrote."""
    from hta.cli import main

    job = _one_rank_of_64_on_an_unnamed_device(tmp_path / "job")
    assert main(["summary", str(job), "--no-cache", "-q"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "ranks: 1 of world size 64" in head and "device: unknown device" in head, head
    out = tmp_path / "report.html"
    assert main(["report", str(job), "--no-cache", "-q", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"Wrote {out.resolve()} (" in said
    html = out.read_text()
    assert "1 rank of world size 64 on 1 × unknown device" in html
    assert ">unknown device<" in html


def test_report_without_output_says_where_it_wrote(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from hta.cli import main

    job = _one_rank_of_64_on_an_unnamed_device(tmp_path / "job")
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(job), "--no-cache", "-q"]) == 0
    assert capsys.readouterr().out.startswith(f"Wrote {tmp_path / 'report.html'} (")


def test_one_colour_per_kind_in_every_figure() -> None:
    """Computation, communication and memory have the same colour in the kernel type pie,
    the timeline, the temporal breakdown and the diff."""
    import pandas as pd

    from hta.plots import diff, temporal, timeline
    from hta.plots.kernels import kernel_type_figure

    table = pd.DataFrame({"kernel_type": ["COMMUNICATION", "COMPUTATION", "MEMORY"],
                          "sum": [5.0, 3.0, 1.0], "percentage": [55.6, 33.3, 11.1]})
    pie = kernel_type_figure(table).data[0]
    colour = dict(zip(pie.labels, pie.marker.colors, strict=True))
    assert colour["COMPUTATION"] == timeline.KIND_COLORS["computation"] \
        == temporal.COLORS["compute"] == dict((p[0], p[2]) for p in diff.GPU_TIME_PARTS)["compute"]
    assert colour["COMMUNICATION"] == timeline.KIND_COLORS["communication"] \
        == temporal.COLORS["exposed communication"]
    assert colour["MEMORY"] == timeline.KIND_COLORS["memcpy_htod"] \
        == temporal.COLORS["exposed memory"]
    assert len(set(colour.values())) == 3


def test_hta_cache_dir_puts_the_cache_elsewhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's promise: ``HTA_CACHE_DIR`` moves the cache out of the trace folder."""
    job = _one_rank_of_64_on_an_unnamed_device(tmp_path / "job")
    monkeypatch.setenv("HTA_CACHE_DIR", str(tmp_path / "elsewhere"))
    TraceAnalysis(trace_dir=str(job), progress=False)
    assert not (job / ".hta_cache").exists()
    assert any((tmp_path / "elsewhere").iterdir())


def _vendor_job(folder: Path, runtime: str, device: str) -> Path:
    """One rank: a step, a kernel and a device synchronisation of ``runtime`` (cuda/hip)."""
    from kineto_builder import TraceBuilder

    b = TraceBuilder(rank=0)
    b.extra_top_level["deviceProperties"] = [{"id": 0, "name": device}]
    with b.step(1, ts=0, dur=100_000):
        b.launch_kernel("gemm", cpu_ts=1_000, cpu_dur=500, gpu_ts=2_000, gpu_dur=30_000)
        b.runtime(f"{runtime}DeviceSynchronize", ts=3_000, dur=40_000)
    b.write(folder / "rank-0.json")
    return folder


def test_diff_across_devices_says_so_and_pairs_cuda_with_hip(tmp_path: Path) -> None:
    import pandas as pd

    from hta.analysis.diff import compare_traces, job_diff
    from hta.analysis.findings.compare import compare_findings

    nvidia = TraceAnalysis(trace_dir=str(_vendor_job(tmp_path / "a", "cuda", "NVIDIA H100")),
                           cache=False, progress=False)
    amd = TraceAnalysis(trace_dir=str(_vendor_job(tmp_path / "b", "hip", "AMD Instinct MI300X")),
                        cache=False, progress=False)
    notes = job_diff(nvidia.t, amd.t).notes
    assert any(n.startswith("devices differ (control: NVIDIA H100; test: AMD Instinct MI300X)")
               for n in notes), notes
    assert not any("devices" in n for n in job_diff(nvidia.t, nvidia.t).notes)
    table = compare_traces(nvidia.t, amd.t)
    row = table.loc["cudaDeviceSynchronize / hipDeviceSynchronize"]
    assert (row["Control_counts"], row["Test_counts"]) == (1, 1)
    assert "cudaDeviceSynchronize" not in table.index
    finding = {"rule": "host_sync", "severity": "low", "est_saving(us)": 40.0, "ranks": [0],
               "title": "Host synchronisation", "section": "", "evidence": ""}
    compared = compare_findings(pd.DataFrame([dict(finding, subject="cudaDeviceSynchronize")]),
                                pd.DataFrame([dict(finding, subject="hipDeviceSynchronize")]))
    assert compared["status"].tolist() == ["unchanged"]
    assert compared["subject"].tolist() == ["cudaDeviceSynchronize / hipDeviceSynchronize"]


def test_progress_bar_in_a_kernel_without_ipywidgets_does_not_warn(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """In Jupyter without ipywidgets, a text bar and no ``TqdmWarning``; with it, a widget."""
    import sys
    import types
    import warnings

    from hta import progress

    class Shell:
        config = {"IPKernelApp": {}}

    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: Shell()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", fake)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # not installed
    for name in ("tqdm.auto", "tqdm.autonotebook"):  # decided again on import
        monkeypatch.delitem(sys.modules, name, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with progress.progress_bar(3, "Loading") as bar:
            bar.update(3)
    assert progress.in_jupyter_kernel()
    from tqdm.std import tqdm as text_bar
    assert progress.bar_class() is text_bar


def test_the_notebook_extra_brings_jupyter() -> None:
    """``pip install -e ".[notebook]"`` installs what the README's notebook lines run."""
    import tomllib

    root = Path(__file__).resolve().parent.parent
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    names = {req.split(">")[0].split("[")[0] for req in extras["notebook"]}
    assert {"jupyterlab", "ipywidgets", "nbconvert"} <= names
    readme = (root / "README.md").read_text()
    assert 'pip install -e ".[notebook]"' in readme and "jupyter lab notebooks/" in readme


def test_packed_text_round_trips_and_avoids_what_script_text_cannot_hold() -> None:
    import os
    import zlib

    from hta.report.packing import decode7, pack

    data = os.urandom(3000) + b"</script>\r\n\x00<" * 50 + b"<"
    text, size = pack(data)
    assert not set(text) & {"\x00", "\r", "<"}
    assert zlib.decompress(decode7(text, size), -15) == data


def test_report_plotlyjs_cdn_is_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    from hta.cli import main
    from hta.report.packing import plotly_cdn_url

    out = tmp_path / "r.html"
    assert main(["report", str(SAMPLE), "--no-cache", "-q", "-o", str(out),
                 "--plotlyjs", "cdn"]) == 0
    html = out.read_text()
    assert f'<script src="{plotly_cdn_url()}" charset="utf-8"></script>' in html
    assert out.stat().st_size < 500_000


@pytest.mark.parametrize("argv", [["--help"], ["summary"], ["summary", "--iterations"]],
                         ids=["help", "missing-dir", "missing-value"])
def test_help_and_usage_errors_do_not_import_pandas(argv: list[str]) -> None:
    """``hta --help`` and argparse's usage errors answer without pandas (or plotly)."""
    import subprocess
    import sys

    code = ("import sys\nfrom hta.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit as e:\n    code = e.code\n"
            "print(sorted(m for m in ('pandas', 'numpy', 'plotly', 'pyarrow') "
            "if m in sys.modules), code)")
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          timeout=60)
    assert proc.stdout.strip().splitlines()[-1] == f"[] {0 if argv == ['--help'] else 2}"


def test_the_facade_imports_no_plotting_library() -> None:
    """plotly is imported when a figure is first built, not with the facade."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    code = ("import sys, hta.trace_analysis\n"
            "print([m for m in ('plotly', 'jinja2', 'rich') if m in sys.modules])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          timeout=60)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_a_truncated_gzip_never_sizes_a_buffer_from_its_broken_trailer(tmp_path: Path) -> None:
    """A cut gzip file's last four bytes are not its size: loading it fails with the
    usual error without allocating what they claim (this test took 3.6 GB before)."""
    import gzip
    import tracemalloc

    from hta.errors import TraceLoadError
    from hta.kineto.rawio import read_bytes

    body = gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"},' * 50 + b"{}]}")[:-20]
    path = tmp_path / "rank-0.json.gz"
    path.write_bytes(body[:-4] + (0xFFFFFFF0).to_bytes(4, "little"))
    tracemalloc.start()
    try:
        with pytest.raises(TraceLoadError, match="truncated or corrupt"):
            read_bytes(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50_000_000
