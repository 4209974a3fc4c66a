"""Generating ranks and whole jobs, in memory or streamed to files."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hta.synthetic.catalog import step_plan
from hta.synthetic.rank import _RankBuilder
from hta.synthetic.timefmt import _events_body, _gc_paused, dumps_trace

try:  # optional: isal compresses gzip ~4x faster than zlib at a similar ratio
    from isal import isal_zlib as _gzlib
except ImportError:  # pragma: no cover - depends on the environment
    _gzlib = zlib  # type: ignore[misc]


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def iter_rank_chunks(
    rank: int,
    world_size: int,
    *,
    steps: int = 3,
    kernels_per_step: int = 40,
    seed: int = 0,
    relative_time: bool = True,
) -> tuple[dict[str, Any], Iterator[list[dict[str, Any]]], str]:
    """Streaming form of :func:`generate_rank`: ``(header, event chunks, traceName)``.

    Concatenating the chunks gives exactly ``generate_rank(...)["traceEvents"]``.  Consumers of
    millions of events run much faster with the cyclic GC paused (``gc.disable()``).
    """
    b = _RankBuilder(rank, world_size, steps, kernels_per_step, seed, relative_time)
    return b.header(), b.iter_events(), b.trace_name()


def generate_rank(
    rank: int,
    world_size: int,
    *,
    steps: int = 3,
    kernels_per_step: int = 40,
    seed: int = 0,
    relative_time: bool = True,
) -> dict[str, Any]:
    """Generate one rank's Kineto trace as a dict (times are :class:`Microseconds`).

    Deterministic in ``(rank, world_size, steps, kernels_per_step, seed, relative_time)``.
    ``kernels_per_step`` is the exact number of GPU activities per step; the rank holds
    :func:`events_per_rank_for` events.
    """
    head, chunks, name = iter_rank_chunks(
        rank,
        world_size,
        steps=steps,
        kernels_per_step=kernels_per_step,
        seed=seed,
        relative_time=relative_time,
    )
    events: list[dict[str, Any]] = []
    with _gc_paused():
        for chunk in chunks:
            events.extend(chunk)
    return {**head, "traceEvents": events, "traceName": name}


class _Sink:
    """Writes bytes to a file, optionally through a streaming gzip compressor."""

    def __init__(self, path: Path, compress: bool) -> None:
        self.fh = open(path, "wb")  # noqa: SIM115 - closed in close()
        # wbits=31: gzip container; zlib/isal write mtime 0 and no file name -> deterministic
        self.comp = _gzlib.compressobj(1, zlib.DEFLATED, 31) if compress else None

    def write(self, data: bytes) -> None:
        self.fh.write(self.comp.compress(data) if self.comp is not None else data)

    def close(self) -> None:
        if self.comp is not None:
            self.fh.write(self.comp.flush())
        self.fh.close()


def _write_stream(
    path: Path,
    head: dict[str, Any],
    chunks: Iterable[list[dict[str, Any]]],
    name: str,
    compress: bool,
) -> None:
    skeleton = dumps_trace({**head, "traceEvents": [], "traceName": name})
    before, after = skeleton.split(b'"traceEvents":[]', 1)
    tmp = path.with_name(path.name + ".tmp")
    sink = _Sink(tmp, compress)
    try:
        sink.write(before + b'"traceEvents":[')
        first = True
        for chunk in chunks:
            if not chunk:
                continue
            body = _events_body(chunk)
            sink.write(body if first else b"," + body)
            first = False
        sink.write((b"]" if first else b"\n]") + after)
    finally:
        sink.close()
    os.replace(tmp, path)


def write_rank(
    path: str | os.PathLike[str],
    rank: int,
    world_size: int,
    *,
    steps: int = 3,
    kernels_per_step: int = 40,
    seed: int = 0,
    relative_time: bool = True,
    gzip: bool | None = None,
) -> Path:
    """Generate and stream one rank to ``path`` (gzip if ``gzip`` or the name ends in .gz).

    The (decompressed) bytes equal ``dumps_trace(generate_rank(...))``.
    """
    path = Path(path)
    compress = path.suffix == ".gz" if gzip is None else gzip
    head, chunks, name = iter_rank_chunks(
        rank,
        world_size,
        steps=steps,
        kernels_per_step=kernels_per_step,
        seed=seed,
        relative_time=relative_time,
    )
    with _gc_paused():
        _write_stream(path, head, chunks, name, compress)
    return path


def generate_job(
    out_dir: str | os.PathLike[str],
    *,
    ranks: int = 4,
    steps: int = 3,
    kernels_per_step: int = 40,
    seed: int = 0,
    gzip: bool = True,
    relative_time: bool = True,
    workers: int = 1,
) -> list[Path]:
    """Write ``rank-{r}.json.gz`` (or ``.json``) for every rank of a job into ``out_dir``.

    ``workers > 1`` writes ranks in that many processes (same bytes as serial writing).
    """
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    step_plan(kernels_per_step)  # validate before creating anything
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    suffix = ".json.gz" if gzip else ".json"
    kwargs: dict[str, Any] = {
        "steps": steps,
        "kernels_per_step": kernels_per_step,
        "seed": seed,
        "relative_time": relative_time,
        "gzip": gzip,
    }
    paths = [out / f"rank-{r}{suffix}" for r in range(ranks)]
    if workers > 1 and ranks > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, ranks)) as pool:
            futures = [
                pool.submit(write_rank, path, r, ranks, **kwargs) for r, path in enumerate(paths)
            ]
            return [f.result() for f in futures]
    return [write_rank(path, r, ranks, **kwargs) for r, path in enumerate(paths)]
