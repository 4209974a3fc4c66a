"""Arrow cache of loaded ranks.

A cached rank is a folder of uncompressed Arrow IPC files (Feather v2: the events table,
the symbol table and each side table) plus ``meta.json``. Reading one back memory-maps
the files, so a reopen costs one copy of the columns into pandas and no decoding; writing
one is a plain copy of the columns to disk (see docs/performance.md, "Linking and the
cache", for the measurements behind this choice over compressed Parquet).

The entry's name holds a fingerprint of the trace file's content (size plus sampled
blocks, so it is cheap even for gigabyte files), the cache format version and the
event-kind rules in force, so any change to one of them misses the cache. Nothing is
ever pickled or unpickled: Arrow IPC, like Parquet, holds typed columns only.

The cache lives in a ``.hta_cache`` folder beside the traces; when that folder cannot
be written, in the user's cache folder (``$XDG_CACHE_HOME/hta`` or ``~/.cache/hta``).
``cache_dir=`` (or the ``HTA_CACHE_DIR`` environment variable) puts it elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

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

CACHE_FORMAT_VERSION = 6
#: Environment variable naming the cache folder when ``cache_dir`` is not given.
CACHE_DIR_ENV = "HTA_CACHE_DIR"
#: File name suffix of every table of an entry (Arrow IPC file format).
SUFFIX = ".arrow"
_BLOCK = 1 << 16
_SAMPLES = 16


def fingerprint(path: Path | RemotePath, extra: str = "") -> str:
    """A content fingerprint: size and 16 sampled 64 KiB blocks, hashed with BLAKE2b."""
    size = path.stat().st_size
    h = hashlib.blake2b(digest_size=12)
    h.update(f"{CACHE_FORMAT_VERSION}|{schema_key()}|{size}|{extra}".encode())
    with path.open("rb") as fh:
        if size <= _BLOCK * (_SAMPLES + 1):
            h.update(fh.read())
        else:
            for i in range(_SAMPLES + 1):
                fh.seek((size - _BLOCK) * i // _SAMPLES)
                h.update(fh.read(_BLOCK))
    return h.hexdigest()


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
    """Write a rank atomically (to a temporary folder renamed into place)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.tmp"))
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
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        _release_arrow_memory()


def read_entry(folder: Path) -> RankTrace | None:
    """Read a cached rank, or ``None`` when absent or unreadable (then reload the JSON)."""
    meta_file = folder / "meta.json"
    if not meta_file.exists():
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
        return None
    _release_arrow_memory()
    return RankTrace(rank=int(meta["rank"]), events=events, symbols=symbols, tables=tables,
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
