"""The short-name rule of :mod:`hta.analysis.names`, case by case."""

from __future__ import annotations

import pytest

from hta.analysis.names import short_name
from hta.model.demangle import demangler_available
from hta.synthetic import catalog as synthetic

CASES = [
    # the example: template arguments, parameters and return type go
    ("void foo<int, 4>(float*, int)", "foo"),
    ("void foo<half, 8>(half*, int)", "foo"),
    # real PyTorch kernel names
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3>)", "at::native::vectorized_elementwise_kernel"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWork*)",
     "ncclKernel_AllGather_RING_LL_Sum_int8_t"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1>"
     "(cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1::Params)", "cutlass::Kernel"),
    # the return type may itself hold templates and parentheses
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, float>(float)",
     "internal::gemvx::kernel"),
    # (anonymous namespace) is kept, with its space
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
     "(anonymous namespace)::TensorListMetadata<1> >(at::native::(anonymous namespace)::"
     "TensorListMetadata<1>)", "at::native::(anonymous namespace)::multi_tensor_apply_kernel"),
    # lambdas: parameters inside the braces go, the marker stays
    ("foo(int)::{lambda(float)#1}::operator()(float) const", "foo::{lambda#1}::operator()"),
    ("ns::{unnamed type#1}::run(int)", "ns::{unnamed type#1}::run"),
    # operators
    ("bool ns::Key::operator<(ns::Key const&) const", "ns::Key::operator<"),
    ("ns::Key::operator<<(std::ostream&)", "ns::Key::operator<<"),
    ("ns::Key::operator->() const", "ns::Key::operator->"),
    ("ns::Key::operator bool() const", "ns::Key::operator bool"),
    ("void* operator new(unsigned long)", "operator new"),
    ("ns::Vec::operator[](int) &&", "ns::Vec::operator[]"),
    ("operator_like_name(int)", "operator_like_name"),
    # trailing qualifiers and clone suffixes go with the parameter list
    ("void k<(N > 3)>(int) [clone .kd]", "k"),
    ("void k<(N>3)>(int) volatile &", "k"),
    # not C++ signatures: kept whole
    ("Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD (Pinned -> Device)"),
    ("Memset (Device)", "Memset (Device)"),
    ("my step (batch=4)", "my step (batch=4)"),
    ("<built-in method cat of type object at 0x7f00>",
     "<built-in method cat of type object at 0x7f00>"),
    ("aten::mm", "aten::mm"),
    ("autograd::engine::evaluate_function: AddmmBackward0",
     "autograd::engine::evaluate_function: AddmmBackward0"),
    ("triton_poi_fused_add_0", "triton_poi_fused_add_0"),
    # a mangled name shortens as its demangled text (where a C++ runtime demangles it)
    ("_ZN2at6native18elementwise_kernelILi128ELi2EEEviT_",
     "at::native::elementwise_kernel" if demangler_available() else
     "_ZN2at6native18elementwise_kernelILi128ELi2EEEviT_"),
    ("", ""),
    # unbalanced brackets keep the rest as it is
    ("foo<int", "foo<int"),
    ("void foo(int", "void foo(int"),
    # steps and Python frames
    ("ProfilerStep#12", "ProfilerStep"),
    ("ProfilerStep#12 extra", "ProfilerStep#12 extra"),
    ("torch/nn/modules/module.py(1501): _call_impl", "torch/nn/modules/module.py: _call_impl"),
    ("train.py(12): <listcomp>", "train.py: <listcomp>"),
]


@pytest.mark.parametrize(("name", "expected"), CASES)
def test_short_name(name, expected):
    assert short_name(name) == expected


def test_short_name_is_idempotent():
    for name, _ in CASES:
        once = short_name(name)
        assert short_name(once) == once, name


def test_generator_kernels_collapse_by_template():
    """The generator's relu, threshold-backward, add and loss-backward kernels are all
    instantiations of one template; the optimizer's graph kernels of another."""
    elementwise = {short_name(k.name) for k in (synthetic._K_RELU, synthetic._K_THRESHOLD_BWD,
                                                 synthetic._K_ADD, synthetic._K_LOSS_BWD)}
    assert elementwise == {"at::native::vectorized_elementwise_kernel"}
    graph = {short_name(k.name) for k in synthetic._K_GRAPH}
    assert graph == {"at::native::(anonymous namespace)::multi_tensor_apply_kernel"}
    assert short_name(synthetic._K_GEMM_FWD.name) == "ampere_sgemm_128x64_tn"
