"""Trace files on local disk, or on remote or shared storage behind an fsspec URL.

Loading reads files through a small part of :class:`pathlib.Path`'s interface
(``open("rb")``, ``read_bytes()``, ``stat().st_size``, ``name``). A local path stays a
plain :class:`~pathlib.Path`, so local files keep the plain-file fast path; a URL such as
``s3://bucket/job/`` or ``memory://job`` becomes a :class:`RemotePath`, which offers the
same methods through `fsspec <https://filesystem-spec.readthedocs.io>`_. ``file://`` URLs
are local paths.

Credentials and other options of the storage (``anon=True``, ``key=...``) are passed as
``storage_options``, exactly as fsspec takes them; workers that read the files get them
with their task.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any
from urllib.parse import unquote, urlparse

from hta.errors import TraceDiscoveryError

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def is_url(location: object) -> bool:
    """True for ``scheme://...`` strings (``file://`` included)."""
    return isinstance(location, str) and bool(_URL.match(location))


def file_url_path(url: str) -> Path:
    """The local path of a ``file://`` URL (``file:///abs/path`` or ``file://localhost/...``)."""
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise TraceDiscoveryError(
            f"{url}: a file:// URL naming another host is not supported; mount the folder "
            "and give its local path"
        )
    return Path(unquote(parsed.path))


def trace_location(location: str | Path | RemotePath,
                   storage_options: dict[str, Any] | None = None) -> Path | RemotePath:
    """A local :class:`~pathlib.Path` for paths and ``file://`` URLs, else a
    :class:`RemotePath` for the fsspec URL."""
    if isinstance(location, RemotePath):
        return location
    if isinstance(location, Path):
        return location.expanduser()
    if not is_url(location):
        return Path(location).expanduser()
    if location.lower().startswith("file://"):
        return file_url_path(location)
    return RemotePath(location, storage_options)


class RemotePath:
    """A file or folder behind an fsspec URL, with the ``Path`` methods loading uses.

    Deliberately has no ``__fspath__``: nothing may open it as a local file by accident.
    """

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        stripped = url.rstrip("/")
        self.url = url if stripped.endswith(":") else stripped
        self.storage_options = dict(storage_options or {})
        self._fs: Any = None
        self._path = ""
        self._kind: str | None = None  # "file"/"directory" when a listing told us

    # -- the filesystem ---------------------------------------------------------------
    @property
    def fs(self) -> Any:
        """The fsspec filesystem (created on first use)."""
        if self._fs is None:
            try:
                import fsspec
            except ImportError as exc:  # pragma: no cover - fsspec is a dependency
                raise TraceDiscoveryError(
                    f"{self.url}: reading URLs needs fsspec; install it with "
                    "`pip install fsspec`"
                ) from exc
            try:
                self._fs, self._path = fsspec.core.url_to_fs(self.url, **self.storage_options)
            except (ImportError, ValueError) as exc:
                scheme = self.url.split("://", 1)[0]
                raise TraceDiscoveryError(
                    f"{self.url}: cannot open {scheme}:// storage ({exc}); install the fsspec "
                    f"implementation for {scheme} (e.g. s3fs for s3://, gcsfs for gs://)"
                ) from exc
        return self._fs

    @property
    def fs_path(self) -> str:
        """The path inside the filesystem (the URL without its scheme)."""
        _ = self.fs
        return self._path

    # -- the Path interface used by loading ---------------------------------------------
    @property
    def name(self) -> str:
        """The last component of the URL."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> RemotePath:
        """The folder holding this file."""
        head = self.url.rstrip("/").rsplit("/", 1)[0]
        return RemotePath(head, self.storage_options)

    def __truediv__(self, name: str) -> RemotePath:
        return RemotePath(f"{self.url.rstrip('/')}/{name}", self.storage_options)

    def open(self, mode: str = "rb") -> IO[bytes]:
        """Open for reading (binary)."""
        if mode != "rb":
            raise ValueError(f"{self.url}: remote trace files are only read (mode 'rb')")
        return self.fs.open(self.fs_path, "rb")

    def read_bytes(self) -> bytes:
        """The whole file."""
        with self.open("rb") as fh:
            return fh.read()

    def stat(self) -> SimpleNamespace:
        """An object with ``st_size`` (bytes)."""
        size = self.fs.size(self.fs_path)
        if size is None:  # pragma: no cover - backends that cannot tell
            size = len(self.read_bytes())
        return SimpleNamespace(st_size=int(size))

    def exists(self) -> bool:
        """Whether the file or folder exists."""
        return bool(self.fs.exists(self.fs_path))

    def is_file(self) -> bool:
        """Whether this is a file."""
        if self._kind is not None:
            return self._kind == "file"
        return bool(self.fs.isfile(self.fs_path))

    def is_dir(self) -> bool:
        """Whether this is a folder."""
        return bool(self.fs.isdir(self.fs_path))

    def iterdir(self) -> Iterator[RemotePath]:
        """The entries directly inside this folder."""
        scheme = self.url.split("://", 1)[0]
        entries = self.fs.ls(self.fs_path, detail=True)
        for entry in sorted(entries, key=lambda e: str(e["name"])):
            text = str(entry["name"])
            child = RemotePath(text if is_url(text) else f"{scheme}://{text.lstrip('/')}",
                               self.storage_options)
            child._fs, child._path = self.fs, text
            child._kind = entry.get("type")
            yield child

    # -- identity -----------------------------------------------------------------------
    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"RemotePath({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemotePath) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    def __lt__(self, other: RemotePath) -> bool:
        return self.url < other.url

