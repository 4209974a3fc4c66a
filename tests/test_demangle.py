"""Mangled C++ kernel names are shown demangled, by the C++ runtime's demangler, while the
tables keep the raw name (issue: mangled names)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import run_cli
from diff_cases import load, write_job
from kineto_builder import TraceBuilder

from hta.analysis.names import short_name
from hta.model.demangle import LONGEST_MANGLED, demangle, demangler_available

pytestmark = pytest.mark.skipif(not demangler_available(),
                                reason="no C++ runtime with __cxa_demangle on this machine")

CUTLASS = "_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalIiEEEEvNT_6ParamsE"
CUTLASS_TEXT = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int> >"
                "(cutlass::gemm::kernel::GemmUniversal<int>::Params)")


def test_known_names() -> None:
    assert demangle("_Z3fooi") == "foo(int)"
    assert demangle(CUTLASS) == CUTLASS_TEXT
    fill = ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5"
            "ArrayIPcLi1EEEEEviT0_T1_")
    assert demangle(fill) == ("void at::native::vectorized_elementwise_kernel<4, "
                              "at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
                              "(int, at::native::FillFunctor<float>, "
                              "at::detail::Array<char*, 1>)")


@pytest.mark.parametrize("name", ["aten::mm", "void k<1>(float*)", "_Zgarbage", "", "_Z",
                                  "_Z3foo\u00e9", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"])
def test_other_names_unchanged(name: str) -> None:
    assert demangle(name) == name


def test_hostile_names_come_back_unchanged() -> None:
    deep = ("_Z1f" + "I" * 4000 + "i" + "E" * 4000)[:LONGEST_MANGLED]
    assert demangle(deep) == deep
    too_long = "_Z" + "3foo" * LONGEST_MANGLED
    assert demangle(too_long) == too_long


def test_short_name_of_a_mangled_name_is_that_of_its_text() -> None:
    assert short_name(CUTLASS) == short_name(CUTLASS_TEXT) == "cutlass::device_kernel"


def test_summary_shows_it_demangled_and_tables_keep_it_raw(tmp_path: Path) -> None:
    b = TraceBuilder(rank=0, world_size=1)
    b.annotation("ProfilerStep#1", 0, 5_000_000)
    b.cpu_op("aten::mm", 100_000, 50_000)
    b.launch_kernel(CUTLASS, cpu_ts=110_000, cpu_dur=5_000, gpu_ts=200_000, gpu_dur=1_000_000)
    folder = write_job(tmp_path / "job", b)
    out = run_cli(["summary", str(folder), "--no-cache"]).stdout
    # the table shows its display name (function and key template parameters)
    assert "device_kernel<GemmUniversal<int>>" in out and CUTLASS not in out
    as_json = run_cli(["summary", str(folder), "--no-cache", "--json"]).stdout
    assert CUTLASS in as_json  # --json keeps the name as written
    events = load(folder).get_events(0)
    assert CUTLASS in set(events["name"]) and CUTLASS_TEXT not in set(events["name"])


def test_report_and_figures_show_it_demangled() -> None:
    from hta.plots._figure_parts import distinct_short, short
    from hta.report.context import display_name

    assert display_name(CUTLASS) == "device_kernel<GemmUniversal<int>>"
    assert short(CUTLASS, 200) == CUTLASS_TEXT
    assert distinct_short([CUTLASS, "aten::mm"], 200) == [CUTLASS_TEXT, "aten::mm"]
