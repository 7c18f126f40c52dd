"""Eight processes writing at once (spawned, as Ray/multiprocessing workers would be) lose nothing.

The workers start together on an *empty* database, so they also race to migrate the schema and to
register the same workload and target: exactly the situation of several tuners started at once.
They also re-measure the same few schedules in every batch (one of them gets a wrong answer), so
the per-schedule standings are written by all of them at once and must still equal a recount.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import traceback

import pytest

from tests.support.db_standings import as_rows, expected_standings
from tuning_db import RecordIn, TuningDB

WORKERS = 8
PER_WORKER = 60
SHARED_W, SHARED_T = "c" * 64, "cpu-shared"
SHARED_SCHEDULES = 4  # re-measured by every worker in every batch; the last gets a wrong answer from worker 3


def _shared(worker: int, batch: int) -> list[RecordIn]:
    recs = [RecordIn(SHARED_W, SHARED_T, [{"shared": j}], costs=(2e-3 + 1e-4 * j + 1e-6 * (worker + batch),),
                     worker_id=f"w{worker}") for j in range(SHARED_SCHEDULES)]
    if worker == 3 and batch == 2:
        recs.append(RecordIn(SHARED_W, SHARED_T, [{"shared": SHARED_SCHEDULES - 1}], error_code=6,
                             error_msg="wrong answer"))
    return recs


def _writer(url: str, worker: int, barrier: object, out: object) -> None:
    """One writer process: register, then commit PER_WORKER records in batches and one by one."""
    try:
        barrier.wait(timeout=120)  # type: ignore[attr-defined]
        db = TuningDB(url)
        db.ensure_workload(SHARED_W, "matmul", {"op": "matmul", "n": 128}, 4.2e6)
        db.ensure_target(SHARED_T, "cpu", {"cores": 2})
        job = db.create_job(SHARED_W, SHARED_T, {"trials": PER_WORKER}, owner=f"w{worker}")
        db.update_job(job.id, state="running")
        ids: list[int] = []
        recs = [
            RecordIn(
                SHARED_W,
                SHARED_T,
                [{"worker": worker, "i": i}],
                costs=(1e-3 + 1e-6 * (worker * PER_WORKER + i),),
                worker_id=f"w{worker}",
                job_id=job.id,
            )
            for i in range(PER_WORKER)
        ]
        for start in range(0, PER_WORKER - 10, 10):
            batch = recs[start : start + 10]
            ids += db.commit_records(batch + _shared(worker, start // 10))[: len(batch)]
            db.update_job(job.id, state="running", trials_done=len(ids))
        for r in recs[len(ids) :]:
            ids.append(db.commit_record(r))
        db.update_job(job.id, state="done", trials_done=len(ids))
        db.close()
        out.put((worker, ids, None))  # type: ignore[attr-defined]
    except BaseException:  # report everything: a silent child would look like a hang
        out.put((worker, [], traceback.format_exc()))  # type: ignore[attr-defined]


def test_eight_processes_lose_nothing(empty_db_url: str) -> None:
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(empty_db_url, w, barrier, out)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in range(WORKERS):
            worker, ids, err = out.get(timeout=240)
            assert err is None, f"worker {worker} failed:\n{err}"
            results[worker] = ids
    except queue.Empty:
        pytest.fail(f"only {len(results)} of {WORKERS} writers reported back")
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()  # our own child, by its handle
    assert all(p.exitcode == 0 for p in procs)

    all_ids = [i for ids in results.values() for i in ids]
    assert len(all_ids) == WORKERS * PER_WORKER == len(set(all_ids))
    n_shared = WORKERS * (PER_WORKER // 10 - 1) * SHARED_SCHEDULES + 1
    with TuningDB(empty_db_url) as db:
        assert db.count_records() == WORKERS * PER_WORKER + n_shared
        assert len(db.measured_step_hashes(SHARED_W, SHARED_T)) == WORKERS * PER_WORKER + SHARED_SCHEDULES
        assert set(all_ids) <= {r.id for r in db.records()}
        assert len(db.workloads()) == 1 and len(db.targets()) == 1
        jobs = db.list_jobs()
        assert len(jobs) == WORKERS and all(j.state == "done" and j.trials_done == PER_WORKER for j in jobs)
        records = db.records(SHARED_W, SHARED_T)
        got = as_rows(db.standings(SHARED_W, SHARED_T, include_disqualified=True))
        assert got == expected_standings(records)
        best = db.best(SHARED_W, SHARED_T)  # verified beats the faster single measurements
        assert best is not None and best.steps == [{"shared": 0}]
        assert db.standing(SHARED_W, SHARED_T, best.steps_hash).n_valid == WORKERS * (PER_WORKER // 10 - 1)
        assert got[-1][-1] == "WRONG_ANSWER: wrong answer"
