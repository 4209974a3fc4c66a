"""Collectives: the operation of each communication kernel, its bandwidth, and the two
findings that use them (exposed communication per operation, collectives far below the
link). Traces are built here so every number is known by construction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import shared_trace
from kineto_builder import TraceBuilder

from hta.analysis import collectives as coll
from hta.analysis.findings import find
from hta.analysis.findings.collective_bw import RULES as BW_RULES
from hta.analysis.findings.communication import RULES as COMM_RULES
from hta.analysis.findings.communication import exposed_by_operation
from hta.analysis.interconnect import LINKS, link_for_device
from hta.analysis.overlap import comm_comp_overlap
from hta.job.load import load_trace
from hta.model.selection import Selection
from hta.trace_analysis import TraceAnalysis

STEP_NS = 10_000_000
COMPUTE_NS = 5_000_000
COMM_STREAM = 20
NELEMS = 25_000_000  # Float: 100,000,000 bytes
H100 = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}]}
SENDRECV = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
#: per operation: (c10d op, record_param_comms name, nccl annotation, kernel, wrapper)
JOBS = {
    "all-to-all": ("c10d::alltoall_base_", "all_to_allv", "nccl:all_to_all", SENDRECV,
                   "moe_dispatch"),
    "all-reduce": ("c10d::allreduce_", "allreduce", "nccl:all_reduce", ALLREDUCE,
                   "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"),
}


def comm_args(name: str, world: int, nelems: int = NELEMS) -> dict[str, object]:
    return {"Collective name": name, "In msg nelems": nelems, "Out msg nelems": nelems,
            "Group size": world, "dtype": "Float", "Process Group Name": "0",
            "Process Group Description": "default_pg",
            "Process Group Ranks": str(list(range(world)))}


def launch_collective(b: TraceBuilder, op: str, world: int, cpu_ts: int, gpu_ts: int,
                      gpu_dur: int) -> None:
    """The CPU stack PyTorch writes around an NCCL launch, then the kernel (no args)."""
    c10d, name, annotation, kernel, wrapper = JOBS[op]
    b.cpu_op(wrapper, ts=cpu_ts, dur=900)
    b.cpu_op(c10d, ts=cpu_ts + 100, dur=700)
    b.cpu_op("record_param_comms", ts=cpu_ts + 150, dur=600, **comm_args(name, world))
    b.annotation(annotation, ts=cpu_ts + 200, dur=500)
    b.launch_kernel(kernel, cpu_ts=cpu_ts + 300, cpu_dur=100, gpu_ts=gpu_ts,
                    gpu_dur=gpu_dur, stream=COMM_STREAM)


def collective_job(folder: Path, op: str, *, transfer_ns: int = 1_000_000, world: int = 4,
                   steps: int = 2, late: dict[int, int] | None = None) -> Path:
    """Per step: a 5 ms compute kernel, then one collective of 100 MB (exposed: nothing
    computes during it) that takes ``transfer_ns`` once the last rank has started; rank r
    starts ``late[r]`` ns after the others and every rank's kernel ends together."""
    late = late or {}
    worst = max(late.values(), default=0)
    for rank in range(world):
        b = TraceBuilder(rank=rank, world_size=world, extra_top_level=dict(H100))
        for step in range(1, steps + 1):
            t0 = step * STEP_NS
            with b.step(step, ts=t0, dur=STEP_NS - 1_000):
                b.launch_kernel("sm90_xmma_gemm_bf16", cpu_ts=t0 + 1_000, cpu_dur=500,
                                gpu_ts=t0 + 10_000, gpu_dur=COMPUTE_NS)
                start = t0 + 6_000_000 + late.get(rank, 0)
                end = t0 + 6_000_000 + worst + transfer_ns
                launch_collective(b, op, world, t0 + 2_000, start, end - start)
        b.write(folder / f"rank-{rank}.json")
    return folder


