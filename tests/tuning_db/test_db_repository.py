"""Records, best/top_k, resume hashes and bad input: the same tests on SQLite and PostgreSQL."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from tests.support.db_test_helpers import CPU, GPU, W1, W2, rec, register, steps
from tuning_db import RecordIn, TuningDB, steps_hash


def test_commit_then_best_and_top_k(db: TuningDB) -> None:
    register(db)
    medians = [3e-3, 1e-3, 5e-3, 2e-3, 4e-3]
    ids = db.commit_records([rec(W1, CPU, i, m) for i, m in enumerate(medians)])
    failed = db.commit_record(rec(W1, CPU, 99, None))
    assert len(ids) == 5 and ids == sorted(ids) and failed > ids[-1]

    best = db.best(W1, CPU)
    assert best is not None
    assert best.id == ids[1] and best.median == pytest.approx(1e-3) and best.ok
    assert best.steps == steps(1) and best.steps_hash == steps_hash(steps(1))
    assert best.costs == pytest.approx((1.1e-3, 1e-3, 0.95e-3))
    assert best.host == "h1" and best.created.tzinfo is not None

    top = db.top_k(W1, CPU, 3)
    assert [r.median for r in top] == pytest.approx([1e-3, 2e-3, 3e-3])
    assert len(db.top_k(W1, CPU, 100)) == 5  # the failed record is never a candidate
    assert db.top_k(W1, CPU, 0) == []
    assert db.best(W1, GPU) is None and db.best(W2, CPU) is None


def test_best_ties_go_to_the_oldest_record(db: TuningDB) -> None:
    register(db)
    first, second = db.commit_records([rec(W1, CPU, 1, 2e-3), rec(W1, CPU, 2, 2e-3)])
    best = db.best(W1, CPU)
    assert best is not None and best.id == first != second


def test_failed_record_is_stored_without_a_median(db: TuningDB) -> None:
    register(db)
    rid = db.commit_record(RecordIn(W1, CPU, steps(0), costs=(math.inf,), error_code=5, error_msg="timeout"))
    (stored,) = db.records()
    assert stored.id == rid and stored.median is None and stored.costs == () and not stored.ok
    assert stored.error_code == 5 and stored.error_msg == "timeout"
    assert db.best(W1, CPU) is None
    assert db.count_records(W1, CPU) == 1 and db.count_records(W1, CPU, ok_only=True) == 0


@pytest.mark.parametrize("costs", [(), (math.inf,), (1e-3, math.nan), ("fast",), (0.0,), (1e-3, -5.0), (-1e-6,)])
def test_valid_record_needs_finite_positive_costs(db: TuningDB, costs: tuple) -> None:
    register(db)
    with pytest.raises(ValueError, match="record 1: costs"):
        db.commit_records([rec(W1, CPU, 0, 1e-3), RecordIn(W1, CPU, steps(1), costs=costs)])
    assert db.count_records() == 0


def test_unknown_workload_is_named_and_nothing_is_stored(db: TuningDB) -> None:
    register(db)
    batch = [rec(W1, CPU, 0, 1e-3), rec("f" * 64, CPU, 1, 1e-3)]
    with pytest.raises(ValueError, match=f"unknown workload key.*{'f' * 64}.*ensure_workload"):
        db.commit_records(batch)
    assert db.count_records() == 0


def test_unknown_target_and_job_are_named(db: TuningDB) -> None:
    register(db)
    with pytest.raises(ValueError, match="unknown target key.*'tpu'"):
        db.commit_record(rec(W1, "tpu", 0, 1e-3))
    with pytest.raises(ValueError, match="unknown job key.*'no-such-job'"):
        db.commit_record(rec(W1, CPU, 0, 1e-3, job_id="no-such-job"))
    assert db.count_records() == 0


def test_bad_record_fields_are_named(db: TuningDB) -> None:
    register(db)
    with pytest.raises(ValueError, match="record 1: error_code"):
        db.commit_records([rec(W1, CPU, 0, 1e-3), RecordIn(W1, CPU, steps(1), costs=(), error_code=-1)])
    with pytest.raises(ValueError, match="steps"):
        db.commit_record(RecordIn(W1, CPU, "{not json", costs=(1e-3,)))
    with pytest.raises(ValueError, match="workload_key"):
        db.commit_record(RecordIn("", CPU, steps(0), costs=(1e-3,)))
    with pytest.raises(ValueError, match="steps must be a JSON list or object"):
        db.commit_record(RecordIn(W1, CPU, 42, costs=(1e-3,)))
    with pytest.raises(ValueError, match="limit"):
        db.records(limit=-1)
    assert db.count_records() == 0


def test_measured_step_hashes_for_resume(db: TuningDB) -> None:
    register(db)
    db.commit_records([rec(W1, CPU, 0, 1e-3), rec(W1, CPU, 1, None), rec(W1, GPU, 2, 1e-3)])
    assert db.measured_step_hashes(W1, CPU) == {steps_hash(steps(0)), steps_hash(steps(1))}
    assert db.measured_step_hashes(W1, GPU) == {steps_hash(steps(2))}
    assert db.measured_step_hashes(W2, CPU) == set()


def test_steps_hash_is_canonical_across_spellings(db: TuningDB) -> None:
    register(db)
    a = db.commit_record(RecordIn(W1, CPU, [{"b": 1, "a": [1, 2]}], costs=(1e-3,)))
    b = db.commit_record(RecordIn(W1, CPU, '[ {"a": [1,2], "b": 1} ]', costs=(2e-3,)))
    ra, rb = db.records()
    assert (ra.id, rb.id) == (a, b) and ra.steps_hash == rb.steps_hash and ra.steps_json == rb.steps_json
    assert len(db.measured_step_hashes(W1, CPU)) == 1


def test_records_filters_count_and_limit(db: TuningDB) -> None:
    register(db)
    db.commit_records(
        [rec(W1, CPU, i, 1e-3 * (i + 1)) for i in range(4)]
        + [rec(W1, CPU, 10, None), rec(W2, GPU, 11, 1e-3), rec(W2, CPU, 12, None)]
    )
    assert db.count_records() == 7
    assert db.count_records(W1) == 5 and db.count_records(W1, CPU, ok_only=True) == 4
    assert db.count_records(target_key=GPU) == 1 and db.count_records(target_key=CPU, ok_only=True) == 4
    assert [r.steps for r in db.records(W1, CPU, limit=2)] == [steps(0), steps(1)]
    assert all(r.ok for r in db.records(ok_only=True)) and len(db.records(ok_only=True)) == 5
    assert [r.target_key for r in db.records(workload_key=W2)] == [GPU, CPU]


def test_best_per_workload_matches_brute_force(db: TuningDB) -> None:
    register(db)
    medians = {(W1, CPU): [3, 1, 2], (W1, GPU): [5, 4], (W2, CPU): [7, 9], (W2, GPU): []}
    i = 0
    for (wk, tk), ms in medians.items():
        for m in ms:
            db.commit_record(rec(wk, tk, i, m * 1e-3))
            i += 1
        db.commit_record(rec(wk, tk, 1000 + i, None))  # failures never win
        i += 1
    got = {(r.workload_key, r.target_key): r.median for r in db.best_per_workload()}
    want = {k: min(ms) * 1e-3 for k, ms in medians.items() if ms}
    assert got == pytest.approx(want)
    assert [(r.workload_key, r.target_key) for r in db.best_per_workload()] == sorted(want)
    only_cpu = db.best_per_workload(target_key=CPU)
    assert {(r.workload_key, r.target_key) for r in only_cpu} == {(W1, CPU), (W2, CPU)}
    for r in db.best_per_workload():
        assert r == db.best(r.workload_key, r.target_key)


def test_ensure_is_idempotent_and_never_overwrites(db: TuningDB) -> None:
    register(db)
    register(db)  # again: no error, nothing duplicated
    assert [w.key for w in db.workloads()] == [W1, W2]
    assert [(t.key, t.kind) for t in db.targets()] == [(CPU, "cpu"), (GPU, "cuda")]
    with pytest.raises(ValueError, match="different spec"):
        db.ensure_workload(W1, "renamed", {"op": "conv2d"}, 1.0)
    with pytest.raises(ValueError, match="different kind or spec"):
        db.ensure_target(CPU, "cuda", {"name": CPU, "cores": 2})
    w = db.workload(W1)
    assert w is not None and w.spec["op"] == "matmul" and w.name == "matmul0"
    assert db.workload("nope") is None and db.target("nope") is None


@pytest.mark.parametrize(
    "args",
    [
        ("", "n", {}, 1.0),
        ("k" * 65, "n", {}, 1.0),
        ("k", "n", ["not", "a", "dict"], 1.0),
        ("k", "n", {}, math.inf),
        ("k", "n", {"x": math.nan}, 1.0),
    ],
)
def test_bad_workload_is_rejected(db: TuningDB, args: tuple) -> None:
    with pytest.raises(ValueError, match="workload"):
        db.ensure_workload(*args)
    assert db.workloads() == []


def test_created_timestamp_round_trips(db: TuningDB) -> None:
    register(db)
    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    db.commit_record(rec(W1, CPU, 0, 1e-3, created=when))
    (r,) = db.records()
    assert r.created == when


def test_best_is_an_index_seek(db: TuningDB) -> None:
    """The hot query reads one range of the per-schedule summary index and the records it returns by
    primary key: no scan of a workload's records, no sort."""
    register(db)
    db.commit_records([rec(W1, CPU, i % 20, 1e-3 * (1 + i % 5)) for i in range(200)])
    stmt = db._best.params(wk=W1, tk=CPU, n=8)  # the exact statement best() runs
    sql = str(stmt.compile(dialect=db.engine.dialect, compile_kwargs={"literal_binds": True}))
    with db.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
            assert "USING INDEX ix_schedules_best" in plan and "TEMP B-TREE" not in plan, plan
            assert "SCAN" not in plan and "INTEGER PRIMARY KEY" in plan, plan
        else:
            conn.execute(text("SET enable_seqscan = off"))  # tiny table: make the planner show its hand
            plan = " ".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + sql))
            assert "ix_schedules_best" in plan and "Sort" not in plan and "pk_records" in plan, plan
