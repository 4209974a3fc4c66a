"""Shared fixtures: where the real traces are, and loading helpers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces" / "hta"
SAMPLE_TRACES = ROOT / "sample_traces"

sys.path.insert(0, str(Path(__file__).resolve().parent))


def shared_trace(*parts: str) -> Path:
    """Path under ../shared/traces/hta, skipping the test when it is absent."""
    path = SHARED_TRACES.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real traces not available: {path} is absent")
    return path


@pytest.fixture
def shared_traces() -> Path:
    """The folder of real Kineto traces (skips when absent)."""
    return shared_trace()
