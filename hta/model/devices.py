"""Device peaks: dense peak FLOP/s per data type and memory bandwidth, per accelerator.

The table is data: one :class:`Device` per part, every number taken from the vendor
datasheet or architecture whitepaper named in ``source`` (dense rates: where a datasheet
gives the rate with 2:4 sparsity only, the dense rate is half of it, as its footnote says).
Rates are in TFLOP/s (10¹² FLOP/s), bandwidth in TB/s (10¹² bytes/s). GeForce parts run
FP16/BF16 (and FP8) tensor math with FP32 accumulate at half the FP16-accumulate rate;
PyTorch accumulates in FP32, so their ``fp16``/``bf16``/``fp8`` are the FP32-accumulate
rates of NVIDIA's whitepapers. GeForce parts no NVIDIA table lists are computed as the
whitepapers compute theirs, the per-SM rate times the SM count times the boost clock
(:func:`_geforce`), with the bandwidth from the memory data rate and bus width; their
``source`` says so. A rate no published figure or per-SM rule grounds is left out: the
GB10 and the RTX 500 Ada laptop part have no 16-bit tensor rates in the table, since NVIDIA
does not say whether they run FP32 accumulate at the GeForce half rate.

Peak keys: ``fp64`` (the FP64 tensor/matrix rate where the part has one), ``fp32`` (the
vector rate, CUDA cores / SIMD), ``fp32_matrix`` (AMD matrix cores), ``tf32``, ``fp16``,
``bf16``, ``fp8``, ``fp4``, ``int8``. A key a part does not have is absent (A100 has no
fp8): :func:`peak_tflops` then falls back as documented there.

A trace's device is matched by its ``deviceProperties`` name, by the exact part, never by
a substring (``GH200 480GB`` is a GH200, not an H200): the name, its vendor prefix
(``NVIDIA GeForce``, ``NVIDIA``, ``GeForce``, ``Tesla``, ``AMD Instinct``, ``AMD``)
removed, must match an entry's ``pattern`` whole (:func:`part_name`,
:meth:`Device.matches`), so ``RTX 4090 D`` (an entry of its own) and ``RTX 4090 Laptop
GPU`` are not an RTX 4090. ``totalGlobalMem`` or ``numSms`` break ties where one part name
covers two entries (A100 40 and 80 GB, the two GH200 memories, the two GCDs called
``MI250X/MI250``, the RTX 3080 10 and 12 GB, the RTX 3060 12 and 8 GB). Where the name is
empty or generic (``AMD Radeon Graphics``, as ROCm writes in some containers), the part is
found by ``computeMajor``, ``computeMinor``, ``numSms`` and memory. A name that fits no
entry gives no device (a MIG slice or an unlisted part: its peaks are not the full
part's): the user can name a device (``device="H100 SXM"``) or give peaks directly
(:func:`custom_device`). Each entry lists in ``names`` the ``deviceProperties`` names it
is known by; the tests check that each of them matches its own entry and no other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Vendor words a ``deviceProperties`` name starts with, removed before matching.
_VENDOR = re.compile(r"^(NVIDIA\s+GeForce|NVIDIA|GeForce|Tesla|AMD Instinct|AMD)\s+",
                     re.IGNORECASE)
#: Part names that say nothing about the part (ROCm in some containers): matched by arch.
GENERIC_NAMES = frozenset({"", "radeon graphics"})


def part_name(name: str) -> str:
    """A ``deviceProperties`` name without its vendor prefix and extra spaces:
    ``NVIDIA GH200 480GB`` -> ``GH200 480GB``, ``Tesla V100-SXM2-32GB`` ->
    ``V100-SXM2-32GB``, ``NVIDIA GeForce RTX 4090`` -> ``RTX 4090``."""
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

#: Dense FLOP per clock per SM of the GeForce tensor cores and CUDA cores, FP32
#: accumulate, as the whitepapers' tables give them (RTX 3090: 71 TFLOP/s FP16 = 82 SMs x
#: 512 x 1.695 GHz; RTX 4090: 165.2 = 128 x 512 x 2.52; RTX 5090: 209.5 = 170 x 512 x
#: 2.407, its FP4 1676 = 170 x 4096 x 2.407, FP4 with FP32 accumulate at full rate).
_GEFORCE_RATES: dict[str, dict[str, int]] = {
    "ampere": {"fp32": 256, "tf32": 256, "fp16": 512, "bf16": 512, "int8": 2048},
    "ada": {"fp32": 256, "tf32": 256, "fp16": 512, "bf16": 512, "fp8": 1024,
            "int8": 2048},
    "blackwell": {"fp32": 256, "tf32": 256, "fp16": 512, "bf16": 512, "fp8": 1024,
                  "fp4": 4096, "int8": 2048},
}
_GA102_WP = "NVIDIA Ampere GA102 GPU Architecture whitepaper v2"
_ADA_WP = "NVIDIA Ada GPU Architecture whitepaper v2.1, Appendix A"
_RTX_BW_WP = "NVIDIA RTX Blackwell GPU Architecture whitepaper v1.1, Appendix A"
_WP_OF = {"ampere": _GA102_WP, "ada": _ADA_WP, "blackwell": _RTX_BW_WP}
_GEFORCE_NOTE = ("GeForce: FP16/BF16/FP8 tensor rates with FP32 accumulate (PyTorch's), half "
                 "the FP16-accumulate rate")


def _geforce(arch: str, sms: int, boost_mhz: float) -> dict[str, float]:
    """Dense peaks of a GeForce part no NVIDIA table lists: the whitepaper's per-SM
    rate x SMs x boost clock, to 0.1 TFLOP/s."""
    return {k: round(v * sms * boost_mhz / 1e6, 1) for k, v in _GEFORCE_RATES[arch].items()}


def _computed(arch: str, spec: str) -> str:
    """The ``source`` of a computed GeForce entry."""
    return (f"computed: {_WP_OF[arch]} per-SM rates x SMs x boost clock of NVIDIA's "
            f"{spec} specifications (no NVIDIA datasheet or whitepaper table lists it); "
            "bandwidth = memory data rate x bus width")


#: RTX 500 Ada Generation Laptop GPU: only the rates Ada runs alike on every part.
_RTX500_ADA = {k: v for k, v in _geforce("ada", 16, 2025).items() if k in ("fp32", "int8")}

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
           notes="no FP32 vector rate on the datasheet",
           names=("NVIDIA B200",), memory_gb=180),
    Device("GB10", {"fp32": 31.0, "fp4": 500.0}, 0.273,
           "NVIDIA DGX Spark datasheet and product page (FP4 1 PFLOP/s with sparsity ÷ 2; "
           "128 GB LPDDR5x at 273 GB/s); FP32 31 TFLOP/s: NVIDIA's GB10 presentation, Hot "
           "Chips 2025", r"GB10",
           notes="DGX Spark's GPU (6,144 CUDA cores, 48 SMs, sm_121), sharing the 128 GB with "
                 "the Grace CPU; no FP16/BF16/FP8/TF32/INT8 rate published, nor whether FP32 "
                 "accumulate runs at the GeForce half rate: those keys are absent (tf32 falls "
                 "back to fp32, the others give no peak)",
           names=("NVIDIA GB10",), memory_gb=128),
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
    Device("T4", {"fp32": 8.1, "fp16": 65.0, "int8": 130.0}, 0.32,
           "NVIDIA T4 Tensor Core GPU datasheet (FP16/FP32 mixed precision 65 TFLOP/s); "
           "T4 board product brief (up to 320 GB/s)", r"T4",
           notes="Turing: no BF16 or TF32 tensor rate",
           names=("Tesla T4",), memory_gb=16),
    Device("RTX 2080 Ti", {"fp32": 13.4, "fp16": 53.8, "int8": 215.2}, 0.616,
           "NVIDIA Turing GPU Architecture whitepaper, Table 1 (GeForce RTX 2080 Ti, "
           "reference clocks: FP32 13.4, FP16 tensor with FP32 accumulate 53.8, INT8 "
           "tensor 215.2; 616 GB/s)", r"RTX 2080 Ti",
           notes="Turing: no BF16 or TF32 tensor rate; " + _GEFORCE_NOTE,
           names=("GeForce RTX 2080 Ti", "NVIDIA GeForce RTX 2080 Ti"), memory_gb=11),
    Device("A10", {"fp32": 31.2, "tf32": 62.5, "fp16": 125.0, "bf16": 125.0,
                   "int8": 250.0}, 0.6, "NVIDIA A10 Tensor Core GPU datasheet (sparse ÷ 2)",
           r"A10", names=("NVIDIA A10",), memory_gb=24),
    Device("A10G", {"fp32": 35.0, "tf32": 35.0, "fp16": 70.0}, 0.6,
           "NVIDIA AWS A10G datasheet (NVIDIA_AWS_A10G_DataSheet_FINAL_02_17_2022: FP32 "
           "35, TF32 35, FP16 70 TFLOP/s; 600 GB/s)", r"A10G",
           notes="AWS G5's A10 variant: more FP32, half the A10's tensor rates; no BF16 "
                 "or INT8 figure found (bf16 falls back to fp16)",
           names=("NVIDIA A10G",), memory_gb=24),
    Device("A40", {"fp32": 37.4, "tf32": 74.8, "fp16": 149.7, "bf16": 149.7,
                   "int8": 299.3}, 0.696, "NVIDIA A40 GPU datasheet (sparse ÷ 2)", r"A40",
           names=("NVIDIA A40",), memory_gb=48),
    Device("RTX A6000", {"fp32": 38.7, "tf32": 77.4, "fp16": 154.8, "bf16": 154.8,
                         "int8": 309.7}, 0.768,
           _GA102_WP + ", Appendix C (RTX A6000; sparse ÷ 2)", r"RTX A6000",
           names=("NVIDIA RTX A6000",), memory_gb=48),
    Device("RTX A5000", {"fp32": 27.8, "tf32": 55.5, "fp16": 111.1, "bf16": 111.1,
                         "int8": 222.2}, 0.768,
           "NVIDIA RTX A5000 datasheet (FP32 27.8, tensor 222.2 sparse ÷ 2); TF32 and INT8: "
           + _GA102_WP + " RTX A6000 per-SM rates x 64 SMs x 1.695 GHz",
           r"RTX A5000", names=("NVIDIA RTX A5000",), memory_gb=24),
    # RTX professional laptop (Ada): the exact name only, "Laptop GPU" included
    Device("RTX 500 Ada Laptop", _RTX500_ADA, 0.128,
           "computed: " + _ADA_WP + " per-SM rates (fp32 256, int8 2048 FLOP/clock, the "
           "same on GeForce and professional Ada parts) x 16 SMs (2,048 CUDA cores) x 2.025 "
           "GHz boost; bandwidth = 16 Gbps x 64-bit GDDR6 (SM count, clock and memory from "
           "public spec databases: no NVIDIA datasheet or whitepaper table found lists it)",
           r"RTX 500 Ada Generation Laptop GPU",
           notes="laptop part (35-60 W): the peaks are at the top boost clock; no NVIDIA "
                 "tensor TFLOP/s found, nor whether FP32 accumulate runs at the GeForce half "
                 "rate: tf32/fp16/bf16/fp8 are absent (tf32 falls back to fp32, the others "
                 "give no peak)",
           names=("NVIDIA RTX 500 Ada Generation Laptop GPU",), memory_gb=4),
    # GeForce RTX 30 (Ampere GA10x)
    Device("RTX 3060 12GB", _geforce("ampere", 28, 1777), 0.36,
           _computed("ampere", "GeForce RTX 3060 (28 SMs, 1.78 GHz, 15 Gbps x 192-bit)"),
           r"RTX 3060", min_memory_gb=10, num_sms=28, notes=_GEFORCE_NOTE,
           names=("NVIDIA GeForce RTX 3060",), memory_gb=12),
    Device("RTX 3060 8GB", _geforce("ampere", 28, 1777), 0.24,
           _computed("ampere", "GeForce RTX 3060 8 GB (28 SMs, 1.78 GHz, 15 Gbps x "
                               "128-bit)"),
           r"RTX 3060", max_memory_gb=10, num_sms=28, notes=_GEFORCE_NOTE,
           names=("NVIDIA GeForce RTX 3060",), memory_gb=8),
    Device("RTX 3060 Ti", _geforce("ampere", 38, 1665), 0.448,
           _computed("ampere", "GeForce RTX 3060 Ti (38 SMs, 1.67 GHz, 14 Gbps x 256-bit)"),
           r"RTX 3060 Ti", notes=_GEFORCE_NOTE + "; the GDDR6X board (608 GB/s) has the "
                                                 "same name and memory: GDDR6 assumed",
           names=("NVIDIA GeForce RTX 3060 Ti",), memory_gb=8),
    Device("RTX 3070", {"fp32": 20.3, "tf32": 20.3, "fp16": 40.6, "bf16": 40.6,
                        "int8": 162.6}, 0.448, _GA102_WP + ", Appendix A (sparse ÷ 2)",
           r"RTX 3070", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 3070",),
           memory_gb=8),
    Device("RTX 3070 Ti", _geforce("ampere", 48, 1770), 0.608,
           _computed("ampere", "GeForce RTX 3070 Ti (48 SMs, 1.77 GHz, 19 Gbps x 256-bit)"),
           r"RTX 3070 Ti", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 3070 Ti",),
           memory_gb=8),
    Device("RTX 3080 10GB", {"fp32": 29.8, "tf32": 29.8, "fp16": 59.5, "bf16": 59.5,
                             "int8": 238.0}, 0.76,
           _GA102_WP + ", Table 2 (RTX 3080; sparse ÷ 2)", r"RTX 3080", max_memory_gb=11.5,
           num_sms=68, notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 3080",),
           memory_gb=10),
    Device("RTX 3080 12GB", _geforce("ampere", 70, 1710), 0.912,
           _computed("ampere", "GeForce RTX 3080 12 GB (70 SMs, 1.71 GHz, 19 Gbps x "
                               "384-bit)"),
           r"RTX 3080", min_memory_gb=11.5, num_sms=70, notes=_GEFORCE_NOTE,
           names=("NVIDIA GeForce RTX 3080",), memory_gb=12),
    Device("RTX 3080 Ti", _geforce("ampere", 80, 1665), 0.912,
           _computed("ampere", "GeForce RTX 3080 Ti (80 SMs, 1.67 GHz, 19 Gbps x 384-bit)"),
           r"RTX 3080 Ti", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 3080 Ti",),
           memory_gb=12),
    Device("RTX 3090", {"fp32": 35.6, "tf32": 35.6, "fp16": 71.0, "bf16": 71.0,
                        "int8": 284.0}, 0.936, _GA102_WP + ", Appendix A (sparse ÷ 2)",
           r"RTX 3090", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 3090",),
           memory_gb=24),
    Device("RTX 3090 Ti", _geforce("ampere", 84, 1860), 1.008,
           _computed("ampere", "GeForce RTX 3090 Ti (84 SMs, 1.86 GHz, 21 Gbps x 384-bit)"),
           r"RTX 3090 Ti", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 3090 Ti",),
           memory_gb=24),
    # GeForce RTX 40 (Ada Lovelace)
    Device("RTX 4060", _geforce("ada", 24, 2460), 0.272,
           _computed("ada", "GeForce RTX 4060 (24 SMs, 2.46 GHz, 17 Gbps x 128-bit)"),
           r"RTX 4060", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 4060",),
           memory_gb=8),
    Device("RTX 4060 Ti", _geforce("ada", 34, 2535), 0.288,
           _computed("ada", "GeForce RTX 4060 Ti (34 SMs, 2.54 GHz, 18 Gbps x 128-bit)"),
           r"RTX 4060 Ti", notes=_GEFORCE_NOTE + "; 8 and 16 GB boards alike",
           names=("NVIDIA GeForce RTX 4060 Ti",), memory_gb=16),
    Device("RTX 4070", _geforce("ada", 46, 2475), 0.504,
           _computed("ada", "GeForce RTX 4070 (46 SMs, 2.48 GHz, 21 Gbps x 192-bit)"),
           r"RTX 4070", notes=_GEFORCE_NOTE + "; the GDDR6 board (480 GB/s) has the same "
                                              "name and memory: GDDR6X assumed",
           names=("NVIDIA GeForce RTX 4070",), memory_gb=12),
    Device("RTX 4070 SUPER", _geforce("ada", 56, 2475), 0.504,
           _computed("ada", "GeForce RTX 4070 SUPER (56 SMs, 2.48 GHz, 21 Gbps x 192-bit)"),
           r"RTX 4070 SUPER", notes=_GEFORCE_NOTE,
           names=("NVIDIA GeForce RTX 4070 SUPER",), memory_gb=12),
    Device("RTX 4070 Ti", _geforce("ada", 60, 2610), 0.504,
           _computed("ada", "GeForce RTX 4070 Ti (60 SMs, 2.61 GHz, 21 Gbps x 192-bit)"),
           r"RTX 4070 Ti", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 4070 Ti",),
           memory_gb=12),
    Device("RTX 4070 Ti SUPER", _geforce("ada", 66, 2610), 0.672,
           _computed("ada", "GeForce RTX 4070 Ti SUPER (66 SMs, 2.61 GHz, 21 Gbps x "
                            "256-bit)"),
           r"RTX 4070 Ti SUPER", notes=_GEFORCE_NOTE,
           names=("NVIDIA GeForce RTX 4070 Ti SUPER",), memory_gb=16),
    Device("RTX 4080", {"fp32": 48.7, "tf32": 48.7, "fp16": 97.5, "bf16": 97.5,
                        "fp8": 194.9, "int8": 389.9}, 0.7168,
           _ADA_WP + " (RTX 4080 16 GB; sparse ÷ 2)", r"RTX 4080", notes=_GEFORCE_NOTE,
           names=("NVIDIA GeForce RTX 4080",), memory_gb=16),
    Device("RTX 4080 SUPER", _geforce("ada", 80, 2550), 0.736,
           _computed("ada", "GeForce RTX 4080 SUPER (80 SMs, 2.55 GHz, 23 Gbps x 256-bit)"),
           r"RTX 4080 SUPER", notes=_GEFORCE_NOTE,
           names=("NVIDIA GeForce RTX 4080 SUPER",), memory_gb=16),
    Device("RTX 4090", {"fp32": 82.6, "tf32": 82.6, "fp16": 165.2, "bf16": 165.2,
                        "fp8": 330.3, "int8": 660.6}, 1.008,
           _ADA_WP + " (RTX 4090; FP8 with FP32 accumulate as corrected in v2.02; "
                     "sparse ÷ 2)",
           r"RTX 4090", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 4090",),
           memory_gb=24),
    Device("RTX 4090 D", _geforce("ada", 114, 2520), 1.008,
           _computed("ada", "GeForce RTX 4090 D (114 SMs, 2.52 GHz, 21 Gbps x 384-bit)"),
           r"RTX 4090 D", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 4090 D",),
           memory_gb=24),
    # GeForce RTX 50 (Blackwell)
    Device("RTX 5070", _geforce("blackwell", 48, 2512), 0.672,
           _computed("blackwell", "GeForce RTX 5070 (48 SMs, 2.51 GHz, 28 Gbps x 192-bit)"),
           r"RTX 5070", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 5070",),
           memory_gb=12),
    Device("RTX 5070 Ti", _geforce("blackwell", 70, 2452), 0.896,
           _computed("blackwell", "GeForce RTX 5070 Ti (70 SMs, 2.45 GHz, 28 Gbps x "
                                  "256-bit)"),
           r"RTX 5070 Ti", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 5070 Ti",),
           memory_gb=16),
    Device("RTX 5080", _geforce("blackwell", 84, 2617), 0.96,
           _computed("blackwell", "GeForce RTX 5080 (84 SMs, 2.62 GHz, 30 Gbps x 256-bit)"),
           r"RTX 5080", notes=_GEFORCE_NOTE, names=("NVIDIA GeForce RTX 5080",),
           memory_gb=16),
    Device("RTX 5090", {"fp32": 104.8, "tf32": 104.8, "fp16": 209.5, "bf16": 209.5,
                        "fp8": 419.0, "fp4": 1676.0, "int8": 838.0}, 1.792,
           _RTX_BW_WP + " (RTX 5090; FP4 with FP32 accumulate; sparse ÷ 2)", r"RTX 5090",
           notes=_GEFORCE_NOTE + "; FP4 runs at full rate with FP32 accumulate",
           names=("NVIDIA GeForce RTX 5090",), memory_gb=32),
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
