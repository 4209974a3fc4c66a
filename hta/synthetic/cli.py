"""``python -m hta.synthetic``: write a generated multi-rank job."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from hta.synthetic.catalog import (
    MIN_KERNELS_PER_STEP,
    events_per_rank_for,
    kernels_per_step_for_events,
)
from hta.synthetic.coupled import SHAPES, TRUTH_FILE, generate_coupled_job
from hta.synthetic.writer import generate_job

# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


DESCRIPTION = "Synthetic PyTorch-profiler (Kineto) traces with exact, by-construction ground truth."


def _parser() -> argparse.ArgumentParser:
    """The command line of :func:`main`."""
    p = argparse.ArgumentParser(prog="python -m hta.synthetic", description=DESCRIPTION)
    p.add_argument("out_dir", type=Path)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument(
        "--kernels-per-step",
        type=int,
        default=None,
        help=f"GPU activities per step (>= {MIN_KERNELS_PER_STEP}; default 40)",
    )
    p.add_argument(
        "--events-per-rank",
        type=int,
        default=None,
        help="pick --kernels-per-step to reach at least this many events per rank",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-gzip", action="store_true", help="write plain .json files")
    p.add_argument("--workers", type=int, default=1, help="write ranks in parallel processes")
    p.add_argument(
        "--absolute-time",
        action="store_true",
        help="absolute epoch-us timestamps instead of baseTimeNanoseconds-relative",
    )
    p.add_argument(
        "--shape",
        choices=SHAPES,
        default=None,
        help="write a coupled job of this shape instead (ranks that wait for each other, "
        "with truth/truth.json; see hta.synthetic.coupled)",
    )
    p.add_argument(
        "--micro-batches",
        type=int,
        default=4,
        help="micro-batches per step of the pipeline shapes (gpipe, 1f1b)",
    )
    p.add_argument(
        "--no-pp-annotations",
        action="store_true",
        help="with a pipeline --shape: leave out the PP:<stage><F|B><micro-batch> annotations",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hta.synthetic OUT_DIR [...]``: write a synthetic multi-rank job."""
    p = _parser()
    args = p.parse_args(argv)
    if args.shape is not None:
        return _coupled(p, args)
    if args.no_pp_annotations:
        p.error("--no-pp-annotations needs --shape")
    kps = 40 if args.kernels_per_step is None else args.kernels_per_step
    if args.events_per_rank is not None:
        kps = kernels_per_step_for_events(args.events_per_rank, args.steps)
    try:
        paths = generate_job(
            args.out_dir,
            ranks=args.ranks,
            steps=args.steps,
            kernels_per_step=kps,
            seed=args.seed,
            gzip=not args.no_gzip,
            relative_time=not args.absolute_time,
            workers=args.workers,
        )
    except ValueError as exc:
        p.error(str(exc))
    n = events_per_rank_for(args.steps, kps)
    for path in paths:
        print(f"{path}  {n} events  {path.stat().st_size} bytes")
    return 0


def _coupled(p: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--shape``: write a coupled job and its truth."""
    unused = [
        flag
        for flag, given in (
            ("--kernels-per-step", args.kernels_per_step is not None),
            ("--events-per-rank", args.events_per_rank is not None),
            ("--absolute-time", args.absolute_time),
        )
        if given
    ]
    if unused:
        p.error(f"{', '.join(unused)} cannot be combined with --shape")
    try:
        paths, _ = generate_coupled_job(
            args.out_dir,
            args.shape,
            ranks=args.ranks,
            steps=args.steps,
            micro_batches=args.micro_batches,
            seed=args.seed,
            gzip=not args.no_gzip,
            annotate=not args.no_pp_annotations,
        )
    except ValueError as exc:
        p.error(str(exc))
    for path in paths:
        print(f"{path}  {path.stat().st_size} bytes")
    print(f"{Path(args.out_dir) / TRUTH_FILE}  ground truth")
    return 0