def load(folder: Path):
    return load_trace(folder, progress=False, cache=False)


# -- the operation ------------------------------------------------------------------------
@pytest.mark.parametrize("name, op", [
    ("ncclDevKernel_AllGather_RING_LL", "all-gather"),
    ("ncclKernel_ReduceScatter_RING_LL_Sum_bf16", "reduce-scatter"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", "all-reduce"),
    ("ncclDevKernel_SendRecv", "send/recv"), ("ncclKernel_Broadcast_RING_LL", "broadcast"),
    ("ncclDevKernel_Reduce_RING_LL_Sum_f32", "reduce"), ("_allgather_base", "all-gather"),
    ("_reduce_scatter_base", "reduce-scatter"), ("all_to_allv", "all-to-all"),
    ("c10d::alltoall_base_", "all-to-all"), ("nccl:send 0->1", "send/recv"),
    ("deep_ep::intranode::dispatch<8>", "all-to-all"), ("cross_device_reduce_2stage", "all-reduce"),
    ("void dpsk::ep::internode::cached_notify<false>(int)", "all-to-all"),
    ("gather", "gather"), ("scatter", "scatter"), ("barrier", "barrier"),
])
def test_names_give_operations(name: str, op: str) -> None:
    assert coll.operation_of(name) == op


@pytest.mark.parametrize("name", ["coalesced", "wait", "ncclDevKernel_Generic", ""])
def test_names_without_operation(name: str) -> None:
    assert coll.operation_of(name) is None


def test_launching_op_wins_over_the_kernel_name(tmp_path: Path) -> None:
    """NCCL runs all-to-all as SendRecv kernels: the launching op decides."""
    rt = load(collective_job(tmp_path, "all-to-all", world=2)).rank(0)
    perf = coll.rank_collective_performance(rt)
    assert perf["collective"].tolist() == ["all-to-all"] * 2
    assert perf["source"].tolist() == ["launch_op"] * 2  # nccl:all_to_all, innermost
    assert perf["launch_op"].tolist() == ["c10d::alltoall_base_"] * 2
    assert perf["context"].tolist() == ["moe"] * 2


def test_sources_in_order(tmp_path: Path) -> None:
    """Own args first; a name without an operation ('coalesced') passes on to the CPU
    stack; with no launch in the trace, the kernel name."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=1_000_000):
        b.launch_kernel(SENDRECV, cpu_ts=1_000, cpu_dur=100, gpu_ts=10_000, gpu_dur=1_000,
                        stream=COMM_STREAM, **comm_args("allgather", 2))
        b.cpu_op("c10d::reduce_scatter_tensor_coalesced_", ts=2_000, dur=900)
        b.cpu_op("record_param_comms", ts=2_100, dur=700, **comm_args("coalesced", 2))
        b.launch_kernel(SENDRECV, cpu_ts=2_200, cpu_dur=100, gpu_ts=20_000, gpu_dur=1_000,
                        stream=COMM_STREAM)
        b.kernel("ncclDevKernel_Broadcast_RING_LL", 30_000, 1_000, stream=COMM_STREAM)
        b.kernel("ncclDevKernel_Generic", 40_000, 1_000, stream=COMM_STREAM)
    perf = coll.rank_collective_performance(load(b.write(tmp_path / "rank-0.json")).rank(0))
    assert perf["collective"].tolist() == ["all-gather", "reduce-scatter", "broadcast",
                                           "other"]
    assert perf["source"].tolist() == ["kernel_args", "launch_op", "kernel_name", "none"]
    # the coalesced op's args still give the message size
    assert perf["msg_bytes"].tolist()[:2] == [NELEMS * 4.0] * 2


# -- bandwidth ------------------------------------------------------------------------------
@pytest.mark.parametrize("op, factor", [("all-reduce", 1.5), ("all-to-all", 0.75)])
def test_bandwidth_known_answer(tmp_path: Path, op: str, factor: float) -> None:
    """100,000,000 bytes in 1 ms: 100 GB/s; bus factor for 4 ranks 2·3/4 or 3/4."""
    analyzer = TraceAnalysis(trace_dir=collective_job(tmp_path, op), cache=False,
                             progress=False)
    perf = analyzer.get_collective_performance()
    assert len(perf) == 8 and set(perf["collective"]) == {op}
    assert (perf["msg_bytes"] == 1e8).all() and (perf["time(us)"] == 1_000.0).all()
    assert np.allclose(perf["algbw(GB/s)"], 100.0)
    assert np.allclose(perf["busbw(GB/s)"], 100.0 * factor)
    assert (perf["group_size"] == 4).all() and (perf["dtype"] == "Float").all()
    assert (perf["exposed(us)"] == 1_000.0).all()  # nothing computes during it
    summary = analyzer.get_collective_performance_summary()
    (row,) = summary.to_dict("records")
    assert row["calls"] == 8 and row["ranks"] == 4
    assert row["busbw(GB/s)"] == pytest.approx(100.0 * factor)


@pytest.mark.parametrize("op, n, factor", [
    ("all-reduce", 8, 1.75), ("all-gather", 8, 0.875), ("reduce-scatter", 2, 0.5),
    ("all-to-all", 4, 0.75), ("broadcast", 8, 1.0), ("send/recv", 2, 1.0),
    ("reduce", 4, 1.0), ("barrier", 4, float("nan")),
])
def test_bus_factors(op: str, n: int, factor: float) -> None:
    assert coll.bus_factor(op, n) == pytest.approx(factor, nan_ok=True)


def test_imbalance() -> None:
    assert coll.imbalance("[10, 10, 10, 10]") == 1.0
    assert coll.imbalance("[40, 0, 0, 0]") == 4.0
    assert coll.imbalance([30, 10]) == 1.5
    assert np.isnan(coll.imbalance("[]")) and np.isnan(coll.imbalance(None))


def test_link_table() -> None:
    assert link_for_device("NVIDIA H100 80GB HBM3") is LINKS["nvlink4"]
    assert link_for_device("NVIDIA H100 PCIe") is LINKS["pcie5"]
    assert link_for_device("NVIDIA A100-SXM4-80GB") is LINKS["nvlink3"]
    assert link_for_device("NVIDIA A100-PCIE-40GB") is LINKS["pcie4"]
    assert link_for_device("NVIDIA H800") is LINKS["nvlink4_h800"]
    assert link_for_device("NVIDIA B200") is LINKS["nvlink5"]
    assert link_for_device("AMD Instinct MI300X") is LINKS["xgmi_mi300"]
    assert link_for_device("Tesla V100-SXM2-32GB") is LINKS["nvlink2"]
    assert link_for_device("some accelerator") is None


# -- exposed communication: advice per operation ----------------------------------------------
def test_exposed_all_to_all_gets_all_to_all_advice(tmp_path: Path) -> None:
    out = find(load(collective_job(tmp_path, "all-to-all")), rules=COMM_RULES)
    (row,) = out[out["rule"] == "comm_exposed"].to_dict("records")
    assert row["subject"] == "all-to-all (MoE dispatch/combine)"  # under moe_dispatch
    assert row["est_saving(us)"] == pytest.approx(2 * 1_000.0)  # 2 steps × 1 ms exposed
    assert "two micro-batches" in row["advice"] and "expert load" in row["advice"]
    assert "bucket_cap_mb" not in row["advice"] and "prefetch" not in row["advice"]
    assert "launched by c10d::alltoall_base_" in row["evidence"]
    assert "ncclDevKernel_SendRecv" in row["evidence"] and "step 2" in row["evidence"]


def test_exposed_gradient_all_reduce_gets_bucket_advice(tmp_path: Path) -> None:
    out = find(load(collective_job(tmp_path, "all-reduce")), rules=COMM_RULES)
    (row,) = out[out["rule"] == "comm_exposed"].to_dict("records")
    assert row["subject"] == "all-reduce (gradients)"
    assert row["est_saving(us)"] == pytest.approx(2 * 1_000.0)
    assert "bucket_cap_mb" in row["advice"] and "micro-batches" not in row["advice"]


def test_exposed_time_is_never_counted_twice(tmp_path: Path) -> None:
    """An all-to-all [0, 1000) µs and an all-gather [500, 1500) µs on two streams, no
    computation during them: 1500 µs exposed in all, the shared 500 µs split equally."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=20_000_000):
        b.launch_kernel("sgemm", cpu_ts=1_000, cpu_dur=100, gpu_ts=5_000_000,
                        gpu_dur=10_000_000)
        b.launch_kernel(SENDRECV, cpu_ts=2_000, cpu_dur=100, gpu_ts=1_000_000,
                        gpu_dur=1_000_000, stream=COMM_STREAM,
                        **comm_args("all_to_all", 2))
        b.launch_kernel(SENDRECV, cpu_ts=3_000, cpu_dur=100, gpu_ts=1_500_000,
                        gpu_dur=1_000_000, stream=COMM_STREAM + 1,
                        **comm_args("_allgather_base", 2))
    trace = load(b.write(tmp_path / "rank-0.json"))
    groups, _ = exposed_by_operation(trace.rank(0))
    exposed = groups.set_index("group")["exposed_ns"]
    assert exposed.to_dict() == {"all-gather": 750_000, "all-to-all": 750_000}
    advice = {f.subject: f.advice for f in COMM_RULES[0].check(trace.rank(0), None)}
    assert "two micro-batches" in advice["all-to-all"]  # no MoE or TorchRec context
    assert "FSDP" in advice["all-gather"]
    overlap = comm_comp_overlap(trace).iloc[0]
    assert exposed.sum() == (overlap["comm_time(us)"] - overlap["overlap_time(us)"]) * 1e3
    out = find(trace, rules=COMM_RULES)
    assert out["est_saving(us)"].sum() == pytest.approx(1_500.0)


# -- collectives far below the link -------------------------------------------------------------
def test_slow_collective_is_found(tmp_path: Path) -> None:
    """100 MB all-reduce in 4 ms on 4 H100s: 37.5 GB/s bus bandwidth, under 25% of
    450 GB/s. At half the link it would take 1.5e8 / 225 ns: the rest is the saving."""
    trace = load(collective_job(tmp_path, "all-reduce", transfer_ns=4_000_000))
    (row,) = find(trace, rules=BW_RULES).to_dict("records")
    per_call = 4_000_000 - 1.5e8 / 225
    assert row["est_saving(us)"] == pytest.approx(2 * per_call / 1e3, abs=0.01)
    assert row["subject"] == "all-reduce on process group 0 (default_pg)"
    assert "37.5 GB/s" in row["evidence"] and "NVLink 4" in row["evidence"]
    assert "ncclDevKernel_AllReduce" in row["evidence"]


def test_slow_link_and_exposed_communication_share_the_time(tmp_path: Path) -> None:
    """The slow all-reduce also runs with no computation: ``collective_bw`` and
    ``comm_exposed`` together claim at most the exposed time of the rank, each ns once
    (the bandwidth finding takes the calls' time first; before, both counted it)."""
    trace = load(collective_job(tmp_path, "all-reduce", transfer_ns=4_000_000))
    exposed = {r: float(v) for r, v in comm_comp_overlap(trace).set_index("rank").eval(
        "`comm_time(us)` - `overlap_time(us)`").items()}
    rules = COMM_RULES + BW_RULES
    out = find(trace, rules=rules)
    assert set(out["rule"]) >= {"collective_bw"}
    per_call = 4_000_000 - 1.5e8 / 225
    bw = out[out["rule"] == "collective_bw"]["est_saving(us)"].sum()
    assert bw == pytest.approx(2 * per_call / 1e3, abs=0.01)
    assert out["est_saving(us)"].sum() <= min(exposed.values()) + 1e-6


def test_fast_collective_is_not_found(tmp_path: Path) -> None:
    trace = load(collective_job(tmp_path, "all-reduce", transfer_ns=1_000_000))
    assert not len(find(trace, rules=BW_RULES))


def test_waiting_for_a_late_peer_is_not_the_link(tmp_path: Path) -> None:
    """Rank 3 starts 3 ms late: the others' kernels run 4 ms (37.5 GB/s by kernel time)
    but the transfer took 1 ms."""
    folder = collective_job(tmp_path, "all-reduce", late={3: 3_000_000})
    perf = TraceAnalysis(trace_dir=folder, cache=False,
                         progress=False).get_collective_performance()
    assert np.allclose(perf[perf["rank"] == 0]["busbw(GB/s)"], 37.5)
    assert not len(find(load(folder), rules=BW_RULES))


def test_one_rank_or_no_sizes_is_silent(tmp_path: Path, caplog) -> None:
    trace = load(collective_job(tmp_path, "all-reduce", transfer_ns=4_000_000))
    with caplog.at_level("INFO", logger="hta.analysis.findings.collective_bw"):
        assert not len(find(trace, Selection.of([0]), rules=BW_RULES))
    assert "one rank loaded" in caplog.text


def test_link_override(tmp_path: Path) -> None:
    """Told the link gives 1000 GB/s, the 1 ms all-reduce (150 GB/s) is slow."""
    from hta.analysis.findings.collective_bw import check_collective_bw

    trace = load(collective_job(tmp_path, "all-reduce", transfer_ns=1_000_000))
    found = check_collective_bw(trace, Selection.of([0, 1, 2, 3]), link_gbps=1000.0)
    assert len(found) == 4  # one per rank; the engine merges them by subject
    assert found[0].est_saving_ns == 2 * int(1_000_000 - 1.5e8 / 500)


# -- real traces -----------------------------------------------------------------------------
def test_real_nccl_args_read_by_hand() -> None:
    """nccl_parser_config: the first all-reduce kernel carries In msg nelems 2049000,
    dtype Float, Group size 2 and runs 3306.963 µs (read in the raw JSON)."""
    perf = coll.collective_performance(load(shared_trace("nccl_parser_config")))
    assert set(perf["collective"]) == {"all-reduce", "broadcast"}
    row = perf[perf["collective"] == "all-reduce"].iloc[0]
    assert row["msg_bytes"] == 2049000 * 4 and row["time(us)"] == pytest.approx(3306.963)
    assert row["busbw(GB/s)"] == pytest.approx(8196000 / 3306963)  # factor 1 for n = 2
    assert row["launch_op"] == "c10d::allreduce_" and row["context"] == "backward"


def test_real_torchrec_all_to_all() -> None:
    """trace_filter (TorchRec): SendRecv kernels launched by c10d::alltoall_base_ are
    all-to-all, those of c10d::_allgather_base_ all-gather."""
    perf = coll.collective_performance(load(shared_trace("trace_filter")))
    by_op = perf.groupby("launch_op")["collective"].agg(set).to_dict()
    assert by_op == {"c10d::alltoall_base_": {"all-to-all"},
                     "c10d::allreduce_": {"all-reduce"},
                     "c10d::_allgather_base_": {"all-gather"}}
    out = find(load(shared_trace("trace_filter")), rules=COMM_RULES, min_share=0.0)
    exposed = out[out["rule"] == "comm_exposed"]
    advice = exposed.set_index("subject")["advice"]
    assert "TrainPipelineSparseDist" in advice["all-to-all (TorchRec embeddings)"]
    assert "bucket_cap_mb" not in advice["all-to-all (TorchRec embeddings)"]


@pytest.mark.parametrize("native", ["1", "0"])
def test_all_to_allv_imbalance_from_split_sizes(tmp_path: Path, monkeypatch,
                                                native: str) -> None:
    """Rank 0 sends rows 30, 10, 10, 10 to its 4 peers: largest over mean = 30 / 15 = 2;
    it receives 15 from each: 1. Both decoders read the split sizes."""
    monkeypatch.setenv("HTA_NATIVE", native)
    b = TraceBuilder(rank=0, world_size=4)
    with b.step(1, ts=0, dur=1_000_000):
        args = {**comm_args("all_to_allv", 4, 60), "In split size": "[30, 10, 10, 10]",
                "Out split size": "[15, 15, 15, 15]"}
        b.launch_kernel(SENDRECV, cpu_ts=1_000, cpu_dur=100, gpu_ts=10_000, gpu_dur=1_000,
                        stream=COMM_STREAM, **args)
        b.launch_kernel(SENDRECV, cpu_ts=2_000, cpu_dur=100, gpu_ts=20_000, gpu_dur=1_000,
                        stream=COMM_STREAM, **{**comm_args("all_to_all", 4, 60),
                                               "In split size": "[]", "Out split size": "[]"})
    perf = coll.rank_collective_performance(load(b.write(tmp_path / "rank-0.json")).rank(0))
    assert perf["send_imbalance"].iloc[0] == 2.0 and perf["recv_imbalance"].iloc[0] == 1.0
    assert perf[["send_imbalance", "recv_imbalance"]].iloc[1].isna().all()  # even split


@pytest.mark.parametrize("name, label", [
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
     "(c10::BFloat16*, unsigned long)",
     "(anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"),
    ("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*)",
     "dpsk::ep::internode::dispatch<false, 8, true, 8>"),
    ("ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", "ncclDevKernel_SendRecv"),
    ("ncclDevKernel_Generic", "ncclDevKernel_Generic"),
])
def test_kernel_label_keeps_template_arguments(name: str, label: str) -> None:
    assert coll.kernel_label(name) == label


