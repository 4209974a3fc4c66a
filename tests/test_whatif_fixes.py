"""The changes that model the findings' fixes, each checked against an after-trace known
by construction.

A small program (:class:`Sim`: host operators launching GPU work on one stream, blocking
calls, copies, a data loader, a device synchronize ending each step) is written as a
Kineto trace twice: as it is, and with the fix applied as the program would really run
it. The replay of the first with the change must predict the measured steps of the
second.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from kineto_builder import TraceBuilder

from hta.analysis.whatif import Change
from hta.errors import ChangeMatchesNothingError
from hta.trace_analysis import TraceAnalysis

LAT, LAUNCH, GAP, RET, OP_GAP, SYNC = 5_000, 2_000, 1_000, 2_000, 500, 3_000
A100 = {"name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_000_000_000, "numSms": 108,
        "computeMajor": 8, "computeMinor": 0}
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


class Sim:
    """One rank's program on one stream, written as it runs (times in ns)."""

    def __init__(self, props: dict | None = None) -> None:
        self.b = TraceBuilder(rank=0)
        if props:
            self.b.extra_top_level["deviceProperties"] = [props]
        self.cpu = 1_000_000
        self.free = 1_000_000

    def op(self, name: str, host: int, kernel: str | None = None, kdur: int = 0) -> None:
        """An operator: ``host`` ns of dispatch, launching ``kernel`` in its middle."""
        c = self.cpu
        if kernel is None:
            self.b.cpu_op(name, c, host)
            self.cpu = c + host + OP_GAP
            return
        ls = c + host // 2
        self.b.cpu_op(name, c, host + LAUNCH)
        g0 = max(ls + LAT, self.free + GAP)
        self.b.launch_kernel(kernel, cpu_ts=ls, cpu_dur=LAUNCH, gpu_ts=g0, gpu_dur=kdur)
        self.free = g0 + kdur
        self.cpu = c + host + LAUNCH + OP_GAP

    def item(self) -> None:
        """``loss.item()``: a stream synchronize until the stream is free."""
        c = self.cpu
        end = max(c + 100 + SYNC, self.free + RET)
        self.b.cpu_op("aten::item", c, end + 100 - c)
        self.b.runtime("cudaStreamSynchronize", c + 100, end - c - 100)
        self.cpu = end + 100 + OP_GAP

    def copy(self, nbytes: int, pageable: bool, bytes_per_ns: float) -> None:
        """A host-to-device copy; from pageable memory the call blocks until it is done."""
        c = self.cpu
        ls = c + 200
        dur = int(nbytes / bytes_per_ns)
        g0 = max(ls + LAT, self.free + GAP)
        call_end = g0 + dur + RET if pageable else ls + LAUNCH
        src = "Pageable" if pageable else "Pinned"
        self.b.cpu_op("aten::copy_", c, call_end + 200 - c)
        self.b.launch(f"Memcpy HtoD ({src} -> Device)", "gpu_memcpy", cpu_ts=ls,
                      cpu_dur=call_end - ls, gpu_ts=g0, gpu_dur=dur,
                      launcher="cudaMemcpyAsync", bytes=nbytes)
        self.free = g0 + dur
        self.cpu = call_end + 200 + OP_GAP

    def loader(self, dur: int) -> None:
        """The main thread inside the data loader for ``dur``."""
        self.b.cpu_op(LOADER, self.cpu, dur)
        self.cpu += dur + OP_GAP

    def steps(self, n: int, body: Callable[[Sim, int], None]) -> Sim:
        """``n`` ProfilerSteps of ``body``, each ended by a device synchronize."""
        for k in range(1, n + 1):
            start = self.cpu
            body(self, k)
            c = self.cpu
            end = max(c + SYNC, self.free + RET)
            self.b.runtime("cudaDeviceSynchronize", c, end - c)
            self.b.annotation(f"ProfilerStep#{k}", start, end - start)
            self.cpu = end + OP_GAP
        return self

    def load(self, folder: Path) -> TraceAnalysis:
        self.b.write(folder / "rank-0.json")
        return TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)


