"""What the service asks about jobs: counts by state, a job's record count and its records' outcomes."""

from __future__ import annotations

from tests.support.db_test_helpers import CPU, GPU, W1, W2, rec, register
from tuning_db import JobState, RecordOutcome, TuningDB


def test_count_jobs_by_state(db: TuningDB) -> None:
    assert db.count_jobs_by_state() == dict.fromkeys(JobState, 0)
    assert list(db.count_jobs_by_state()) == list(JobState)  # every state, in declaration order
    register(db)
    jobs = [db.create_job(W1, CPU) for _ in range(4)]
    db.update_job(jobs[0].id, state="running")
    db.update_job(jobs[1].id, state="running")
    db.update_job(jobs[1].id, state="done")
    db.update_job(jobs[2].id, state="cancelled")
    counts = db.count_jobs_by_state()
    assert counts == {JobState.QUEUED: 1, JobState.RUNNING: 1, JobState.DONE: 1, JobState.FAILED: 0,
                      JobState.CANCELLED: 1}
    assert counts["queued"] == 1  # StrEnum keys: plain state names work too
    assert sum(counts.values()) == len(db.list_jobs())


def test_count_records_of_a_job(db: TuningDB) -> None:
    register(db)
    a, b = db.create_job(W1, CPU), db.create_job(W2, GPU)
    assert db.count_records(job_id=a.id) == 0 and db.count_records(job_id="no-such-job") == 0
    db.commit_records([rec(W1, CPU, 0, 1e-3, job_id=a.id), rec(W1, CPU, 1, None, job_id=a.id),
                       rec(W2, GPU, 2, 2e-3, job_id=b.id), rec(W1, CPU, 3, 5e-4)])
    assert db.count_records(job_id=a.id) == 2 and db.count_records(job_id=b.id) == 1
    assert db.count_records(job_id=a.id, ok_only=True) == 1
    assert db.count_records(W2, job_id=a.id) == 0 and db.count_records(W1, CPU, job_id=a.id) == 2
    assert db.count_records() == 4  # no filter: every record, with or without a job


def test_record_outcomes_in_insertion_order(db: TuningDB) -> None:
    register(db)
    job, other = db.create_job(W1, CPU), db.create_job(W1, CPU)
    assert db.record_outcomes(job.id) == [] and db.record_outcomes("no-such-job") == []
    ids = db.commit_records([rec(W1, CPU, 0, 3e-3, job_id=job.id), rec(W1, CPU, 1, None, job_id=job.id),
                             rec(W1, CPU, 2, 9e-3, job_id=other.id)])
    ids += db.commit_records([rec(W1, CPU, 3, 1e-3, job_id=job.id), rec(W1, CPU, 4, None, job_id=job.id,
                                                                         error_code=7)])
    got = db.record_outcomes(job.id)
    assert all(isinstance(o, RecordOutcome) for o in got)
    assert [o.id for o in got] == [ids[0], ids[1], ids[3], ids[4]]
    assert [(o.median, o.error_code, o.ok) for o in got] == [
        (3e-3, 0, True), (None, 2, False), (1e-3, 0, True), (None, 7, False)]
    full = {r.id: r for r in db.records()}  # the same facts as the full records
    assert all((full[o.id].median, full[o.id].error_code, full[o.id].job_id) == (o.median, o.error_code, job.id)
               for o in got)
    assert [o.id for o in db.record_outcomes(other.id)] == [ids[2]]
