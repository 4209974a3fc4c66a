"""The ``layout_conversions`` finding: cuDNN or MIOpen converting tensors between the NCHW
and NHWC layouts around convolutions.

**Conversion kernels.** A compute kernel of the analysis whose name is a layout conversion
of a convolution library (:data:`CONVERSION`: cuDNN's ``convertTensor_kernel``,
``nchwToNhwcKernel``, ``nhwcToNchwKernel``; MIOpen's ``transpose_NCHW2NHWC`` and back)
launched by a convolution operator (:data:`CONV_OP`: ``aten::convolution``,
``aten::cudnn_convolution``, ``aten::miopen_convolution``, their ``_backward`` and the
autograd ``ConvolutionBackward`` nodes, innermost first up the operator's parents). The
library runs them when the model's tensors are NCHW (PyTorch's default) and its fastest
kernels, the tensor-core ones, want NHWC: each convolution converts its input, weight or
output and back.

**Fires** when they take at least :data:`MIN_SHARE` (5 %) of the compute kernel time.
**Saving**: their time (GPU time, not replayed: ``channels_last`` removes them, and how the
convolutions run in NHWC is not in the trace).
"""

from __future__ import annotations

import re

import numpy as np

from hta.analysis.findings.base import Finding, FindingRule, analysis_window
from hta.analysis.findings.claims import Claim
from hta.analysis.findings.kernel_common import (
    Kernels,
    claimed_rows,
    compute_kernels,
    fmt_at,
    top_labels,
)
from hta.analysis.findings.rule_tools import (
    fmt_time,
    name_matches,
    step_text,
    step_tuple,
    steps_text,
    within_named,
)
from hta.model.trace import RankTrace

#: Layout conversion kernels of the convolution libraries.
CONVERSION = re.compile(r"(?i)convertTensor_kernel|nchwToNhwc|nhwcToNchw|NCHW2NHWC|NHWC2NCHW")
#: Convolution operators (forward and backward).
CONV_OP = re.compile(r"^aten::(convolution|_convolution|cudnn_convolution\w*"
                     r"|miopen_convolution\w*|convolution_backward)$|ConvolutionBackward")
#: Least share of the compute kernel time in conversion kernels.
MIN_SHARE = 0.05


def conversion_kernels(rt: RankTrace, k: Kernels) -> np.ndarray:
    """Per kernel of ``k``: whether it is a layout conversion launched under a convolution
    operator (module docstring)."""
    if k.rows.size == 0:
        return np.zeros(0, dtype=bool)
    named = name_matches(rt, k.rows, CONVERSION)
    if not named.any():
        return named
    return named & within_named(rt, k.ops, CONV_OP)


def converted_away(rt: RankTrace) -> np.ndarray:
    """The conversion kernel rows on the rank's whole analysed window (what
    ``ops_below_roof`` and ``small_kernels`` leave to this rule). Computed once per rank."""
    return claimed_rows(rt, "findings.layout_conversions", conversion_kernels)


def check_layout(rt: RankTrace, iterations: list[int] | None) -> list[Finding]:
    """The ``layout_conversions`` finding of one rank (module docstring)."""
    window = analysis_window(rt, iterations)
    k = compute_kernels(rt, iterations, window)
    if k.total <= 0:
        return []
    hit = conversion_kernels(rt, k)
    time = int(k.dur[hit].sum())
    if time < MIN_SHARE * k.total:
        return []
    dur, ts = k.dur[hit], k.ts[hit]
    longest = int(np.argmax(dur))
    evidence = (
        f"{int(hit.sum())} layout conversion kernels launched by convolutions ran "
        f"{fmt_time(time)}, {100 * time / k.total:.1f}% of the compute kernel time in "
        f"{steps_text(rt, k.step[hit])} (most: {top_labels(rt, k.ids[hit], dur)}; the "
        f"longest at {fmt_at(rt, int(ts[longest]))}, {step_text(rt, int(k.step[hit][longest]))},"
        f" {fmt_time(int(dur[longest]))}; kernels table).")
    return [Finding((rt.rank,), step_tuple(k.step[hit]), evidence, time,
                    window[1] - window[0], claim=Claim(ts, ts + dur, None))]


ADVICE = (
    "The convolution library converts the tensors between NCHW (PyTorch's default layout) "
    "and NHWC, which its fastest kernels use, around each convolution. Keep the model and "
    "its inputs in NHWC: model.to(memory_format=torch.channels_last) and "
    "x.to(memory_format=torch.channels_last) (channels_last_3d for 3-d convolutions); "
    "with bf16 or fp16 autocast the tensor-core kernels then run without conversions.")

RULES: list[FindingRule] = [
    FindingRule(
        id="layout_conversions",
        title="Layout conversions around convolutions",
        section="kernels",
        advice=ADVICE,
        saving=("The time of the layout conversion kernels (NCHW <-> NHWC) launched by "
                "convolutions, which channels_last removes (GPU time, not replayed)."),
        check=check_layout,
    ),
]
