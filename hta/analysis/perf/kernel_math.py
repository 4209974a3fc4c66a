"""Which arithmetic a call's GEMM kernels run, from their names: the peak it is judged by.

An operator's model (:mod:`hta.analysis.perf.models`) picks the peak from the call's
input type: an fp32 matrix product is compared with the TF32 tensor-core rate, which
cuBLAS and cuDNN use where TF32 is allowed. When the kernels that ran say otherwise, the
call is judged against the rate of the math they ran:

* **SIMT fp32 GEMMs** (:data:`SIMT_FP32_GEMM`), fp32 products computed on the CUDA cores
  (NVIDIA) or the vector ALUs (AMD) with fused multiply-adds, no tensor or matrix cores:
  cuBLAS ``*sgemm*`` (``ampere_sgemm_128x64_nn``, ``volta_sgemm_*``, ``sgemm_largek``,
  ``magma_sgemmEx_kernel``), CUTLASS ``*simt_sgemm*``, cuBLASLt ``*xmma_gemm_f32f32_f32f32*``
  and ``*xmma_gemm_*_ffma_*`` (fp32 inputs, fp32 FMA), the fp32 GEMV and thin-GEMM
  kernels (``gemv2T_kernel_val<int, int, float, float, float, ...>``, ``gemvx::kernel``,
  ``gemmSN_*<float``, ``gemmk1_kernel<float``), and AMD Tensile fp32 kernels without
  matrix instructions (``Cijk_<A>_<B>_S[B]_`` with no ``_MI<m>x<n>`` tile). A name that
  also says ``tf32``, ``tensorop``, ``wmma`` or ``hmma`` is not SIMT. They are judged
  against the device's **fp32 vector** peak (``fp32``, matrix False: 19.5 TFLOP/s on an
  A100, not its 156 TFLOP/s TF32 rate).
* **AMD fp32 matrix-core GEMMs** (:data:`FP32_MATRIX_GEMM`): Tensile fp32 kernels with an
  ``_MI<m>x<n>`` tile run fp32 MFMA instructions: judged against ``fp32_matrix``.

A call takes its kernels' math when kernels of one of these classes ran longer than the
call's other matrix kernels (GEMM, convolution, attention and MoE kernels of any other
math) and its model is a matrix op on fp32 inputs (peak key ``tf32`` or ``fp32``); the
split-K reduction that follows a GEMM (``splitKreduce_kernel``), copies and elementwise
kernels take no side. Other calls keep their model's peak. Whether such a product should
run on the
tensor cores instead is the ``fp32_gemm`` finding's question, not the roofline's: the
roofline says how close the kernel came to the rate of the math it ran.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd

#: fp32 GEMM kernels on CUDA cores or vector ALUs, by name (module docstring).
SIMT_FP32_GEMM = re.compile(
    r"sgemm"                              # cuBLAS *_sgemm_*, magma_sgemmEx, simt_sgemm
    r"|xmma_gemm_f32f32_f32f32"                    # cuBLASLt fp32 in, fp32 math
    r"|xmma_gemm_\w*_ffma_"                        # cuBLASLt SIMT tile (ffma: fp32 FMA)
    r"|(^|\W)gemv\w*(::kernel)?<int, int, float, float, float"  # cuBLAS fp32 GEMV
    r"|(^|[^a-z])gemmSN_\w+<float"                 # cuBLAS small-N fp32 GEMM
    r"|(^|\W)gemmk1_kernel<float"                  # cuBLAS K=1 fp32 GEMM
    r"|^Cijk_A[a-zA-Z]+_B[a-zA-Z]+_SB?_(?!\w*_MI\d)",  # AMD Tensile fp32, no MFMA tile
    re.IGNORECASE,
)
#: Names that say the kernel runs on tensor cores: never SIMT, whatever else they say.
TENSOR_WORDS = re.compile(r"(?i)tf32|tensorop|wmma|hmma")
#: AMD Tensile fp32 kernels on matrix cores (an ``_MI<m>x<n>`` MFMA tile).
FP32_MATRIX_GEMM = re.compile(r"^Cijk_A[a-zA-Z]+_B[a-zA-Z]+_SB?_\w*_MI\d")

#: Math classes: none (no side), SIMT fp32, fp32 on matrix cores, other matrix math.
NONE, SIMT_FP32, FP32_MATRIX, OTHER_MATRIX = 0, 1, 2, 3
#: Peak (key, matrix) of the classes a call can take from its kernels.
PEAK_OF = {SIMT_FP32: ("fp32", False), FP32_MATRIX: ("fp32", True)}
#: Kernel categories (:mod:`hta.model.categories`) whose kernels do matrix math.
MATRIX_CATEGORIES = ("GEMM", "convolution", "attention", "MoE")
#: The split-K reduction after a GEMM: part of the product, of no math of its own.
SPLIT_K = re.compile(r"(?i)splitKreduce|split_k_reduce|splitk_reduce")


@lru_cache(maxsize=16384)
def kernel_math(name: str) -> int:
    """The math class of one kernel name (:data:`NONE`, :data:`SIMT_FP32`,
    :data:`FP32_MATRIX`)."""
    low = name.lower()
    if "gemm" not in low and "gemv" not in low and not name.startswith("Cijk_"):
        return NONE
    if FP32_MATRIX_GEMM.search(name):
        return FP32_MATRIX
    if SIMT_FP32_GEMM.search(name) and not TENSOR_WORDS.search(name):
        return SIMT_FP32
    return NONE


def row_math(symbols: list[str], ids: np.ndarray, category: np.ndarray) -> np.ndarray:
    """The math class of each GPU row from its name id and kernel category: a named
    class, else :data:`OTHER_MATRIX` for a matrix-category kernel other than a split-K
    reduction, else :data:`NONE` (each distinct name classified once)."""
    if not len(ids):
        return np.zeros(0, dtype=np.int8)
    codes, uniq = pd.factorize(ids)
    names = [symbols[int(i)] for i in uniq.tolist()]
    named = np.array([kernel_math(n) for n in names], dtype=np.int8)
    split_k = np.array(["split" in n.lower() and SPLIT_K.search(n) is not None
                        for n in names], dtype=bool)
    out = named[codes]
    other = (out == NONE) & np.isin(category, MATRIX_CATEGORIES) & ~split_k[codes]
    out[other] = OTHER_MATRIX
    return out


def call_math(slot: np.ndarray, dur: np.ndarray, math: np.ndarray, n_calls: int
              ) -> np.ndarray:
    """Per call, the class among :data:`SIMT_FP32`, :data:`FP32_MATRIX`,
    :data:`OTHER_MATRIX` whose kernels ran longest, strictly (:data:`NONE` where no
    kernel has one or two tie). ``slot`` is each GPU row's call (0 .. n_calls - 1),
    ``dur`` its duration, ``math`` its class (:func:`row_math`)."""
    classes = (SIMT_FP32, FP32_MATRIX, OTHER_MATRIX)
    t = np.stack([np.bincount(slot, weights=np.where(math == c, dur, 0.0),
                              minlength=n_calls) for c in classes])
    best = t.argmax(axis=0)
    top = t.max(axis=0)
    unique_top = (t == top).sum(axis=0) == 1
    out = np.zeros(n_calls, dtype=np.int8)
    ok = (top > 0) & unique_top
    out[ok] = np.asarray(classes, dtype=np.int8)[best[ok]]
    return out
