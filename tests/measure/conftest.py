"""Shared set-up for the measure tests: helpers importable whatever pytest's import mode."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture()
def cache_dir(tmp_path: Path) -> Path:
    """A private artifact cache, so tests never see each other's (or a user's) builds."""
    d = tmp_path / "kernels"
    d.mkdir()
    return d
