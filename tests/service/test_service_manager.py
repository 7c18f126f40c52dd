"""The job manager: the scheduling policy on its own, the manager's bookkeeping with a fake
executor, and one real job in a local worker thread."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from autosched.service.app import create_app
from autosched.service.job_runner import JobOutcome, JobSpec
from autosched.service.manager import JobManager, Slot, Waiting, plan
from autosched.service.settings import ServiceSettings
from autosched.target.key import Target
from autosched.tuning.api import register
from autosched.workload import Workload
from tests.support.service_helpers import AUTH, TOKEN, job_body
from tuning_db import TuningDB, sqlite_url


def W(job_id: str, priority: int = 0, order: float = 0.0) -> Waiting:
    return Waiting(job_id, priority, order)


def test_plan_fills_free_slots_by_priority_then_turn() -> None:
    waiting = [W("old", 0, 1.0), W("new", 0, 2.0), W("urgent", 5, 3.0), W("low", -1, 0.0)]
    start, preempt = plan(waiting, {}, 2, now=100.0, quantum_s=10)
    assert start == ["urgent", "old"] and preempt == []


def test_plan_round_robin_preempts_equal_priority_after_the_quantum() -> None:
    running = {"a": Slot("a", 0, started=0.0), "b": Slot("b", 0, started=50.0)}
    start, preempt = plan([W("c", 0, 5.0)], running, 2, now=55.0, quantum_s=10)
    assert start == [] and preempt == ["a"]  # a has had its quantum; b has not
    running["a"].preempting = True
    assert plan([W("c", 0, 5.0)], running, 2, now=56.0, quantum_s=10) == ([], [])  # already being preempted
    assert plan([W("c", 0, 5.0)], {"b": Slot("b", 0, 50.0)}, 1, now=55.0, quantum_s=10) == ([], [])


def test_plan_lower_priority_yields_at_once_higher_never_does() -> None:
    running = {"lo": Slot("lo", -1, started=99.0), "hi": Slot("hi", 3, started=0.0)}
    assert plan([W("mid", 0)], running, 2, now=100.0, quantum_s=1000) == ([], ["lo"])
    assert plan([W("lower", -5)], running, 2, now=100.0, quantum_s=0.001) == ([], [])


def test_plan_preempted_job_queues_behind_those_that_had_no_turn() -> None:
    # "a" ran and was preempted (its order is its last start, recent); "b" was created earlier and never ran
    start, _ = plan([W("a", 0, order=500.0), W("b", 0, order=100.0)], {}, 1, now=600.0, quantum_s=10)
    assert start == ["b"]
    assert plan([W("a", 0)], {"a": Slot("a", 0, 0.0, preempting=True)}, 2, 10.0, 1.0) == ([], [])  # still winding down


class FakeExecutor:
    """Records launches; the test decides how each job ends."""

    def __init__(self) -> None:
        self.launched: list[str] = []
        self.ended: list[JobOutcome] = []

    def launch(self, spec: JobSpec) -> None:
        self.launched.append(spec.job_id)

    def poll(self) -> list[JobOutcome]:
        out, self.ended = self.ended, []
        return out

    def shutdown(self, wait_s: float = 10.0) -> None:
        pass


@pytest.fixture
def db(tmp_path: Path):
    d = TuningDB(sqlite_url(tmp_path / "m.db"))
    yield d
    d.close()


def _job(db: TuningDB, priority: int = 0) -> str:
    w, t = Workload.create("matmul", 8, 8, 8), Target.parse("cpu")
    register(db, w, t)
    return db.create_job(w.key, t.key, request={"trials": 8, "priority": priority}).id


def test_manager_settles_outcomes_and_requeues_lost_runners(db: TuningDB) -> None:
    s = ServiceSettings(db_url=str(db.settings.url), max_running_jobs=4, job_attempts=2)
    ex = FakeExecutor()
    mgr = JobManager(db, s, ex)
    ids = [_job(db) for _ in range(4)]
    mgr.tick()
    assert sorted(ex.launched) == sorted(ids) and all(db.get_job(i).state == "running" for i in ids)
    db.update_job(ids[0], best_median=1e-3)
    db.update_job(ids[3], state="cancelled")
    ex.ended = [JobOutcome(ids[0], "finished", trials=8, best_cost=1e-3),
                JobOutcome(ids[1], "error", message="ValueError: broken"),
                JobOutcome(ids[2], "lost", message="NodeDiedError"),
                JobOutcome(ids[3], "stopped")]
    mgr.tick()  # settles, then relaunches the requeued one
    assert db.get_job(ids[0]).state == "done"
    assert db.get_job(ids[1]).state == "failed" and "broken" in db.get_job(ids[1]).error
    assert db.get_job(ids[3]).state == "cancelled"
    assert db.get_job(ids[2]).state == "running" and ex.launched.count(ids[2]) == 2
    ex.ended = [JobOutcome(ids[2], "lost", message="NodeDiedError again")]
    mgr.tick()
    assert db.get_job(ids[2]).state == "failed" and "lost 2 times" in db.get_job(ids[2]).error
    assert mgr.events["done"] == 1 and mgr.events["requeued"] == 1


def test_manager_without_a_valid_schedule_fails_the_job(db: TuningDB) -> None:
    ex = FakeExecutor()
    mgr = JobManager(db, ServiceSettings(db_url=str(db.settings.url)), ex)
    job = _job(db)
    mgr.tick()
    ex.ended = [JobOutcome(job, "finished", trials=8, errors={"COMPILE_ERROR": 8})]
    mgr.tick()
    j = db.get_job(job)
    assert j.state == "failed" and "no valid schedule" in j.error and "COMPILE_ERROR: 8" in j.error


def test_a_verify_job_that_finds_nothing_valid_fails_saying_so(db: TuningDB) -> None:
    ex = FakeExecutor()
    mgr = JobManager(db, ServiceSettings(db_url=str(db.settings.url)), ex)
    w, t = Workload.create("matmul", 8, 8, 8), Target.parse("cpu")
    register(db, w, t)
    job = db.create_job(w.key, t.key, request={"mode": "verify", "top": 2, "trials": 2}).id
    mgr.tick()
    assert ex.launched == [job]
    ex.ended = [JobOutcome(job, "finished", trials=2, errors={"RULED_OUT": 2})]
    mgr.tick()
    j = db.get_job(job)
    assert j.state == "failed" and "verifying 2 candidate(s) found none valid" in j.error and "RULED_OUT: 2" in j.error


def test_manager_resumes_running_jobs_on_start_and_preempts_for_priority(db: TuningDB) -> None:
    s = ServiceSettings(db_url=str(db.settings.url), max_running_jobs=1, poll_interval_s=0.05)
    stale = _job(db)
    db.update_job(stale, state="running")  # left behind by a killed process
    ex = FakeExecutor()
    mgr = JobManager(db, s, ex)
    mgr.start()
    try:
        deadline = time.monotonic() + 10
        while stale not in ex.launched and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ex.launched == [stale] and db.get_job(stale).state == "running"
        urgent = _job(db, priority=10)
        mgr.wake()
        while db.get_job(stale).state != "queued" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert db.get_job(stale).state == "queued"  # preempted: its should_stop sees this
        assert urgent not in ex.launched  # the slot frees only when the preempted runner has ended
        ex.ended = [JobOutcome(stale, "stopped", trials=4)]
        while urgent not in ex.launched and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ex.launched == [stale, urgent]
    finally:
        mgr.stop()
    assert db.get_job(urgent).state == "queued"  # a clean stop puts running jobs back in the queue


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_real_job_runs_in_a_local_worker_thread(tmp_path: Path) -> None:
    s = ServiceSettings(db_url=sqlite_url(tmp_path / "local.db"), write_tokens={TOKEN: "admin"},
                        max_running_jobs=1, poll_interval_s=0.2)
    with TestClient(create_app(s)) as c:
        job = c.post("/v1/jobs", json=job_body("matmul", [16, 16, 16], trials=4), headers=AUTH).json()
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            j = c.get(f"/v1/jobs/{job['id']}").json()
            if j["state"] in ("done", "failed", "cancelled"):
                break
            time.sleep(0.5)
        assert j["state"] == "done", j
        # 4 trials, then the tuner's verification measured those 4 schedules twice more
        assert j["trials_done"] == 4 and j["records"] == 4 + 2 * 4 and j["best_gflops"] > 0
        best = c.get(f"/v1/schedules/{job['workload_key']}")
        assert best.status_code == 200 and best.json()["median_ms"] == pytest.approx(j["best_median_ms"])
