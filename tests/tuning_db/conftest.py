"""Fixtures for the tuning_db suite: every test taking `db_url`/`db` runs on SQLite and PostgreSQL.

This folder has no `__init__.py` on purpose: as a package it would be imported as `tuning_db` and
shadow the real package. Test modules are named `test_db_*` so their basenames stay unique.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuning_db import TuningDB, sqlite_url

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty database: a fresh SQLite file, or a fresh database on the session's server."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "db" / "tuning.db")
        return
    pg = request.getfixturevalue("postgres_server_session")
    name = f"t_{uuid.uuid4().hex[:16]}"
    url = pg.create_database(name)
    yield url
    pg.drop_database(name)


@pytest.fixture
def db(db_url: str) -> Iterator[TuningDB]:
    database = TuningDB(db_url)
    yield database
    database.close()


@pytest.fixture
def empty_db_url(db_url: str) -> str:
    """Alias that reads better in tests about migrations and imports into an empty database."""
    return db_url
