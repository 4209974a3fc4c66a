"""Coupled synthetic jobs (hta.synthetic.coupled): ranks that wait for each other, exact truth.

The jobs are checked three ways: against themselves (the same arguments give the same bytes),
against the project's loader (every rank loads; its kernels are the truth's, to the ns), and
against what each shape was built to show (who is late, how big the pipeline bubbles are).
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from hta import synthetic as syn
from hta.synthetic.coupled import (
    ALLREDUCE_NS,
    HOST_PAUSE_NS,
    PIPE_BACKWARD_NS,
    PIPE_FORWARD_NS,
    SHAPES,
    coupled_job,
    generate_coupled_job,
)
from hta.synthetic.coupled_pipeline import T_P2P_NS, schedule
from hta.trace_analysis import TraceAnalysis

US = 1_000
DDP = ("balanced", "slow_worker", "imbalance", "host", "slow_link")
PIPES = ("gpipe", "1f1b")
TIME_RE = re.compile(rb'"(?:ts|dur)":(-?[0-9.eE+-]+)')


@pytest.fixture(scope="module")
def jobs() -> dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Every shape in memory, 4 ranks, 4 steps, 4 micro-batches."""
    return {shape: coupled_job(shape, ranks=4, steps=4, micro_batches=4) for shape in SHAPES}


def _abs(trace: dict[str, Any], value: Any) -> int:
    return int(trace["baseTimeNanoseconds"]) + value.ns


def _events(trace: dict[str, Any], cat: str, name: str | None = None) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"]
            if e.get("cat") == cat and (name is None or e["name"] == name)]


# --- files and determinism ---------------------------------------------------------------------


def test_same_arguments_give_the_same_bytes(tmp_path: Path) -> None:
    a, truth_a = generate_coupled_job(tmp_path / "a", "1f1b", ranks=3, steps=2, seed=5)
    b, truth_b = generate_coupled_job(tmp_path / "b", "1f1b", ranks=3, steps=2, seed=5)
    c, _ = generate_coupled_job(tmp_path / "c", "1f1b", ranks=3, steps=2, seed=6)
    assert [p.name for p in a] == ["rank-0.json.gz", "rank-1.json.gz", "rank-2.json.gz"]
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    truth_file = (tmp_path / "a" / "truth" / "truth.json").read_bytes()
    assert truth_file == (tmp_path / "b" / "truth" / "truth.json").read_bytes()
    assert truth_a == truth_b == json.loads(truth_file)
    assert [p.read_bytes() for p in a] != [p.read_bytes() for p in c]


def test_file_holds_the_dict_with_three_decimals(tmp_path: Path) -> None:
    paths, _ = generate_coupled_job(tmp_path, "host", ranks=2, steps=2, gzip=False)
    traces, _ = coupled_job("host", ranks=2, steps=2)
    raw = paths[1].read_bytes()
    assert raw == syn.dumps_trace(traces[1])
    assert all(re.fullmatch(rb"-?\d+\.\d{3}", m) for m in TIME_RE.findall(raw))
    data = json.loads(raw)
    assert list(data)[-1] == "traceName" and data["displayTimeUnit"] == "ns"
    assert {t["baseTimeNanoseconds"] for t in traces} == {data["baseTimeNanoseconds"]}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown shape"):
        coupled_job("zigzag")
    with pytest.raises(ValueError, match="micro_batches"):
        coupled_job("gpipe", micro_batches=0)