@pytest.mark.parametrize("name", ["trace_filter", "nccl_parser_config", "df_index_resolver"])
def test_real_traces_exposed_time_is_shared_out_once(name: str) -> None:
    """On every rank: the operations' exposed shares add up to the overlap table's
    exposed communication, and the rule's savings to at most that and the window."""
    from hta.analysis.findings import analysis_window
    from hta.analysis.findings.communication import check_exposed

    trace = load(shared_trace(name))
    overlap = comm_comp_overlap(trace).set_index("rank")
    for rt in trace:
        groups, calls = exposed_by_operation(rt)
        if not len(groups):
            continue
        comm, both = overlap.loc[rt.rank, ["comm_time(us)", "overlap_time(us)"]]
        assert groups["rank_comm_ns"].iloc[0] == pytest.approx(comm * 1e3, abs=1)
        assert groups["rank_overlap_ns"].iloc[0] == pytest.approx(both * 1e3, abs=1)
        # waits cut from their calls (waits_cut) are no exposed communication
        exposed = groups["exposed_ns"].sum()
        if calls["waited_ns"].any():
            assert exposed < (comm - both) * 1e3
        else:
            assert exposed == pytest.approx((comm - both) * 1e3, abs=1)
        assert groups["group"].is_unique and calls["collective"].ne("other").all()
        savings = sum(f.est_saving_ns for f in check_exposed(rt, None))
        start, end = analysis_window(rt)
        assert savings <= min(groups["exposed_ns"].sum(), end - start)


