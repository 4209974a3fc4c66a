"""Display names (hta.analysis.display_names): a kernel's function and key template
parameters, on names written by real CUDA and ROCm libraries."""

from __future__ import annotations

import pytest

from hta.analysis.display_names import DISPLAY_WIDTH, display_name


@pytest.mark.parametrize(("name", "shown"), [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
     "threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, "
     "float)#1}, at::detail::Array<char*, 3> >(int, at::native::(anonymous namespace)::"
     "threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, "
     "float)#1}, at::detail::Array<char*, 3>)",
     "vectorized_elementwise_kernel<4, threshold_kernel_impl::λ, …>"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::neg_kernel_cuda(at::"
     "TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() "
     "const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, ...)",
     "vectorized_elementwise_kernel<4, neg_kernel_cuda::λ, Array<char*, 2>>"),
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>("
     "cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4::Params)",
     "Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>"),
    ("void (anonymous namespace)::softmax_warp_backward<c10::Half, c10::Half, float, 7, true, "
     "false>(c10::Half*, c10::Half const*, c10::Half const*, int, int, int, bool const*)",
     "softmax_warp_backward<Half, Half, float, 7, true, false>"),
    ("void cub::DeviceScanKernel<cub::AgentScanPolicy<128, 15, int, (cub::BlockLoadAlgorithm)"
     "3, (cub::CacheLoadModifier)0, (cub::BlockStoreAlgorithm)3, (cub::BlockScanAlgorithm)2>"
     ", int*, int*, cub::ScanTileState<int, true>, at_cuda_detail::cub::Sum, cub::"
     "NullType, int>(int*, int*, cub::ScanTileState<int, true>, int, at_cuda_detail::cub::"
     "Sum, cub::NullType, int)",
     "DeviceScanKernel<AgentScanPolicy<…>, int*, int*, …>"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
     "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("ampere_sgemm_64x32_sliced1x4_nn", "ampere_sgemm_64x32_sliced1x4_nn"),
    ("Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD (Pinned -> Device)"),
    ("aten::mm", "aten::mm"),
    ("_ZN17cutlass__5x_cudnn6KernelINS_4conv6kernel23ImplicitGemmConvolutionIXXXX",
     "cutlass__5x_cudnn::Kernel<…>"),
    ("", ""),
])
def test_display_names(name: str, shown: str) -> None:
    assert display_name(name) == shown
    assert len(display_name(name)) <= DISPLAY_WIDTH


def test_arguments_that_do_not_fit_are_elided_from_the_end() -> None:
    name = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
            "(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous namespace)::"
            "FusedSgdMathFunctor<float, 3>, double, double*, double, double, bool, bool, bool, "
            "float*, float const*>(at::native::(anonymous namespace)::TensorListMetadata<3>)")
    assert display_name(name) == "multi_tensor_apply_kernel<TensorListMetadata<3>, …>"
    assert display_name(name, 200) == (
        "multi_tensor_apply_kernel<TensorListMetadata<3>, FusedSgdMathFunctor<float, 3>, "
        "double, double*, double, double, bool, bool, bool, float*, float const*>")


@pytest.mark.parametrize("name", [
    "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
    "torch/nn/modules/module.py(1783): _call_impl",
    "Memcpy HtoD (Pageable -> Device)",
    "<built-in method relu of type object at 0x7fc65873e180>",
    "## forward ##",
])
def test_names_that_are_not_signatures_are_shown_as_they_are(name: str) -> None:
    assert display_name(name) == name


def test_critical_path_rows_never_read_as_one_row_twice() -> None:
    import pandas as pd

    from hta.plots.critical_path import critical_path_figure

    long_a = ("void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>, "
              "at::detail::Array<char*, 2> >(int, at::native::AbsFunctor<float>)")
    long_b = long_a.replace("AbsFunctor", "NegFunctor")
    events = pd.DataFrame({
        "bound_by": ["gpu_compute_bound", "gpu_compute_bound", "launch_overhead",
                     "gpu_compute_bound"],
        "name": [long_a, long_b, "Memset (Device)", "Memset (Device)"],
        "kind": ["computation", "computation", "memset", "memset"],
        "count": [1, 1, 1, 1], "duration(us)": [4.0, 3.0, 2.0, 1.0],
        "duration_pctg": [40.0, 30.0, 20.0, 10.0]})
    bounds = pd.DataFrame({"bound_by": ["gpu_compute_bound", "launch_overhead"],
                           "duration(us)": [8.0, 2.0], "duration_pctg": [80.0, 20.0]})
    labels = list(critical_path_figure(bounds, events).layout.yaxis2.categoryarray)[::-1]
    # the names differ past their 60th character: shown by their key parameters
    assert labels == ["1. vectorized_elementwise_kernel<4, AbsFunctor<float>, …>",
                      "2. vectorized_elementwise_kernel<4, NegFunctor<float>, …>",
                      "3. Memset (Device) [launch_overhead]",
                      "4. Memset (Device) [gpu_compute_bound]"]
    assert len(set(labels)) == len(labels)