def predicted_vs_after(before: Sim, after: Sim, change: str, tmp: Path,
                       steps: list[int] | None = None) -> tuple[float, float, float]:
    """(measured before, predicted, measured after): step times summed (µs)."""
    a = before.load(tmp / "before")
    b = after.load(tmp / "after")
    pred, meas = a.what_if(change), b.what_if()
    if steps is not None:
        pred, meas = pred[pred["step"].isin(steps)], meas[meas["step"].isin(steps)]
    return (float(pred["measured(us)"].sum()), float(pred["predicted(us)"].sum()),
            float(meas["measured(us)"].sum()))


def close(pred: float, actual: float, tol: float = 0.05) -> None:
    assert abs(pred - actual) <= tol * actual, (pred, actual)


# -- no-sync:SITE ---------------------------------------------------------------------------
def _training(with_item: bool) -> Callable[[Sim, int], None]:
    def body(s: Sim, k: int) -> None:
        s.op("aten::mm", 10_000, "sgemm_fwd", 200_000)
        if with_item:
            s.item()
        s.op("aten::add", 40_000)  # logging on the host
        s.op("aten::mm", 10_000, "sgemm_bwd", 200_000)
    return body


def test_no_sync_removes_one_site(tmp_path: Path) -> None:
    before = Sim().steps(4, _training(True))
    after = Sim().steps(4, _training(False))
    measured, pred, actual = predicted_vs_after(before, after, "no-sync:aten::item", tmp_path)
    assert pred < 0.9 * measured  # the host no longer waits for sgemm_fwd before logging
    close(pred, actual)
    a = TraceAnalysis(trace_dir=str(tmp_path / "before"), cache=False, progress=False)
    # the step's own device synchronize (outside any operator) is another site
    assert a.what_if("no-sync:cudaDeviceSynchronize")["predicted(us)"].sum() != pred
    with pytest.raises(ChangeMatchesNothingError, match="no-sync:aten::nonzero"):
        a.what_if("no-sync:aten::nonzero")


def test_a_change_that_finds_no_work_fails_alone_and_in_company(tmp_path: Path) -> None:
    # check_targets keeps each change's verdict per graph: asked alone first or with
    # another first, a change that finds no work fails, and one that finds work does not
    sim = Sim().steps(4, _training(True))
    for first_alone in (True, False):
        a = sim.load(tmp_path / str(first_alone))
        asks = [["no-sync:aten::nonzero"], ["no-sync:aten::item", "no-sync:aten::nonzero"]]
        for changes in asks if first_alone else asks[::-1]:
            with pytest.raises(ChangeMatchesNothingError, match="no-sync:aten::nonzero"):
                a.what_if(changes)
        both = a.what_if(["no-sync:aten::item", "no-sync:cudaDeviceSynchronize"])
        assert len(both) and both["predicted(us)"].notna().all()


# -- pinned-copies --------------------------------------------------------------------------
PINNED_BW, PAGEABLE_BW = 20.0, 5.0  # bytes per ns (GB/s)


def _copies(pageable: bool) -> Callable[[Sim, int], None]:
    def body(s: Sim, k: int) -> None:
        s.copy(1 << 20, False, PINNED_BW)  # labels, already pinned: the reference
        s.copy(64 << 20, pageable, PAGEABLE_BW if pageable else PINNED_BW)
        s.op("aten::mm", 10_000, "sgemm", 3_000_000)
    return body


def test_pinned_copies_run_at_the_pinned_bandwidth_without_blocking(tmp_path: Path) -> None:
    before = Sim().steps(4, _copies(True))
    after = Sim().steps(4, _copies(False))
    measured, pred, actual = predicted_vs_after(before, after, "pinned-copies", tmp_path)
    assert pred < 0.7 * measured
    close(pred, actual)