# --- the loader --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_loads_with_the_truths_kernels(tmp_path: Path, shape: str) -> None:
    _, truth = generate_coupled_job(tmp_path, shape, ranks=4, steps=2, micro_batches=3)
    ta = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)  # truth/ not read
    assert sorted(ta.t.ranks) == [0, 1, 2, 3]
    for rank in range(4):
        rt = ta.t.rank(rank)
        ev = rt.events
        kernel = (rt.decoded(["cat"])["cat"] == "kernel").to_numpy()
        k = ev[kernel]
        got = sorted(zip(k["ts"].astype(int), k["end"].astype(int), k["stream"].astype(int),
                         k["iteration"].astype(int)))
        want = sorted((x["start_ns"], x["end_ns"], x["stream"], x["step"])
                      for x in truth["kernels"] if x["rank"] == rank)
        assert len(got) == len(want)
        assert got == want
        assert (k["index_correlation"] >= 0).all()  # every kernel linked to its launch
        kinds = ev["kind"].value_counts()
        n_comm = sum(x["kind"] in ("allreduce", "send", "recv") for x in truth["kernels"]
                     if x["rank"] == rank)
        assert kinds["communication"] == n_comm
        assert kinds["computation"] == len(want) - n_comm


# --- the layout of every trace -----------------------------------------------------------------


@pytest.mark.parametrize("shape", ["slow_link", "1f1b"])
def test_launches_precede_kernels_and_streams_never_overlap(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]], shape: str
) -> None:
    traces, _ = jobs[shape]
    for r, trace in enumerate(traces):
        assert trace["distributedInfo"]["rank"] == r
        launches = {e["args"]["correlation"]: e for e in _events(trace, "cuda_runtime",
                                                                 "cudaLaunchKernel")}
        assert {e["dur"].ns for e in launches.values()} == {5 * US}
        by_stream: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for k in _events(trace, "kernel"):
            assert k["pid"] == r and k["tid"] == k["args"]["stream"]
            assert k["ts"].ns >= launches[k["args"]["correlation"]]["ts"].ns + 3 * US
            by_stream[k["tid"]].append((k["ts"].ns, k["ts"].ns + k["dur"].ns))
        for spans in by_stream.values():
            spans.sort()
            assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
        flows = [e for e in trace["traceEvents"] if e.get("cat") == "ac2g"]
        assert sorted(e["id"] for e in flows if e["ph"] == "s") == sorted(launches)
        assert sorted(e["id"] for e in flows if e["ph"] == "f") == sorted(launches)


def test_steps_end_after_the_synchronize(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]
) -> None:
    traces, truth = jobs["gpipe"]
    for r, trace in enumerate(traces):
        steps = sorted(_events(trace, "user_annotation"), key=lambda e: e["ts"].ns)
        steps = [e for e in steps if e["name"].startswith("ProfilerStep#")]
        assert [e["name"] for e in steps] == [f"ProfilerStep#{s}" for s in range(4)]
        syncs = _events(trace, "cuda_runtime", "cudaStreamSynchronize")
        kernels = _events(trace, "kernel")
        for s, (step, sync) in enumerate(zip(steps, syncs)):
            end = step["ts"].ns + step["dur"].ns
            done = max(k["ts"].ns + k["dur"].ns for k in kernels
                       if step["ts"].ns <= k["ts"].ns < end)
            assert sync["ts"].ns + sync["dur"].ns == done + 10 * US
            assert end == done + 30 * US
            if s + 1 < len(steps):
                assert steps[s + 1]["ts"].ns == end
            row = next(x for x in truth["per_step"] if x["rank"] == r and x["step"] == s)
            assert (row["step_start_ns"], row["step_end_ns"]) == (
                _abs(trace, step["ts"]), _abs(trace, step["ts"]) + step["dur"].ns)


def test_collective_args_as_pytorch_writes_them(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]
) -> None:
    traces, _ = jobs["balanced"]
    ops = _events(traces[2], "cpu_op", "record_param_comms")
    assert [op["args"]["Seq"] for op in ops] == [1, 2, 3, 4]
    assert {op["args"]["Rank"] for op in ops} == {2}
    nccl = [k for k in _events(traces[2], "kernel") if k["args"]["stream"] == 20]
    assert nccl[0]["name"].startswith("ncclDevKernel_AllReduce_Sum_f32_RING_LL(")
    assert nccl[0]["args"]["Collective name"] == "allreduce"
    assert nccl[0]["args"]["Process Group Ranks"] == "[0, 1, 2, 3]"
    assert "Rank" not in nccl[0]["args"]
    ann = _events(traces[2], "gpu_user_annotation", "nccl:all_reduce")
    assert [(a["ts"].ns, a["dur"].ns) for a in ann] == [(k["ts"].ns, k["dur"].ns) for k in nccl]


