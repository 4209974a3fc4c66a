"""CUPTI counters: the FLOPs each counted SASS instruction stands for.

``get_cupti_counter_data_with_operators`` (a method of ``TraceAnalysis``) returns the
counters per kernel; multiply each counter column by its weight here and sum to get the
floating-point operations of a kernel.
"""

from __future__ import annotations

__all__ = ["CUDA_SASS_INSTRUCTION_COUNTER_FLOPS"]

_PRECISIONS = ("f", "h", "d")  # single, half, double
_OPERATIONS = {"fma": 2.0, "mul": 1.0, "add": 1.0}  # a fused multiply-add is two FLOPs

#: CUPTI counter name -> floating-point operations per executed instruction (per thread).
CUDA_SASS_INSTRUCTION_COUNTER_FLOPS: dict[str, float] = {
    f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": flops
    for p in _PRECISIONS for op, flops in _OPERATIONS.items()
}
