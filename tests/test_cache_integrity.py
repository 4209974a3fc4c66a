"""The cache never serves another trace's numbers, nor numbers from damaged files.

* A trace rewritten in place with its name, size and modification time kept (changed
  bytes between the blocks a sampled fingerprint would read) misses the cache: the key
  covers every byte of the file.
* A cached data file whose bytes were overwritten at the same size fails the entry's
  manifest check: the entry is rebuilt, with a warning that names the file.
* Temporary entries left by a killed process are removed by the next load; those of a
  live process (a load running beside this one) are kept.

In every case the cached answer equals the uncached one.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path

import numpy as np
import pytest
from cli_runner import run_cli
from kineto_builder import TraceBuilder
from test_cache import entries

from hta.job.cache import LEFTOVER_AGE_S, MANIFEST, entry_damage
from hta.trace_analysis import TraceAnalysis

#: Bytes of one block a sampled fingerprint reads, and how many it reads (17 in all).
BLOCK = 1 << 16
SAMPLES = 16
KERNELS = 6_000


def long_trace(path: Path) -> Path:
    """A rank of 6,000 kernels of 100 µs each (about 2 MB of JSON), one step."""
    b = TraceBuilder(rank=0)
    with b.step(1, ts=0, dur=KERNELS * 200_000 + 10_000):
        for i in range(KERNELS):
            b.launch_kernel("sgemm", cpu_ts=i * 200_000, cpu_dur=1_000,
                            gpu_ts=i * 200_000 + 50_000, gpu_dur=100_000)
    return b.write(path)


def sampled_ranges(size: int) -> list[tuple[int, int]]:
    """The byte ranges a sampled fingerprint of a file of ``size`` bytes reads."""
    return [((size - BLOCK) * i // SAMPLES, (size - BLOCK) * i // SAMPLES + BLOCK)
            for i in range(SAMPLES + 1)]


def rewrite_between_samples(path: Path) -> int:
    """Make kernels 9x longer where no sampled block looks, keeping size and times.

    Returns how many kernels changed.
    """
    data = bytearray(path.read_bytes())
    before = os.stat(path)
    ranges = sampled_ranges(len(data))
    changed = 0
    for match in re.finditer(rb'"dur": 100\.0', bytes(data)):
        lo, hi = match.span()
        if any(a < hi and lo < b for a, b in ranges):
            continue
        data[lo:hi] = b'"dur": 900.0'
        changed += 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    return changed


def gpu_kernel_ns(analyzer: TraceAnalysis) -> int:
    ev = analyzer.t.rank(0).events
    return int(ev.loc[ev["kind"].astype(str) == "computation", "dur"].sum())


def test_a_trace_rewritten_with_the_same_size_and_time_misses_the_cache(
        tmp_path: Path) -> None:
    folder = tmp_path / "job"
    path = long_trace(folder / "rank-0.json")
    assert path.stat().st_size > 1.5 * (SAMPLES + 1) * BLOCK  # gaps between the samples
    cache = tmp_path / "cache"
    first = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    assert gpu_kernel_ns(first) == KERNELS * 100_000
    changed = rewrite_between_samples(path)
    assert changed > KERNELS // 4
    cached = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    fresh = TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    expected = KERNELS * 100_000 + changed * 800_000
    assert gpu_kernel_ns(fresh) == expected
    assert gpu_kernel_ns(cached) == expected  # the cached answer is the uncached one
    assert len(entries(cache)) == 2


def test_same_content_elsewhere_hits_the_cache(tmp_path: Path) -> None:
    path = long_trace(tmp_path / "a" / "rank-0.json")
    copy = tmp_path / "b" / "rank-0.json"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    cache = tmp_path / "cache"
    TraceAnalysis(trace_dir=path.parent, cache_dir=cache, progress=False)
    again = TraceAnalysis(trace_dir=copy.parent, cache_dir=cache, progress=False)
    assert len(entries(cache)) == 1  # the key is the content, not the path or times
    assert again.t.rank(0).meta["source"] == str(copy)


def overwrite_same_size(file: Path) -> None:
    """Flip bytes in the middle of a file, keeping its size."""
    data = bytearray(file.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(b ^ 0x5A for b in data[middle:middle + 64])
    file.write_bytes(bytes(data))


def test_a_damaged_data_file_of_the_same_size_is_rebuilt_with_a_warning(
        tmp_path: Path) -> None:
    folder = tmp_path / "job"
    long_trace(folder / "rank-0.json")
    b = TraceBuilder(rank=1)  # a second rank: the command line's path
    b.launch_kernel("sgemm", cpu_ts=0, cpu_dur=1_000, gpu_ts=5_000, gpu_dur=100_000)
    b.write(folder / "rank-1.json")
    cache = tmp_path / "cache"
    fresh = run_cli(["summary", str(folder), "--no-cache", "--json"])
    first = run_cli(["summary", str(folder), "--json"], env={"HTA_CACHE_DIR": str(cache)})
    assert fresh.returncode == first.returncode == 0, first.stderr
    entry = next(e for e in entries(cache) if e.name.startswith("rank-0."))
    overwrite_same_size(entry / "events.arrow")
    damage = entry_damage(entry)
    assert damage == "events.arrow does not hold the bytes written (CRC-32 differs)"
    again = run_cli(["summary", str(folder), "--json"], env={"HTA_CACHE_DIR": str(cache)})
    assert again.returncode == 0, again.stderr
    payload = json.loads(again.stdout)
    assert [w["message"] for w in payload.pop("load_warnings")] == [
        f"the cache entry was damaged ({damage}); rebuilt from the trace "
        "(rank 0: rank-0.json)"]
    expected = json.loads(fresh.stdout)
    assert expected.pop("load_warnings") == []
    assert payload == expected  # the cached answer is the uncached one
    assert entry_damage(entry) is None  # rebuilt in place
    overwrite_same_size(entry / "events.arrow")
    text = run_cli(["summary", str(folder)], env={"HTA_CACHE_DIR": str(cache)})
    assert text.returncode == 0, text.stderr
    assert text.stderr == (f"hta: warning: the cache entry was damaged ({damage}); rebuilt "
                           "from the trace (rank 0: rank-0.json)\n")
    quiet = run_cli(["summary", str(folder)], env={"HTA_CACHE_DIR": str(cache)})
    assert quiet.stderr == ""  # said once, when it was rebuilt
    assert quiet.stdout == text.stdout


def test_manifest_lists_every_file_of_an_entry(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    TraceBuilder(rank=0).write(folder / "rank-0.json")
    cache = tmp_path / "cache"
    TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    entry = entries(cache)[0]
    manifest = json.loads((entry / MANIFEST).read_text())
    assert set(manifest) == {p.name for p in entry.iterdir()} - {MANIFEST}
    assert all(size == (entry / name).stat().st_size for name, (size, _) in manifest.items())
    (entry / "symbols.arrow").unlink()
    assert entry_damage(entry) == "symbols.arrow cannot be read (No such file or directory)"


def test_leftover_temporary_entries_are_removed(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    TraceBuilder(rank=0).write(folder / "rank-0.json")
    cache = tmp_path / "cache"
    cache.mkdir()
    host = socket.gethostname().replace("-", "_") or "host"
    dead_pid = 2**22 + 12345  # above Linux's pid_max default: no such process
    dead = cache / f".rank-0.abc.tmp-{host}-{dead_pid}-x1y2"
    live = cache / f".rank-0.abc.tmp-{host}-{os.getpid()}-x1y3"
    elsewhere = cache / ".rank-0.abc.tmp-otherhost-77-x1y4"
    stale = cache / ".rank-0.abc.tmp-otherhost-78-x1y5"
    for leftover in (dead, live, elsewhere, stale):
        leftover.mkdir()
        (leftover / "events.arrow").write_bytes(b"partial")
    old = time.time() - LEFTOVER_AGE_S - 60
    os.utime(stale, (old, old))
    analyzer = TraceAnalysis(trace_dir=folder, cache_dir=cache, progress=False)
    assert analyzer.ranks == [0]
    left = sorted(p.name for p in cache.iterdir() if p.name.startswith("."))
    assert left == sorted([live.name, elsewhere.name])  # a live writer's, another host's
    assert np.array_equal(analyzer.t.rank(0).events["ts"],
                          TraceAnalysis(trace_dir=folder, cache=False,
                                        progress=False).t.rank(0).events["ts"])


def test_a_killed_load_s_temporary_ranks_are_removed_by_the_next_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A load whose worker was killed while storing a rank without a cache entry leaves a
    half-written ``.rank.tmp-HOST-PID-*`` in a ``hta-load-*`` folder of the system's
    temporary folder. The next load removes it (its writer is gone) and the folder left
    empty; a live writer's, a whole entry (maybe a lazily held rank) and another
    folder's stay."""
    import tempfile

    from hta.job.rank_load import TEMPORARY_PREFIX

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    folder = tmp_path / "job"
    TraceBuilder(rank=0).write(folder / "rank-0.json")
    host = socket.gethostname().replace("-", "_") or "host"
    dead_pid = 2**22 + 12345  # above Linux's pid_max default: no such process
    killed = temp / f"{TEMPORARY_PREFIX}a1"
    (killed / f".rank.tmp-{host}-{dead_pid}-x1").mkdir(parents=True)
    (killed / f".rank.tmp-{host}-{dead_pid}-x1" / "events.arrow").write_bytes(b"partial")
    empty = temp / f"{TEMPORARY_PREFIX}a2"
    empty.mkdir()
    writing = temp / f"{TEMPORARY_PREFIX}a3" / f".rank.tmp-{host}-{os.getpid()}-x3"
    whole = temp / f"{TEMPORARY_PREFIX}a4" / "rank"
    other = temp / "someone-else" / f".rank.tmp-{host}-{dead_pid}-x5"
    for kept in (writing, whole, other):
        kept.mkdir(parents=True)
        (kept / "events.arrow").write_bytes(b"data")
    TraceAnalysis(trace_dir=folder, cache=False, progress=False)
    assert not killed.exists() and not empty.exists()
    assert writing.exists() and whole.exists() and other.exists()
