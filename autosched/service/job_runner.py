"""The body of one tuning job, wherever it runs: a worker thread of the API, or a Ray task.

It talks to the world only through the database: the workload comes from its stored JSON (so a
Ray worker needs no op registry), progress (trials done, best so far) is written to the job row
after every batch, and `should_stop` reads the row's state, so a cancel (DELETE) or a preemption
by the job manager (state set back to "queued") is seen between batches by a job on any node.
The final state is decided by the job manager from the returned `JobOutcome`, never here, so a
job whose runner vanished (node lost, API restarted) is left for the manager to requeue.
A job whose request says `"mode": "verify"` re-measures the stored candidates
(`autosched.tuning.verify.verify_schedules`) instead of searching.

No FastAPI import here: Ray workers import this module.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tuning_db.types import JobState

_SQL_DETAIL = re.compile(r"\s*\[(?:SQL|parameters): .*", re.S)


def safe_error(exc: BaseException, limit: int = 2000) -> str:
    """`Type: message` without the SQL statement and bound parameters a database error may carry:
    job errors are stored and shown, and parameters may hold user data."""
    text = _SQL_DETAIL.sub("", str(exc)).split("\n(Background on this error", 1)[0]
    return f"{type(exc).__name__}: {text}"[:limit]


@dataclass(frozen=True)
class JobSpec:
    """What a runner needs to run job `job_id` (all plain data: it travels to Ray workers)."""

    job_id: str
    db_url: str
    runner: str | None = None  # None: local process pool; "HOST:PORT": the Ray cluster
    progress_every_s: float = 0.0  # throttle progress writes (0: after every batch)


@dataclass(frozen=True)
class JobOutcome:
    """How `run_job` ended: "finished" (tuner done), "stopped" (should_stop said so) or "error"."""

    job_id: str
    status: str
    trials: int = 0
    measured: int = 0
    reused: int = 0
    best_cost: float | None = None
    errors: dict[str, int] = field(default_factory=dict)
    message: str = ""


def run_job(spec: JobSpec, stop_event: threading.Event | None = None) -> JobOutcome:
    """Run the tuner for job `spec.job_id` until it is done, cancelled or preempted."""
    from autosched.tuning.api import tune
    from autosched.workload import Workload
    from tuning_db import TuningDB

    db = TuningDB(spec.db_url)
    try:
        job = db.get_job(spec.job_id)
        if job is None:
            return JobOutcome(spec.job_id, "error", message=f"job {spec.job_id} is not in the database")
        info = db.workload(job.workload_key)
        if info is None:
            return JobOutcome(spec.job_id, "error", message=f"workload {job.workload_key} is not in the database")
        req: dict[str, Any] = dict(job.request)
        workload = Workload.from_json(info.spec)
        state = {"stopped": False, "last": 0.0, "trials": job.trials_done, "best": job.best_median}

        def should_stop() -> bool:
            if stop_event is not None and stop_event.is_set():
                state["stopped"] = True
            else:
                row = db.get_job(spec.job_id)
                state["stopped"] = row is None or row.state != JobState.RUNNING
            return bool(state["stopped"])

        if req.get("mode") == "verify":
            return _verify(spec, db, workload, job.target_key, req, should_stop, state)

        def on_batch(task: Any) -> None:
            best = task.best_cost if math.isfinite(task.best_cost) else None
            if best is not None and (state["best"] is None or best < state["best"]):
                state["best"] = best
            state["trials"] = max(int(state["trials"] or 0), int(task.trials))  # never goes backwards on resume
            now = time.monotonic()
            if now - float(state["last"]) >= spec.progress_every_s:
                state["last"] = now
                db.update_job(spec.job_id, trials_done=state["trials"], best_median=state["best"])

        result = tune(
            workload, job.target_key, int(req["trials"]), searcher=req.get("searcher", "genetic"),
            cost_model=None if req.get("cost_model") in (None, "none") else req["cost_model"], db=db,
            runner=spec.runner, batch_size=int(req.get("batch_size", 16)),
            early_stopping=req.get("early_stopping"), seed=int(req.get("seed", 0)), progress=False,
            job_id=spec.job_id, on_batch=on_batch, should_stop=should_stop, verify=int(req.get("verify", 4)),
            transfer=bool(req.get("transfer", True)))
        rec = db.best(job.workload_key, job.target_key)
        if rec is not None:  # after verification: what the schedules endpoint and `apply_best` give
            state["best"] = rec.median
        best = state["best"]
        db.update_job(spec.job_id, trials_done=state["trials"], best_median=state["best"])
        return JobOutcome(spec.job_id, "stopped" if state["stopped"] else "finished", int(state["trials"] or 0),
                          result.measured, result.reused, best, dict(result.errors))
    except Exception as exc:  # noqa: BLE001  reported to the manager, which marks the job failed
        return JobOutcome(spec.job_id, "error", message=safe_error(exc))
    finally:
        db.close()


def _verify(spec: JobSpec, db: Any, workload: Any, target_key: str, req: dict[str, Any],
            should_stop: Any, state: dict[str, Any]) -> JobOutcome:
    """The body of a verify job: re-measure the top candidates, report how many still measure valid."""
    from autosched.tuning.verify import verify_schedules

    report = verify_schedules(db, workload, target_key, top=int(req.get("top", 5)),
                              repeats=int(req.get("repeats", 3)), runner=spec.runner, job_id=spec.job_id,
                              should_stop=should_stop)
    best = report.best.median if report.best is not None else None
    db.update_job(spec.job_id, trials_done=len(report.checked), best_median=best)
    errors = Counter("RULED_OUT" if c.error.startswith("ruled out") else "NOT_VALID"
                     for c in report.checked if not c.ok)
    return JobOutcome(spec.job_id, "stopped" if state["stopped"] else "finished", len(report.checked),
                      measured=len(report.checked), best_cost=best, errors=dict(errors))
