"""What `best`/`top_k`/`standings` serve, on SQLite and PostgreSQL: a schedule with a wrong-answer,
runtime-error or crashed record never; verified schedules (3 local valid records) before unverified
ones; each by the upper median of its records, so one lucky measurement does not win."""

from __future__ import annotations

import random

import pytest

from tests.support.db_standings import as_rows, expected_standings
from tests.support.db_test_helpers import CPU, GPU, W1, rec, register, steps
from tuning_db import MIN_VERIFIED, RecordIn, TuningDB, steps_hash

WRONG_ANSWER, RUNTIME_ERROR, RUN_TIMEOUT, WORKER_CRASHED = 6, 4, 5, 7


def _failed(i: int, code: int, msg: str = "boom") -> RecordIn:
    return RecordIn(W1, CPU, steps(i), costs=(), error_code=code, error_msg=msg)


def test_one_fast_valid_and_two_wrong_answers_is_never_served(db: TuningDB) -> None:
    """A racy kernel: right (and fast) once, wrong twice. Planted first, so it would win on speed."""
    register(db)
    racy = db.commit_records([rec(W1, CPU, 1, 0.1e-3), _failed(1, WRONG_ANSWER, "max abs err 3.5 at [7]"),
                              _failed(1, WRONG_ANSWER, "max abs err 1.0 at [2]")])
    honest = db.commit_record(rec(W1, CPU, 2, 5e-3))
    assert db.best(W1, CPU).id == honest
    assert [r.id for r in db.top_k(W1, CPU, 10)] == [honest]
    st = db.standing(W1, CPU, steps_hash(steps(1)))
    assert st.disqualified and not st.verified and st.n_disqualifying == 2 and st.n_valid == 1
    assert st.reason == "WRONG_ANSWER: max abs err 3.5 at [7]" and st.record.id == racy[0]
    assert [s.steps_hash for s in db.standings(W1, CPU)] == [steps_hash(steps(2))]
    listed = db.standings(W1, CPU, include_disqualified=True)
    assert [s.steps_hash for s in listed] == [steps_hash(steps(2)), steps_hash(steps(1))]
    assert [r.id for r in db.best_per_workload(CPU)] == [honest]


@pytest.mark.parametrize("code, name", [(RUNTIME_ERROR, "RUNTIME_ERROR"), (WORKER_CRASHED, "WORKER_CRASHED")])
def test_disqualification_is_for_good(db: TuningDB, code: int, name: str) -> None:
    """A verified schedule that crashes once later is out, however many good records it has."""
    register(db)
    db.commit_records([rec(W1, CPU, 1, 1e-3) for _ in range(5)])
    assert db.standing(W1, CPU, steps_hash(steps(1))).verified
    db.commit_record(_failed(1, code, "segfault"))
    db.commit_records([rec(W1, CPU, 1, 1e-3) for _ in range(5)])
    assert db.best(W1, CPU) is None and db.top_k(W1, CPU, 3) == [] and db.best_per_workload() == []
    st = db.standing(W1, CPU, steps_hash(steps(1)))
    assert st.disqualified and not st.verified and st.reason == f"{name}: segfault" and st.n_valid == 10


def test_a_timeout_does_not_disqualify(db: TuningDB) -> None:
    register(db)
    db.commit_records([rec(W1, CPU, 1, 1e-3), _failed(1, RUN_TIMEOUT), _failed(2, RUN_TIMEOUT)])
    assert db.best(W1, CPU).steps == steps(1)
    only_failed = db.standing(W1, CPU, steps_hash(steps(2)))
    assert only_failed.record is None and only_failed.cost is None and not only_failed.disqualified
    assert db.standing(W1, CPU, steps_hash(steps(99))) is None


def test_one_lucky_record_loses_to_a_verified_schedule(db: TuningDB) -> None:
    register(db)
    lucky = db.commit_record(rec(W1, CPU, 1, 0.5e-3))
    assert db.best(W1, CPU).id == lucky  # nothing verified yet: the fastest unverified is the fallback
    assert not db.standing(W1, CPU, steps_hash(steps(1))).verified
    steady = db.commit_records([rec(W1, CPU, 2, m) for m in (1.3e-3, 1.2e-3, 1.25e-3)])
    best = db.best(W1, CPU)
    assert best.id == steady[2] and best.median == pytest.approx(1.25e-3)  # the middle of three
    st = db.standing(W1, CPU, best.steps_hash)
    assert st.verified and st.n_valid == MIN_VERIFIED and st.cost == pytest.approx(1.25e-3)
    assert [r.id for r in db.top_k(W1, CPU, 5)] == [steady[2], lucky]  # verified first, then unverified


