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
from typing import Any

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


def _pinned(out: Path, fixed: bool, model: nn.Module, rows: int) -> None:
    """``rows`` x 2048 fp32 batches copied to the GPU from pageable memory ahead of
    ``model``'s training step; fixed: pinned, non-blocking."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    host = [torch.randn(rows, 2048) for _ in range(2)]
    if fixed:
        host = [h.pin_memory() for h in host]
    y = torch.randint(0, 10, (rows,), device="cuda")

    def step(i: int) -> None:
        xb = host[i % 2].to("cuda", non_blocking=fixed)
        loss = nn.functional.cross_entropy(model(xb), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _profiled(out, step)


def pinned_copy(out: Path, fixed: bool) -> None:
    """64 MB batches copied to the GPU from pageable memory; fixed: pinned, non-blocking."""
    model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)).cuda()
    _pinned(out, fixed, model, 8192)


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
    _loader_training(out, model, DataLoader(Slow(), batch_size=64,
                                            num_workers=4 if fixed else 0, pin_memory=True))


def _loader_training(out: Path, model: nn.Module, loader: Any) -> None:
    """A classifier's training step on each batch of ``loader``, its workers started (and
    its first batch taken) before the profiled steps."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    it = iter(loader)
    next(it)

    def step(i: int) -> None:
        xb, yb = next(it)
        loss = nn.functional.cross_entropy(model(xb.cuda(non_blocking=True)),
                                           yb.cuda(non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _profiled(out, step)


def _classifier_training(out: Path, model: nn.Module, x: torch.Tensor,
                         autocast: torch.dtype | None = None,
                         after: Callable[[], None] | None = None) -> None:
    """A classifier's training step on ``x`` (10 classes), under autocast to ``autocast``
    (None: fp32), then ``after()`` when given."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    y = torch.randint(0, 10, (x.shape[0],), device="cuda")

    def step(i: int) -> None:
        with torch.autocast("cuda", dtype=autocast or torch.float32,
                            enabled=autocast is not None):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if after is not None:
            after()
    _profiled(out, step)


def _gemm_training(out: Path, autocast: torch.dtype | None, tf32: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    _classifier_training(out, _mlp(4096, 4), torch.randn(2048, 4096, device="cuda"), autocast)


def bf16_autocast(out: Path, fixed: bool) -> None:
    """fp32 GEMM training; fixed: bf16 autocast."""
    _gemm_training(out, torch.bfloat16 if fixed else None, tf32=False)


def tf32_matmul(out: Path, fixed: bool) -> None:
    """fp32 GEMM training; fixed: TF32 matmuls."""
    _gemm_training(out, None, tf32=fixed)


def captured(model: nn.Module, x: torch.Tensor) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """``model(x)`` captured as a CUDA graph after three warm-up calls on a side stream,
    with its static output."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        static_out = model(x)
    return graph, static_out


def _graphed_inference(out: Path, fixed: bool, model: nn.Module, x: torch.Tensor,
                       calls: int) -> None:
    """``calls`` eager inference calls of ``model`` on ``x`` a step, then a synchronize;
    fixed: each call a replay of the CUDA graph captured from it."""
    graph, static_out = captured(model, x) if fixed else (None, None)

    def step(i: int) -> None:
        with torch.no_grad():
            for _ in range(calls):
                if graph is not None:
                    graph.replay()
                else:
                    model(x)
        torch.cuda.synchronize()
    _profiled(out, step)
    del static_out


def cuda_graph(out: Path, fixed: bool) -> None:
    """Batch-8 inference of a 24-layer narrow MLP, eager; fixed: replayed as a CUDA graph."""
    model = nn.Sequential(*[m for _ in range(24) for m in (nn.Linear(256, 256), nn.ReLU())])
    _graphed_inference(out, fixed, model.cuda().eval(), torch.randn(8, 256, device="cuda"), 20)


def fused_adamw(out: Path, fixed: bool) -> None:
    """AdamW over many small parameters, one kernel per tensor; fixed: fused AdamW."""
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(64)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False, fused=fixed or None)
    _optimizer_training(out, model, opt, torch.randn(64, 256, device="cuda"))


def _optimizer_training(out: Path, model: nn.Module, opt: torch.optim.Optimizer,
                        x: torch.Tensor) -> None:
    """Profiled steps of ``model`` on ``x`` (forward, backward, ``opt``'s step)."""

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


def cpu_metric(out: Path, fixed: bool) -> None:
    """Training that copies each step's predictions to the host (``.cpu()``) for a metric;
    fixed: the metric is counted on the GPU."""
    model = _mlp(2048, 3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(1024, 2048, device="cuda")
    y = torch.randint(0, 10, (1024,), device="cuda")
    correct = torch.zeros((), device="cuda")

    def step(i: int) -> None:
        nonlocal correct
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if fixed:
            correct = correct + (logits.argmax(1) == y).sum()
        else:
            pred = logits.argmax(1).cpu()
            _ = int((pred == y.cpu()).sum())
        opt.step()
    _profiled(out, step)


def nonzero_mask(out: Path, fixed: bool) -> None:
    """A loss over the positive activations picked by boolean indexing (``h[h > 0]``: a
    data-dependent size, so a sync in ``aten::nonzero``); fixed: ``torch.where``."""
    model = _mlp(2048, 3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(1024, 2048, device="cuda")

    def step(i: int) -> None:
        h = model[:-1](x)
        if fixed:
            loss = torch.where(h > 0, h, torch.zeros_like(h)).pow(2).sum() / h.numel()
        else:
            loss = h[h > 0].pow(2).sum() / h.numel()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _profiled(out, step)


def explicit_sync(out: Path, fixed: bool) -> None:
    """A training step that ends with ``torch.cuda.synchronize()`` and host-side logging;
    fixed: no synchronize."""
    def after() -> None:
        if not fixed:
            torch.cuda.synchronize()
        time.sleep(0.003)  # host-side logging
    _classifier_training(out, _mlp(2048, 4), torch.randn(1024, 2048, device="cuda"),
                         after=after)


def empty_cache(out: Path, fixed: bool) -> None:
    """A step that frees the allocator's cache (``torch.cuda.empty_cache()``) each time;
    fixed: the cache is kept."""
    _classifier_training(out, _mlp(4096, 2), torch.randn(2048, 4096, device="cuda"),
                         after=None if fixed else torch.cuda.empty_cache)


def pinned_small(out: Path, fixed: bool) -> None:
    """16 MB batches from pageable memory ahead of a heavier model; fixed: pinned,
    non-blocking."""
    _pinned(out, fixed, _mlp(2048, 6), 2048)


def loader_workers2(out: Path, fixed: bool) -> None:
    """A DataLoader decoding sequences on the CPU, 0 workers; fixed: 2 workers."""
    import numpy as np
    from torch.utils.data import DataLoader, Dataset

    class Seq(Dataset):
        def __len__(self) -> int:
            return 100_000

        def __getitem__(self, i: int):  # noqa: ANN204
            rng = np.random.default_rng(i)
            a = rng.standard_normal((128, 256)).astype(np.float32)
            a = np.cumsum(np.sort(a, axis=1), axis=0) / 128.0  # CPU work
            return torch.from_numpy(a.astype(np.float32)), i % 10

    model = nn.Sequential(nn.Flatten(), nn.Linear(128 * 256, 1024), nn.GELU(),
                          nn.Linear(1024, 10)).cuda()
    _loader_training(out, model, DataLoader(Seq(), batch_size=32,
                                            num_workers=2 if fixed else 0, pin_memory=True))


def _conv_training(out: Path, autocast: torch.dtype | None, tf32: bool) -> None:
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    layers: list[nn.Module] = [nn.Conv2d(3, 128, 3, padding=1), nn.ReLU()]
    for _ in range(4):
        layers += [nn.Conv2d(128, 128, 3, padding=1), nn.ReLU()]
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(128, 10)).cuda()
    _classifier_training(out, model, torch.randn(64, 3, 64, 64, device="cuda"), autocast)


def fp16_conv(out: Path, fixed: bool) -> None:
    """fp32 convolution training (TF32 off); fixed: fp16 autocast."""
    _conv_training(out, torch.float16 if fixed else None, tf32=False)


def tf32_conv(out: Path, fixed: bool) -> None:
    """fp32 convolution training (TF32 off); fixed: TF32 on."""
    _conv_training(out, None, tf32=fixed)


def bf16_transformer(out: Path, fixed: bool) -> None:
    """fp32 training of a transformer encoder (TF32 off); fixed: bf16 autocast."""
    torch.backends.cuda.matmul.allow_tf32 = False
    layer = nn.TransformerEncoderLayer(512, 8, dim_feedforward=2048, batch_first=True,
                                       dropout=0.0)
    model = nn.TransformerEncoder(layer, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(16, 256, 512, device="cuda")

    def step(i: int) -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=fixed):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _profiled(out, step)


def fused_sgd(out: Path, fixed: bool) -> None:
    """SGD with momentum over many small parameters, one kernel per tensor; fixed: fused
    SGD."""
    model = nn.Sequential(*[m for _ in range(48) for m in (nn.Linear(128, 128),
                                                           nn.LayerNorm(128))]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=False,
                          fused=fixed or None)
    _optimizer_training(out, model, opt, torch.randn(64, 128, device="cuda"))


def cuda_graph_block(out: Path, fixed: bool) -> None:
    """Batch-1 inference of two transformer layers, eager; fixed: a CUDA graph."""
    layer = nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, batch_first=True,
                                       dropout=0.0)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).cuda().eval()
    _graphed_inference(out, fixed, model, torch.randn(1, 32, 256, device="cuda"), 10)


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
    Pair("cpu_metric", "no-sync:aten::to", "metric counted on the GPU, no .cpu() per step",
         cpu_metric),
    Pair("nonzero_mask", "no-sync:aten::index", "torch.where instead of h[h > 0]",
         nonzero_mask, holdout=True),
    Pair("explicit_sync", "no-sync:cudaDeviceSynchronize",
         "no torch.cuda.synchronize() per step", explicit_sync),
    Pair("empty_cache", "no-sync:cudaFree", "no torch.cuda.empty_cache() per step",
         empty_cache),
    Pair("pinned_small", "pinned-copies", "pinned host batches, non_blocking copies",
         pinned_small),
    Pair("loader_workers2", "workers:2", "DataLoader(num_workers=2)", loader_workers2,
         holdout=True),
    Pair("fp16_conv", "dtype:fp16", "torch.autocast(dtype=torch.float16)", fp16_conv,
         holdout=True),
    Pair("tf32_conv", "dtype:tf32", "torch.backends.cudnn.allow_tf32 = True", tf32_conv),
    Pair("bf16_transformer", "dtype:bf16", "torch.autocast(dtype=torch.bfloat16)",
         bf16_transformer),
    Pair("fused_sgd", "fused-optimizer", "SGD(fused=True)", fused_sgd),
    Pair("cuda_graph_block", "cuda-graphs", "torch.cuda.graph capture and replay",
         cuda_graph_block),
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
