"""The device peak table: matching deviceProperties, overrides, fallbacks."""

from __future__ import annotations

import math

import pytest

from hta.model.devices import (
    DEVICES,
    _geforce,
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
    # cloud parts of the Turing/Ampere generation
    ({"name": "Tesla T4", "totalGlobalMem": 15828320256, "numSms": 40}, "T4"),
    ({"name": "NVIDIA A10", "totalGlobalMem": 23836098560, "numSms": 72}, "A10"),
    ({"name": "NVIDIA A10G", "totalGlobalMem": 23609475072, "numSms": 80}, "A10G"),
    ({"name": "NVIDIA A40", "totalGlobalMem": 47850782720, "numSms": 84}, "A40"),
    ({"name": "NVIDIA RTX A6000", "totalGlobalMem": 51041271808}, "RTX A6000"),
])
def test_match(props: dict, name: str) -> None:
    assert match_device(props).name == name


#: One deviceProperties name per GeForce part (torch.cuda.get_device_name()), its
#: memory in bytes and SM count as a trace records them, and the entry it must get.
GEFORCE = [
    ("NVIDIA GeForce RTX 3060", 12630491136, 28, "RTX 3060 12GB"),
    ("NVIDIA GeForce RTX 3060", 8589934592, 28, "RTX 3060 8GB"),
    ("NVIDIA GeForce RTX 3060 Ti", 8358723584, 38, "RTX 3060 Ti"),
    ("NVIDIA GeForce RTX 3070", 8361738240, 46, "RTX 3070"),
    ("NVIDIA GeForce RTX 3070 Ti", 8361738240, 48, "RTX 3070 Ti"),
    ("NVIDIA GeForce RTX 3080", 10487889920, 68, "RTX 3080 10GB"),
    ("NVIDIA GeForce RTX 3080", 12630491136, 70, "RTX 3080 12GB"),
    ("NVIDIA GeForce RTX 3080 Ti", 12630491136, 80, "RTX 3080 Ti"),
    ("NVIDIA GeForce RTX 3090", 25438126080, 82, "RTX 3090"),
    ("NVIDIA GeForce RTX 3090 Ti", 25438126080, 84, "RTX 3090 Ti"),
    ("NVIDIA GeForce RTX 4060", 8585216000, 24, "RTX 4060"),
    ("NVIDIA GeForce RTX 4060 Ti", 17171480576, 34, "RTX 4060 Ti"),
    ("NVIDIA GeForce RTX 4070", 12878086144, 46, "RTX 4070"),
    ("NVIDIA GeForce RTX 4070 SUPER", 12878086144, 56, "RTX 4070 SUPER"),
    ("NVIDIA GeForce RTX 4070 Ti", 12878086144, 60, "RTX 4070 Ti"),
    ("NVIDIA GeForce RTX 4070 Ti SUPER", 17171480576, 66, "RTX 4070 Ti SUPER"),
    ("NVIDIA GeForce RTX 4080", 17171480576, 76, "RTX 4080"),
    ("NVIDIA GeForce RTX 4080 SUPER", 17171480576, 80, "RTX 4080 SUPER"),
    ("NVIDIA GeForce RTX 4090", 25756696576, 128, "RTX 4090"),
    ("NVIDIA GeForce RTX 5070", 12820807680, 48, "RTX 5070"),
    ("NVIDIA GeForce RTX 5070 Ti", 16837967872, 70, "RTX 5070 Ti"),
    ("NVIDIA GeForce RTX 5080", 16837967872, 84, "RTX 5080"),
    ("NVIDIA GeForce RTX 5090", 33676689408, 170, "RTX 5090"),
]


@pytest.mark.parametrize(("name", "memory", "sms", "entry"), GEFORCE)
def test_geforce_parts(name: str, memory: int, sms: int, entry: str) -> None:
    assert match_device({"name": name, "totalGlobalMem": memory, "numSms": sms}).name == entry
    # the name alone (no memory, no SM count) finds the part, for the 3060 and 3080 the
    # first memory variant
    first = {"RTX 3060 8GB": "RTX 3060 12GB", "RTX 3080 12GB": "RTX 3080 10GB"}
    assert match_device({"name": name}).name == first.get(entry, entry)
    dev = device_by_name(entry)
    assert dev.notes.startswith("GeForce: FP16/BF16/FP8 tensor rates with FP32 accumulate")
    # FP32 accumulate: fp16 = bf16 = 2 x tf32 = 2 x the fp32 vector rate
    assert dev.peaks["fp16"] == dev.peaks["bf16"]
    assert dev.peaks["fp16"] == pytest.approx(2 * dev.peaks["tf32"], rel=0.005)
    assert dev.peaks["tf32"] == dev.peaks["fp32"]


