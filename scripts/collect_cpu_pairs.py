#!/usr/bin/env python
"""Collect real CPU before/after pairs for ``benchmarks/bench_predict.py``: one workload,
one fix, both traces written by ``torch.profiler`` (CPU activity), each run in a fresh
process.

``loader_workers``
    A small MLP trained on the CPU (one intra-op thread) from a ``DataLoader`` whose
    dataset runs an FFT per sample; ``num_workers=0`` before, ``num_workers=1`` after
    (the change ``workers:1``): the loading moves to a worker process on the other core
    while the main thread trains.

Each pair is written as ``<out>/<pair>/{before,after,again}/rank-0.pt.trace.json.gz`` and
``<out>/<pair>/pair.json`` (``again``: the workload as it is, a second time, for the
run-to-run noise), the layout of ``scripts/cuda_pairs.py``. Needs ``torch`` (CPU build)::

    python scripts/collect_cpu_pairs.py --out sample_traces/pairs_cpu
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

STEPS = 6
RUNS = (("before", False), ("after", True), ("again", False))
PAIRS = {"loader_workers": {"change": "workers:1", "fix": "DataLoader(num_workers=1)",
                            "holdout": False}}


def loader_workers(out: Path, fixed: bool) -> None:
    """The workload of the module docstring, profiled for ``STEPS`` steps."""
    import numpy as np
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)
    torch.manual_seed(0)

    class Slow(Dataset):
        def __len__(self) -> int:
            return 100_000

        def __getitem__(self, i: int):  # noqa: ANN204
            a = np.random.default_rng(i).standard_normal((64, 64)).astype(np.float32)
            for _ in range(3):
                a = np.fft.ifft2(np.fft.fft2(a)).real.astype(np.float32)
            return torch.from_numpy(a.reshape(-1)), i % 10

    model = nn.Sequential(nn.Linear(4096, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    it = iter(DataLoader(Slow(), batch_size=32, num_workers=1 if fixed else 0))
    next(it)  # the worker starts before the profiled steps
    out.mkdir(parents=True, exist_ok=True)
    path = out / "rank-0.pt.trace.json.gz"
    prof = profile(activities=[ProfilerActivity.CPU],
                   schedule=schedule(wait=1, warmup=2, active=STEPS),
                   on_trace_ready=lambda p: p.export_chrome_trace(str(path)))
    with prof:
        for _ in range(3 + STEPS):
            xb, yb = next(it)
            for _ in range(4):
                loss = nn.functional.cross_entropy(model(xb), yb)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            prof.step()


def main(argv: list[str] | None = None) -> int:
    """Run each pair's three processes (or one, with ``--child``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("/tmp/cpu_pairs"))
    p.add_argument("--child", nargs=3, metavar=("PAIR", "RUN", "FIXED"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        name, run, fixed = args.child
        {"loader_workers": loader_workers}[name](args.out / name / run, fixed == "1")
        return 0
    failed = []
    for name, manifest in PAIRS.items():
        (args.out / name).mkdir(parents=True, exist_ok=True)
        (args.out / name / "pair.json").write_text(json.dumps(manifest, indent=1) + "\n")
        for run, fixed in RUNS:
            cmd = [sys.executable, __file__, "--out", str(args.out), "--child", name, run,
                   "1" if fixed else "0"]
            rc = subprocess.run(cmd, timeout=600).returncode
            print(f"{name}/{run}: rc={rc}", flush=True)
            if rc:
                failed.append(f"{name}/{run}")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
