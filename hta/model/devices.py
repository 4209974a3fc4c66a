"""Device peaks: dense peak FLOP/s per data type and memory bandwidth, per accelerator.

The table is data: one :class:`Device` per part, every number taken from the vendor
datasheet named in ``source`` (dense rates: where a datasheet gives the rate with 2:4
sparsity only, the dense rate is half of it, as its footnote says). Rates are in TFLOP/s
(10¹² FLOP/s), bandwidth in TB/s (10¹² bytes/s).

Peak keys: ``fp64`` (the FP64 tensor/matrix rate where the part has one), ``fp32`` (the
vector rate, CUDA cores / SIMD), ``fp32_matrix`` (AMD matrix cores), ``tf32``, ``fp16``,
``bf16``, ``fp8``, ``fp4``, ``int8``. A key a part does not have is absent (A100 has no
fp8): :func:`peak_tflops` then falls back as documented there.

A trace's device is matched by its ``deviceProperties`` name, by the exact part, never
by a substring (``GH200 480GB`` is a GH200, not an H200): the name, its vendor prefix
(``NVIDIA``, ``Tesla``, ``AMD Instinct``, ``AMD``) removed, must match an entry's
``pattern`` whole (:func:`part_name`, :meth:`Device.matches`). ``totalGlobalMem`` or
``numSms`` break ties where one part name covers two entries (A100 40 and 80 GB, the two
GH200 memories, the two GCDs called ``MI250X/MI250``). Where the name is empty or generic
(``AMD Radeon Graphics``, as ROCm writes in some containers), the part is found by
``computeMajor``, ``computeMinor``, ``numSms`` and memory. A name that fits no entry gives
no device (a MIG slice or an unlisted part: its peaks are not the full part's): the user
can name a device (``device="H100 SXM"``) or give peaks directly (:func:`custom_device`).
Each entry lists in ``names`` the ``deviceProperties`` names it is known by; the tests
check that each of them matches its own entry and no other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Vendor words a ``deviceProperties`` name starts with, removed before matching.
_VENDOR = re.compile(r"^(NVIDIA|Tesla|AMD Instinct|AMD)\s+", re.IGNORECASE)
#: Part names that say nothing about the part (ROCm in some containers): matched by arch.
GENERIC_NAMES = frozenset({"", "radeon graphics"})


def part_name(name: str) -> str:
    """A ``deviceProperties`` name without its vendor prefix and extra spaces:
    ``NVIDIA GH200 480GB`` -> ``GH200 480GB``, ``Tesla V100-SXM2-32GB`` ->
    ``V100-SXM2-32GB``."""
    return _VENDOR.sub("", " ".join(str(name or "").split()))


@dataclass(frozen=True)
class Device:
    """One accelerator's dense peaks (TFLOP/s per key) and memory bandwidth (TB/s).

    ``pattern`` must match the whole part name (:func:`part_name`, case-insensitive);
    ``min_memory_gb``/``max_memory_gb`` and ``num_sms`` break ties between entries whose
    patterns share a name; ``names`` are the ``deviceProperties`` names the part is known
    by; ``memory_gb`` its nominal memory."""

    name: str
    peaks: Mapping[str, float]
    bandwidth_tbs: float
    source: str
    pattern: str = ""
    min_memory_gb: float = 0.0
    max_memory_gb: float = float("inf")
    num_sms: int | None = None
    notes: str = ""
    #: (computeMajor, computeMinor, CU count) that identify the part when the trace
    #: leaves the name empty or generic (ROCm inside some containers).
    arch: tuple[int, int, int] | None = None
    names: tuple[str, ...] = ()
    memory_gb: float = 0.0

    def matches(self, name: str, memory_gb: float = 0.0, sms: int | None = None,
                major: int | None = None, minor: int | None = None) -> bool:
        """Whether a ``deviceProperties`` record (name, memory in GB, SM/CU count,
        compute capability; 0 or None where unknown) is this part: the whole part name
        matches ``pattern`` (a generic or empty name: ``arch`` matches), and the memory
        and SM count, where known, fit."""
        part = part_name(name)
        if part.lower() in GENERIC_NAMES:
            if self.arch is None or sms is None or int(sms) != self.arch[2]:
                return False
            if (major is not None and int(major) != self.arch[0]) or (
                    minor is not None and int(minor) != self.arch[1]):
                return False
        elif not self.pattern or re.fullmatch(self.pattern, part, re.IGNORECASE) is None:
            return False
        if memory_gb and not self.min_memory_gb <= memory_gb <= self.max_memory_gb:
            return False
        return self.num_sms is None or sms is None or int(sms) == self.num_sms


_A100 = {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0,
         "int8": 624.0}
_A100_SRC = "NVIDIA A100 Tensor Core GPU datasheet (dense; TF32/FP16/BF16/INT8 sparse ÷ 2)"
_H100_SXM = {"fp64": 67.0, "fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5,
             "fp8": 1979.0, "int8": 1979.0}
_H100_SRC = "NVIDIA H100 Tensor Core GPU datasheet (tensor rates given with sparsity ÷ 2)"
_H_NVL = {"fp64": 60.0, "fp32": 60.0, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5,
          "fp8": 1670.5, "int8": 1670.5}
_GH200_SRC = ("NVIDIA GH200 Grace Hopper Superchip datasheet (GPU: H100 SXM compute; "
              "sparse ÷ 2)")
_MI300 = {"fp64": 163.4, "fp32": 163.4, "fp32_matrix": 163.4, "tf32": 653.7,
          "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9, "int8": 2614.9}
_MI2 = {"fp64": 45.3, "fp32": 22.6, "fp32_matrix": 45.3, "fp16": 181.0, "bf16": 181.0,
        "int8": 181.0}
_A100_PG = r"|A100(-PG\d{3}-\d{3})?"  # the bare name and board names: memory decides

DEVICES: tuple[Device, ...] = (
    Device("A100 80GB PCIe", _A100, 1.935, _A100_SRC, r"A100[- ]80GB[- ]PCIe|A100-PCIe-80GB",
           names=("NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB"), memory_gb=80),
    Device("A100 80GB SXM", _A100, 2.039, _A100_SRC, r"A100-SXM4?-80GB" + _A100_PG,
           min_memory_gb=60, names=("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM-80GB"),
           memory_gb=80),
    Device("A100 40GB", _A100, 1.555, _A100_SRC, r"A100-(SXM4|PCIe)-40GB" + _A100_PG,
           max_memory_gb=60, notes="SXM4 and PCIe 40 GB parts have the same peaks; "
                                   "A100-PG509-200 is one",
           names=("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB", "NVIDIA A100-PG509-200"),
           memory_gb=40),
    Device("H100 PCIe", {"fp64": 51.0, "fp32": 51.0, "tf32": 378.0, "fp16": 756.5,
                         "bf16": 756.5, "fp8": 1513.0, "int8": 1513.0}, 2.0, _H100_SRC,
           r"H100[- ]PCIe", names=("NVIDIA H100 PCIe",), memory_gb=80),
    Device("H100 NVL", _H_NVL, 3.9, _H100_SRC, r"H100 NVL", names=("NVIDIA H100 NVL",),
           memory_gb=94),
    Device("H100 SXM", _H100_SXM, 3.35, _H100_SRC, r"H100( 80GB HBM3|[- ]SXM5?([- ]80GB)?)?",
           names=("NVIDIA H100 80GB HBM3", "NVIDIA H100"), memory_gb=80),
    Device("H800", {**_H100_SXM, "fp64": 1.0}, 3.35,
           "NVIDIA H800 Tensor Core GPU datasheet (SXM; FP64 1 TFLOP/s)", r"H800( 80GB HBM3)?",
           names=("NVIDIA H800", "NVIDIA H800 80GB HBM3"), memory_gb=80),
    Device("H200 NVL", _H_NVL, 4.8, "NVIDIA H200 Tensor Core GPU datasheet (NVL; sparse ÷ 2)",
           r"H200 NVL", names=("NVIDIA H200 NVL",), memory_gb=141),
    Device("H200", _H100_SXM, 4.8, "NVIDIA H200 Tensor Core GPU datasheet (SXM; sparse ÷ 2)",
           r"H200( 141GB HBM3e)?", names=("NVIDIA H200",), memory_gb=141),
    Device("GH200 96GB", _H100_SXM, 4.0, _GH200_SRC, r"GH200( 480GB| 120GB| 96GB( HBM3)?)?",
           max_memory_gb=125,
           notes="96 GB HBM3; reports as 'GH200 480GB' (the Grace CPU's LPDDR5X)",
           names=("NVIDIA GH200 480GB",), memory_gb=96),
    Device("GH200 144GB", _H100_SXM, 4.9, _GH200_SRC, r"GH200( 144GB?( HBM3e)?| 624GB)?",
           min_memory_gb=125,
           notes="144 GB HBM3e", names=("NVIDIA GH200 144G HBM3e",), memory_gb=144),
    Device("GB200", {"fp64": 45.0, "tf32": 1250.0, "fp16": 2500.0, "bf16": 2500.0,
                     "fp8": 5000.0, "fp4": 10000.0, "int8": 5000.0}, 8.0,
           "NVIDIA GB200 NVL72 datasheet (rack figures ÷ 72 GPUs; sparse ÷ 2)", r"GB200",
           notes="no FP32 vector rate on the datasheet", names=("NVIDIA GB200",),
           memory_gb=186),
    Device("B200", {"fp64": 37.0, "tf32": 1100.0, "fp16": 2250.0, "bf16": 2250.0,
                    "fp8": 4500.0, "fp4": 9000.0, "int8": 4500.0}, 8.0,
           "NVIDIA HGX B200 datasheet (per GPU; sparse ÷ 2)", r"B200",
           notes="no FP32 vector rate on the datasheet", names=("NVIDIA B200",),
           memory_gb=180),
    Device("L40S", {"fp32": 91.6, "tf32": 183.0, "fp16": 366.0, "bf16": 366.0,
                    "fp8": 733.0, "int8": 733.0}, 0.864,
           "NVIDIA L40S GPU datasheet (sparse ÷ 2)", r"L40S", names=("NVIDIA L40S",),
           memory_gb=48),
    Device("L4", {"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0, "fp8": 242.5,
                  "int8": 242.5}, 0.3, "NVIDIA L4 Tensor Core GPU datasheet (sparse ÷ 2)",
           r"L4", names=("NVIDIA L4",), memory_gb=24),
    Device("V100 SXM2", {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0}, 0.9,
           "NVIDIA Tesla V100 GPU datasheet (SXM2)", r"V100-SXM2-(16|32)GB",
           names=("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"), memory_gb=32),
    Device("V100 PCIe", {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0}, 0.9,
           "NVIDIA Tesla V100 GPU datasheet (PCIe)", r"V100-PCIE-(16|32)GB",
           names=("Tesla V100-PCIE-16GB", "Tesla V100-PCIE-32GB"), memory_gb=32),
    Device("MI355X", {"fp64": 78.6, "fp32": 157.3, "fp32_matrix": 157.3, "fp16": 2516.6,
                      "bf16": 2516.6, "fp8": 5033.2, "fp4": 10066.3, "int8": 5033.2}, 8.0,
           "AMD Instinct MI355X GPU datasheet", r"MI355X", arch=(9, 5, 256),
           names=("AMD Instinct MI355X",), memory_gb=288),
    Device("MI325X", _MI300, 6.0, "AMD Instinct MI325X GPU datasheet", r"MI325X",
           min_memory_gb=230, arch=(9, 4, 304), names=("AMD Instinct MI325X",),
           memory_gb=256),
    Device("MI300X", _MI300, 5.3, "AMD Instinct MI300X GPU datasheet", r"MI300X( VF)?",
           max_memory_gb=230, arch=(9, 4, 304),
           names=("AMD Instinct MI300X", "AMD Instinct MI300X VF"), memory_gb=192),
    Device("MI250X (one GCD)", {"fp64": 47.85, "fp32": 23.95, "fp32_matrix": 47.85,
                                "fp16": 191.5, "bf16": 191.5, "int8": 191.5}, 1.6,
           "AMD Instinct MI250X accelerator datasheet (package figures ÷ 2 GCDs)",
           r"MI250X(/MI250)?", num_sms=110, arch=(9, 0, 110),
           notes="each of the two GCDs is one device in a trace",
           names=("AMD Instinct MI250X", "AMD Instinct MI250X/MI250"), memory_gb=64),
    Device("MI210", _MI2, 1.6, "AMD Instinct MI210 accelerator datasheet",
           r"MI210|MI250|MI250X/MI250", num_sms=104, arch=(9, 0, 104),
           notes="a 104-CU, 64 GB device: an MI210, or one GCD of an MI250, whose per-GCD "
                 "peaks are the same (ROCm names both GCD kinds 'MI250X/MI250')",
           names=("AMD Instinct MI210", "AMD Instinct MI250", "AMD Instinct MI250X/MI250"),
           memory_gb=64),
)

#: Where a part has no rate for a key: the keys tried next, in order.
FALLBACK: dict[str, tuple[str, ...]] = {
    "fp32_matrix": ("fp32",), "tf32": ("fp32_matrix", "fp32"), "bf16": ("fp16",),
    "fp8": ("fp16", "bf16"), "fp4": ("fp8", "fp16", "bf16"), "int8": ("fp16",),
    "fp64": ("fp32",),
}


def match_device(properties: Mapping[str, Any] | None) -> Device | None:
    """The table's entry for one ``deviceProperties`` record (None when none fits): the
    first entry, in table order, that :meth:`Device.matches` it."""
    if not properties:
        return None
    name = str(properties.get("name", "") or "")
    memory_gb = float(properties.get("totalGlobalMem") or 0) / 1e9
    sms, major, minor = (properties.get(k) for k in ("numSms", "computeMajor",
                                                     "computeMinor"))
    for dev in DEVICES:
        if dev.matches(name, memory_gb, sms, major, minor):
            return dev
    return None


def device_by_name(name: str) -> Device:
    """A table entry by its name (case-insensitive: ``h100 sxm``, ``MI300X``), else by a
    part name its pattern matches whole (``H100``, ``NVIDIA GH200 480GB``: the first
    such entry), else the first entry whose name starts with the given words."""
    want = " ".join(name.split()).lower()
    for dev in DEVICES:
        if dev.name.lower() == want:
            return dev
    part = part_name(name)
    for dev in DEVICES:
        if part and dev.pattern and re.fullmatch(dev.pattern, part, re.IGNORECASE):
            return dev
    for dev in DEVICES:
        if dev.name.lower().startswith(want + " "):
            return dev
    names = ", ".join(d.name for d in DEVICES)
    raise ValueError(f"unknown device {name!r}; choose one of {names}, or pass peaks "
                     "with custom_device()")


def custom_device(name: str, peaks: Mapping[str, float], bandwidth_tbs: float) -> Device:
    """A device the table lacks: peaks in TFLOP/s per key, bandwidth in TB/s."""
    if bandwidth_tbs <= 0 or not peaks or min(peaks.values()) <= 0:
        raise ValueError("a custom device needs a positive bandwidth and positive peaks")
    return Device(name, dict(peaks), float(bandwidth_tbs), "given by the user")


def peak_tflops(device: Device, key: str, matrix: bool) -> float:
    """The dense peak for a key: an fp32 matrix op uses ``fp32_matrix`` where the part
    has it; a missing key falls back through :data:`FALLBACK`; NaN when none is known."""
    if matrix and key == "fp32" and "fp32_matrix" in device.peaks:
        key = "fp32_matrix"
    for k in (key, *FALLBACK.get(key, ())):
        if k in device.peaks:
            return float(device.peaks[k])
    return float("nan")


def describe_devices() -> list[dict[str, Any]]:
    """The table as rows (for the docs and for users checking a number's source)."""
    return [{"device": d.name, **{k: d.peaks.get(k) for k in (
        "fp64", "fp32", "fp32_matrix", "tf32", "fp16", "bf16", "fp8", "fp4", "int8")},
        "bandwidth(TB/s)": d.bandwidth_tbs, "memory(GB)": d.memory_gb,
        "names": ", ".join(d.names), "source": d.source, "notes": d.notes}
        for d in DEVICES]