@pytest.mark.parametrize("name", [
    "NVIDIA GeForce RTX 4090 Laptop GPU",
    "NVIDIA GeForce RTX 4080 Laptop GPU",
    "NVIDIA GeForce RTX 3080 Ti Laptop GPU",
    "NVIDIA GeForce RTX 3060 Laptop GPU",
    "NVIDIA GeForce RTX 5090 D",
    "NVIDIA GeForce RTX 5090 Laptop GPU",
    "NVIDIA GeForce RTX 5060 Ti",
    "NVIDIA GeForce RTX 4050",
    "NVIDIA GeForce RTX 2080",
    "NVIDIA RTX 6000 Ada Generation",
    "NVIDIA L40",
])
def test_geforce_near_misses_get_no_device(name: str) -> None:
    assert match_device({"name": name}) is None


def test_geforce_names_are_matched_whole() -> None:
    # each SKU its own entry: no prefix takes a longer name, no longer pattern a shorter one
    assert match_device({"name": "NVIDIA GeForce RTX 4080"}).name == "RTX 4080"
    assert match_device({"name": "NVIDIA GeForce RTX 4080 SUPER"}).name == "RTX 4080 SUPER"
    assert match_device({"name": "NVIDIA GeForce RTX 4070"}).name == "RTX 4070"
    assert match_device({"name": "NVIDIA GeForce RTX 4070 Ti"}).name == "RTX 4070 Ti"
    assert match_device({"name": "NVIDIA GeForce RTX 4070 Ti SUPER"}
                        ).name == "RTX 4070 Ti SUPER"
    assert match_device({"name": "NVIDIA GeForce RTX 4090"}).bandwidth_tbs == 1.008
    # older drivers write the name without "NVIDIA"; the case of SUPER does not matter
    assert match_device({"name": "GeForce RTX 3090"}).name == "RTX 3090"
    assert match_device({"name": "NVIDIA GeForce RTX 4070 Super"}).name == "RTX 4070 SUPER"
    # A10, A10G, A100 and A40 are four parts
    assert match_device({"name": "NVIDIA A10"}).name == "A10"
    assert match_device({"name": "NVIDIA A10G"}).name == "A10G"
    assert match_device({"name": "NVIDIA A40"}).name == "A40"
    assert match_device({"name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42e9}
                        ).name == "A100 40GB"
    # the RTX 3080 10 and 12 GB share a name: memory or the SM count decides
    assert match_device({"name": "NVIDIA GeForce RTX 3080", "numSms": 70}
                        ).name == "RTX 3080 12GB"
    assert match_device({"name": "NVIDIA GeForce RTX 3080", "totalGlobalMem": 12.6e9}
                        ).bandwidth_tbs == 0.912
    assert match_device({"name": "NVIDIA GeForce RTX 3080", "totalGlobalMem": 10.5e9,
                         "numSms": 70}) is None  # contradictory: no guess
    assert match_device({"name": "NVIDIA GeForce RTX 3060", "totalGlobalMem": 8.5e9}
                        ).bandwidth_tbs == 0.24
    assert device_by_name("RTX 4090").name == "RTX 4090"
    assert device_by_name("NVIDIA GeForce RTX 3080").name == "RTX 3080 10GB"


def test_geforce_rates() -> None:
    """The whitepaper-tabulated parts' rates, and the per-SM x SMs x boost clock rule the
    computed entries follow, which reproduces every tabulated figure."""
    rtx4090 = device_by_name("RTX 4090")
    assert peak_tflops(rtx4090, "bf16", True) == 165.2  # not 330.3 (FP16 accumulate)
    assert peak_tflops(rtx4090, "fp8", True) == 330.3
    assert peak_tflops(rtx4090, "fp32", True) == 82.6  # an fp32 GEMM: the TF32 rate
    rtx5090 = device_by_name("RTX 5090")
    assert rtx5090.peaks["fp4"] == 8 * rtx5090.peaks["bf16"]  # FP4 not halved
    assert device_by_name("RTX 3090").peaks["bf16"] == 71.0
    assert device_by_name("T4").peaks == {"fp32": 8.1, "fp16": 65.0, "int8": 130.0}
    assert peak_tflops(device_by_name("T4"), "bf16", True) == 65.0  # falls back to fp16
    assert peak_tflops(device_by_name("A10G"), "bf16", True) == 70.0
    assert device_by_name("A10").peaks["bf16"] == 125.0
    tabulated = {"RTX 3070": ("ampere", 46, 1725), "RTX 3080 10GB": ("ampere", 68, 1710),
                 "RTX 3090": ("ampere", 82, 1695), "RTX 4080": ("ada", 76, 2505),
                 "RTX 4090": ("ada", 128, 2520), "RTX 5090": ("blackwell", 170, 2407)}
    for name, (arch, sms, mhz) in tabulated.items():
        computed, table = _geforce(arch, sms, mhz), device_by_name(name).peaks
        assert set(computed) == set(table), name
        for key, value in table.items():
            assert computed[key] == pytest.approx(value, rel=0.003), (name, key)


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
        assert ("datasheet" in d.source or "whitepaper" in d.source) and d.bandwidth_tbs > 0
        if d.source.startswith("computed"):  # a GeForce part no NVIDIA table lists
            assert "whitepaper" in d.source and d.name.startswith("RTX "), d.name
        for key, value in d.peaks.items():
            assert value > 0, (d.name, key)
        # dense tensor rates: bf16 at most 2x tf32 where both exist, fp8 2x bf16
        if "fp8" in d.peaks and "bf16" in d.peaks:
            assert d.peaks["fp8"] == pytest.approx(2 * d.peaks["bf16"], rel=0.01)


def test_the_rtx_4090_d_is_its_own_part() -> None:
    """The China part: 114 SMs at the 4090's clock, so 114/128 of its rates."""
    from hta.model.devices import match_device

    d = match_device({"name": "NVIDIA GeForce RTX 4090 D"})
    full = match_device({"name": "NVIDIA GeForce RTX 4090"})
    assert d is not None and full is not None and d.name == "RTX 4090 D"
    assert d.peaks["fp32"] == pytest.approx(full.peaks["fp32"] * 114 / 128, abs=0.1)
    assert d.bandwidth_tbs == full.bandwidth_tbs
    a5000 = match_device({"name": "NVIDIA RTX A5000"})
    assert a5000 is not None and a5000.peaks["fp16"] == 111.1


def test_the_rtx_500_ada_laptop_part_and_the_gb10() -> None:
    """Issue 37 Q7: the two parts of the real traces the table lacked, by their exact names,
    with the figures their sources give (module docstring) and no 16-bit tensor rate."""
    rtx500 = match_device({"name": "NVIDIA RTX 500 Ada Generation Laptop GPU",
                           "totalGlobalMem": 4294639616, "numSms": 16})
    assert rtx500 is not None and rtx500.name == "RTX 500 Ada Laptop"
    assert rtx500.source.startswith("computed") and "Ada GPU Architecture whitepaper" in \
        rtx500.source
    # 16 SMs x 2.025 GHz x the Ada per-SM rates (256 fp32, 2048 int8); 16 Gbps x 64 bit
    assert rtx500.peaks == {"fp32": 8.3, "int8": 66.4} and rtx500.bandwidth_tbs == 0.128
    assert _geforce("ada", 16, 2025)["fp32"] == 8.3
    assert math.isnan(peak_tflops(rtx500, "bf16", True))  # not grounded: no peak
    assert peak_tflops(rtx500, "fp32", True) == 8.3  # tf32 falls back to fp32
    gb10 = match_device({"name": "NVIDIA GB10", "totalGlobalMem": 128.5e9, "numSms": 48})
    assert gb10 is not None and gb10.name == "GB10" and gb10.memory_gb == 128
    assert gb10.peaks == {"fp32": 31.0, "fp4": 500.0}  # 1 PFLOP/s FP4 with sparsity / 2
    assert gb10.bandwidth_tbs == 0.273
    # NVIDIA's two figures agree with the Blackwell per-SM rates (FP4 4096, FP32 256 per
    # clock): one clock, about 2.5 GHz on 48 SMs, gives both
    assert gb10.peaks["fp4"] / gb10.peaks["fp32"] == pytest.approx(4096 / 256, rel=0.01)
    assert math.isnan(peak_tflops(gb10, "bf16", True))
    assert peak_tflops(gb10, "fp4", True) == 500.0
    assert device_by_name("GB10") is gb10 and device_by_name("RTX 500 Ada") is rtx500


@pytest.mark.parametrize("name", [
    "NVIDIA RTX 500 Ada Generation",  # without "Laptop GPU": not the exact name
    "NVIDIA RTX 500 Ada Generation Embedded GPU",
    "NVIDIA RTX A500 Laptop GPU",  # the Ampere part
    "NVIDIA RTX 1000 Ada Generation Laptop GPU",
    "NVIDIA RTX 5000 Ada Generation Laptop GPU",
    "NVIDIA GB100",
    "NVIDIA GB10 Laptop GPU",
    "NVIDIA GB102",
])
def test_near_misses_of_the_rtx_500_ada_and_gb10_get_no_device(name: str) -> None:
    assert match_device({"name": name}) is None


def test_gb10_is_not_gb200_nor_b200() -> None:
    assert match_device({"name": "NVIDIA GB200"}).name == "GB200"
    assert match_device({"name": "NVIDIA B200"}).name == "B200"
    assert not device_by_name("GB10").matches("NVIDIA GB200")
    assert not device_by_name("GB200").matches("NVIDIA GB10")


def test_the_rtx_2080_ti_has_turings_rates() -> None:
    """A public trace names it "GeForce RTX 2080 Ti" (no vendor word before): FP32, FP16
    with FP32 accumulate (GeForce: half the FP16-accumulate rate) and INT8, no BF16/TF32."""
    dev = match_device({"name": "GeForce RTX 2080 Ti", "totalGlobalMem": 11554717696,
                        "numSms": 68, "computeMajor": 7, "computeMinor": 5})
    assert dev is not None and dev.name == "RTX 2080 Ti"
    assert dict(dev.peaks) == {"fp32": 13.4, "fp16": 53.8, "int8": 215.2}
    assert dev.bandwidth_tbs == 0.616
