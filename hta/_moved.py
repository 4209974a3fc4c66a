"""Old module names that moved, kept working with a deprecation warning.

``hta.loading`` was two layers in one folder; it became :mod:`hta.kineto` (the file
format) and :mod:`hta.job` (loading a job: rank loading, the cache, executors, the
distributed job), and ``hta.parallel`` became :mod:`hta.job.executors`. Importing an old
name returns the new module itself (so patches and ``isinstance`` checks keep working)
and warns once.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from types import ModuleType

#: old module name -> new module name
MOVED: dict[str, str] = {
    "hta.loading.errors": "hta.errors",
    "hta.loading.rawio": "hta.kineto.rawio",
    "hta.loading.stream": "hta.kineto.stream",
    "hta.loading.files": "hta.kineto.files",
    "hta.loading.discovery": "hta.kineto.discovery",
    "hta.loading.decode": "hta.kineto.decode",
    "hta.loading.columns": "hta.kineto.columns",
    "hta.loading.side_tables": "hta.kineto.side_tables",
    "hta.loading.structs": "hta.kineto.structs",
    "hta.loading.symbols": "hta.kineto.symbols",
    "hta.loading.timeparse": "hta.kineto.timeparse",
    "hta.loading.native": "hta.kineto.native",
    "hta.loading.events": "hta.kineto.pydecode",
    "hta.loading.loader": "hta.job.load",
    "hta.loading.rank_load": "hta.job.rank_load",
    "hta.loading.cache": "hta.job.cache",
    "hta.loading.arrow_files": "hta.job.arrow_files",
    "hta.loading.lazy": "hta.job.distributed",
    "hta.parallel": "hta.job.executors",
    # names that told history rather than content (issue 16, item 7)
    "hta.facade.hta_main": "hta.facade.steps_and_ops",
    "hta.commands.common": "hta.commands.args_and_output",
    "hta.analysis.diff.common": "hta.analysis.diff.scope",
    "hta.plots._common": "hta.plots._figure_parts",
    "hta.synthetic.steps": "hta.synthetic.training_step",
}


def alias(old: str) -> ModuleType:
    """Make module ``old`` the module it moved to, with a :class:`DeprecationWarning`."""
    new = MOVED[old]
    warnings.warn(f"{old} moved to {new}; import it from there (the old name will be "
                  "removed)", DeprecationWarning, stacklevel=3)
    module = importlib.import_module(new)
    sys.modules[old] = module
    return module
