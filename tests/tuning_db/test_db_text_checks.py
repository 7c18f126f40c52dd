"""NUL characters are refused with a ValueError naming the field (PostgreSQL would answer with an
error that printed the SQL and its parameters), and SQL errors never print their parameters."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tests.support.db_test_helpers import CPU, W1, rec, register, steps
from tuning_db import RecordIn, TuningDB

NUL = "\x00"


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda db: db.ensure_target(f"cpu{NUL}x", "cpu", {}), "target key"),
        (lambda db: db.ensure_target("cpu2", f"c{NUL}", {}), "target kind"),
        (lambda db: db.ensure_target("cpu2", "cpu", {"name": f"a{NUL}b"}), r"target spec\.name"),
        (lambda db: db.ensure_target("cpu2", "cpu", {f"k{NUL}": 1}), "target spec has a key"),
        (lambda db: db.ensure_workload("k" * 64, f"mm{NUL}", {}, 1.0), "workload name"),
        (lambda db: db.ensure_workload("k" * 64, "mm", {"dag": [{"op": f"x{NUL}"}]}, 1.0),
         r"workload spec\.dag\[0\]\.op"),
        (lambda db: db.commit_record(RecordIn(W1, CPU, steps(0), costs=(1e-3,), host=f"h{NUL}")), "record 0: host"),
        (lambda db: db.commit_record(rec(W1, CPU, 0, 1e-3, device=f"d{NUL}")), "record 0: device"),
        (lambda db: db.commit_record(rec(W1, CPU, 0, 1e-3, worker_id=f"w{NUL}")), "record 0: worker_id"),
        (lambda db: db.commit_record(RecordIn(W1, CPU, steps(0), error_code=6, error_msg=f"e{NUL}")),
         "record 0: error_msg"),
        (lambda db: db.commit_record(rec(W1, CPU, 0, 1e-3, origin=f"import{NUL}")), "record 0: origin"),
        (lambda db: db.commit_record(RecordIn(W1, CPU, [{"loop": f"i{NUL}"}], costs=(1e-3,))),
         r"record 0: steps\[0\]\.loop"),
        (lambda db: db.commit_record(RecordIn(f"{W1[:63]}{NUL}", CPU, steps(0), costs=(1e-3,))), "workload_key"),
        (lambda db: db.create_job(W1, CPU, {"searcher": f"x{NUL}"}), r"job request\.searcher"),
        (lambda db: db.create_job(W1, CPU, owner=f"al{NUL}ice"), "owner"),
    ],
)
def test_nul_in_text_is_refused_naming_the_field(db: TuningDB, call, field: str) -> None:
    register(db)
    with pytest.raises(ValueError, match=f"{field}.*NUL"):
        call(db)
    assert db.count_records() == 0 and db.list_jobs() == [] and len(db.targets()) == 2


def test_nul_in_job_updates_is_refused(db: TuningDB) -> None:
    register(db)
    job = db.create_job(W1, CPU)
    for field in ("owner", "error", "cancelled_by"):
        with pytest.raises(ValueError, match=f"update_job: {field} contains a NUL"):
            db.update_job(job.id, **{field: f"x{NUL}"})
    assert db.get_job(job.id) == job


def test_sql_errors_hide_their_parameters(db: TuningDB) -> None:
    with pytest.raises(DBAPIError) as err, db.engine.connect() as conn:
        conn.execute(text("SELECT key FROM no_such_table WHERE key = :k"), {"k": "secret-parameter"})
    assert "secret-parameter" not in str(err.value) and "hidden" in str(err.value)
