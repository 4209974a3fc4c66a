#!/usr/bin/env python
"""Collect small real CUDA traces of workloads whose main cause is known by construction.

Each workload runs in a fresh Python process (so the CUDA context, lazy module loading
and the first cuBLAS call are really paid inside the first profiled iteration where the
workload says so) and writes one gzipped Kineto trace::

    <out>/<workload>/rank-0.pt.trace.json.gz

The workloads and the cause each one is built to show:

``warmup_nosched``
    A small transformer's training loop profiled from its very first iteration with a
    plain ``with profile():`` and no ``ProfilerStep``: one-time costs (context creation,
    first cuBLAS/cuDNN call, allocator growth) then a repeating iteration.
``gpu_bound_steps``
    A larger transformer in bf16 autocast with ``schedule(wait=1, warmup=2, active=4)``
    and ``prof.step()``: the GPU is busy, kernels are long.
``host_bound_steps``
    Batch-1 eager inference of a deep, narrow MLP with Python work between layers:
    many tiny kernels, the GPU waits on the host.
``sync_steps``
    A training loop that calls ``loss.item()`` and a host-side metric per step: a
    device synchronisation each iteration.
``dataloader_steps``
    A training loop whose batches come from a ``DataLoader`` with a slow CPU transform
    and ``num_workers=0``: the GPU waits for data.
``pageable_copy_steps``
    Batches copied host to device from pageable memory each step: blocking copies.
``cuda_graph_steps``
    The same step replayed as a CUDA graph (``torch.cuda.graph``): one launch for many
    kernels.

Run on a machine with a GPU::

    python scripts/collect_cuda_workloads.py --out /tmp/cuda_workloads

``compile_nosched``
    A ``torch.compile``-d MLP profiled from its first call, no schedule: compilation
    (``Torch-Compiled Region``, dynamo and inductor frames) happens once, inside the
    window.

``--holdout`` runs four more, kept apart to judge the findings on last (a ResNet-style
net with AMP, cuDNN benchmark and two loader workers from its first iteration; GPT
decoding token by token; a compiled MLP recompiled when the batch changes mid-profile;
a side-stream copy joined by events with ``empty_cache`` each step). ``--only NAME``
(repeatable) runs a subset. A workload that fails is reported and the
others still run; the exit status is 1 when any failed, 2 without CUDA.

``--pairs`` collects before/after pairs instead (``scripts/cuda_pairs.py``: one workload,
one fix, and the workload again with no change), for ``benchmarks/bench_predict.py``::

    python scripts/collect_cuda_workloads.py --pairs --out sample_traces/pairs_h100
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

WORKLOADS = (
    "warmup_nosched",
    "gpu_bound_steps",
    "host_bound_steps",
    "sync_steps",
    "dataloader_steps",
    "pageable_copy_steps",
    "cuda_graph_steps",
    "compile_nosched",
)


def _trace_file(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    return out / "rank-0.pt.trace.json.gz"


def _profiler(
    out: Path, *, steps: bool, with_stack: bool = False
) -> tuple[profile, Callable[[profile], None] | None]:
    """A ``torch.profiler.profile`` writing ``out``'s trace, with or without a schedule."""
    path = _trace_file(out)

    def _export(prof: profile) -> None:
        prof.export_chrome_trace(str(path))

    kwargs: dict = dict(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        record_shapes=True,
        with_stack=with_stack,
    )
    if steps:
        kwargs["schedule"] = schedule(wait=1, warmup=2, active=4)
        kwargs["on_trace_ready"] = _export
        return profile(**kwargs), None
    return profile(**kwargs), _export


def _transformer(d_model: int, layers: int, heads: int) -> nn.Module:
    """An encoder-only transformer on the GPU."""

    layer = nn.TransformerEncoderLayer(
        d_model, heads, dim_feedforward=4 * d_model, batch_first=True, dropout=0.0
    )
    return nn.TransformerEncoder(layer, layers).cuda()


