"""Before/after pairs: one workload, one change, both traces real (``collect_cuda_workloads.py
--pairs``).

Each pair is one workload written twice, as it is (``before``) and with the fix its
finding's advice gives (``after``), plus a second run of ``before`` with no change
(``again``: the run-to-run noise), each in a fresh process. A pair's folder::

    <out>/<pair>/before/rank-0.pt.trace.json.gz
    <out>/<pair>/after/rank-0.pt.trace.json.gz
    <out>/<pair>/again/rank-0.pt.trace.json.gz
    <out>/<pair>/pair.json      {"change": ..., "fix": ..., "holdout": ...}

``change`` is the what-if change that models the fix ("" where the replay has none: the
pair still measures what the fix did). ``benchmarks/bench_predict.py`` reads them. A
quarter of the pairs are marked ``holdout``: judged only after the changes are tuned on
the others.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

STEPS = 6  # profiled steps (after wait=1, warmup=2)


@dataclass(frozen=True)
class Pair:
    """A workload and its fix: ``run(out, fixed)`` writes one trace."""

    name: str
    change: str
    fix: str
    run: Callable[[Path, bool], None]
    holdout: bool = False


def _profiled(out: Path, step: Callable[[int], None], iterations: int = 3 + STEPS) -> None:
    """Run ``step`` under the profiler (wait=1, warmup=2, active=STEPS), one ProfilerStep
    each, and write ``out/rank-0.pt.trace.json.gz``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "rank-0.pt.trace.json.gz"
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                   record_shapes=True,
                   schedule=schedule(wait=1, warmup=2, active=STEPS),
                   on_trace_ready=lambda p: p.export_chrome_trace(str(path)))
    with prof:
        for i in range(iterations):
            step(i)
            prof.step()
        torch.cuda.synchronize()


def _mlp(width: int = 2048, depth: int = 4) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, 10)).cuda()


def sync_item(out: Path, fixed: bool) -> None:
    """Training that reads the loss with ``.item()`` every step; fixed: kept on the GPU."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(512, 2048, device="cuda")
    y = torch.randint(0, 10, (512,), device="cuda")
    total = torch.zeros((), device="cuda")

    def step(i: int) -> None:
        nonlocal total
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if fixed:
            total = total + loss.detach()
        else:
            _ = loss.item()
        time.sleep(0.002)  # host-side logging
        opt.step()
    _profiled(out, step)


def pinned_copy(out: Path, fixed: bool) -> None:
    """64 MB batches copied to the GPU from pageable memory; fixed: pinned, non-blocking."""
    model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    host = [torch.randn(8192, 2048) for _ in range(2)]
    if fixed:
        host = [h.pin_memory() for h in host]
    y = torch.randint(0, 10, (8192,), device="cuda")

    def step(i: int) -> None:
        xb = host[i % 2].to("cuda", non_blocking=fixed)
        loss = nn.functional.cross_entropy(model(xb), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _profiled(out, step)


def loader_workers(out: Path, fixed: bool) -> None:
    """A DataLoader with a slow CPU transform, 0 workers; fixed: 4 workers."""
    import numpy as np
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self) -> int:
            return 100_000

        def __getitem__(self, i: int):  # noqa: ANN204
            a = np.random.default_rng(i).standard_normal((3, 64, 64)).astype(np.float32)
            return torch.from_numpy(np.fft.ifft2(np.fft.fft2(a)).real.astype(np.float32)), i % 10

    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(64, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    it = iter(DataLoader(Slow(), batch_size=64, num_workers=4 if fixed else 0,
                         pin_memory=True))
    next(it)  # workers started before the profiled steps

    def step(i: int) -> None:
        xb, yb = next(it)
        loss = nn.functional.cross_entropy(model(xb.cuda(non_blocking=True)),
                                           yb.cuda(non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _profiled(out, step)


def _gemm_training(out: Path, autocast: torch.dtype | None, tf32: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    model = _mlp(4096, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(2048, 4096, device="cuda")
    y = torch.randint(0, 10, (2048,), device="cuda")

    def step(i: int) -> None:
        with torch.autocast("cuda", dtype=autocast or torch.float32,
                            enabled=autocast is not None):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _profiled(out, step)


def bf16_autocast(out: Path, fixed: bool) -> None:
    """fp32 GEMM training; fixed: bf16 autocast."""
    _gemm_training(out, torch.bfloat16 if fixed else None, tf32=False)


def tf32_matmul(out: Path, fixed: bool) -> None:
    """fp32 GEMM training; fixed: TF32 matmuls."""
    _gemm_training(out, None, tf32=fixed)


def cuda_graph(out: Path, fixed: bool) -> None:
    """Batch-8 inference of a 24-layer narrow MLP, eager; fixed: replayed as a CUDA graph."""
    model = nn.Sequential(*[m for _ in range(24) for m in (nn.Linear(256, 256), nn.ReLU())])
    model = model.cuda().eval()
    x = torch.randn(8, 256, device="cuda")
    graph, static_out = None, None
    if fixed:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s), torch.no_grad():
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), torch.no_grad():
            static_out = model(x)

    def step(i: int) -> None:
        with torch.no_grad():
            for _ in range(20):
                if graph is not None:
                    graph.replay()
                else:
                    model(x)
        torch.cuda.synchronize()
    _profiled(out, step)
    del static_out


def fused_adamw(out: Path, fixed: bool) -> None:
    """AdamW over many small parameters, one kernel per tensor; fixed: fused AdamW."""
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(64)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False, fused=fixed or None)
    x = torch.randn(64, 256, device="cuda")

    def step(i: int) -> None:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    _profiled(out, step)


def compiled(out: Path, fixed: bool) -> None:
    """An eager MLP with elementwise tails; fixed: torch.compile (warmed up first)."""
    model = _mlp(1024, 6)
    fn = torch.compile(model) if fixed else model
    x = torch.randn(256, 1024, device="cuda")
    for _ in range(3):
        fn(x).sum().backward()
    torch.cuda.synchronize()

    def step(i: int) -> None:
        fn(x).sum().backward()
    _profiled(out, step)


PAIRS = (
    Pair("sync_item", "no-sync:aten::item", "loss kept on the GPU, no .item() per step",
         sync_item),
    Pair("pinned_copy", "pinned-copies", "pinned host batches, non_blocking copies",
         pinned_copy),
    Pair("loader_workers", "workers:4", "DataLoader(num_workers=4)", loader_workers),
    Pair("bf16_autocast", "dtype:bf16", "torch.autocast(dtype=torch.bfloat16)",
         bf16_autocast),
    Pair("tf32_matmul", "dtype:tf32", "torch.backends.cuda.matmul.allow_tf32 = True",
         tf32_matmul, holdout=True),
    Pair("cuda_graph", "cuda-graphs", "torch.cuda.graph capture and replay", cuda_graph),
    Pair("fused_adamw", "fused-optimizer", "AdamW(fused=True)", fused_adamw, holdout=True),
    Pair("compiled", "", "torch.compile", compiled),
)
BY_NAME = {p.name: p for p in PAIRS}
#: The three runs of a pair and whether each has the fix.
RUNS = (("before", False), ("after", True), ("again", False))


def write_manifest(out: Path, pair: Pair) -> None:
    """``<out>/<pair>/pair.json``."""
    folder = out / pair.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pair.json").write_text(json.dumps(
        {"change": pair.change, "fix": pair.fix, "holdout": pair.holdout}, indent=1) + "\n")