# -- workers:N ------------------------------------------------------------------------------
def test_workers_take_the_loading_off_the_main_thread(tmp_path: Path) -> None:
    d, n, steps = 300_000, 2, 8

    def body(loading: Callable[[Sim, int], int]) -> Callable[[Sim, int], None]:
        def run(s: Sim, k: int) -> None:
            s.loader(loading(s, k))
            s.op("aten::mm", 10_000, "sgemm", 50_000)
            s.op("aten::relu", 10_000, "relu", 20_000)
        return run

    before = Sim().steps(steps, body(lambda s, k: d))
    # with N workers started with the loop, batch k is ready at t0 + ceil(k / N) * d;
    # the main thread waits for it, then takes 1 µs to receive it
    t0 = 1_000_000

    def waiting(s: Sim, k: int) -> int:
        ready = t0 + -(-k // n) * d
        return max(ready - s.cpu, 0) + 1_000

    after = Sim().steps(steps, body(waiting))
    # the first steps fill the pipeline; from step 2 a pair of steps takes d
    measured, pred, actual = predicted_vs_after(before, after, f"workers:{n}", tmp_path,
                                                steps=list(range(2, 8)))
    assert pred < 0.6 * measured
    close(pred, actual, 0.08)


def test_pinned_copies_also_drop_the_sync_of_the_same_upload(tmp_path: Path) -> None:
    """``tensor.to('cuda')`` from pageable memory: the copy's call blocks, then a stream
    synchronize under the same ``aten::to`` waits for it. Pinned, non-blocking memory
    drops both waits: pinned-copies saves at least what no-sync:aten::to does."""
    def run(s: Sim, k: int) -> None:
        c = s.cpu
        ls, dur = c + 200, 400_000
        g0 = max(ls + LAT, s.free + GAP)
        call_end = g0 + dur + RET
        s.b.cpu_op("aten::to", c, call_end + 30_000 - c)
        s.b.launch("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", cpu_ts=ls,
                   cpu_dur=call_end - ls, gpu_ts=g0, gpu_dur=dur,
                   launcher="cudaMemcpyAsync", bytes=4 << 20)
        s.b.runtime("cudaStreamSynchronize", call_end + 1_000, 20_000)
        s.free = g0 + dur
        s.cpu = call_end + 30_000 + OP_GAP
        s.op("aten::relu", 200_000)  # host work that could overlap the copy
        s.op("aten::mm", 10_000, "sgemm", 300_000)

    a = Sim().steps(4, run).load(tmp_path)
    pinned = a.what_if("pinned-copies")["predicted(us)"].sum()
    no_sync = a.what_if("no-sync:aten::to")["predicted(us)"].sum()
    assert pinned <= no_sync + 1.0


def test_workers_reach_a_loader_waiting_on_its_pin_memory_thread(tmp_path: Path) -> None:
    """A multi-process loader: the main thread's ``__next__`` span has no event inside;
    the batch arrives through the pin-memory thread, whose call near the span's end the
    main thread waits for (a thread hand-off). More workers and no loader at all both
    shorten the steps: the hand-off's wait is the loader's too."""
    d, steps = 300_000, 6
    multi = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"

    def run(s: Sim, k: int) -> None:
        c = s.cpu
        s.b.annotation(multi, c, d)
        s.b.runtime("cudaPointerGetAttributes", c + d - 20_000, 3_000, tid=2)
        s.cpu = c + d + OP_GAP
        s.op("aten::mm", 10_000, "sgemm", 50_000)
        s.op("aten::relu", 10_000, "relu", 20_000)

    a = Sim().steps(steps, run).load(tmp_path)
    for change in ("workers:4", "no-data-loader"):
        pred = a.what_if(change)
        assert pred["predicted(us)"].sum() < 0.6 * pred["replayed(us)"].sum(), change


# -- cuda-graphs ----------------------------------------------------------------------------
def test_cuda_graphs_remove_launch_and_dispatch(tmp_path: Path) -> None:
    kernels = [("aten::linear", 30_000, f"gemm_{i}", 8_000) for i in range(12)]

    def eager(s: Sim, k: int) -> None:
        for name, host, kernel, kdur in kernels:
            s.op(name, host, kernel, kdur)

    def graphed(s: Sim, k: int) -> None:
        # one graph launch at the step's start; the kernels run back to back after the
        # launch latency; the host still runs the Python between operators
        c = s.cpu
        ts = max(c + LAT, s.free + GAP)
        gpu = []
        for _, _, kernel, kdur in kernels:
            gpu.append((kernel, ts, kdur, 7))
            ts += kdur + GAP
        s.b.graph_launch(gpu, cpu_ts=c, cpu_dur=0)
        s.free = ts - GAP
        s.cpu = c + len(kernels) * OP_GAP

    before = Sim().steps(4, eager)
    after = Sim().steps(4, graphed)
    measured, pred, actual = predicted_vs_after(before, after, "cuda-graphs", tmp_path)
    assert pred < 0.5 * measured
    close(pred, actual, 0.08)


# -- dtype:TYPE -----------------------------------------------------------------------------
FP32_ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
BF16_ADD = ("void at::native::vectorized_elementwise_kernel<4, "
            "at::native::AddFunctor<c10::BFloat16>>")


def _gpu_bound(gemm: str, gemm_ns: int, add: str, add_ns: int,
               conv: str = "volta_scudnn_128x64_relu_interior_nn_v1",
               conv_ns: int = 0) -> Callable[[Sim, int], None]:
    def body(s: Sim, k: int) -> None:
        for _ in range(3):
            s.op("aten::mm", 5_000, gemm, gemm_ns)
            s.op("aten::add", 5_000, add, add_ns)
            if conv_ns:
                s.op("aten::cudnn_convolution", 5_000, conv, conv_ns)
    return body


def test_dtype_bf16_at_the_parts_rate(tmp_path: Path) -> None:
    ratio = 19.5 / 312.0  # A100: fp32 vector vs bf16 tensor peak (the peak table)
    before = Sim(A100).steps(4, _gpu_bound("ampere_sgemm_128x64_nn", 800_000, FP32_ADD,
                                           100_000, conv_ns=400_000))
    after = Sim(A100).steps(4, _gpu_bound("ampere_bf16_s16816gemm_bf16_128x64_nn",
                                          int(800_000 * ratio), BF16_ADD, 50_000,
                                          "sm80_xmma_fprop_implicit_gemm_bf16",
                                          int(400_000 * ratio)))
    measured, pred, actual = predicted_vs_after(before, after, "dtype:bf16", tmp_path)
    assert pred < 0.3 * measured
    close(pred, actual)
    # tf32 speeds the GEMMs (156 TF/s) and leaves the elementwise kernels alone
    a = TraceAnalysis(trace_dir=str(tmp_path / "before"), cache=False, progress=False)
    tf32 = float(a.what_if("dtype:tf32")["predicted(us)"].sum())
    assert pred < tf32 < measured


def test_dtype_needs_a_known_part(tmp_path: Path) -> None:
    a = Sim().steps(2, _gpu_bound("ampere_sgemm_128x64_nn", 100_000, FP32_ADD, 10_000)
                    ).load(tmp_path)
    with pytest.raises(ValueError, match="names no GPU the peak table knows"):
        a.what_if("dtype:bf16")


# -- parsing and the command line -------------------------------------------------------------
@pytest.mark.parametrize("text", ["no-sync:aten::item", "workers:4", "dtype:bf16",
                                  "pinned-copies", "cuda-graphs"])
def test_new_changes_round_trip(text: str) -> None:
    assert str(Change.parse(text)) == text


@pytest.mark.parametrize("text", ["workers:0", "workers:x", "dtype:fp8", "no-sync:",
                                  "no-sync:("])
def test_bad_new_changes_say_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="expected|bad regular expression"):
        Change.parse(text)


