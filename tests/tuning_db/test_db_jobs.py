"""Jobs: creation, progress, and the state machine (illegal transitions are named)."""

from __future__ import annotations

import pytest

from tests.support.db_test_helpers import CPU, W1, rec, register
from tuning_db import JobState, TuningDB
from tuning_db.jobs import TRANSITIONS


def test_create_get_list(db: TuningDB) -> None:
    register(db)
    req = {"trials": 200, "searcher": "evolutionary", "cost_model": "xgb", "priority": 3}
    job = db.create_job(W1, CPU, req, owner="alice")
    assert job.state == JobState.QUEUED == "queued" and not job.finished
    assert job.request == req and job.owner == "alice" and job.trials_done == 0 and job.best_median is None
    assert len(job.id) == 36 and job.created == job.updated
    assert db.get_job(job.id) == job and db.get_job("missing") is None
    other = db.create_job(W1, CPU, job_id="fixed-id")
    assert other.id == "fixed-id" and other.request == {}
    assert [j.id for j in db.list_jobs()] == [job.id, other.id]
    with pytest.raises(ValueError, match="already exists"):
        db.create_job(W1, CPU, job_id="fixed-id")


def test_create_job_for_unknown_workload(db: TuningDB) -> None:
    register(db)
    with pytest.raises(ValueError, match="unknown workload key.*'nope'"):
        db.create_job("nope", CPU)
    assert db.list_jobs() == []


def test_lifecycle_and_progress(db: TuningDB) -> None:
    register(db)
    job = db.create_job(W1, CPU, {"trials": 64})
    running = db.update_job(job.id, state="running", owner="worker-3")
    assert running.state == "running" and running.owner == "worker-3" and running.updated >= job.updated
    progress = db.update_job(job.id, state="running", trials_done=32, best_median=1.5e-3)
    assert (progress.trials_done, progress.best_median) == (32, 1.5e-3)
    db.commit_record(rec(W1, CPU, 0, 1.5e-3, job_id=job.id))  # records may point at their job
    done = db.update_job(job.id, state=JobState.DONE, trials_done=64)
    assert done.finished and done.trials_done == 64 and done.request == {"trials": 64}
    assert db.records()[0].job_id == job.id
    assert [j.id for j in db.list_jobs(state="done")] == [job.id] and db.list_jobs(state="queued") == []


@pytest.mark.parametrize(
    "path, bad",
    [
        ([], "done"),
        (["running", "done"], "running"),
        (["cancelled"], "queued"),
        (["running", "failed"], "done"),
        (["failed"], "running"),
    ],
)
def test_illegal_transitions_are_named(db: TuningDB, path: list[str], bad: str) -> None:
    register(db)
    job = db.create_job(W1, CPU)
    for state in path:
        db.update_job(job.id, state=state)
    current = path[-1] if path else "queued"
    with pytest.raises(ValueError, match=f"invalid state transition '{current}' -> '{bad}'"):
        db.update_job(job.id, state=bad)
    after = db.get_job(job.id)
    assert after is not None and after.state == current  # nothing changed


def test_every_listed_transition_is_accepted(db: TuningDB) -> None:
    register(db)
    route_to = {JobState.QUEUED: [], JobState.RUNNING: ["running"]}  # how to reach each live state
    assert all(not TRANSITIONS[s] for s in JobState if s not in route_to)  # the others are final
    for src, route in route_to.items():
        for dst in TRANSITIONS[src]:
            job = db.create_job(W1, CPU)
            for s in route:
                db.update_job(job.id, state=s)
            assert db.update_job(job.id, state=dst).state == dst


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"state": "paused"}, "unknown job state 'paused'"),
        ({"workload_key": "x"}, "read-only field"),
        ({"trials_done": -1}, "trials_done"),
        ({"best_median": float("inf")}, "best_median"),
        ({"error": 3}, "error must be a str"),
        ({"cancelled_by": None}, "cancelled_by must be a str"),
        ({"cancelled_by": "x" * 256}, "cancelled_by is longer than 255"),
    ],
)
def test_bad_updates_are_rejected(db: TuningDB, fields: dict, match: str) -> None:
    register(db)
    job = db.create_job(W1, CPU)
    with pytest.raises(ValueError, match=match):
        db.update_job(job.id, **fields)
    assert db.get_job(job.id) == job
    with pytest.raises(ValueError, match="unknown job id"):
        db.update_job("nope", state="running")


def test_cancel_records_who_cancelled(db: TuningDB) -> None:
    register(db)
    job = db.create_job(W1, CPU, owner="bob")
    assert job.cancelled_by == ""
    cancelled = db.update_job(job.id, state="cancelled", cancelled_by="alice")
    assert cancelled.state == "cancelled" and cancelled.cancelled_by == "alice" and cancelled.owner == "bob"
    assert db.get_job(job.id).cancelled_by == "alice" and db.list_jobs("cancelled")[0].cancelled_by == "alice"
    other = db.create_job(W1, CPU)
    assert db.update_job(other.id, state="running").cancelled_by == ""
