"""What docs/architecture.md calls public resolves: ``hta.__all__``, the HTA-compatible
modules' names, and the facade's methods that HTA's notebooks call."""

from __future__ import annotations

import importlib

import pytest

import hta

HTA_MODULES = ["hta.trace_analysis", "hta.trace_diff", "hta.analyzers", "hta.common",
               "hta.configs", "hta.utils"]


@pytest.mark.parametrize("name", hta.__all__)
def test_every_name_in_hta_all_resolves(name: str) -> None:
    assert getattr(hta, name) is not None


@pytest.mark.parametrize("module", HTA_MODULES)
def test_the_hta_compatible_modules_import(module: str) -> None:
    importlib.import_module(module)


def test_the_facade_has_htas_main_methods() -> None:
    from hta.trace_analysis import TraceAnalysis

    for method in ("get_temporal_breakdown", "get_idle_time_breakdown",
                   "get_gpu_kernel_breakdown", "get_comm_comp_overlap",
                   "get_queue_length_summary", "get_cuda_kernel_launch_stats",
                   "get_frequent_cuda_kernel_sequences", "critical_path_analysis"):
        assert callable(getattr(TraceAnalysis, method)), method
