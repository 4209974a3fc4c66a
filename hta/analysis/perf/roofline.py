"""Achieved throughput against a device's roofline.

For a call doing F FLOPs and moving B bytes in t seconds on a device of peak P FLOP/s
(for the call's data type) and bandwidth W bytes/s:

* achieved ``tflops_per_s`` = F / t / 10¹², ``tb_per_s`` = B / t / 10¹²;
* arithmetic intensity I = F / B (FLOP per byte);
* the roof (attainable rate) is min(P, I·W); the *ridge point* P / W separates
  ``memory``-bound calls (I < P / W) from ``compute``-bound ones;
* ``pct_of_peak`` = achieved / roof · 100: for a compute-bound call F / t / P, for a
  memory-bound one (B / t) / W (since (F / t) / (I·W) = (B / t) / W), so a call that moves
  no FLOPs (an embedding gather) is judged by its bandwidth alone.

Where the device's compute peak for the type is unknown the call is judged by
bandwidth alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hta.model.devices import Device, peak_tflops


def roofline_columns(flops: np.ndarray, nbytes: np.ndarray, time_ns: np.ndarray,
                     keys: np.ndarray, matrix: np.ndarray, device: Device | None
                     ) -> dict[str, np.ndarray]:
    """The per-call roofline columns (module docstring); NaN where no model or device."""
    t = time_ns.astype(np.float64) / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        tflops = np.where(t > 0, flops / t / 1e12, np.nan)
        tbs = np.where(t > 0, nbytes / t / 1e12, np.nan)
        intensity = np.where(nbytes > 0, flops / nbytes, np.nan)
    n = len(flops)
    peak = np.full(n, np.nan)
    if device is not None and n:
        codes, uniq = pd.factorize(keys)
        both = codes.astype(np.int64) * 2 + matrix.astype(np.int64)
        table = np.full(2 * max(len(uniq), 1), np.nan)
        for i, k in enumerate(uniq):
            if k:
                table[2 * i] = peak_tflops(device, k, False)
                table[2 * i + 1] = peak_tflops(device, k, True)
        peak = np.where(codes >= 0, table[np.clip(both, 0, None)], np.nan)
    bw = device.bandwidth_tbs if device is not None else np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        ridge = peak / bw
        compute = (intensity >= ridge) & ~np.isnan(peak)
        roof = np.where(compute, peak, intensity * bw)
        pct = np.where(compute, 100 * tflops / peak, 100 * tbs / bw)
    modelled = ~np.isnan(flops) & ~np.isnan(nbytes) & (device is not None)
    # numpy's stubs refuse None as a value; it makes an object array, as meant
    bound = np.where(~modelled, None,  # type: ignore[call-overload]
                     np.where(compute, "compute", "memory"))
    return {
        "tflops_per_s": tflops, "tb_per_s": tbs, "flops_per_byte": intensity,
        "roof_tflops_per_s": np.where(modelled, roof, np.nan),
        "bound": pd.array(bound, dtype="object"),
        "pct_of_peak": np.where(modelled, pct, np.nan),
    }


ROOF_COLUMNS = ["roof", "flops_per_byte", "tflops_per_s"]


def roof_curves(device: Device, roofs: list[tuple[str, bool]], lo: float = 1e-2,
                hi: float = 1e4) -> pd.DataFrame:
    """Points of the roofs min(P, I·W) for the given (peak key, matrix) pairs, on
    I from ``lo`` to ``hi`` FLOP/byte: the two ends and the ridge point of each roof (a
    roof whose peak is unknown is the bandwidth line alone). ``roof`` names the line
    (``bf16 matrix``, ``fp32 vector``)."""
    rows = []
    bw = device.bandwidth_tbs
    for key, matrix in sorted(set(roofs)):
        peak = peak_tflops(device, key, matrix)
        label = f"{key} {'matrix' if matrix else 'vector'}"
        ridge = lo if np.isnan(peak) else min(max(peak / bw, lo), hi)
        xs = sorted({lo, ridge, hi})
        for x in xs:
            y = x * bw if np.isnan(peak) else min(peak, x * bw)
            rows.append((label, x, y))
    return pd.DataFrame(rows, columns=ROOF_COLUMNS)


def roofs_of(rows: pd.DataFrame) -> list[tuple[str, bool]]:
    """The (peak key, matrix) roofs the modelled rows of ``op_performance`` are judged
    against."""
    modelled = rows[rows["flops"].notna() & (rows["peak_key"] != "")]
    return sorted(set(zip(modelled["peak_key"], modelled["matrix"].astype(bool))))
