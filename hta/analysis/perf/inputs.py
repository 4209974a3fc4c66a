"""An operator call's recorded inputs (``Input Dims``, ``Input type``, ``Concrete Inputs``)
and the element types they name: bytes per element and the peak-rate key of
:mod:`hta.model.devices`."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

#: Profiler type name -> (bytes per element, peak key). ``Float4_e2m1fn_x2`` packs two
#: values per byte: one element of the tensor is one byte holding two fp4 values.
DTYPES: dict[str, tuple[float, str]] = {
    "double": (8, "fp64"), "float": (4, "fp32"), "c10::Half": (2, "fp16"),
    "c10::BFloat16": (2, "bf16"), "c10::Float8_e4m3fn": (1, "fp8"),
    "c10::Float8_e5m2": (1, "fp8"), "c10::Float8_e4m3fnuz": (1, "fp8"),
    "c10::Float8_e5m2fnuz": (1, "fp8"), "c10::Float8_e8m0fnu": (1, "fp8"),
    "c10::Float4_e2m1fn_x2": (1, "fp4"), "long int": (8, "int64"), "long": (8, "int64"),
    "int": (4, "int32"), "short int": (2, "int16"), "short": (2, "int16"),
    "signed char": (1, "int8"), "unsigned char": (1, "uint8"), "bool": (1, "bool"),
    "c10::complex<float>": (8, "fp32"), "c10::complex<double>": (16, "fp64"),
}
FLOAT_KEYS = frozenset({"fp64", "fp32", "fp16", "bf16", "fp8", "fp4"})


@dataclass(frozen=True)
class Inputs:
    """The parsed inputs of one call: ``dims[i]`` the shape of argument ``i`` (``None``
    when it is not a tensor), ``types[i]`` its type text, ``concrete[i]`` its value text."""

    dims: tuple[tuple[int, ...] | None, ...]
    types: tuple[str, ...]
    concrete: tuple[str, ...]

    def shape(self, i: int) -> tuple[int, ...] | None:
        """Shape of tensor argument ``i`` (None when absent or not a tensor)."""
        return self.dims[i] if i < len(self.dims) else None

    def itemsize(self, i: int) -> float:
        """Bytes per element of argument ``i`` (NaN when the type is unknown)."""
        t = self.types[i] if i < len(self.types) else ""
        return DTYPES.get(t, (math.nan, ""))[0]

    def key(self, i: int) -> str:
        """Peak-rate key of argument ``i``'s type (``""`` when unknown)."""
        t = self.types[i] if i < len(self.types) else ""
        return DTYPES.get(t, (0, ""))[1]

    def nbytes(self, i: int) -> float:
        """Bytes of tensor argument ``i`` (0 when it is not a tensor)."""
        s = self.shape(i)
        return 0.0 if s is None else numel(s) * self.itemsize(i)

    def value(self, i: int) -> Any:
        """The concrete value of argument ``i`` parsed (None when not recorded)."""
        text = self.concrete[i] if i < len(self.concrete) else ""
        if not text:
            return None
        low = text.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        for attempt in (text, text.replace("True", "true").replace("False", "false")):
            try:
                return json.loads(attempt)
            except ValueError:
                continue
        return text


def numel(shape: tuple[int, ...]) -> int:
    """Number of elements of a shape (1 for a 0-d tensor)."""
    out = 1
    for d in shape:
        out *= int(d)
    return out


def parse_inputs(dims: str, types: str, concrete: str = "") -> Inputs | None:
    """Parse the three JSON texts of ``op_args``; None when the shapes are absent or bad.

    An argument is a tensor when its type names an element type (:data:`DTYPES`) and its
    dims are a list of integers; a 0-d tensor has dims ``[]``.
    """
    if not dims:
        return None
    try:
        raw_dims = json.loads(dims)
        raw_types = json.loads(types) if types else []
        raw_conc = json.loads(concrete) if concrete else []
    except ValueError:
        return None
    if not isinstance(raw_dims, list):
        return None
    raw_types = [t if isinstance(t, str) else "" for t in raw_types]
    raw_types += [""] * (len(raw_dims) - len(raw_types))
    shapes: list[tuple[int, ...] | None] = []
    for d, t in zip(raw_dims, raw_types):
        ok = isinstance(d, list) and t in DTYPES and all(isinstance(x, int) for x in d)
        shapes.append(tuple(d) if ok else None)
    conc = tuple(c if isinstance(c, str) else "" for c in raw_conc) if isinstance(
        raw_conc, list) else ()
    return Inputs(tuple(shapes), tuple(raw_types), conc)
