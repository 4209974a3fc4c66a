#!/usr/bin/env python
"""Collect a small, real CPU-only PyTorch profiler (Kineto) trace of a tiny training loop.

The script trains a tiny MLP on random data with SGD for a handful of steps under
``torch.profiler.profile`` (CPU activity only, ``record_shapes``, ``profile_memory`` and,
by default, ``with_stack`` enabled) and a ``wait=1, warmup=1, active=3`` schedule. The
trace of the active steps is written as gzipped Chrome-trace JSON, one file per rank::

    <out>/rank-0.pt.trace.json.gz
    <out>/rank-1.pt.trace.json.gz
    ...

With ``--ranks N`` (N > 1) the loop runs in N independent processes (spawned, no
distributed backend), so the traces carry no ``distributedInfo``; the rank is encoded in
the file name only. Inputs, weights and file names are deterministic (fixed seeds, fixed
names); timestamps, pids/tids and durations naturally are not.

Example::

    python scripts/collect_cpu_trace.py --out sample_traces/cpu_training
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
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
    threads: int
    with_stack: bool
    handler: str


def build_model(cfg: Config) -> nn.Module:
    """Return the tiny MLP that is trained."""
    return nn.Sequential(
        nn.Linear(cfg.in_features, cfg.hidden),
        nn.ReLU(),
        nn.Linear(cfg.hidden, cfg.classes),
    )


def trace_path(out_dir: Path, rank: int) -> Path:
    """Path of the gzipped trace written for ``rank`` with the default handler."""
    return out_dir / f"rank-{rank}.pt.trace.json.gz"


def make_trace_handler(out_dir: Path, handler: str, rank: int) -> Callable[[profile], None]:
    """Return the ``on_trace_ready`` callback for ``rank``.

    ``export`` (default) writes ``rank-<r>.pt.trace.json.gz`` (a stable name);
    ``tensorboard`` uses ``torch.profiler.tensorboard_trace_handler``, whose file names
    are ``rank-<r>.<time_ns>.pt.trace.json.gz`` (a new name on every run).
    """
    if handler == "tensorboard":
        return torch.profiler.tensorboard_trace_handler(
            str(out_dir), worker_name=f"rank-{rank}", use_gzip=True
        )

    def _export(prof: profile) -> None:
        # export_chrome_trace gzips the output when the path ends with ".gz".
        prof.export_chrome_trace(str(trace_path(out_dir, rank)))

    return _export


def train_and_profile(rank: int, cfg: Config) -> None:
    """Run the profiled training loop for one rank and write its trace."""
    torch.manual_seed(cfg.seed + rank)
    torch.set_num_threads(cfg.threads)
    model = build_model(cfg)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(cfg.seed + 1000 + rank)

    total_steps = WAIT_STEPS + WARMUP_STEPS + ACTIVE_STEPS
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        with_stack=cfg.with_stack,
        schedule=schedule(wait=WAIT_STEPS, warmup=WARMUP_STEPS, active=ACTIVE_STEPS),
        on_trace_ready=make_trace_handler(cfg.out_dir, cfg.handler, rank),
    ) as prof:
        for _ in range(total_steps):
            with record_function("data"):
                x = torch.randn(cfg.batch_size, cfg.in_features, generator=gen)
                y = torch.randint(0, cfg.classes, (cfg.batch_size,), generator=gen)
            with record_function("forward"):
                loss = loss_fn(model(x), y)
            with record_function("backward"):
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
            with record_function("optimizer_step"):
                optimizer.step()
            prof.step()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("sample_traces/cpu_training"),
        help="output directory for the gzipped traces",
    )
    p.add_argument(
        "--ranks",
        type=int,
        default=1,
        help="number of independent profiled processes (files rank-0..rank-N-1)",
    )
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--in-features", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads per process (1 keeps traces small and stable)",
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
    args = p.parse_args(argv)
    if args.ranks < 1:
        p.error("--ranks must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point: collect one trace per rank and print the written files."""
    args = parse_args(argv)
    cfg = Config(
        out_dir=args.out,
        batch_size=args.batch_size,
        in_features=args.in_features,
        hidden=args.hidden,
        classes=args.classes,
        lr=args.lr,
        seed=args.seed,
        threads=args.threads,
        with_stack=args.with_stack,
        handler=args.handler,
    )
    cfg.out_dir.mkdir(parents=True, exist_ok=True)

    if args.ranks == 1:
        train_and_profile(0, cfg)
    else:
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=train_and_profile, args=(r, cfg)) for r in range(args.ranks)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        failed = [r for r, proc in enumerate(procs) if proc.exitcode != 0]
        if failed:
            print(f"error: rank process(es) {failed} failed", file=sys.stderr)
            return 1

    for path in sorted(cfg.out_dir.glob("rank-*.json.gz")):
        print(f"{path}  ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
