"""Eight processes writing at once (spawned, as Ray/multiprocessing workers would be) lose nothing.

The workers start together on an *empty* database, so they also race to migrate the schema and to
register the same workload and target: exactly the situation of several tuners started at once.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import traceback

import pytest

from tuning_db import RecordIn, TuningDB

WORKERS = 8
PER_WORKER = 60
SHARED_W, SHARED_T = "c" * 64, "cpu-shared"


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
            ids += db.commit_records(recs[start : start + 10])
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
    with TuningDB(empty_db_url) as db:
        assert db.count_records() == WORKERS * PER_WORKER
        assert len(db.measured_step_hashes(SHARED_W, SHARED_T)) == WORKERS * PER_WORKER
        assert sorted(r.id for r in db.records()) == sorted(all_ids)
        assert len(db.workloads()) == 1 and len(db.targets()) == 1
        jobs = db.list_jobs()
        assert len(jobs) == WORKERS and all(j.state == "done" and j.trials_done == PER_WORKER for j in jobs)
        best = db.best(SHARED_W, SHARED_T)
        assert best is not None and best.steps == [{"worker": 0, "i": 0}]
