"""Arrow cache of loaded ranks.

A cached rank is a folder of uncompressed Arrow IPC files (Feather v2: the events table,
the symbol table and each side table) plus ``meta.json``. Reading one back memory-maps
the files, so a reopen costs one copy of the columns into pandas and no decoding; writing
one is a plain copy of the columns to disk (see docs/performance.md, "Linking and the
cache", for the measurements behind this choice over compressed Parquet).

The entry's name holds a fingerprint of the trace file's whole content (its size and
two checksums of every byte, CRC-32 and Adler-32, computed by ISA-L at several GB/s: a
few ms for a 1M-event rank, against about 120 ms to reopen it; see
``benchmarks/bench_cache.py``), the cache format version and the event-kind rules in
force, so any change to one of them misses the cache. Files behind a URL are not read
whole: their size, the storage's own identity of the version (ETag, modification time)
and sampled blocks are used. Nothing is ever pickled or unpickled: Arrow IPC, like
Parquet, holds typed columns only.

An entry checks itself: ``manifest.json``, written last, holds each file's size and
CRC-32, and a read verifies them (a damaged entry is rebuilt from the trace, with a
warning). An entry is written into a temporary folder renamed into place; temporary
folders that a killed process left behind are removed by the next load
(:func:`remove_leftovers`).

The cache lives in a ``.hta_cache`` folder beside the traces; when that folder cannot
be written, in the user's cache folder (``$XDG_CACHE_HOME/hta`` or ``~/.cache/hta``).
``cache_dir=`` (or the ``HTA_CACHE_DIR`` environment variable) puts it elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from isal import isal_zlib

from hta.job.arrow_files import (
    ArrowTables,
    map_columns,
    read_column,
    read_table,
    write_table,
)
from hta.kineto.files import RemotePath
from hta.model.rules import KINDS
from hta.model.schema import EVENT_COLUMNS, KIND_DTYPE, TABLES, schema_key
from hta.model.trace import RankTrace

logger = logging.getLogger(__name__)

#: 8: launches and kernels of ROCm traces without correlation linked by External id.
CACHE_FORMAT_VERSION = 8
#: Environment variable naming the cache folder when ``cache_dir`` is not given.
CACHE_DIR_ENV = "HTA_CACHE_DIR"
#: File name suffix of every table of an entry (Arrow IPC file format).
SUFFIX = ".arrow"
_BLOCK = 1 << 16
_SAMPLES = 16


#: The file of an entry holding every other file's size and CRC-32 (written last).
MANIFEST = "manifest.json"
#: Leftover temporary entries and probe files older than this are removed whoever made them.
LEFTOVER_AGE_S = 24 * 3600


def fingerprint(path: Path | RemotePath, extra: str = "") -> str:
    """The identity of a trace file's content, as part of its cache key.

    A local file: its size and the CRC-32 and Adler-32 of all its bytes (read through a
    memory map; a few ms per 20 MB). A file behind a URL: its size, the storage's
    version identity (ETag, modification time) when it gives one, and 17 sampled 64 KiB
    blocks. Hashed with BLAKE2b together with the cache format, the schema and
    ``extra`` (the rules' fingerprint).
    """
    h = hashlib.blake2b(digest_size=12)
    if isinstance(path, Path):
        size = path.stat().st_size
        crc, adler = file_checksums(path)
        identity = f"{size}|crc32={crc:08x}|adler32={adler:08x}"
    else:
        size = path.stat().st_size
        identity = f"{size}|{_remote_version(path)}|{_sampled_blocks(path, size)}"
    h.update(f"{CACHE_FORMAT_VERSION}|{schema_key()}|{identity}|{extra}".encode())
    return h.hexdigest()


def file_checksums(path: Path) -> tuple[int, int]:
    """CRC-32 and Adler-32 of a local file's bytes (ISA-L, through a memory map)."""
    crc, adler = _over_bytes(path, isal_zlib.crc32, isal_zlib.adler32)
    return crc, adler


def file_crc32(path: Path) -> int:
    """CRC-32 of a local file's bytes: what a manifest holds."""
    return _over_bytes(path, isal_zlib.crc32)[0]


def _over_bytes(path: Path, *checksums: Callable[[Any], int]) -> tuple[int, ...]:
    """Each checksum of a local file's bytes, read through one memory map."""
    with path.open("rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return tuple(f(b"") for f in checksums)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return tuple(f(mapped) for f in checksums)


def _sampled_blocks(path: RemotePath, size: int) -> str:
    """BLAKE2b of 17 evenly spaced 64 KiB blocks (the whole file when smaller)."""
    h = hashlib.blake2b(digest_size=12)
    with path.open("rb") as fh:
        if size <= _BLOCK * (_SAMPLES + 1):
            h.update(fh.read())
        else:
            for i in range(_SAMPLES + 1):
                fh.seek((size - _BLOCK) * i // _SAMPLES)
                h.update(fh.read(_BLOCK))
    return h.hexdigest()


def _remote_version(path: RemotePath) -> str:
    """What the storage says of the object's version (ETag, modification time, ...)."""
    try:
        info = path.fs.info(path.fs_path)
    except Exception:  # noqa: BLE001 - a storage that cannot tell: the blocks still count
        return ""
    keys = ("ETag", "etag", "md5Hash", "crc32c", "generation", "version_id", "VersionId",
            "LastModified", "last_modified", "mtime", "updated", "created")
    return ";".join(f"{k}={info[k]}" for k in keys if info.get(k) is not None)


def default_cache_root(trace_dir: Path | RemotePath) -> Path:
    """``trace_dir/.hta_cache`` if writable, else the user cache folder.

    Traces behind a URL (remote storage) are cached in the user cache folder of the
    machine that loads them.
    """
    if not isinstance(trace_dir, Path):
        return user_cache_root()
    local = trace_dir / ".hta_cache"
    try:
        local.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=local, prefix=".probe"):
            pass
        return local
    except OSError:
        return user_cache_root()


def user_cache_root() -> Path:
    """``$XDG_CACHE_HOME/hta``, else ``~/.cache/hta``."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "hta"


def entry_path(root: Path, trace_file: Path | RemotePath, key: str) -> Path:
    """The folder holding one cached rank."""
    stem = trace_file.name.replace(".json.gz", "").replace(".json", "")
    return root / f"{stem}.{key}"


def write_entry(folder: Path, rank_trace: RankTrace) -> None:
    """Write a rank atomically (to a temporary folder renamed into place), with the
    manifest of its files' checksums."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=_temporary_prefix(folder)))
    try:
        # Column by column, without copying the table: kinds as their int8 codes.
        events = rank_trace.events
        columns = {c: (events[c].cat.codes.to_numpy().astype(np.int8) if c == "kind"
                       else events[c].to_numpy()) for c in events.columns}
        if len(rank_trace.unclassified) == len(events):  # as bytes, read back as a view
            columns["unclassified"] = np.asarray(rank_trace.unclassified, bool).view(np.uint8)
        write_table(pa.table(columns), tmp / f"events{SUFFIX}")
        del columns
        write_table(pa.table({"symbol": pa.array(rank_trace.symbols, type=pa.string())}),
                    tmp / f"symbols{SUFFIX}")
        for name, frame in rank_trace.tables.items():
            write_table(pa.Table.from_pandas(frame, preserve_index=False, nthreads=1),
                        tmp / f"{name}{SUFFIX}")
        meta = dict(rank_trace.meta)
        meta["cache_format_version"] = CACHE_FORMAT_VERSION
        (tmp / "meta.json").write_text(json.dumps(meta, default=_json_default))
        write_manifest(tmp)
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        _release_arrow_memory()


def _temporary_prefix(folder: Path) -> str:
    """``.NAME.tmp-HOST-PID-``: whose temporary entry it is, so that a later load can
    tell one left by a dead process from one being written."""
    host = socket.gethostname().replace("-", "_") or "host"
    return f".{folder.name}.tmp-{host}-{os.getpid()}-"


def write_manifest(folder: Path) -> None:
    """Write ``folder``'s manifest: each other file's size and CRC-32."""
    files = sorted(p for p in folder.iterdir() if p.name != MANIFEST)
    manifest = {p.name: [p.stat().st_size, f"{file_crc32(p):08x}"] for p in files}
    (folder / MANIFEST).write_text(json.dumps(manifest, sort_keys=True))


def entry_damage(folder: Path) -> str | None:
    """What is wrong with an entry's files against its manifest, or None when every file
    is there with the size and CRC-32 it was written with."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        return f"its manifest cannot be read ({exc})"
    if not isinstance(manifest, dict) or not manifest:
        return "its manifest is not a list of files"
    for name, expected in sorted(manifest.items()):
        path = folder / name
        if (not isinstance(expected, list) or len(expected) != 2 or "/" in name
                or name.startswith(".")):
            return "its manifest is not a list of files"
        try:
            if path.stat().st_size != expected[0]:
                return f"{name} is {path.stat().st_size} bytes, written as {expected[0]}"
            if f"{file_crc32(path):08x}" != expected[1]:
                return f"{name} does not hold the bytes written (CRC-32 differs)"
        except OSError as exc:
            return f"{name} cannot be read ({exc.strerror or exc})"
    return None


def remove_leftovers(root: Path) -> int:
    """Remove temporary entries that a killed or failed process left in a cache folder:
    those of a process of this machine that is gone, and any older than
    :data:`LEFTOVER_AGE_S`; also stale ``.probe`` files. Returns how many were removed."""
    try:
        names = [p for p in root.iterdir() if p.name.startswith(".")]
    except OSError:
        return 0
    host = socket.gethostname().replace("-", "_") or "host"
    now = time.time()
    removed = 0
    for path in names:
        if ".tmp-" not in path.name and not path.name.startswith(".probe"):
            continue
        try:
            old = now - path.stat().st_mtime > LEFTOVER_AGE_S
        except OSError:
            continue
        owner = path.name.rsplit(".tmp-", 1)[-1].split("-")
        dead = (len(owner) >= 3 and owner[0] == host and owner[1].isdigit()
                and not _alive(int(owner[1])))
        if not (old or dead):
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed += not path.exists()
    if removed:
        logger.info("removed %d leftover temporary cache entries from %s", removed, root)
    return removed


def _alive(pid: int) -> bool:
    """Whether a process of this machine with that id exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def read_entry(folder: Path, problems: list[str] | None = None) -> RankTrace | None:
    """Read a cached rank, or ``None`` when absent or unreadable (then reload the JSON).

    The entry's files are checked against its manifest first; a damaged entry is
    reported (a warning, and a line in ``problems`` when given) and not used.
    """
    meta_file = folder / "meta.json"
    if not meta_file.exists():
        return None
    damage = entry_damage(folder)
    if damage is not None:
        logger.warning("ignoring unreadable cache entry %s: %s; rebuilding it from the "
                       "trace", folder, damage)
        if problems is not None:
            problems.append(f"the cache entry was damaged ({damage}); rebuilt from the trace")
        return None
    try:
        meta: dict[str, Any] = json.loads(meta_file.read_text())
        if not isinstance(meta, dict) or "rank" not in meta:
            raise ValueError("meta.json is not a cached rank's metadata")
        if meta.pop("cache_format_version", None) != CACHE_FORMAT_VERSION:
            return None
        columns = map_columns(folder / f"events{SUFFIX}")
        if [c for c in columns if c != "unclassified"] != [c.name for c in EVENT_COLUMNS]:
            raise ValueError("its events' columns are not the schema's (hta.model.schema)")
        n = len(columns["index"])
        unclassified = columns.pop("unclassified", np.zeros(n, dtype=np.uint8)).view(bool)
        codes = columns["kind"].astype(np.int8, copy=False)
        if codes.size and not (int(codes.min()) >= 0 and int(codes.max()) < len(KINDS)):
            raise ValueError("event kinds out of range")
        columns["kind"] = pd.Categorical.from_codes(codes, dtype=KIND_DTYPE, validate=False)
        events = pd.DataFrame(columns, copy=False)
        symbols = read_column(folder / f"symbols{SUFFIX}", "symbol")
        # Every table is written for every rank: a missing one means a damaged entry.
        tables = ArrowTables({name: read_table(folder / f"{name}{SUFFIX}")
                              for name in TABLES})
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as exc:
        logger.warning("ignoring unreadable cache entry %s: %s", folder, exc)
        if problems is not None:
            problems.append(f"the cache entry could not be read ({exc}); rebuilt from the "
                            "trace")
        return None
    _release_arrow_memory()
    # ArrowTables stands in for the tables' dict (a mapping with copy(); read on access)
    return RankTrace(rank=int(meta["rank"]), events=events, symbols=symbols,
                     tables=tables,  # type: ignore[arg-type]
                     meta=meta, unclassified=unclassified)


def _release_arrow_memory() -> None:
    """Give Arrow's freed buffers back to the system: its allocator keeps them otherwise,
    and a reloaded rank would hold about twice its size."""
    pa.default_memory_pool().release_unused()


def stored_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` as a cache entry gives it back (a JSON round trip: tuples become lists,
    numpy numbers plain numbers, other objects their text)."""
    return json.loads(json.dumps(meta, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return str(value)
