"""The ``fp64_work`` finding: compute kernels that run in double precision.

A model trained or served in bf16, fp16 or fp32 rarely means to compute in fp64, yet a
float64 tensor slips in easily (a NumPy array, ``.double()``, a default dtype of
float64) and every operator it touches then runs in fp64. Consumer and cloud inference
GPUs run fp64 at 1/32 (Turing, Pascal GP10x) to 1/64 (Ampere GA10x, Ada, Blackwell
GB20x) of their fp32 rate, and fp64 values are twice the bytes of fp32 ones anywhere.

A compute kernel (kind ``computation``, of the analysis: :func:`in_steps`) is an *fp64
kernel* when

1. its name says double (:func:`name_precision` is ``+1``): a cuBLAS, cuBLASLt, CUTLASS
   or Tensile fp64 family (:data:`FP64_NAME`: ``dgemm``, ``d884gemm``, ``f64``/``fp64``
   tokens, Tensile ``Cijk_<A>_<B>_D[B]_``/``Z[B]_``), or its own template arguments name
   ``double`` and no narrower float type (``vectorized_elementwise_kernel<4,
   CUDAFunctor_add<double>, ...>``, ``upsample_nearest2d_out_frame<double, ...>``,
   ``c10::complex<double>``); a name whose template arguments hold ``double`` next to
   ``float`` (fused Adam and SGD pass their hyper-parameters as ``double``; random
   kernels name the ``double`` mean and std of their generator) is not one; or
2. its name says nothing of its type (``0``: Triton, cuDNN without a type argument) and
   the operator that launched it (the innermost ``cpu_op`` around its launch,
   ``op_index``), an ATen or custom operator (``ns::name``) or an Inductor kernel launch
   (``triton_*``), computes in double by its recorded inputs (:func:`inputs_double`:
   ``Input type`` with ``record_shapes=True``). Wrappers such as ``CompiledFunction``
   are not such operators: one float64 graph input would mark every kernel they launch.

A name that says a narrower type (``-1``: ``float``, ``c10::Half``, ``c10::BFloat16``
template arguments; cuBLAS ``sgemm``, tensor-core GEMM families) is never fp64, whatever
the operator's inputs: a ``copy_`` from double to bf16 runs a bf16 kernel.

**Saving**: ``fraction x`` the time of the fp64 kernels, ``fraction = max(1 - r, 0.5)``
with ``r`` the device's fp64 to fp32 rate (:func:`fp64_rate`): the table of
:mod:`hta.model.devices` where it has both peaks (its fp64 is the tensor-core rate:
``r`` is 1 on A100 and H100, 1/67 on H800), else the vector rates of the NVIDIA
compute capability (:data:`SLOW_FP64`: 1/32 on 6.1, 6.2 and 7.5, 1/64 on 8.6, 8.9 and
12.0), else unknown (0.5). The floor of one half holds whatever the rates: fp32 halves
the bytes a memory-bound fp64 kernel moves. Each kernel claims that share of its
interval (:class:`~hta.analysis.findings.claims.Claim`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hta.analysis.findings.base import Finding, FindingRule, analysis_window
from hta.analysis.findings.claims import Claim
from hta.analysis.findings.kernel_common import (
    FP32_GEMM,
    compute_kernels,
    cut,
    first_template_arguments,
    fmt_at,
    top_labels,
)
from hta.analysis.findings.kernels import TENSOR_GEMM
from hta.analysis.findings.rule_tools import fmt_time, step_text, step_tuple, steps_text
from hta.analysis.names import short_name
from hta.analysis.perf.inputs import DTYPES, FLOAT_KEYS
from hta.analysis.side_columns import side_slots
from hta.model.arrays import distinct
from hta.model.devices import match_device
from hta.model.prefilter import Prefiltered
from hta.model.rules import KIND_CODE
from hta.model.trace import RankTrace

_COMPUTATION = KIND_CODE["computation"]

#: Kernel families whose name says fp64 whatever their template arguments: cuBLAS and
#: rocBLAS ``dgemm``/``dgemv``, CUTLASS and cuBLAS DMMA tiles (``d884gemm``), cuBLASLt
#: ``f64`` types (``xmma_gemm_f64f64_...``), ``fp64`` tokens, AMD Tensile double
#: (``D``) and complex double (``Z``) kernels.
FP64_NAME = Prefiltered(re.compile(
    r"(?<![A-Za-z])d(gemm|gemv|\d{3,5}gemm)"   # volta_dgemm_, magma_dgemmEx, d884gemm
    r"|(?<![A-Za-z0-9])(f|fp|FP)64(?!\d)"         # xmma_gemm_f64f64_, _fp64_
    r"|^Cijk_A[a-zA-Z]+_B[a-zA-Z]+_[DZ]B?_"      # Tensile D / Z (double, complex double)
))
#: ``double`` as a type in template arguments (``<double>``, ``lambda(double)``,
#: ``c10::complex<double>``, ``double const*``); not ``doubled`` or ``double_buffer``.
_DOUBLE = re.compile(r"(?<![\w])double(?![\w])")
#: Narrower float types in template arguments.
_NARROW = re.compile(
    r"(?<![\w])(float[1-4]?|half2?|__half2?|Half|BFloat16|bfloat16|__nv_bfloat162?"
    r"|__nv_fp8\w*|Float8_\w+|Float4_\w+|bf16|fp16|fp8\w*)(?![\w])")
#: Operators whose recorded inputs say what their kernels compute in: ATen and custom
#: operators (``ns::name``; not the autograd engine's wrappers) and Inductor's Triton
#: launches.
_LAUNCHER_OP = re.compile(r"^(?!autograd::)[A-Za-z_]\w*::\w|^triton_")
#: Profiler type names of double-precision tensors.
DOUBLE_TYPES = frozenset({"double", "c10::complex<double>"})
#: fp64 / fp32 vector rate per NVIDIA compute capability, for the parts where fp64 is
#: slow (CUDA C++ Programming Guide, throughput of native arithmetic instructions, 64-bit
#: vs 32-bit floating-point add, multiply, multiply-add per clock per SM).
SLOW_FP64: dict[tuple[int, int], float] = {
    (6, 1): 1 / 32, (6, 2): 1 / 32, (7, 5): 1 / 32,
    (8, 6): 1 / 64, (8, 9): 1 / 64, (12, 0): 1 / 64,
}
#: Least share of the fp64 kernels' time claimed (fp32 halves the bytes they move).
MIN_FRACTION = 0.5
#: Device names of AMD parts (their ``computeMajor`` is a GFX version, not CUDA's).
_AMD = re.compile(r"(?i)amd|radeon|instinct|gfx")


# -- which kernels are fp64 ------------------------------------------------------------------
def template_arguments(name: str) -> str:
    """The first top-level ``<...>`` of a kernel name (its own template arguments; the
    parameter list is left out), ``""`` when it has none."""
    return first_template_arguments(name) if "<" in name else ""


def name_precision(name: str) -> int:
    """``+1`` when a kernel name says it computes in fp64, ``-1`` when it says a narrower
    float type, ``0`` when it says nothing of its type (module docstring)."""
    if FP64_NAME.search(name) is not None:
        return 1
    args = template_arguments(name)
    if _NARROW.search(args) is not None:
        return -1
    if _DOUBLE.search(args) is not None:
        return 1
    if FP32_GEMM.search(name) is not None or TENSOR_GEMM.search(name) is not None:
        return -1
    return 0


def inputs_double(types_text: str, dims_text: str = "") -> bool:
    """Whether an operator with these recorded inputs (``Input type``, ``Input Dims``
    JSON texts) computes in double, by PyTorch's type promotion: among its float tensor
    inputs, those of the highest category (a tensor with dimensions over a 0-d one) set
    the type; one ``double`` (or ``complex<double>``) among them makes it fp64. A 0-d
    float64 tensor next to a float32 matrix leaves it float32."""
    try:
        types = json.loads(types_text) if types_text else []
        dims = json.loads(dims_text) if dims_text else []
    except ValueError:
        return False
    if not isinstance(types, list):
        return False
    dims = dims if isinstance(dims, list) else []
    best, double = 0, False
    for i, t in enumerate(types):
        if not isinstance(t, str) or DTYPES.get(t, (0, ""))[1] not in FLOAT_KEYS:
            continue
        d = dims[i] if i < len(dims) else None
        category = 1 if isinstance(d, list) and not d else 2
        if category > best:
            best, double = category, t in DOUBLE_TYPES
        elif category == best:
            double = double or t in DOUBLE_TYPES
    return double


@dataclass(frozen=True)
class Fp64Kernels:
    """The compute kernels of the analysis (``rows``: event rows; ``ts``, ``dur``,
    ``step``, ``ids``: their start, duration, step and name id), which of them are fp64
    (``hit``), which of those by name (``by_name``), and the operator of each (``ops``,
    -1 none)."""

    rows: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    step: np.ndarray
    ids: np.ndarray
    hit: np.ndarray
    by_name: np.ndarray
    ops: np.ndarray


def fp64_kernels(rt: RankTrace, iterations: Sequence[int] | None,
                 window: tuple[int, int]) -> Fp64Kernels:
    """The compute kernels of the analysis and which run in fp64 (module docstring)."""
    k = compute_kernels(rt, iterations, window)
    rows, ts, dur, step, ids = k.rows, k.ts, k.dur, k.step, k.ids
    verdict = np.zeros(len(rt.symbols), dtype=np.int8)
    for i in distinct(ids).tolist():
        verdict[i] = name_precision(rt.symbols[i])
    said = verdict[ids]
    ops = k.ops
    by_op = np.zeros(rows.size, dtype=bool)
    silent = (said == 0) & (ops >= 0)
    by_op[silent] = double_ops(rt, ops[silent])
    return Fp64Kernels(rows, ts, dur, step, ids, (said > 0) | by_op, said > 0, ops)


def double_ops(rt: RankTrace, ops: np.ndarray) -> np.ndarray:
    """Whether each operator row (a launcher, :data:`_LAUNCHER_OP`) computes in double
    by its recorded inputs (:func:`inputs_double`); False without recorded types."""
    out = np.zeros(ops.size, dtype=bool)
    table, slot = side_slots(rt, "op_args")
    if not len(table) or "input_type" not in table or ops.size == 0:
        return out
    where = slot[ops]
    names = rt.column("name")[ops]
    uniq, inverse = np.unique(names, return_inverse=True)
    launcher = np.array([_LAUNCHER_OP.search(rt.symbols[int(n)]) is not None
                         for n in uniq.tolist()], dtype=bool)[inverse.reshape(-1)]
    has = np.flatnonzero((where >= 0) & launcher)
    if has.size == 0:
        return out
    types = table["input_type"].take(where[has]).to_numpy(dtype=object, na_value="")
    dims = (table["input_dims"].take(where[has]).to_numpy(dtype=object, na_value="")
            if "input_dims" in table else np.full(has.size, "", dtype=object))
    seen: dict[tuple[str, str], bool] = {}
    for k, pair in enumerate(zip(types.tolist(), dims.tolist(), strict=True)):
        key = (str(pair[0] or ""), str(pair[1] or ""))
        if key not in seen:
            seen[key] = inputs_double(*key)
        out[has[k]] = seen[key]
    return out


# -- the device's fp64 rate ------------------------------------------------------------------
def fp64_rate(props: dict | None) -> tuple[float | None, str]:
    """The fp64 / fp32 rate of a ``deviceProperties`` record and where it comes from
    (module docstring); ``(None, "")`` when neither source knows the part."""
    if not props:
        return None, ""
    dev = match_device(props)
    if dev is not None and "fp64" in dev.peaks and "fp32" in dev.peaks:
        fp64, fp32 = float(dev.peaks["fp64"]), float(dev.peaks["fp32"])
        return fp64 / fp32, f"{dev.name}: {fp64:g} fp64 and {fp32:g} fp32 TFLOP/s peaks"
    name = str(props.get("name") or "")
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if name.strip() and not _AMD.search(name) and isinstance(major, int) \
            and isinstance(minor, int) and (major, minor) in SLOW_FP64:
        ratio = SLOW_FP64[(major, minor)]
        return ratio, f"{name}, compute capability {major}.{minor}: fp64 at " \
                      f"1/{round(1 / ratio)} of the fp32 rate"
    return None, ""


def saving_fraction(ratio: float | None) -> float:
    """Share of the fp64 kernels' time claimed: ``max(1 - ratio, 0.5)``, 0.5 unknown."""
    return MIN_FRACTION if ratio is None else max(1.0 - ratio, MIN_FRACTION)


