"""The device peak table: matching deviceProperties, overrides, fallbacks."""

from __future__ import annotations

import math

import pytest

from hta.model.devices import (
    DEVICES,
    custom_device,
    describe_devices,
    device_by_name,
    match_device,
    peak_tflops,
)


@pytest.mark.parametrize(("props", "name"), [
    ({"name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85e9}, "A100 80GB SXM"),
    ({"name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42297524224}, "A100 40GB"),
    ({"name": "NVIDIA A100 80GB PCIe", "totalGlobalMem": 85e9}, "A100 80GB PCIe"),
    ({"name": "NVIDIA H100 80GB HBM3"}, "H100 SXM"),
    ({"name": "NVIDIA H100 PCIe"}, "H100 PCIe"),
    ({"name": "NVIDIA H800"}, "H800"),
    ({"name": "NVIDIA H200"}, "H200"),
    ({"name": "NVIDIA B200"}, "B200"),
    ({"name": "NVIDIA GB200"}, "GB200"),
    ({"name": "NVIDIA L4"}, "L4"),
    ({"name": "NVIDIA L40S"}, "L40S"),
    ({"name": "Tesla V100-SXM2-32GB"}, "V100 SXM2"),
    ({"name": "AMD Instinct MI300X"}, "MI300X"),
    ({"name": "AMD Instinct MI325X"}, "MI325X"),
    ({"name": "AMD Instinct MI355X"}, "MI355X"),
    ({"name": "AMD Instinct MI250X"}, "MI250X (one GCD)"),
    ({"name": "AMD Instinct MI250X/MI250", "numSms": 110}, "MI250X (one GCD)"),
    ({"name": "AMD Instinct MI250X/MI250", "numSms": 104}, "MI210"),
    ({"name": "NVIDIA GH200 480GB", "totalGlobalMem": 102625181696}, "GH200 96GB"),
    ({"name": "NVIDIA GH200 144G HBM3e", "totalGlobalMem": 153008209920}, "GH200 144GB"),
    ({"name": "NVIDIA H200 NVL"}, "H200 NVL"),
    ({"name": "Tesla V100-PCIE-16GB", "totalGlobalMem": 16.9e9}, "V100 PCIe"),
    ({"name": "AMD Radeon Graphics", "totalGlobalMem": 205e9, "numSms": 304,
      "computeMajor": 9, "computeMinor": 4}, "MI300X"),
    ({"name": "AMD Radeon Graphics", "totalGlobalMem": 68702699520, "numSms": 104}, "MI210"),
    ({"name": "AMD Instinct MI300X VF", "totalGlobalMem": 205571227648, "numSms": 304},
     "MI300X"),
    ({"name": "", "totalGlobalMem": 206141652992, "numSms": 304, "computeMajor": 9,
      "computeMinor": 4}, "MI300X"),
    ({"name": "", "totalGlobalMem": 274e9, "numSms": 304, "computeMajor": 9,
      "computeMinor": 4}, "MI325X"),
])
def test_match(props: dict, name: str) -> None:
    assert match_device(props).name == name


def test_every_name_matches_its_own_entry_and_no_other() -> None:
    """Each entry's deviceProperties names (with the entry's memory and CU count) run
    against every entry's matcher: only the entry's own accepts them."""
    for dev in DEVICES:
        assert dev.names, dev.name
        sms = dev.num_sms if dev.num_sms is not None else (dev.arch or (0, 0, None))[2]
        for name in dev.names:
            props = {"name": name, "totalGlobalMem": dev.memory_gb * 1e9, "numSms": sms}
            assert match_device(props) is dev, (name, match_device(props))
            takers = [d.name for d in DEVICES if d.matches(name, dev.memory_gb, sms)]
            assert takers == [dev.name], (name, takers)


def test_parts_are_matched_whole_never_by_substring() -> None:
    gh = match_device({"name": "NVIDIA GH200 480GB", "totalGlobalMem": 102625181696})
    assert gh.name == "GH200 96GB" and gh.bandwidth_tbs == 4.0
    assert peak_tflops(gh, "fp32", False) == 67.0 and peak_tflops(gh, "bf16", True) == 989.5
    assert match_device({"name": "NVIDIA GH200 144G HBM3e"}).name == "GH200 144GB"
    assert match_device({"name": "NVIDIA GH200 144G HBM3e", "totalGlobalMem": 102e9}) is None
    assert match_device({"name": "NVIDIA GH200 144G HBM3e", "totalGlobalMem": 153e9}
                        ).bandwidth_tbs == 4.9
    for name in ("NVIDIA GH200 480GB", "NVIDIA GH200 144G HBM3e"):
        assert not device_by_name("H200").matches(name)
    assert match_device({"name": "NVIDIA GB200"}).name == "GB200"
    assert match_device({"name": "NVIDIA L40S"}).name == "L40S"
    assert match_device({"name": "NVIDIA L40"}) is None
    # a MIG slice, another V100 board: not the full part's peaks, so no device
    assert match_device({"name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb"}) is None
    assert match_device({"name": "Tesla V100-SXM3-32GB"}) is None
    # the part name decides, the memory only splits a part into its variants
    assert match_device({"name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 42e9}) is None
    assert device_by_name("H100").name == "H100 SXM"
    assert device_by_name("NVIDIA GH200 480GB").name == "GH200 96GB"


def test_no_match_and_overrides() -> None:
    assert match_device({"name": "Some Future GPU"}) is None
    assert match_device({"name": "", "numSms": 132, "computeMajor": 9,
                         "computeMinor": 0}) is None
    assert match_device({"name": "AMD Radeon Graphics", "numSms": 60}) is None
    assert device_by_name("h100 sxm").name == "H100 SXM"
    assert device_by_name("MI300X").bandwidth_tbs == 5.3
    with pytest.raises(ValueError, match="unknown device"):
        device_by_name("Z9000")
    dev = custom_device("mine", {"bf16": 100.0}, 1.0)
    assert peak_tflops(dev, "bf16", True) == 100.0
    with pytest.raises(ValueError):
        custom_device("bad", {"bf16": 0.0}, 1.0)


def test_peaks_and_fallbacks() -> None:
    h100 = device_by_name("H100 SXM")
    assert peak_tflops(h100, "bf16", True) == 989.5
    assert peak_tflops(h100, "fp8", True) == 2 * peak_tflops(h100, "bf16", True)
    a100 = device_by_name("A100 40GB")
    assert peak_tflops(a100, "fp8", True) == 312.0  # no fp8 on A100: the fp16 rate
    mi = device_by_name("MI300X")
    assert peak_tflops(mi, "fp32", True) == 163.4 and peak_tflops(mi, "fp32", False) == 163.4
    assert math.isnan(peak_tflops(device_by_name("B200"), "fp32", False))


def test_every_entry_names_its_source_and_is_dense() -> None:
    rows = describe_devices()
    assert len(rows) == len(DEVICES)
    for d in DEVICES:
        assert "datasheet" in d.source and d.bandwidth_tbs > 0
        for key, value in d.peaks.items():
            assert value > 0, (d.name, key)
        # dense tensor rates: bf16 at most 2x tf32 where both exist, fp8 2x bf16
        if "fp8" in d.peaks and "bf16" in d.peaks:
            assert d.peaks["fp8"] == pytest.approx(2 * d.peaks["bf16"], rel=0.01)
