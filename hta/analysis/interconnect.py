"""The bandwidth of the link between the GPUs of one node, per direction, by device.

A collective's bus bandwidth (:mod:`hta.analysis.collectives`) is comparable with the
bandwidth one GPU can send over its links in one direction while it receives as much
(what NCCL tests' ``busbw`` measures against). :data:`LINKS` holds that bandwidth per
interconnect, in GB/s (1e9 bytes/s), from the vendors' datasheets, which quote the total
of both directions (halved here). :data:`DEVICE_LINKS` maps a device name (the trace's
``deviceProperties`` name) to its interconnect: the first pattern found wins, so the
PCIe variants come before the SXM/OAM parts of the same name.

These numbers hold between GPUs of one node. A process group whose ranks span nodes is
limited by the network instead, which the trace does not describe: such groups are
left out unless the caller passes its own bandwidth (``link_gbps``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """An interconnect: its name, GB/s per direction and where the number comes from."""

    name: str
    gbps: float
    source: str


#: Interconnects, GB/s per direction (half the datasheet's bidirectional total).
LINKS: dict[str, Link] = {
    "nvlink2": Link("NVLink 2 (V100 SXM2)", 150.0,
                    "NVIDIA V100 datasheet: NVLink 300 GB/s"),
    "nvlink3": Link("NVLink 3 (A100 SXM)", 300.0,
                    "NVIDIA A100 datasheet: NVLink 600 GB/s"),
    "nvlink3_a800": Link("NVLink 3 (A800 SXM)", 200.0,
                         "NVIDIA A800 datasheet: NVLink 400 GB/s"),
    "nvlink4": Link("NVLink 4 (H100/H200 SXM)", 450.0,
                    "NVIDIA H100 and H200 datasheets: NVLink 900 GB/s"),
    "nvlink4_h800": Link("NVLink 4 (H800 SXM)", 200.0,
                         "NVIDIA H800 datasheet: NVLink 400 GB/s"),
    "nvlink4_nvl": Link("NVLink bridge (H100 NVL)", 300.0,
                        "NVIDIA H100 NVL datasheet: NVLink 600 GB/s"),
    "nvlink5": Link("NVLink 5 (B200/GB200)", 900.0,
                    "NVIDIA B200/GB200 datasheets: NVLink 1.8 TB/s"),
    "pcie3": Link("PCIe 3.0 x16", 16.0, "PCI-SIG: 8 GT/s x16, about 32 GB/s"),
    "pcie4": Link("PCIe 4.0 x16", 32.0, "PCI-SIG: 16 GT/s x16, about 64 GB/s"),
    "pcie5": Link("PCIe 5.0 x16", 64.0, "PCI-SIG: 32 GT/s x16, about 128 GB/s"),
    "xgmi_mi210": Link("Infinity Fabric (MI210, 3 links)", 150.0,
                       "AMD Instinct MI210 datasheet: 3 links, 300 GB/s peak"),
    "xgmi_mi300": Link("Infinity Fabric (MI300X/MI325X, 7 links)", 448.0,
                       "AMD Instinct MI300X and MI325X datasheets: 7 links of 128 GB/s"),
    "xgmi_mi355": Link("Infinity Fabric (MI355X, 7 links)", 537.6,
                       "AMD Instinct MI355X datasheet: 7 links of 153.6 GB/s"),
}

#: Ordered (pattern on the device name, interconnect key of :data:`LINKS`).
DEVICE_LINKS: tuple[tuple[str, str], ...] = (
    (r"(?i)(H100|H200|H800|A100|A800|V100).*PCIe|PCIe.*(H100|A100)", "pcie_by_part"),
    (r"(?i)H100 NVL", "nvlink4_nvl"),
    (r"(?i)H800", "nvlink4_h800"),
    (r"(?i)GB200|\bB200|B300", "nvlink5"),
    (r"(?i)H100|H200|H20\b", "nvlink4"),
    (r"(?i)A800", "nvlink3_a800"),
    (r"(?i)A100|PG509", "nvlink3"),
    (r"(?i)V100", "nvlink2"),
    (r"(?i)\bL4\b|L40|A10\b|A40\b", "pcie4"),
    (r"(?i)MI355", "xgmi_mi355"),
    (r"(?i)MI300|MI325", "xgmi_mi300"),
    (r"(?i)MI210", "xgmi_mi210"),
)
_PCIE_GEN = ((r"(?i)H100|H200|H800", "pcie5"), (r"(?i)A100|A800", "pcie4"),
             (r"(?i)V100", "pcie3"))


def link_for_device(name: str) -> Link | None:
    """The interconnect of a device name (:data:`DEVICE_LINKS`), or None when unknown."""
    for pattern, key in DEVICE_LINKS:
        if re.search(pattern, name or ""):
            if key == "pcie_by_part":
                key = next((k for p, k in _PCIE_GEN if re.search(p, name)), "pcie4")
            return LINKS[key]
    return None