def _device_props(rt: RankTrace, rows: np.ndarray, dur: np.ndarray) -> dict | None:
    """The ``deviceProperties`` record of the device running most of the given rows'
    time (the first record when the trace does not say which)."""
    props = [p for p in rt.meta.get("device_properties") or [] if isinstance(p, dict)]
    if not props:
        return None
    if "device" in rt.events and rows.size:
        device = rt.column("device")[rows]
        time = pd.Series(dur).groupby(device).sum()
        top = int(time.idxmax())
        for p in props:
            if p.get("id") == top:
                return p
    return props[0]


# -- the finding -----------------------------------------------------------------------------
def check_fp64_work(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``fp64_work`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    k = fp64_kernels(rt, iterations, window)
    total = int(k.dur.sum())
    if not k.hit.any() or total <= 0:  # no fp64 kernel, or no measurable compute time
        return []
    dur, ts, step, ids = k.dur[k.hit], k.ts[k.hit], k.step[k.hit], k.ids[k.hit]
    fp64 = int(dur.sum())
    ratio, source = fp64_rate(_device_props(rt, k.rows[k.hit], dur))
    fraction = saving_fraction(ratio)
    longest = int(np.argmax(dur))
    n_name = int(k.by_name.sum())
    evidence = (
        f"{int(k.hit.sum())} compute kernels ran in double precision (fp64) for "
        f"{fmt_time(fp64)}, {100 * fp64 / total:.1f}% of the compute kernel time in "
        f"{steps_text(rt, step)} (most: {top_labels(rt, ids, dur)}; the longest, "
        f"{cut(short_name(rt.symbols[int(ids[longest])]))}, at "
        f"{fmt_at(rt, int(ts[longest]))}, {step_text(rt, int(step[longest]))}, "
        f"{fmt_time(int(dur[longest]))}; kernels table); "
        f"{_found_by(n_name, int(k.hit.sum()) - n_name)}{launched_by(rt, k.ops[k.hit], dur)}"
        f"; {_rate_text(ratio, source, fraction)}."
    )
    names = [rt.symbols[i] for i in distinct(ids).tolist()]
    ops = [rt.symbols[int(n)] for n in
           distinct(rt.column("name")[k.ops[k.hit][k.ops[k.hit] >= 0]]).tolist()]
    advice = FP64_ADVICE + (" " + COMPILED_NOTE if _compiled(names + ops) else "")
    claim = Claim(ts, ts + dur, fraction * dur)
    return [Finding((rt.rank,), step_tuple(step), evidence, int(round(fraction * fp64)),
                    window[1] - window[0], advice=advice, claim=claim)]


def _found_by(n_name: int, n_op: int) -> str:
    """How the fp64 kernels were found: by their names, by their operators' inputs."""
    inputs = "the double inputs of the operators that launched them"
    if n_op == 0:
        return "all found by their names"
    if n_name == 0:
        return f"all found by {inputs} (their names do not say their type)"
    return f"{n_name} found by their names, {n_op} by {inputs}"


def _rate_text(ratio: float | None, source: str, fraction: float) -> str:
    if ratio is None:
        return ("the device's fp64 rate is not known: the saving is half their time "
                "(fp32 halves the bytes they move)")
    return f"{source}: the saving is {100 * fraction:.1f}% of their time"


def launched_by(rt: RankTrace, ops: np.ndarray, weights: np.ndarray, n: int = 3) -> str:
    """``; launched by aten::upsample_nearest2d ×12 (1.200 ms; inputs [[8, 3, 64, 64],
    [], []] of double, ...)``: the operators with the most fp64 kernel time, each with the
    recorded inputs of its call with the most."""
    has = ops >= 0
    if not has.any():
        return ""
    names = rt.column("name")[ops[has]]
    frame = pd.DataFrame({"name": names, "op": ops[has], "w": weights[has]})
    per_call = frame.groupby(["name", "op"], sort=False)["w"].sum().reset_index()
    by_name = per_call.groupby("name", sort=False).agg(
        calls=("op", "size"), w=("w", "sum")).sort_values("w", ascending=False, kind="stable")
    parts = []
    for name, row in by_name.head(n).iterrows():
        mine = per_call[per_call["name"] == name]
        op = int(mine["op"].iloc[int(np.argmax(mine["w"].to_numpy()))])
        parts.append(f"{rt.symbols[int(name)]} ×{int(row['calls'])} "
                     f"({fmt_time(float(row['w']))}{_inputs_text(rt, op)})")
    return "; launched by " + ", ".join(parts)


def _inputs_text(rt: RankTrace, op: int) -> str:
    """``; inputs [[8, 3, 64, 64], []] of double, Scalar`` from ``op_args`` ("" when the
    trace recorded none)."""
    table, slot = side_slots(rt, "op_args")
    if not len(table) or slot[op] < 0:
        return ""
    row = table.iloc[int(slot[op])]
    dims, types = str(row.get("input_dims") or ""), str(row.get("input_type") or "")
    try:
        shown = json.dumps(json.loads(dims)) if dims else ""
        kinds = ", ".join(t for t in json.loads(types) if isinstance(t, str) and t) \
            if types else ""
    except ValueError:
        return ""
    if not shown and not kinds:
        return ""
    return f"; inputs {cut(shown, 80)}" + (f" of {cut(kinds, 80)}" if kinds else "")


def _compiled(names: list[str]) -> bool:
    """Whether the fp64 work comes from compiled code (Triton kernels) or upsampling."""
    return any(n.startswith("triton") or "upsample" in n or "interpolate" in n
               for n in names)


FP64_ADVICE = ("Find where the float64 tensors come from (the operators and their inputs "
               "above; record_shapes=True shows them) and make them float32 or bf16: NumPy "
               "arrays are float64 by default and torch.from_numpy keeps it (use "
               "a.astype(np.float32) or .float()); torch.tensor(..., dtype=torch.float64), "
               ".double() and .to(torch.float64) make them; torch.set_default_dtype("
               "torch.float64) makes every new float tensor float64 (torch.arange, "
               "torch.linspace, torch.full, torch.tensor of Python floats). Cast once, where "
               "the tensor enters the model.")
COMPILED_NOTE = ("In compiled code (torch.compile, Triton kernels) or for upsample, "
                 "interpolate and comparisons, check the scale factors, grids and constants "
                 "the graph receives: a scale passed as a float64 tensor, or a tensor built "
                 "as float64, makes the kernels that use it fp64; pass scale factors as "
                 "Python floats or float32 tensors.")

RULES: list[FindingRule] = [
    FindingRule(
        id="fp64_work",
        title="Kernels computing in double precision (fp64)",
        section="kernels",
        advice=FP64_ADVICE,
        saving=("The time of the fp64 compute kernels times max(1 - fp64/fp32 rate of the "
                "device, 0.5): 1/32 to 1/64 on consumer and inference GPUs, half the time "
                "where the rate is known to be high or not known (fp32 halves the bytes)."),
        check=check_fp64_work,
    ),
]
