"""Device peaks: dense peak FLOP/s per data type and memory bandwidth, per accelerator.

The table is data: one :class:`Device` per part, every number taken from the vendor
datasheet named in ``source`` (dense rates: where a datasheet gives the rate with 2:4
sparsity only, the dense rate is half of it, as its footnote says). Rates are in TFLOP/s
(10¹² FLOP/s), bandwidth in TB/s (10¹² bytes/s).

Peak keys: ``fp64`` (the FP64 tensor/matrix rate where the part has one), ``fp32`` (the
vector rate, CUDA cores / SIMD), ``fp32_matrix`` (AMD matrix cores), ``tf32``, ``fp16``,
``bf16``, ``fp8``, ``fp4``, ``int8``. A key a part does not have is absent (A100 has no
fp8): :func:`peak_tflops` then falls back as documented there.

A trace's device is matched by its ``deviceProperties`` name (first matching entry, in
table order), with ``totalGlobalMem`` or ``numSms`` breaking ties where one name covers
two parts; where the name is empty (ROCm in some containers), by ``computeMajor``,
``computeMinor``, ``numSms`` and memory. The user can name a device
(``device="H100 SXM"``) or give peaks directly (:func:`custom_device`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Device:
    """One accelerator's dense peaks (TFLOP/s per key) and memory bandwidth (TB/s)."""

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
    #: leaves the name empty (ROCm inside some containers).
    arch: tuple[int, int, int] | None = None


_A100 = {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0,
         "int8": 624.0}
_A100_SRC = "NVIDIA A100 Tensor Core GPU datasheet (dense; TF32/FP16/BF16/INT8 sparse ÷ 2)"
_H100_SXM = {"fp64": 67.0, "fp32": 67.0, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5,
             "fp8": 1979.0, "int8": 1979.0}