def test_cli_refuses_a_change_matching_no_work(tmp_path: Path) -> None:
    Sim().steps(2, _training(False)).load(tmp_path)
    from cli_runner import run_cli

    proc = run_cli(["whatif", str(tmp_path), "pinned-copies", "--no-cache", "-q"])
    assert proc.returncode == 2
    assert "pinned-copies: matches no work in these traces (no copy from or to pageable " \
           "host memory)" in proc.stderr


# -- the range and the uncertainty ------------------------------------------------------------
def test_predicted_range_by_definition(tmp_path: Path) -> None:
    def body(s: Sim, k: int) -> None:
        s.op("aten::mm", 10_000, "sgemm_fwd", 100_000 + 20_000 * k)  # steps vary
        s.item()
        s.op("aten::add", 40_000)

    a = Sim().steps(4, body).load(tmp_path)
    t = a.what_if("no-sync:aten::item")
    m = t["measured(us)"].to_numpy()
    spread = 2 * 1.4826 * np.median(np.abs(m - np.median(m)))
    assert spread > 0 and (t["replay_error_pctg"] == 0).all()
    assert (a.get_replay_uncertainty()["inferred_binding_pctg"] == 0).all()
    assert np.allclose(t["predicted_low(us)"], t["predicted(us)"] - spread)
    assert np.allclose(t["predicted_high(us)"], t["predicted(us)"] + spread)
    assert np.allclose(t["job_predicted_high(us)"], t["predicted_high(us)"])  # one rank


