"""Old module names keep working after the move to hta.kineto / hta.job, with a warning."""

from __future__ import annotations

import importlib
import sys

import pytest

from hta._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_name_is_the_new_module_and_warns(old: str) -> None:
    sys.modules.pop(old, None)  # import the alias afresh, so that it warns again
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


def test_every_new_name_exists() -> None:
    for new in MOVED.values():
        importlib.import_module(new)


def test_public_names_through_old_paths() -> None:
    sys.modules.pop("hta.loading.loader", None)
    with pytest.warns(DeprecationWarning):
        from hta.loading.loader import load_trace  # noqa: F401
    from hta.job.load import load_trace as new_load

    assert load_trace is new_load