def warmup_nosched(out: Path) -> None:
    """First iterations of a small transformer, no schedule and no ProfilerStep."""
    model = _transformer(256, 4, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    prof, export = _profiler(out, steps=False)
    with prof:
        for _ in range(12):
            x = torch.randn(16, 128, 256, device="cuda")
            loss = model(x).float().pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
    export(prof)


def gpu_bound_steps(out: Path) -> None:
    """A transformer large enough that the GPU is busy, bf16 autocast, ProfilerSteps."""
    model = _transformer(1024, 6, 16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(32, 512, 1024, device="cuda")
    for _ in range(3):  # warm up outside the profiler
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    prof, _ = _profiler(out, steps=True)
    with prof:
        for _ in range(7):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
        torch.cuda.synchronize()


def host_bound_steps(out: Path) -> None:
    """Batch-1 eager inference of a deep narrow MLP with Python work between layers."""

    layers = [nn.Linear(128, 128).cuda() for _ in range(48)]
    x0 = torch.randn(1, 128, device="cuda")
    with torch.no_grad():
        for lin in layers:  # warm up
            x0 = torch.relu(lin(x0))
    torch.cuda.synchronize()
    prof, _ = _profiler(out, steps=True, with_stack=True)
    with prof, torch.no_grad():
        for _ in range(7):
            x = torch.randn(1, 128, device="cuda")
            for i, lin in enumerate(layers):
                x = torch.relu(lin(x))
                if i % 4 == 0:
                    x = x * 0.5 + 0.1
                _ = sum(j * j for j in range(300))  # Python work on the host
            prof.step()
        torch.cuda.synchronize()


def sync_steps(out: Path) -> None:
    """Training that reads the loss on the host each step (a device sync)."""

    model = nn.Sequential(
        nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 10)
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(512, 1024, device="cuda")
    y = torch.randint(0, 10, (512,), device="cuda")
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(3):
        loss_fn(model(x), y).backward()
    torch.cuda.synchronize()
    history = []
    prof, _ = _profiler(out, steps=True)
    with prof:
        for _ in range(7):
            out_ = model(x)
            loss = loss_fn(out_, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            history.append(loss.item())  # blocks until the step's kernels finish
            acc = (out_.argmax(1) == y).float().mean().item()
            history.append(acc)
            time.sleep(0.002)  # host-side logging
            prof.step()


def dataloader_steps(out: Path) -> None:
    """Training fed by a DataLoader with a slow CPU transform and no worker processes."""
    import numpy as np
    from torch.utils.data import DataLoader, Dataset

    class SlowDataset(Dataset):
        def __len__(self) -> int:
            return 10_000

        def __getitem__(self, i: int):  # noqa: ANN204
            a = np.random.default_rng(i).standard_normal((3, 64, 64)).astype(np.float32)
            a = np.fft.ifft2(np.fft.fft2(a)).real.astype(np.float32)  # CPU work
            return torch.from_numpy(a), i % 10

    model = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(SlowDataset(), batch_size=64, num_workers=0, pin_memory=True)
    it = iter(loader)
    prof, _ = _profiler(out, steps=True)
    with prof:
        for _ in range(7):
            xb, yb = next(it)
            xb = xb.cuda(non_blocking=True)
            yb = yb.cuda(non_blocking=True)
            loss = loss_fn(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
        torch.cuda.synchronize()


def pageable_copy_steps(out: Path) -> None:
    """Large batches copied host to device from pageable memory every step."""

    model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    host_batches = [torch.randn(8192, 2048) for _ in range(2)]  # pageable host memory
    y = torch.randint(0, 10, (8192,), device="cuda")
    loss_fn = nn.CrossEntropyLoss()
    prof, _ = _profiler(out, steps=True)
    with prof:
        for i in range(7):
            xb = host_batches[i % 2].to("cuda")
            loss = loss_fn(model(xb), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
        torch.cuda.synchronize()


def cuda_graph_steps(out: Path) -> None:
    """A forward pass captured once as a CUDA graph and replayed each step."""

    model = nn.Sequential(*[m for _ in range(16) for m in (nn.Linear(256, 256), nn.ReLU())]).cuda()
    static_x = torch.randn(8, 256, device="cuda")
    from cuda_pairs import captured  # this folder is on sys.path when run as a script

    graph, static_y = captured(model, static_x)
    prof, _ = _profiler(out, steps=True)
    with prof:
        for _ in range(7):
            static_x.copy_(torch.randn(8, 256, device="cuda"))
            graph.replay()
            _ = static_y.sum()
            prof.step()
        torch.cuda.synchronize()


def compile_nosched(out: Path) -> None:
    """A compiled MLP's first calls, compilation included, no schedule."""

    model = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)).cuda()
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    prof, export = _profiler(out, steps=False)
    with prof:
        for _ in range(10):
            x = torch.randn(256, 512, device="cuda")
            loss = compiled(x).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
    export(prof)


def resnet_amp_nosched(out: Path) -> None:
    """ResNet-style conv net, AMP and channels_last, cuDNN benchmark on, a DataLoader with
    two workers, profiled from its first iteration without a schedule."""
    from torch.utils.data import DataLoader, TensorDataset

    torch.backends.cudnn.benchmark = True
    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, stride=2, padding=3),
        nn.BatchNorm2d(64),
        nn.ReLU(),
    ]
    for _ in range(6):
        layers += [nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU()]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 100)]
    model = nn.Sequential(*layers).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler()
    data = TensorDataset(torch.randn(1024, 3, 112, 112), torch.randint(0, 100, (1024,)))
    loader = DataLoader(data, batch_size=64, num_workers=2, pin_memory=True)
    prof, export = _profiler(out, steps=False)
    with prof:
        for i, (xb, yb) in enumerate(loader):
            if i == 10:
                break
            xb = xb.cuda(non_blocking=True).to(memory_format=torch.channels_last)
            yb = yb.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        torch.cuda.synchronize()
    assert export is not None
    export(prof)


