"""A schedule measured several times is judged by all its measurements (the upper median of its
records), so one lucky measurement does not make it the best: on SQLite and PostgreSQL."""

from __future__ import annotations

import random

import pytest

from tests.support.db_test_helpers import CPU, W1, rec, register
from tuning_db import TuningDB, ranking


def test_a_lucky_measurement_re_measured_slower_loses_to_a_steady_schedule(db: TuningDB) -> None:
    register(db)
    lucky = db.commit_record(rec(W1, CPU, 1, 1.0e-3))
    steady = db.commit_record(rec(W1, CPU, 2, 1.2e-3))
    assert db.best(W1, CPU).id == lucky  # measured once each: the fastest record
    slow = db.commit_records([rec(W1, CPU, 1, 1.6e-3), rec(W1, CPU, 1, 1.5e-3)])  # re-measured
    best = db.best(W1, CPU)
    assert best.id == steady and best.median == pytest.approx(1.2e-3)
    top = db.top_k(W1, CPU, 5)
    assert [r.id for r in top] == [steady, slow[1]]  # one record per schedule: its middle measurement
    assert db.best_per_workload(CPU)[0].id == steady


def test_two_measurements_count_as_the_slower_one(db: TuningDB) -> None:
    register(db)
    first = db.commit_record(rec(W1, CPU, 1, 1.0e-3))
    db.commit_record(rec(W1, CPU, 2, 1.1e-3))
    again = db.commit_record(rec(W1, CPU, 1, 1.3e-3))
    assert db.best(W1, CPU).median == pytest.approx(1.1e-3)
    assert first != again


def test_a_better_schedule_beyond_the_first_window_is_still_found(db: TuningDB) -> None:
    """More lucky records than the window holds, each re-measured slow: the steady schedule whose one
    record lies outside the first window is the answer."""
    register(db)
    n = ranking.BEST_WINDOW + 8
    db.commit_records([rec(W1, CPU, i, 1e-3 + i * 1e-6) for i in range(n)])
    db.commit_records([rec(W1, CPU, i, 9e-3) for i in range(n) for _ in range(2)])
    steady = db.commit_record(rec(W1, CPU, 999, 2e-3))
    assert db.best(W1, CPU).id == steady
    assert len(db.top_k(W1, CPU, 3)) == 3


@pytest.mark.parametrize("seed", range(4))
def test_matches_brute_force(db: TuningDB, seed: int) -> None:
    register(db)
    rng = random.Random(seed)
    recs = [(rng.randrange(12), rng.choice([1, 2, 3, 4, 5, 6]) * 1e-3) for _ in range(60)]
    ids = db.commit_records([rec(W1, CPU, i, m) for i, m in recs])
    by_schedule: dict[int, list[tuple[float, int]]] = {}
    for (i, m), rid in zip(recs, ids):
        by_schedule.setdefault(i, []).append((m, rid))
    reps = sorted(sorted(v)[len(v) // 2] for v in by_schedule.values())
    assert [r.id for r in db.top_k(W1, CPU, 5)] == [rid for _, rid in reps[:5]]
    assert db.best(W1, CPU).id == reps[0][1]