def test_a_lucky_measurement_re_measured_slower_loses(db: TuningDB) -> None:
    register(db)
    ids = db.commit_records([rec(W1, CPU, 1, m) for m in (1.0e-3, 1.6e-3, 1.5e-3)])
    steady = db.commit_records([rec(W1, CPU, 2, m) for m in (1.2e-3, 1.2e-3, 1.3e-3)])
    assert db.best(W1, CPU).id == steady[1]
    assert [r.id for r in db.top_k(W1, CPU, 5)] == [steady[1], ids[2]]


def test_unverified_schedules_are_judged_by_the_upper_median(db: TuningDB) -> None:
    register(db)
    db.commit_records([rec(W1, CPU, 1, 1.0e-3), rec(W1, CPU, 1, 1.3e-3)])  # two: the slower counts
    other = db.commit_record(rec(W1, CPU, 2, 1.1e-3))
    assert db.best(W1, CPU).id == other


def test_imported_records_never_verify(db: TuningDB) -> None:
    register(db)
    db.commit_records([RecordIn(W1, CPU, steps(1), costs=(1e-3,), origin="import:x.jsonl") for _ in range(5)])
    st = db.standing(W1, CPU, steps_hash(steps(1)))
    assert (st.n_valid, st.n_imported, st.verified) == (0, 5, False)
    db.commit_records([rec(W1, CPU, 1, 2e-3) for _ in range(3)])  # re-measured here
    st = db.standing(W1, CPU, steps_hash(steps(1)))
    assert (st.n_valid, st.n_imported, st.verified) == (3, 5, True) and st.cost == pytest.approx(2e-3)
    assert st.record.origin == ""


def test_standings_limit_and_bad_k(db: TuningDB) -> None:
    register(db)
    db.commit_records([rec(W1, CPU, i, (i + 1) * 1e-3) for i in range(4)] + [_failed(9, WRONG_ANSWER)])
    assert len(db.standings(W1, CPU)) == 4 and len(db.standings(W1, CPU, 2)) == 2
    assert len(db.standings(W1, CPU, 5, include_disqualified=True)) == 5
    assert db.standings(W1, CPU, 0) == [] and db.top_k(W1, CPU, 0) == [] and db.best(W1, GPU) is None
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="k must be"):
            db.standings(W1, CPU, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(4))
def test_matches_brute_force(db: TuningDB, seed: int) -> None:
    """Random records (valid, disqualifying, other failures; local and imported), in random batches."""
    register(db)
    rng = random.Random(seed)
    recs = []
    for _ in range(120):
        i = rng.randrange(15)
        kind = rng.random()
        if kind < 0.07:
            recs.append(_failed(i, rng.choice([WRONG_ANSWER, RUNTIME_ERROR, WORKER_CRASHED]), f"bad{rng.randrange(9)}"))
        elif kind < 0.15:
            recs.append(_failed(i, RUN_TIMEOUT))
        else:
            origin = "" if rng.random() < 0.7 else "import:planted"
            recs.append(rec(W1, CPU, i, rng.choice([1, 2, 3, 4, 5, 6]) * 1e-3, origin=origin))
    while recs:
        n = rng.randrange(1, 12)
        db.commit_records(recs[:n])
        recs = recs[n:]
    want = expected_standings(db.records(W1, CPU))
    assert as_rows(db.standings(W1, CPU, include_disqualified=True)) == want
    servable = [row for row in want if row[5] == 0]
    assert as_rows(db.standings(W1, CPU)) == servable
    assert [r.id for r in db.top_k(W1, CPU, 5)] == [row[1] for row in servable[:5]]
    assert db.best(W1, CPU).id == servable[0][1]
    for row in want:
        assert as_rows([db.standing(W1, CPU, row[0])]) == [row]


def test_rebuild_standings_after_a_raw_bulk_load(db: TuningDB) -> None:
    """A benchmark that fills `records` with raw SQL rebuilds the standings, then `best` sees them."""
    from tuning_db.models import records_table
    from tuning_db.rows import record_row, utcnow

    register(db)
    rows = [record_row(rec(W1, CPU, i % 3, (1 + i) * 1e-3), utcnow()) for i in range(9)]
    with db.engine.begin() as conn:
        conn.execute(records_table.insert(), rows)
    assert db.best(W1, CPU) is None  # nothing told the standings
    assert db.rebuild_standings() == 3 and db.rebuild_standings(W1, GPU) == 0
    assert as_rows(db.standings(W1, CPU, include_disqualified=True)) == expected_standings(db.records())
    assert db.best(W1, CPU).steps == steps(0)
