#!/usr/bin/env python3
"""What-if replay benchmark: build the job graph and replay it, with and without a change.

Loads the ranks (not timed), then times, ``--repeat`` times each:

* ``critical path graph``: :func:`hta.analysis.critical_path.build_graph` on the whole
  trace of each rank (what the replay graph is built on), for comparison;
* ``build``: :func:`hta.analysis.whatif.build_job` (every rank's graph with its edge
  delays, inferred waits and launch queue, and the collective coupling);
* ``replay``: one unchanged replay (:func:`hta.analysis.whatif.replay`);
* ``predict``: :func:`hta.analysis.whatif.predict` with ``--change`` (a changed and the
  unchanged replay, the stricter replay and the per-step table);
* ``critical path (one rank)``: HTA-style longest path of the first rank's whole trace.

With ``--dask N`` it times the coupled per-rank replays instead
(:mod:`hta.analysis.whatif.coupled`) on a local Dask cluster of N worker processes: the
job loaded there, the ranks' graphs built and coupled on the workers, a prediction with
``--change`` (its rounds, and the bytes the answers of one round bring back), against the
job graph built in this process from the same ranks.

With ``--errors`` it prints the replay error per trace folder instead (the figures of
``docs/analyses/whatif.md``). The input is a trace folder, or with ``--generate-events N``
a synthetic job of about N events per rank (``--ranks``) made by ``python -m
hta.synthetic``. A benchmark: it reports, it asserts nothing.

    python benchmarks/bench_whatif.py --generate-events 1000000
    python benchmarks/bench_whatif.py --errors ../shared/traces/hta/*/
    python benchmarks/bench_whatif.py --generate-events 216000 --ranks 8 --dask 2
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import timed

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))


def generate(events: int, ranks: int, out: Path, seed: int) -> Path:
    cmd = [sys.executable, "-m", "hta.synthetic", str(out), "--ranks", str(ranks),
           "--events-per-rank", str(events), "--seed", str(seed)]
    subprocess.run(cmd, check=True, cwd=REPO_ROOT)
    return out


def load(folder: Path):
    from hta.trace_analysis import TraceAnalysis

    t0 = time.perf_counter()
    a = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False)
    traces = [a.t.rank(r) for r in a.t.get_ranks()]
    return traces, time.perf_counter() - t0


def bench(folder: Path, repeat: int, change: str) -> None:
    from hta.analysis.critical_path import critical_path_analysis
    from hta.analysis.critical_path.graph import build_graph
    from hta.analysis.whatif import build_job, predict, replay

    traces, load_s = load(folder)
    events = sum(len(rt.events) for rt in traces)
    print(f"{folder}: {len(traces)} rank(s), {events:,} events, loaded in {load_s:.2f} s")
    cp_s, _ = timed(lambda: [build_graph(rt, annotation="") for rt in traces], repeat)
    build_s, jg = timed(lambda: build_job(traces), repeat)
    replay_s, _ = timed(lambda: replay(jg), repeat)
    predict_s, table = timed(lambda: predict(jg, change), repeat)
    one_s, _ = timed(lambda: critical_path_analysis(traces[0], annotation=""), repeat)
    print(f"  nodes {jg.num_nodes:,}, edges {jg.src.size:,}")
    print(f"  critical path graph (all ranks)   {cp_s:7.3f} s")
    print(f"  build job graph                   {build_s:7.3f} s")
    print(f"  replay (unchanged)                {replay_s:7.3f} s")
    print(f"  build + replay                    {build_s + replay_s:7.3f} s")
    print(f"  predict {change!r:25} {predict_s:7.3f} s")
    print(f"  critical path (rank {traces[0].rank}, HTA-style) {one_s:7.3f} s")
    print(f"  worst replay error {table['replay_error_pctg'].abs().max():.3f} %")


def bench_dask(folder: Path, workers: int, repeat: int, change: str, compare: bool) -> None:
    import pickle

    import distributed

    from hta.analysis.whatif import build_job, predict
    from hta.analysis.whatif.coupled import (
        coupled_critical_path,
        coupled_predict,
        coupled_ranks,
        replay_rank,
    )
    from hta.analysis.whatif.jobpath import job_critical_path
    from hta.trace_analysis import TraceAnalysis

    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                       dashboard_address=None, silence_logs=logging.ERROR)
    client = distributed.Client(cluster)
    try:
        t0 = time.perf_counter()
        a = TraceAnalysis(trace_dir=str(folder), cache=False, progress=False, client=client)
        load_s = time.perf_counter() - t0
        print(f"{folder}: {len(a.t.get_ranks())} rank(s) loaded on {workers} Dask "
              f"workers in {load_s:.2f} s")
        build_s, (kept, coupling) = timed(lambda: coupled_ranks(a.t), repeat)
        pred_s, table = timed(lambda: coupled_predict(kept, coupling, change), repeat)
        first_rounds = dict(coupling.rounds)
        again_s, _ = timed(lambda: coupled_predict(kept, coupling, "no-stragglers"), repeat)
        print(f"  coupled: build and couple on the workers {build_s:7.3f} s")
        print(f"  coupled: predict {change!r:22} {pred_s:7.3f} s, rounds "
              f"{first_rounds}, {coupling.measured.size} collective instances")
        print(f"  coupled: then predict 'no-stragglers'     {again_s:7.3f} s, rounds "
              f"{coupling.rounds['changed']} (the unchanged replays are kept)")
        path_s, path = timed(lambda: coupled_critical_path(kept, coupling), repeat)
        print(f"  coupled: the first step's critical path   {path_s:7.3f} s "
              f"({len(path)} segments on ranks {sorted(set(path['rank']))})")
        print(f"  ranks read into the client: {a.t.resident_ranks()}")
        # what one round brings back: the answers, pickled
        from hta.analysis.whatif.coupled import Request

        items = {r: Request("base", coupling.measured[i]) for r, i in
                 coupling.rank_inst.items()}
        answers = kept.map(replay_rank, items)
        size = sum(len(pickle.dumps(v)) for v in answers.values())
        print(f"  one round's answers: {size:,} bytes for {len(answers)} ranks")
        if not compare:
            return
        t0 = time.perf_counter()
        traces = [a.t.rank(r) for r in a.t.get_ranks()]
        read_s = time.perf_counter() - t0
        jg_s, jg = timed(lambda: build_job(traces), repeat)
        local_s, local = timed(lambda: predict(jg, change), repeat)
        from hta.analysis.whatif import replay

        here_path_s, here_path = timed(lambda: job_critical_path(jg, replay(jg)), repeat)
        print(f"  job graph here: ranks read {read_s:.2f} s, build {jg_s:.3f} s, "
              f"predict {local_s:.3f} s, replay and critical path {here_path_s:.3f} s; "
              f"same table: {local.equals(table)}, same path: {here_path.equals(path)}")
    finally:
        client.close()
        cluster.close()


def errors(folders: list[Path]) -> None:
    from hta.analysis.whatif import build_job, predict

    logging.disable(logging.WARNING)
    print("| trace | ranks | steps | replay error median / worst (%) | "
          "modelled error median / worst (%) |")
    print("|---|---|---|---|---|")
    for folder in folders:
        try:
            traces, _ = load(folder)
            table = predict(build_job(traces))
        except Exception as exc:  # noqa: BLE001 - a benchmark reports every folder
            print(f"| {folder.name} | failed: {type(exc).__name__}: {exc} | | | |")
            continue
        steps = table[table["step"] >= 0]
        if not len(steps):
            continue
        r = steps["replay_error_pctg"].abs()
        m = steps["modelled_error_pctg"].abs()
        print(f"| {folder.name} | {len(traces)} | {len(steps)} | "
              f"{r.median():.2f} / {r.max():.2f} | {m.median():.2f} / {m.max():.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="*", type=Path)
    p.add_argument("--generate-events", type=int, default=0)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--change", default="kernels:gemm*0.5")
    p.add_argument("--errors", action="store_true", help="replay error per folder")
    p.add_argument("--dask", type=int, default=0,
                   help="time the coupled per-rank replays on N Dask workers")
    p.add_argument("--no-compare", action="store_true",
                   help="with --dask: skip the job graph built here from the same ranks")
    args = p.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if args.errors:
        errors(args.folders)
        return
    folders = list(args.folders)
    tmp = None
    if args.generate_events:
        tmp = tempfile.TemporaryDirectory()
        folders.append(generate(args.generate_events, args.ranks, Path(tmp.name) / "job",
                                args.seed))
    for folder in folders:
        if args.dask:
            bench_dask(folder, args.dask, args.repeat, args.change, not args.no_compare)
        else:
            bench(folder, args.repeat, args.change)


if __name__ == "__main__":
    main()
