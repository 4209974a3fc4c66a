#!/usr/bin/env python
"""Collect real CUDA PyTorch profiler (Kineto) traces of a small training loop, one per rank.

The same tiny-MLP training loop as ``collect_cpu_trace.py`` runs on the GPU under
``torch.profiler.profile`` with CPU and CUDA activities (``record_shapes``,
``profile_memory`` and, by default, ``with_stack`` on) and a ``wait=1, warmup=1,
active=3`` schedule. Each rank writes a gzipped Chrome-trace JSON file::

    <out>/rank-<r>.pt.trace.json.gz

Single process (one GPU)::

    python scripts/collect_cuda_trace.py --out sample_traces/cuda_training

Several ranks (one GPU each) with NCCL all-reduce of the gradients; when ``WORLD_SIZE``
is set (as ``torchrun`` does) the script calls ``init_process_group("nccl")``, so the
traces carry ``distributedInfo`` and NCCL kernels::

    torchrun --nproc-per-node 2 scripts/collect_cuda_trace.py --out sample_traces/cuda_ddp

``--comm ddp`` (default) wraps the model in ``DistributedDataParallel`` (bucketed
all-reduce overlapped with backward); ``--comm allreduce`` issues one explicit
``all_reduce`` per gradient after ``backward()``. The script exits with status 2 and a
message when CUDA (or NCCL, for a distributed launch) is unavailable.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

# Run as a script, this folder is on sys.path: reuse the CPU script's trace handler.
from collect_cpu_trace import make_trace_handler  # noqa: E402
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WAIT_STEPS = 1
WARMUP_STEPS = 1
ACTIVE_STEPS = 3


@dataclass(frozen=True)
class Config:
    """Settings of one profiled training run (shared by all ranks)."""

    out_dir: Path
    batch_size: int
    in_features: int
    hidden: int
    classes: int
    lr: float
    seed: int
    with_stack: bool
    comm: str
    handler: str


@dataclass(frozen=True)
class DistContext:
    """Where this process runs: its rank, world size, device and whether a group exists."""

    rank: int
    world_size: int
    device: torch.device
    distributed: bool


def build_model(cfg: Config) -> nn.Module:
    """Return the small MLP that is trained."""
    return nn.Sequential(
        nn.Linear(cfg.in_features, cfg.hidden),
        nn.ReLU(),
        nn.Linear(cfg.hidden, cfg.hidden),
        nn.ReLU(),
        nn.Linear(cfg.hidden, cfg.classes),
    )


def setup(backend: str = "nccl") -> DistContext:
    """Initialise the process group when launched by torchrun and pick this rank's GPU."""
    if "WORLD_SIZE" not in os.environ:
        return DistContext(rank=0, world_size=1, device=torch.device("cuda", 0), distributed=False)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:  # only for smoke tests of the distributed logic on CPU
        device = torch.device("cpu")
    dist.init_process_group(backend)
    return DistContext(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        device=device,
        distributed=True,
    )


def allreduce_gradients(model: nn.Module, world_size: int) -> None:
    """Average the gradients over all ranks with one all-reduce per parameter."""
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            param.grad.div_(world_size)


def train_and_profile(
    cfg: Config,
    ctx: DistContext,
    activities: list[ProfilerActivity] | None = None,
) -> None:
    """Run the profiled training loop on ``ctx.device`` and write this rank's trace."""
    if activities is None:
        activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    torch.manual_seed(cfg.seed)  # identical initial weights on every rank
    model: nn.Module = build_model(cfg).to(ctx.device)
    use_ddp = ctx.distributed and cfg.comm == "ddp"
    if use_ddp:
        device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator(device=ctx.device).manual_seed(cfg.seed + 1000 + ctx.rank)

    total_steps = WAIT_STEPS + WARMUP_STEPS + ACTIVE_STEPS
    with profile(
        activities=activities,
        record_shapes=True,
        profile_memory=True,
        with_stack=cfg.with_stack,
        schedule=schedule(wait=WAIT_STEPS, warmup=WARMUP_STEPS, active=ACTIVE_STEPS),
        on_trace_ready=make_trace_handler(cfg.out_dir, cfg.handler, ctx.rank),
    ) as prof:
        for _ in range(total_steps):
            with record_function("data"):
                x = torch.randn(cfg.batch_size, cfg.in_features, generator=gen, device=ctx.device)
                y = torch.randint(
                    0, cfg.classes, (cfg.batch_size,), generator=gen, device=ctx.device
                )
            with record_function("forward"):
                loss = loss_fn(model(x), y)
            with record_function("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            if ctx.distributed and not use_ddp:
                with record_function("allreduce_grads"):
                    allreduce_gradients(model, ctx.world_size)
            with record_function("optimizer_step"):
                optimizer.step()
            prof.step()
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("sample_traces/cuda_training"),
        help="output directory for the gzipped traces (one rank-<r> file per rank)",
    )
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--in-features", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--comm",
        choices=("ddp", "allreduce"),
        default="ddp",
        help="gradient sync when launched with torchrun: DistributedDataParallel, or one "
        "explicit NCCL all_reduce per gradient after backward()",
    )
    p.add_argument(
        "--stack",
        dest="with_stack",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="profile with with_stack=True (python_function events); --no-stack is smaller",
    )
    p.add_argument(
        "--handler",
        choices=("export", "tensorboard"),
        default="export",
        help="export: stable names rank-<r>.pt.trace.json.gz; "
        "tensorboard: tensorboard_trace_handler names (rank-<r>.<time_ns>...)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point: check CUDA/NCCL, run the profiled loop, write this rank's trace."""
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "error: CUDA is not available (torch "
            f"{torch.__version__}, torch.version.cuda={torch.version.cuda}); this script "
            "needs a GPU. Use scripts/collect_cpu_trace.py for a CPU-only trace.",
            file=sys.stderr,
        )
        return 2
    if "WORLD_SIZE" in os.environ and not (dist.is_available() and dist.is_nccl_available()):
        print("error: WORLD_SIZE is set but this torch build has no NCCL support.", file=sys.stderr)
        return 2

    cfg = Config(
        out_dir=args.out,
        batch_size=args.batch_size,
        in_features=args.in_features,
        hidden=args.hidden,
        classes=args.classes,
        lr=args.lr,
        seed=args.seed,
        with_stack=args.with_stack,
        comm=args.comm,
        handler=args.handler,
    )
    ctx = setup("nccl")
    try:
        cfg.out_dir.mkdir(parents=True, exist_ok=True)
        train_and_profile(cfg, ctx)
        if ctx.distributed:
            dist.barrier()
    finally:
        if ctx.distributed:
            dist.destroy_process_group()

    if ctx.rank == 0:
        for path in sorted(cfg.out_dir.glob("rank-*.json.gz")):
            print(f"{path}  ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