def test_p2p_names_peers_and_seq(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]
) -> None:
    traces, _ = jobs["1f1b"]
    ops = _events(traces[1], "cpu_op", "record_param_comms")
    assert [op["args"]["Seq"] for op in ops] == list(range(1, len(ops) + 1))
    for op in ops:
        args = op["args"]
        assert args["Process Group Name"] == "1" and args["Process Group Description"] == "pipeline"
        assert args["In msg nelems"] == 1_048_576
        assert (args["Collective name"], args["Rank"]) in {("send", 0), ("send", 2), ("recv", 0),
                                                           ("recv", 2)}
    names = {e["name"] for e in _events(traces[1], "gpu_user_annotation")}
    assert names == {"nccl:send 1->2", "nccl:send 1->0", "nccl:recv 1<-0", "nccl:recv 1<-2"}
    sendrecv = {k["name"] for k in _events(traces[1], "kernel") if k["args"]["stream"] in (21, 22)}
    assert sendrecv == {"ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"}


def _runtime_calls(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(_events(trace, "cuda_runtime"), key=lambda e: e["ts"].ns)


def _encloses(trace: dict[str, Any], ext: int, start: int, end: int) -> bool:
    """Whether a CPU op or annotation with External id ``ext`` spans [start, end]."""
    return any(e["args"].get("External id") == ext and e["ts"].ns <= start
               and end <= e["ts"].ns + e["dur"].ns
               for e in trace["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation"))


def _waiting_launches(trace: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(cudaEventRecord, cudaLaunchKernel) around each cudaStreamWaitEvent, checked to be
    back to back, 2 us each, in the launch's op, with the launches' counter and no flow."""
    calls = _runtime_calls(trace)
    flows = {e["id"] for e in trace["traceEvents"] if e.get("cat") == "ac2g"}
    gpu = {e["args"]["correlation"] for e in _events(trace, "kernel")}
    out = []
    for i, wait in enumerate(calls):
        if wait["name"] != "cudaStreamWaitEvent":
            continue
        rec, launch = calls[i - 1], calls[i + 1]
        assert (rec["name"], launch["name"]) == ("cudaEventRecord", "cudaLaunchKernel")
        assert rec["dur"].ns == wait["dur"].ns == 2 * US
        assert rec["ts"].ns + 2 * US == wait["ts"].ns and wait["ts"].ns + 2 * US == launch["ts"].ns
        assert (rec["args"]["cbid"], wait["args"]["cbid"]) == (135, 147)
        corr = [c["args"]["correlation"] for c in (rec, wait, launch)]
        assert corr == [corr[0], corr[0] + 1, corr[0] + 2]
        assert not {corr[0], corr[1]} & (flows | gpu)
        ext = launch["args"]["External id"]
        assert rec["args"]["External id"] == wait["args"]["External id"] == ext
        assert _encloses(trace, ext, rec["ts"].ns, launch["ts"].ns + launch["dur"].ns)
        out.append((rec, launch))
    return out


def _kernels_by_corr(trace: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {k["args"]["correlation"]: k for k in _events(trace, "kernel")}


def _end(e: dict[str, Any]) -> int:
    return int(e["ts"].ns + e["dur"].ns)


def _last_before(kernels: list[dict[str, Any]], stream: int, corr: int) -> int:
    """End of the last kernel on ``stream`` launched before correlation ``corr`` (0: none)."""
    ends = [_end(k) for k in kernels if k["tid"] == stream and k["args"]["correlation"] < corr]
    return max(ends, default=0)


def test_the_all_reduce_waits_for_the_compute_stream(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]
) -> None:
    for shape in DDP:
        traces, _ = jobs[shape]
        for trace in traces:
            waits = _waiting_launches(trace)
            kernels = _kernels_by_corr(trace)
            assert len(waits) == 4  # one per step, before the all-reduce
            for rec, launch in waits:
                corr = launch["args"]["correlation"]
                k = kernels[corr]
                assert k["tid"] == 20 and k["name"].startswith("ncclDevKernel_AllReduce")
                assert _encloses(trace, launch["args"]["External id"], rec["ts"].ns,
                                 _end(launch))  # inside the nccl:all_reduce annotation
                ks = list(kernels.values())
                assert k["ts"].ns == max(launch["ts"].ns + 3 * US, _last_before(ks, 7, corr),
                                         _last_before(ks, 20, corr))


@pytest.mark.parametrize("shape", PIPES)
def test_pipeline_streams_wait_for_each_other(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]], shape: str
) -> None:
    traces, truth = jobs[shape]
    for r, trace in enumerate(traces):
        kernels = _kernels_by_corr(trace)
        ks = list(kernels.values())
        waiting = [kernels[launch["args"]["correlation"]] for _, launch in _waiting_launches(trace)]
        n_recv = sum(x["direction"] == "recv" for x in truth["p2p"] if x["rank"] == r)
        n_send = sum(x["direction"] == "send" for x in truth["p2p"] if x["rank"] == r)
        assert sorted(k["tid"] for k in waiting) == [7] * n_recv + [21] * n_send
        for k in waiting:  # compute waits for its recv, a send for its compute kernel
            corr = k["args"]["correlation"]
            launch = next(e for e in _events(trace, "cuda_runtime", "cudaLaunchKernel")
                          if e["args"]["correlation"] == corr)
            other = 22 if k["tid"] == 7 else 7
            assert k["ts"].ns == max(launch["ts"].ns + 3 * US, _last_before(ks, other, corr),
                                     _last_before(ks, k["tid"], corr))


@pytest.mark.parametrize("shape", PIPES)
def test_pipeline_actions_are_annotated(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]], shape: str
) -> None:
    traces, truth = jobs[shape]
    assert truth["annotated"] is True
    for r, trace in enumerate(traces):
        actions = sorted((e for e in _events(trace, "user_annotation")
                          if e["name"].startswith("PP:")), key=lambda e: e["ts"].ns)
        want = [f"PP:{r}{'F' if phase == 'forward' else 'B'}{mb}"
                for phase, mb in schedule(shape, r, 4, 4)] * 4
        assert [a["name"] for a in actions] == want
        ops = sorted(_events(trace, "cpu_op", "aten::mm"), key=lambda e: e["ts"].ns)
        launches = {e["args"]["External id"]: e
                    for e in _events(trace, "cuda_runtime", "cudaLaunchKernel")}
        assert len(ops) == len(actions)
        for a, op in zip(actions, ops):  # each op, its event calls and launch inside
            assert isinstance(a["args"]["External id"], int)
            assert a["ts"].ns + US == op["ts"].ns and _end(op) + US == _end(a)
            launch = launches[op["args"]["External id"]]
            assert op["ts"].ns < launch["ts"].ns and _end(launch) <= _end(op)
    ddp = jobs["slow_worker"][0]
    assert not [e for t in ddp for e in _events(t, "user_annotation") if e["name"][:3] == "PP:"]
    assert jobs["slow_worker"][1]["annotated"] is False


def test_without_annotations_only_the_annotations_go(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]
) -> None:
    traces, truth = coupled_job("1f1b", ranks=4, steps=4, micro_batches=4, annotate=False)
    traces_a, truth_a = jobs["1f1b"]
    assert truth["annotated"] is False
    assert {**truth, "annotated": True} == truth_a
    for plain, annotated in zip(traces, traces_a):
        kept = [e for e in annotated["traceEvents"] if not e["name"].startswith("PP:")]
        assert len(kept) < len(annotated["traceEvents"])
        strip = [{**e, "args": {k: v for k, v in e.get("args", {}).items()
                                if k != "External id"}} for e in kept]
        assert strip == [{**e, "args": {k: v for k, v in e.get("args", {}).items()
                                        if k != "External id"}} for e in plain["traceEvents"]]


def test_the_replay_sees_the_all_reduce_wait(tmp_path: Path) -> None:
    """With the stream wait in the trace, making rank 3's compute as fast as the others'
    takes its excess off every step of the job."""
    _, truth = generate_coupled_job(tmp_path, "slow_worker", ranks=4, steps=4)
    ta = TraceAnalysis(trace_dir=tmp_path, cache=False, progress=False)
    t = ta.what_if("no-stragglers:3").drop_duplicates("step").set_index("step")
    for s in range(4):
        compute = {x["rank"]: x["compute_ns"] for x in truth["per_step"] if x["step"] == s}
        excess_us = (compute[3] - max(compute[r] for r in range(3))) / US
        drop = t.loc[s, "job_measured(us)"] - t.loc[s, "job_predicted(us)"]
        assert drop == pytest.approx(excess_us, rel=0.05)


# --- what each shape was built to show ---------------------------------------------------------


def _late(truth: dict[str, Any]) -> list[int]:
    return [x["rank"] for x in sorted(truth["late"], key=lambda x: x["step"])]


def test_data_parallel_stragglers(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]
) -> None:
    truth = {shape: jobs[shape][1] for shape in DDP}
    assert _late(truth["slow_worker"]) == [3, 3, 3, 3]
    assert truth["slow_worker"]["straggler"] == {"rank": 3, "cause": "slow_compute",
                                                 "steps": [0, 1, 2, 3]}
    assert _late(truth["host"]) == [1, 1, 1, 1]
    assert all(x["lag_ns"] > HOST_PAUSE_NS - 100 * US for x in truth["host"]["late"])
    assert _late(truth["slow_link"])[1:] == [3, 3, 3]
    assert truth["slow_link"]["straggler"]["steps"][-3:] == [1, 2, 3]
    assert _late(truth["imbalance"]) == [(3 * s + 1) % 4 for s in range(4)]
    assert truth["imbalance"]["straggler"]["rank"] is None
    assert max(x["lag_ns"] for x in truth["balanced"]["late"]) < 100 * US
    assert truth["balanced"]["straggler"] == {"rank": None, "cause": None, "steps": []}


def test_all_reduce_ends_after_the_last_start(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]
) -> None:
    for shape in ("balanced", "slow_link"):
        rows = jobs[shape][1]["per_step"]
        for s in range(4):
            step = [x for x in rows if x["step"] == s]
            latest = max(x["allreduce_start_ns"] for x in step)
            for x in step:
                factor = 2 if shape == "slow_link" and x["rank"] == 3 else 1
                assert x["allreduce_end_ns"] == latest + factor * ALLREDUCE_NS


def test_compute_is_jittered_by_at_most_one_percent(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]
) -> None:
    rows = jobs["slow_worker"][1]["per_step"]
    for x in rows:
        base = 8 * (200_000 + 400_000) * (1.3 if x["rank"] == 3 else 1.0)
        assert 0.99 * base - 16 <= x["compute_ns"] <= 1.01 * base + 16
    kernels = [k for k in jobs["1f1b"][1]["compute"] if k["rank"] == 0]
    for k in kernels:
        base = PIPE_FORWARD_NS if k["phase"] == "forward" else PIPE_BACKWARD_NS
        assert 0.99 * base <= k["end_ns"] - k["start_ns"] <= 1.01 * base


def _bubbles_by_stage(truth: dict[str, Any]) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for x in truth["bubbles"]:
        out[x["rank"]] += x["bubble_ns"]
    return dict(out)


def _recomputed_bubbles(truth: dict[str, Any]) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for s in range(truth["steps"]):
        ops = [x for x in truth["compute"] if x["step"] == s]
        window = max(x["end_ns"] for x in ops) - min(x["start_ns"] for x in ops)
        for r in range(truth["ranks"]):
            busy = sum(x["end_ns"] - x["start_ns"] for x in ops if x["rank"] == r)
            out[r] += window - busy
    return dict(out)


@pytest.mark.parametrize("shape", PIPES)
def test_pipeline_truth_is_consistent(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]], shape: str
) -> None:
    traces, truth = jobs[shape]
    assert truth["schedule"] == shape and truth["stage_order"] == [0, 1, 2, 3]
    assert truth["theory"]["bubble_fraction"] == pytest.approx(3 / 7)
    assert _bubbles_by_stage(truth) == _recomputed_bubbles(truth)
    for r in range(4):  # compute kernels in schedule order, every step
        order = [(x["phase"], x["micro_batch"]) for x in truth["compute"]
                 if x["rank"] == r and x["step"] == 0]
        assert order == schedule(shape, r, 4, 4)
    pairs: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for x in truth["p2p"]:
        sender = x["rank"] if x["direction"] == "send" else x["peer"]
        receiver = x["peer"] if x["direction"] == "send" else x["rank"]
        pairs[(x["step"], x["phase"], x["micro_batch"], sender, receiver)].append(x)
    assert len(pairs) == 4 * 2 * 3 * 4  # steps x phases x links x micro-batches
    for both in pairs.values():
        assert sorted(x["direction"] for x in both) == ["recv", "send"]
        assert both[0]["end_ns"] == both[1]["end_ns"]
        assert {x["transfer_ns"] for x in both} == {T_P2P_NS}
        assert min(x["wait_ns"] for x in both) == 0
    # every stage's compute-stream kernels, from the traces, never overlap
    for trace in traces:
        spans = sorted((k["ts"].ns, k["ts"].ns + k["dur"].ns) for k in _events(trace, "kernel")
                       if k["args"]["stream"] == 7)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))


def test_1f1b_bubble_is_about_gpipes(
    jobs: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]
) -> None:
    gpipe = _bubbles_by_stage(jobs["gpipe"][1])
    one_f = _bubbles_by_stage(jobs["1f1b"][1])
    theory = 4 * 3 * (PIPE_FORWARD_NS + PIPE_BACKWARD_NS)  # steps x (P - 1)(f + b)
    for r in range(4):
        assert gpipe[r] >= 0.99 * theory and one_f[r] >= 0.99 * theory
        assert one_f[r] == pytest.approx(gpipe[r], rel=0.15)


def test_a_single_stage_has_no_bubble_and_no_transfer() -> None:
    traces, truth = coupled_job("1f1b", ranks=1, steps=2, micro_batches=3)
    assert truth["p2p"] == []
    assert {x["bubble_ns"] for x in truth["bubbles"]} == {0}  # its kernels run back to back
    assert len(_events(traces[0], "kernel")) == 2 * 3 * 2


# --- CLI ---------------------------------------------------------------------------------------


def test_cli_writes_a_coupled_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "job"
    assert syn.main([str(out), "--shape", "1f1b", "--ranks", "4", "--steps", "2"]) == 0
    printed = capsys.readouterr().out
    files = sorted(p.name for p in out.iterdir())
    assert files == ["rank-0.json.gz", "rank-1.json.gz", "rank-2.json.gz", "rank-3.json.gz",
                     "truth"]
    assert all(str(out / name) in printed for name in files[:-1] + ["truth/truth.json"])
    truth = json.loads((out / "truth" / "truth.json").read_text())
    assert (truth["shape"], truth["ranks"], truth["steps"], truth["micro_batches"]) == (
        "1f1b", 4, 2, 4)
    with gzip.open(out / "rank-2.json.gz") as fh:
        assert json.load(fh)["distributedInfo"]["world_size"] == 4
    with pytest.raises(SystemExit):
        syn.main([str(out), "--shape", "gpipe", "--absolute-time"])


def test_cli_without_pp_annotations(tmp_path: Path) -> None:
    out = tmp_path / "job"
    assert syn.main([str(out), "--shape", "gpipe", "--ranks", "2", "--steps", "1",
                     "--no-pp-annotations", "--no-gzip"]) == 0
    assert json.loads((out / "truth" / "truth.json").read_text())["annotated"] is False
    assert b'"PP:' not in (out / "rank-1.json").read_bytes()
    with pytest.raises(SystemExit):
        syn.main([str(tmp_path / "plain"), "--no-pp-annotations"])
