"""Alembic migrations: an empty database reaches head, models and migrations agree, downgrade works."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from tests.support.db_test_helpers import CPU, W1, rec, register
from tuning_db import DBSettings, TuningDB, downgrade, head_revision, sqlite_url, upgrade
from tuning_db.engine import make_engine
from tuning_db.migrate import current_revision
from tuning_db.models import Base

TABLES = {"workloads", "targets", "jobs", "records"}


def test_upgrade_empty_database_to_head(empty_db_url: str) -> None:
    upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    try:
        insp = inspect(engine)
        assert TABLES <= set(insp.get_table_names())
        assert {"ix_records_best", "ix_records_steps", "ix_records_job"} <= {
            ix["name"] for ix in insp.get_indexes("records")
        }
        with engine.connect() as conn:
            assert current_revision(conn) == head_revision()
            if conn.dialect.name == "sqlite":
                ddl = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'ix_records_best'")).scalar()
            else:
                ddl = conn.execute(text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_records_best'")).scalar()
            assert "error_code = 0" in ddl  # a partial index: failed records are not in it
            diffs = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
        assert diffs == [], f"models and migrations disagree, add a revision: {diffs}"
    finally:
        engine.dispose()
    upgrade(empty_db_url)  # at head already: nothing to do, no error


def test_downgrade_then_reopen_recreates_schema(empty_db_url: str) -> None:
    upgrade(empty_db_url)
    downgrade(empty_db_url, "base")
    engine = make_engine(empty_db_url)
    try:
        assert not TABLES & set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    db = TuningDB(empty_db_url)  # opening migrates
    register(db)
    db.commit_record(rec(W1, CPU, 0, 1e-3))
    assert db.count_records() == 1
    db.close()


def test_reopening_keeps_data(empty_db_url: str) -> None:
    with TuningDB(empty_db_url) as db:
        register(db)
        db.commit_record(rec(W1, CPU, 0, 1e-3))
    with TuningDB(empty_db_url) as db:
        best = db.best(W1, CPU)
        assert best is not None and best.median == pytest.approx(1e-3)


def test_sqlite_file_created_with_parents_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "tuning.db"
    with TuningDB(DBSettings(url=sqlite_url(path), sqlite_busy_timeout_ms=1234, sqlite_cache_mib=3)) as db:
        assert path.is_file()
        with db.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 1234
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -3 * 1024


def test_schema_from_a_newer_version_is_refused(empty_db_url: str) -> None:
    upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    finally:
        engine.dispose()
    with pytest.raises(RuntimeError, match="newer autosched"):
        TuningDB(empty_db_url)
