"""Find the trace files of a job."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from hta.errors import TraceDiscoveryError
from hta.kineto.files import RemotePath, is_url, trace_location
from hta.kineto.pftrace import PROTOBUF_SUFFIXES

TracePath = Path | RemotePath

TRACE_SUFFIXES = (".json", ".json.gz", *PROTOBUF_SUFFIXES)


def is_trace_name(path: TracePath) -> bool:
    """``*.json`` or ``*.json.gz`` (``*.pt.trace.json.gz`` included), or a Perfetto
    protobuf name (``*.pftrace``, ``*.pb``, ``*.pb.gz`` ...), not hidden. The name only
    picks the files; their content says how they are read."""
    name = path.name
    return not name.startswith(".") and name.lower().endswith(TRACE_SUFFIXES)


def _stem(name: str) -> str:
    low = name.lower()
    for suffix in sorted(TRACE_SUFFIXES, key=len, reverse=True):
        if low.endswith(suffix):
            return name[:-len(suffix)]
    return name


def drop_twins(files: list[TracePath]) -> list[TracePath]:
    """The files without the protobuf-named twins of JSON-named ones (``x.json`` and
    ``x.pb.gz``: Kineto writes both of one run): the JSON is read, once."""
    json_stems = {_stem(p.name) for p in files
                  if not p.name.lower().endswith(PROTOBUF_SUFFIXES)}
    return [p for p in files if not (p.name.lower().endswith(PROTOBUF_SUFFIXES)
                                     and _stem(p.name) in json_stems)]


# What this package's exports write beside a trace (``generate_trace_with_counters``,
# the pattern and critical-path overlays): the source's name with a suffix before the
# extension, or with a prefix.
EXPORT_SUFFIXES = ("_with_counters",)
EXPORT_PREFIXES = ("overlaid_critical_path_", "overlaid_")


def drop_exports(files: list[TracePath]) -> list[TracePath]:
    """The files without those our exports wrote from another file of the same list
    (``x_with_counters.json.gz`` or ``overlaid_x.json.gz`` next to ``x.json.gz``): a folder
    an export wrote into loads again with the same ranks. An exported file alone in its
    folder (``output_dir=``) is kept: there it is the trace."""
    names = {p.name for p in files}

    def source_present(name: str) -> bool:
        stem = _stem(name)
        ext = name[len(stem):]
        for suffix in EXPORT_SUFFIXES:
            if stem.endswith(suffix) and stem[:-len(suffix)] + ext in names:
                return True
        return any(name.startswith(prefix) and name[len(prefix):] in names
                   for prefix in EXPORT_PREFIXES)

    return [p for p in files if not source_present(p.name)]


def discover(
    trace_dir: str | Path | None = None,
    trace_files: Mapping[int, str | TracePath] | Iterable[str | TracePath] | None = None,
    storage_options: dict | None = None,
) -> tuple[list[TracePath], dict[TracePath, int]]:
    """Trace files to load, and the ranks the caller fixed explicitly.

    ``trace_files`` may be a mapping rank -> file (HTA's form; the rank is then given) or
    a list of files; relative names are taken inside ``trace_dir``. Without it every
    ``*.json``/``*.json.gz`` directly inside ``trace_dir`` is taken, except the files our
    exports wrote from another trace of the folder (see :func:`drop_exports`). Folders and files
    may be fsspec URLs (``s3://...``, ``memory://...``; see :mod:`hta.kineto.files`).
    """
    base = trace_location(trace_dir, storage_options) if trace_dir is not None else None
    explicit: dict[TracePath, int] = {}
    if trace_files is not None:
        if isinstance(trace_files, Mapping):
            pairs = [(int(r), f) for r, f in trace_files.items()]
        else:
            pairs = [(-1, f) for f in trace_files]
        files: list[TracePath] = []
        for rank, name in pairs:
            f = trace_location(name, storage_options)
            relative = isinstance(f, Path) and not f.is_absolute() and not is_url(name)
            path = base / str(name) if relative and base is not None else f
            if not path.is_file():
                raise TraceDiscoveryError(f"trace file not found: {path}")
            files.append(path)
            if rank >= 0:
                explicit[path] = rank
        if not files:
            raise TraceDiscoveryError("trace_files is empty: give at least one trace file")
        return files, explicit
    if base is None:
        raise TraceDiscoveryError("give trace_dir (a folder of traces) or trace_files")
    if base.is_file():
        return [base], {}
    if not base.exists():
        raise TraceDiscoveryError(f"trace folder not found: {base}")
    if not base.is_dir():
        raise TraceDiscoveryError(f"not a folder: {base}")
    found = [p for p in base.iterdir() if is_trace_name(p)]
    files = drop_exports(drop_twins(sorted(p for p in found if p.is_file())))
    if not files:
        others = sorted(p.name for p in base.iterdir() if not p.name.startswith("."))[:5]
        seen = f" (found: {', '.join(others)})" if others else " (the folder is empty)"
        head = (f"no trace files (*.json, *.json.gz) in {base}{seen}; nor Perfetto protobuf "
                "traces (*.pftrace, *.pb, *.pb.gz); point at the folder the profiler wrote")
        raise TraceDiscoveryError(f"{head}, or pass trace_files=",
                                  cli_message=f"{head}, or give one trace file")
    return files, explicit