def gpt_decode_steps(out: Path) -> None:
    """Token-by-token greedy decoding of a small GPT (random weights, KV cache), one
    ProfilerStep per generated token."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=8192)
    model = GPT2LMHeadModel(cfg).cuda().eval().half()
    ids = torch.randint(0, 8192, (4, 64), device="cuda")
    with torch.no_grad():
        for _ in range(2):
            model(ids)
    torch.cuda.synchronize()
    prof, _ = _profiler(out, steps=True)
    with prof, torch.no_grad():
        outs = model(ids, use_cache=True)
        past = outs.past_key_values
        tok = outs.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(7):
            outs = model(tok, past_key_values=past, use_cache=True)
            past = outs.past_key_values
            tok = outs.logits[:, -1].argmax(-1, keepdim=True)
            prof.step()
        torch.cuda.synchronize()


def recompile_steps(out: Path) -> None:
    """A compiled MLP whose batch size changes at the fifth step (a recompilation in
    the middle of the profiled steps)."""
    model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).cuda()
    compiled = torch.compile(model, dynamic=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(3):
        compiled(torch.randn(512, 1024, device="cuda")).sum().backward()
    torch.cuda.synchronize()
    prof, _ = _profiler(out, steps=True)
    with prof:
        for k in range(7):
            batch = 512 if k < 4 else 384
            loss = compiled(torch.randn(batch, 1024, device="cuda")).float().pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
        torch.cuda.synchronize()


def side_stream_steps(out: Path) -> None:
    """Compute on the default stream while the next batch is copied on a side stream,
    joined with events; a memory-hungry step that frees the cache each step."""
    model = nn.Sequential(nn.Linear(2048, 8192), nn.ReLU(), nn.Linear(8192, 2048)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    copy_stream = torch.cuda.Stream()
    host = [torch.randn(4096, 2048).pin_memory() for _ in range(2)]
    nxt = host[0].cuda()
    prof, _ = _profiler(out, steps=True)
    with prof:
        for k in range(7):
            cur = nxt
            with torch.cuda.stream(copy_stream):
                nxt = host[(k + 1) % 2].cuda(non_blocking=True)
            ready = torch.cuda.Event()
            ready.record(copy_stream)
            loss = model(cur).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            torch.cuda.current_stream().wait_event(ready)
            del cur
            torch.cuda.empty_cache()
            prof.step()
        torch.cuda.synchronize()


HOLDOUT = ("resnet_amp_nosched", "gpt_decode_steps", "recompile_steps", "side_stream_steps")

RUNNERS: dict[str, Callable[[Path], None]] = {
    "warmup_nosched": warmup_nosched,
    "gpu_bound_steps": gpu_bound_steps,
    "host_bound_steps": host_bound_steps,
    "sync_steps": sync_steps,
    "dataloader_steps": dataloader_steps,
    "pageable_copy_steps": pageable_copy_steps,
    "cuda_graph_steps": cuda_graph_steps,
    "compile_nosched": compile_nosched,
    "resnet_amp_nosched": resnet_amp_nosched,
    "gpt_decode_steps": gpt_decode_steps,
    "recompile_steps": recompile_steps,
    "side_stream_steps": side_stream_steps,
}


def main(argv: list[str] | None = None) -> int:
    """Run each chosen workload in its own process (or one, with ``--child``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("/tmp/cuda_workloads"))
    p.add_argument("--only", action="append", choices=(*WORKLOADS, *HOLDOUT))
    p.add_argument(
        "--holdout",
        action="store_true",
        help="run the workloads kept apart to judge the findings on last",
    )
    p.add_argument("--child", choices=(*WORKLOADS, *HOLDOUT), help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=240.0, help="seconds per workload")
    p.add_argument("--pairs", action="store_true",
                   help="collect before/after pairs instead (scripts/cuda_pairs.py): each "
                        "workload as it is, with its fix, and again as it is")
    p.add_argument("--pair-child", nargs=3, metavar=("PAIR", "RUN", "FIXED"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        RUNNERS[args.child](args.out / args.child)
        return 0
    if args.pair_child:
        from cuda_pairs import BY_NAME

        name, run, fixed = args.pair_child
        BY_NAME[name].run(args.out / name / run, fixed == "1")
        return 0

    if not torch.cuda.is_available():
        print("error: CUDA is not available; this script needs a GPU.", file=sys.stderr)
        return 2
    if args.pairs:
        return _collect_pairs(args.out, args.timeout)
    failed = []
    for name in args.only or (HOLDOUT if args.holdout else WORKLOADS):
        start = time.perf_counter()
        cmd = [sys.executable, __file__, "--out", str(args.out), "--child", name]
        try:
            rc = subprocess.run(cmd, timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = -1
        took = time.perf_counter() - start
        path = args.out / name / "rank-0.pt.trace.json.gz"
        size = path.stat().st_size if path.exists() else 0
        print(f"{name}: rc={rc} {took:.1f} s {size} bytes", flush=True)
        if rc != 0 or not size:
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


def _collect_pairs(out: Path, timeout: float) -> int:
    """Every pair of ``cuda_pairs.PAIRS``: three fresh processes each (before, after,
    again)."""
    from cuda_pairs import PAIRS, RUNS, write_manifest

    failed = []
    for pair in PAIRS:
        write_manifest(out, pair)
        for run, fixed in RUNS:
            start = time.perf_counter()
            cmd = [sys.executable, __file__, "--out", str(out), "--pair-child", pair.name,
                   run, "1" if fixed else "0"]
            try:
                rc = subprocess.run(cmd, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                rc = -1
            path = out / pair.name / run / "rank-0.pt.trace.json.gz"
            size = path.stat().st_size if path.exists() else 0
            print(f"{pair.name}/{run}: rc={rc} {time.perf_counter() - start:.1f} s "
                  f"{size} bytes", flush=True)
            if rc != 0 or not size:
                failed.append(f"{pair.name}/{run}")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