_H100_SRC = "NVIDIA H100 Tensor Core GPU datasheet (tensor rates given with sparsity ÷ 2)"
_MI300 = {"fp64": 163.4, "fp32": 163.4, "fp32_matrix": 163.4, "tf32": 653.7,
          "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9, "int8": 2614.9}

DEVICES: tuple[Device, ...] = (
    Device("A100 80GB PCIe", _A100, 1.935, _A100_SRC, r"A100.*80GB.*PCIe|A100.*PCIe.*80GB"),
    Device("A100 80GB SXM", _A100, 2.039, _A100_SRC, r"A100", min_memory_gb=60),
    Device("A100 40GB", _A100, 1.555, _A100_SRC, r"A100", max_memory_gb=60,
           notes="SXM4 and PCIe 40 GB parts have the same peaks; A100-PG509-200 is one"),
    Device("H100 PCIe", {"fp64": 51.0, "fp32": 51.0, "tf32": 378.0, "fp16": 756.5,
                         "bf16": 756.5, "fp8": 1513.0, "int8": 1513.0}, 2.0, _H100_SRC,
           r"H100.*PCIe"),
    Device("H100 NVL", {"fp64": 60.0, "fp32": 60.0, "tf32": 417.5, "fp16": 835.5,
                        "bf16": 835.5, "fp8": 1670.5, "int8": 1670.5}, 3.9, _H100_SRC,
           r"H100 NVL"),
    Device("H100 SXM", _H100_SXM, 3.35, _H100_SRC, r"H100"),
    Device("H800", {**_H100_SXM, "fp64": 1.0}, 3.35,
           "NVIDIA H800 Tensor Core GPU datasheet (SXM; FP64 1 TFLOP/s)", r"H800"),
    Device("H200 NVL", {"fp64": 60.0, "fp32": 60.0, "tf32": 417.5, "fp16": 835.5,
                        "bf16": 835.5, "fp8": 1670.5, "int8": 1670.5}, 4.8,
           "NVIDIA H200 Tensor Core GPU datasheet (NVL; sparse ÷ 2)", r"H200 NVL"),
    Device("H200", _H100_SXM, 4.8, "NVIDIA H200 Tensor Core GPU datasheet (SXM; sparse ÷ 2)",
           r"H200"),
    Device("GB200", {"fp64": 45.0, "tf32": 1250.0, "fp16": 2500.0, "bf16": 2500.0,
                     "fp8": 5000.0, "fp4": 10000.0, "int8": 5000.0}, 8.0,
           "NVIDIA GB200 NVL72 datasheet (rack figures ÷ 72 GPUs; sparse ÷ 2)", r"GB200",
           notes="no FP32 vector rate on the datasheet"),
    Device("B200", {"fp64": 37.0, "tf32": 1100.0, "fp16": 2250.0, "bf16": 2250.0,
                    "fp8": 4500.0, "fp4": 9000.0, "int8": 4500.0}, 8.0,
           "NVIDIA HGX B200 datasheet (per GPU; sparse ÷ 2)", r"B200",
           notes="no FP32 vector rate on the datasheet"),
    Device("L40S", {"fp32": 91.6, "tf32": 183.0, "fp16": 366.0, "bf16": 366.0,
                    "fp8": 733.0, "int8": 733.0}, 0.864,
           "NVIDIA L40S GPU datasheet (sparse ÷ 2)", r"L40S"),
    Device("L4", {"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0, "fp8": 242.5,
                  "int8": 242.5}, 0.3, "NVIDIA L4 Tensor Core GPU datasheet (sparse ÷ 2)",
           r"\bL4\b"),
    Device("V100 SXM2", {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0}, 0.9,
           "NVIDIA Tesla V100 GPU datasheet (SXM2)", r"V100"),
    Device("MI355X", {"fp64": 78.6, "fp32": 157.3, "fp32_matrix": 157.3, "fp16": 2516.6,
                      "bf16": 2516.6, "fp8": 5033.2, "fp4": 10066.3, "int8": 5033.2}, 8.0,
           "AMD Instinct MI355X GPU datasheet", r"MI355", arch=(9, 5, 256)),
    Device("MI325X", _MI300, 6.0, "AMD Instinct MI325X GPU datasheet", r"MI325",
           min_memory_gb=230, arch=(9, 4, 304)),
    Device("MI300X", _MI300, 5.3, "AMD Instinct MI300X GPU datasheet", r"MI300X",
           max_memory_gb=230, arch=(9, 4, 304)),
    Device("MI250X (one GCD)", {"fp64": 47.85, "fp32": 23.95, "fp32_matrix": 47.85,
                                "fp16": 191.5, "bf16": 191.5, "int8": 191.5}, 1.6,
           "AMD Instinct MI250X accelerator datasheet (package figures ÷ 2 GCDs)", r"MI250X",
           num_sms=110, notes="each of the two GCDs is one device in a trace"),
    Device("MI210", {"fp64": 45.3, "fp32": 22.6, "fp32_matrix": 45.3, "fp16": 181.0,
                     "bf16": 181.0, "int8": 181.0}, 1.6,
           "AMD Instinct MI210 accelerator datasheet", r"MI210|MI250|AMD Radeon Graphics",
           num_sms=104, notes="a 104-CU, 64 GB device: an MI210, or one GCD of an MI250, "
                              "whose per-GCD peaks are the same"),
)

#: Where a part has no rate for a key: the keys tried next, in order.
FALLBACK: dict[str, tuple[str, ...]] = {
    "fp32_matrix": ("fp32",), "tf32": ("fp32_matrix", "fp32"), "bf16": ("fp16",),
    "fp8": ("fp16", "bf16"), "fp4": ("fp8", "fp16", "bf16"), "int8": ("fp16",),
    "fp64": ("fp32",),
}


def match_device(properties: Mapping[str, Any] | None) -> Device | None:
    """The table's entry for one ``deviceProperties`` record (None when none fits)."""
    if not properties:
        return None
    name = str(properties.get("name", "") or "").strip()
    memory_gb = float(properties.get("totalGlobalMem") or 0) / 1e9
    sms = properties.get("numSms")
    arch = (properties.get("computeMajor"), properties.get("computeMinor"), sms)
    for dev in DEVICES:
        if not name and (dev.arch is None or tuple(dev.arch) != arch):
            continue
        if name and not re.search(dev.pattern, name):
            continue
        if memory_gb and not dev.min_memory_gb <= memory_gb <= dev.max_memory_gb:
            continue
        if dev.num_sms is not None and sms is not None and int(sms) != dev.num_sms \
                and not re.search(r"MI\d", name):
            continue
        return dev
    return None


def device_by_name(name: str) -> Device:
    """A table entry by its name (case-insensitive; ``H100``, ``h100 sxm``, ``MI300X``)."""
    want = name.strip().lower()
    for dev in DEVICES:
        if dev.name.lower() == want or dev.name.lower().startswith(want + " "):
            return dev
    for dev in DEVICES:
        if re.search(dev.pattern, name, re.IGNORECASE):
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
        "bandwidth(TB/s)": d.bandwidth_tbs, "source": d.source, "notes": d.notes}
        for d in DEVICES]
