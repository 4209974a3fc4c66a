"""A two-worker local Dask cluster for the tests that run a job on Dask."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def local_client(config: dict[str, Any] | None = None, **cluster: Any) -> Iterator[Any]:
    """A client of a two-process, one-thread-per-worker ``LocalCluster`` (no dashboard,
    quiet logs); ``cluster`` adds or overrides ``LocalCluster`` arguments, ``config`` is
    Dask configuration set while the cluster starts. Both are closed on exit."""
    import dask
    import distributed

    options: dict[str, Any] = {"processes": True, "n_workers": 2, "threads_per_worker": 1,
                               "dashboard_address": None, "silence_logs": 50, **cluster}
    with dask.config.set(config or {}):
        local = distributed.LocalCluster(**options)
        client = distributed.Client(local)
    try:
        yield client
    finally:
        client.close()
        local.close()
