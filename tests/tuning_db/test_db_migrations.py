"""Alembic migrations: an empty database reaches head, models and migrations agree, downgrade works."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import MetaData, Table, inspect, select, text

from tests.support.db_standings import as_rows, expected_standings
from tests.support.db_test_helpers import CPU, GPU, W1, rec, register, steps
from tuning_db import DBSettings, RecordIn, TuningDB, downgrade, head_revision, sqlite_url, steps_hash, upgrade
from tuning_db.engine import make_engine, write_engine
from tuning_db.migrate import current_revision
from tuning_db.models import Base, schedules_table
from tuning_db.rows import record_row, utcnow
from tuning_db.standings import refresh

TABLES = {"workloads", "targets", "jobs", "records", "schedules"}
PREVIOUS = "0001_initial"


def test_upgrade_empty_database_to_head(empty_db_url: str) -> None:
    upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    try:
        insp = inspect(engine)
        assert TABLES <= set(insp.get_table_names())
        assert {"ix_records_best", "ix_records_steps", "ix_records_job"} <= {
            ix["name"] for ix in insp.get_indexes("records")
        }
        assert {ix["name"] for ix in insp.get_indexes("schedules")} == {"ix_schedules_best"}
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


def _plant_previous_revision(url: str) -> None:
    """A database at the previous revision with schedules of every kind, written as that schema was."""
    upgrade(url, PREVIOUS)
    now = utcnow()
    wrong, crash, timeout = 6, 7, 5
    records = (
        [rec(W1, CPU, 0, m) for m in (3e-3, 1e-3, 2e-3)]  # verified, cost 2e-3
        + [rec(W1, CPU, 1, 0.1e-3)] + [RecordIn(W1, CPU, steps(1), error_code=wrong, error_msg=f"err {k}")
                                       for k in range(2)]  # racy: disqualified
        + [rec(W1, CPU, 2, m) for m in (1.5e-3, 1.2e-3)]  # unverified, the slower of two
        + [RecordIn(W1, CPU, steps(3), error_code=timeout)]  # no valid record
        + [rec(W1, CPU, 4, 1e-3) for _ in range(4)] + [RecordIn(W1, CPU, steps(4), error_code=crash)]
        + [rec(W1, GPU, 0, m) for m in (5e-3, 4e-3, 4e-3, 6e-3)]  # verified, even count: upper median
    )
    engine = make_engine(url)
    try:
        with write_engine(engine).begin() as conn:
            meta = MetaData()
            tables = {n: Table(n, meta, autoload_with=conn) for n in ("workloads", "targets", "jobs", "records")}
            conn.execute(tables["workloads"].insert(), [{"key": W1, "name": "mm", "spec": "{}", "flops": 1.0,
                                                          "created": now}])
            conn.execute(tables["targets"].insert(), [{"key": t, "kind": "cpu", "spec": "{}", "created": now}
                                                      for t in (CPU, GPU)])
            conn.execute(tables["jobs"].insert(), [{"id": "j1", "state": "running", "workload_key": W1,
                                                     "target_key": CPU, "request": "{}", "trials_done": 0,
                                                     "best_median": None, "error": "", "created": now,
                                                     "updated": now, "owner": "bob"}])
            rows = [record_row(r, now) for r in records]
            for r in rows:
                del r["origin"]  # the previous schema has no origin
            conn.execute(tables["records"].insert(), rows)
    finally:
        engine.dispose()


def test_upgrade_from_previous_revision_back_fills_standings(empty_db_url: str) -> None:
    _plant_previous_revision(empty_db_url)
    with TuningDB(empty_db_url) as db:  # opening migrates to head
        with db.engine.connect() as conn:
            assert current_revision(conn) == head_revision()
        for tk in (CPU, GPU):
            records = db.records(W1, tk)
            assert {r.origin for r in records} == {""}  # older records count as local
            assert as_rows(db.standings(W1, tk, include_disqualified=True)) == expected_standings(records)
        best = db.best(W1, CPU)
        assert best.median == pytest.approx(2e-3) and db.standing(W1, CPU, best.steps_hash).verified
        assert db.best(W1, GPU).median == pytest.approx(5e-3)
        racy = db.standing(W1, CPU, steps_hash(steps(1)))
        assert racy.disqualified and racy.reason == "WRONG_ANSWER: err 0" and racy.n_valid == 1
        crashed = db.standing(W1, CPU, steps_hash(steps(4)))
        assert crashed.disqualified and crashed.reason == "WORKER_CRASHED: " and crashed.n_valid == 4
        two = db.standing(W1, CPU, steps_hash(steps(2)))
        assert not two.verified and two.cost == pytest.approx(1.5e-3)
        timed_out = db.standing(W1, CPU, steps_hash(steps(3)))
        assert timed_out.record is None and timed_out.cost is None and not timed_out.disqualified
        assert db.get_job("j1").cancelled_by == ""
        # the SQL back-fill and the rule applied on every insert agree, column for column
        with db.engine.connect() as conn:
            back_filled = sorted(tuple(r) for r in conn.execute(select(schedules_table)))
        with write_engine(db.engine).begin() as conn:
            refresh(conn, [(r[0], r[1], r[2]) for r in back_filled])
        with db.engine.connect() as conn:
            assert sorted(tuple(r) for r in conn.execute(select(schedules_table))) == back_filled
        assert len(back_filled) == 6
        db.commit_records([rec(W1, CPU, 2, 1.3e-3)])  # the third local record verifies it
        assert db.standing(W1, CPU, steps_hash(steps(2))).verified
    downgrade(empty_db_url, PREVIOUS)
    engine = make_engine(empty_db_url)
    try:
        insp = inspect(engine)
        assert "schedules" not in insp.get_table_names()
        assert "origin" not in {c["name"] for c in insp.get_columns("records")}
        with engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM records")).scalar() == 19  # 18 planted, 1 new
    finally:
        engine.dispose()