def test_an_unresolved_sync_makes_the_replay_uncertain(tmp_path: Path) -> None:
    from hta.analysis.whatif.uncertainty import uncertainty_line

    def body(s: Sim, k: int) -> None:
        s.op("aten::mm", 10_000, "sgemm_fwd", 100_000)
        c = s.cpu  # an event synchronize with no record: which work it waited for is a guess
        end = max(c + SYNC, s.free + RET)
        s.b.runtime("cudaEventSynchronize", c, end - c)
        s.cpu = end + OP_GAP
        s.op("aten::add", 40_000)

    a = Sim().steps(3, body).load(tmp_path)
    (row,) = a.get_replay_uncertainty().to_dict("records")
    assert row["unresolved_syncs"] == 3 and row["inferred_edges"] == 3
    assert row["uncertain"] and "3 synchronizations the trace does not tie" in row["why"]
    line = uncertainty_line(a.get_replay_uncertainty())
    assert line is not None and line.startswith("The replay is uncertain on rank 0: 3 ")


# -- fused-optimizer --------------------------------------------------------------------------
def test_fused_optimizer_submits_its_kernels_at_once(tmp_path: Path) -> None:
    n_params = 16

    def unfused(s: Sim, k: int) -> None:
        s.op("aten::mm", 10_000, "sgemm_bwd", 100_000)
        start = s.cpu
        for _ in range(n_params):  # one small kernel per tensor, dispatch-bound
            s.op("aten::add_", 12_000, "add_kernel", 2_000)
        s.b.annotation("Optimizer.step#AdamW.step", start, s.cpu - start)

    def fused(s: Sim, k: int) -> None:
        s.op("aten::mm", 10_000, "sgemm_bwd", 100_000)
        c = s.cpu
        ts = max(c + LAT, s.free + GAP)
        for _ in range(n_params):  # submitted at once, back to back
            s.b.launch_kernel("add_kernel", cpu_ts=c, cpu_dur=0, gpu_ts=ts, gpu_dur=2_000)
            ts += 2_000 + GAP
        s.free = ts - GAP
        s.b.annotation("Optimizer.step#AdamW.step", c, 1_000)
        s.cpu = c + 1_000 + OP_GAP

    before, after = Sim().steps(4, unfused), Sim().steps(4, fused)
    measured, pred, actual = predicted_vs_after(before, after, "fused-optimizer", tmp_path)
    assert pred < 0.7 * measured
    close(pred, actual, 0.08)
    a = TraceAnalysis(trace_dir=str(tmp_path / "after"), cache=False, progress=False)
    b = Sim().steps(2, _training(False)).load(tmp_path / "none")
    with pytest.raises(ChangeMatchesNothingError, match="Optimizer.step"):
        b.what_if("fused-optimizer")
    assert len(a.what_if("fused-optimizer"))  # the fused trace still has its span


def test_cuda_graphs_leave_graphed_kernels_alone(tmp_path: Path) -> None:
    def graphed(s: Sim, k: int) -> None:
        c = s.cpu
        ts = max(c + LAT, s.free + GAP)
        gpu = [(f"gemm_{i}", ts + i * 9_000, 8_000, 7) for i in range(6)]
        s.b.graph_launch(gpu, cpu_ts=c, cpu_dur=3_000)
        s.free = gpu[-1][1] + 8_000
        s.cpu = c + 3_000 + OP_GAP

    a = Sim().steps(3, graphed).load(tmp_path)
    t = a.what_if("cuda-graphs")
    # only the graph launch's own 3 µs of host time goes; its kernels already replay
    assert np.allclose(t["predicted(us)"], t["replayed(us)"], atol=3.5)
