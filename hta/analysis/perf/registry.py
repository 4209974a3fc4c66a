"""Which performance model applies to an operator: the GEMM, norm, elementwise ...
models of :mod:`hta.analysis.perf.models` and the convolution and attention models of
:mod:`hta.analysis.perf.models_nn`, looked up by operator name."""

from __future__ import annotations

from hta.analysis.perf.inputs import Inputs
from hta.analysis.perf.models import CUSTOM_MODELS, MODELS, Model, Work
from hta.analysis.perf.models_nn import NN_MODELS
from hta.model.categories import op_base_name


def model_of(op: str) -> Model | None:
    """The model of an operator name (``aten::addmm``, ``aten::add_.Tensor``), or None."""
    if not op.startswith("aten::"):
        return CUSTOM_MODELS.get(op)
    base = op_base_name(op)
    return MODELS.get(base) or NN_MODELS.get(base)


def work_of(op: str, x: Inputs | None) -> Work | None:
    """FLOPs and bytes of one call (None when no model applies or shapes do not fit)."""
    if x is None:
        return None
    model = model_of(op)
    if model is None:
        return None
    try:
        return model(x)
    except (TypeError, ValueError, IndexError):
        return None  # a recorded signature other than the one the model expects