def test_link_override_through_the_rule_and_the_facade(tmp_path: Path) -> None:
    from hta.analysis.findings.collective_bw import collective_bw_rule

    folder = collective_job(tmp_path, "all-reduce", transfer_ns=1_000_000)
    assert not len(find(load(folder), rules=[collective_bw_rule()]))
    (row,) = find(load(folder), rules=[collective_bw_rule(1000.0)]).to_dict("records")
    assert row["est_saving(us)"] == pytest.approx(2 * (1_000 - 1.5e8 / 500 / 1e3))
    slow = TraceAnalysis(trace_dir=folder, cache=False,
                         progress=False).get_slow_collectives(link_gbps=1000.0)
    assert len(slow) == 8 and np.allclose(slow["transfer_busbw"], 150.0)
    assert (slow["waited_ns"] == 0).all() and (slow["link"] == "link_gbps given").all()


def test_optimizer_all_gather_gets_its_own_advice() -> None:
    """trace_filter: the all-gathers run inside Optimizer.step#Shampoo.step."""
    out = find(load(shared_trace("trace_filter")), rules=COMM_RULES, min_share=0.0)
    advice = out[out["rule"] == "comm_exposed"].set_index("subject")["advice"]
    assert set(advice.index) == {"all-to-all (TorchRec embeddings)",
                                 "all-gather (optimizer step)", "all-reduce (gradients)"}
    assert "sharded optimizer" in advice["all-gather (optimizer step)"]
    assert "FSDP" not in advice["all-gather (optimizer step)"]


