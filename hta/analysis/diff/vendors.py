"""Comparing jobs that ran on different devices (an NVIDIA GPU against an AMD one).

The CUDA and HIP runtimes name the same call alike: ``cudaDeviceSynchronize`` and
``hipDeviceSynchronize``, ``cudaLaunchKernel`` and ``hipLaunchKernel``. A diff that keys
on names would report one call removed and its twin added; these helpers pair a runtime
name on one side with its twin on the other side (when neither side has both) under one
label, ``"cudaDeviceSynchronize / hipDeviceSynchronize"``, so the call is compared with
itself. Kernel names differ between vendors' libraries and are not paired.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import pandas as pd

from hta.model.job import Job

_RUNTIME = re.compile(r"^(cuda|hip)([A-Z]\w*)$")


def twin(name: str) -> str | None:
    """The other runtime's name of a CUDA or HIP runtime call, else ``None``."""
    match = _RUNTIME.match(str(name))
    if match is None:
        return None
    return ("hip" if match.group(1) == "cuda" else "cuda") + match.group(2)


def paired_names(control: Iterable[str], test: Iterable[str]) -> dict[str, str]:
    """``name -> shared label`` for each runtime name found only on one side whose twin is
    found only on the other side."""
    c, t = set(map(str, control)), set(map(str, test))
    out: dict[str, str] = {}
    for name in sorted(c ^ t):
        other = twin(name)
        if other is None or other not in (c ^ t) or (name in c) == (other in c):
            continue
        cuda, hip = (name, other) if name.startswith("cuda") else (other, name)
        out[name] = out[other] = f"{cuda} / {hip}"
    return out


def pair_frames(control: pd.DataFrame, test: pd.DataFrame, column: str = "name"
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two per-name tables with paired runtime names replaced by their shared label
    in ``column`` (each name is on one side only, so no row merges within a side)."""
    if control is None or test is None or column not in control or column not in test:
        return control, test
    mapping = paired_names(control[column].dropna(), test[column].dropna())
    if not mapping:
        return control, test
    return tuple(
        frame.assign(**{column: frame[column].map(lambda n: mapping.get(n, n))})
        for frame in (control, test))


def device_names(trace: Job, ranks: Sequence[int]) -> list[str]:
    """Sorted names of the devices the ranks list in their ``deviceProperties``."""
    names: set[str] = set()
    for rank in ranks:
        for props in trace.meta(rank).get("device_properties") or []:
            if isinstance(props, dict) and str(props.get("name") or "").strip():
                names.add(str(props["name"]).strip())
    return sorted(names)


def devices_note(control: list[str], test: list[str]) -> str | None:
    """A note when both sides name their devices and the names differ, else ``None``."""
    if not control or not test or control == test:
        return None
    return (f"devices differ (control: {', '.join(control)}; test: {', '.join(test)}): "
            "kernels and libraries differ by device; compare step and GPU times, and "
            "kernels only by type. CUDA and HIP runtime calls are paired by name.")


__all__ = ["device_names", "devices_note", "pair_frames", "paired_names", "twin"]
