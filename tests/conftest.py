"""Fixtures shared by several test folders. Folder conftests hold only their own folder's fixtures.

Markers (registered in pyproject.toml, `--strict-markers`): `ray`, `postgres`, `slow`, `gpu`.
`bash scripts/test.sh --quick` deselects all four; `bash scripts/test.sh` (CI) runs everything;
`-m gpu` tests need an NVIDIA GPU and skip elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.postgres import postgres_server_session  # noqa: F401  (a session fixture: tuning_db, service)


@pytest.fixture()
def cache_dir(tmp_path: Path) -> Path:
    """A private artifact cache, so tests never see each other's (or a user's) builds."""
    d = tmp_path / "kernels"
    d.mkdir()
    return d
