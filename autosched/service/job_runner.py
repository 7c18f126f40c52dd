"""The body of one tuning job, wherever it runs: a worker thread of the API, or a Ray task.

It talks to the world only through the database: the workload comes from its stored JSON (so a
Ray worker needs no op registry), progress (trials done, best so far) is written to the job row
after every batch, and `should_stop` reads the row's state, so a cancel (DELETE) or a preemption
by the job manager (state set back to "queued") is seen between batches by a job on any node.
The final state is decided by the job manager from the returned `JobOutcome`, never here, so a
job whose runner vanished (node lost, API restarted) is left for the manager to requeue.

No FastAPI import here: Ray workers import this module.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tuning_db.types import JobState


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
        return JobOutcome(spec.job_id, "error", message=f"{type(exc).__name__}: {exc}"[:2000])
    finally:
        db.close()