def test_no_message_sizes_is_silent_and_says_so(tmp_path: Path, caplog) -> None:
    for rank in range(2):
        b = TraceBuilder(rank=rank, world_size=2, extra_top_level=dict(H100))
        with b.step(1, ts=0, dur=10_000_000):
            b.launch_kernel(ALLREDUCE, cpu_ts=1_000, cpu_dur=100, gpu_ts=10_000,
                            gpu_dur=4_000_000, stream=COMM_STREAM)
        b.write(tmp_path / f"rank-{rank}.json")
    with caplog.at_level("INFO", logger="hta.analysis.findings.collective_bw"):
        assert not len(find(load(tmp_path), rules=BW_RULES))
    assert caplog.text.count("no communication kernel carries a message size") == 1


def test_group_of_one_is_never_slow(tmp_path: Path) -> None:
    """A 'collective' in a group of one rank moves nothing over a link (bus factor 0)."""
    from hta.analysis.findings.collective_bw import check_collective_bw

    for rank in range(2):
        b = TraceBuilder(rank=rank, world_size=2, extra_top_level=dict(H100))
        with b.step(1, ts=0, dur=10_000_000):
            b.launch_kernel(ALLREDUCE, cpu_ts=1_000, cpu_dur=100, gpu_ts=10_000,
                            gpu_dur=4_000_000, stream=COMM_STREAM,
                            **{**comm_args("allreduce", 1), "Process Group Name": "9"})
        b.write(tmp_path / f"rank-{rank}.json")
    trace = load(tmp_path)
    perf = coll.collective_performance(trace)
    assert (perf["busbw(GB/s)"] == 0).all()
    assert not check_collective_bw(trace, Selection.of([0, 1]), link_gbps=100.0)


def test_a_collective_of_unknown_operation_says_so(tmp_path: Path) -> None:
    """An RCCL ``ncclDevKernel_Generic`` kernel launched outside any recorded op, with no
    collective args: neither its name nor a launching op tells its operation. The finding
    says so and how to get the operation recorded (before, its subject read "other" and
    the advice was the generic one)."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=20_000_000):
        b.launch_kernel("sgemm", cpu_ts=1_000, cpu_dur=100, gpu_ts=5_000_000,
                        gpu_dur=10_000_000)
        b.launch_kernel("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
                        cpu_ts=2_000, cpu_dur=100, gpu_ts=1_000_000, gpu_dur=1_000_000,
                        stream=COMM_STREAM)
    trace = load(b.write(tmp_path / "rank-0.json"))
    (row,) = find(trace, rules=COMM_RULES).to_dict("records")
    assert row["subject"] == "collective of unknown operation"
    assert "record_param_comms" in row["advice"] and "ncclDevKernel_Generic" in row["evidence"]
    assert row["est_saving(us)"] == pytest.approx(1_000.0)
