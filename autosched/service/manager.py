"""The job manager: decides which queued job runs when, and settles jobs that ended.

Jobs live in the database; the manager keeps only what a restart may lose (which jobs this
process launched, when). Policy, in `plan`: free slots go to queued jobs by priority, then by
least recent start (round robin: a preempted job queues behind those that have not had a turn);
when a job waits and no slot is free, a running job of lower priority is preempted at once, one
of equal priority once it has run `quantum_s`. Preemption is the row going back to "queued":
the job's `should_stop` sees it between batches and the job later resumes from its records.

On start, jobs left "running" by a previous process (killed, or its host restarted) are put back
in the queue: their records are in the database, so the tuner skips what they measured.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autosched.service.executors import Executor
from autosched.service.job_runner import JobOutcome, JobSpec
from autosched.service.settings import ServiceSettings
from tuning_db import TuningDB
from tuning_db.types import JobInfo, JobState

log = logging.getLogger("autosched.service")


@dataclass
class Slot:
    """A job this process launched and has not seen end yet."""

    job_id: str
    priority: int
    started: float  # monotonic
    preempting: bool = False


@dataclass(frozen=True)
class Waiting:
    job_id: str
    priority: int
    order: float  # smaller runs first among equal priorities (last start, or creation time)


def plan(waiting: Sequence[Waiting], running: dict[str, Slot], slots: int, now: float,
         quantum_s: float) -> tuple[list[str], list[str]]:
    """(jobs to start, running jobs to preempt). Pure, so the policy is tested on its own."""
    order = sorted((w for w in waiting if w.job_id not in running), key=lambda w: (-w.priority, w.order))
    free = max(0, slots - len(running))
    start = [w.job_id for w in order[:free]]
    preempt: list[str] = []
    candidates = [s for s in running.values() if not s.preempting]
    for w in order[free:]:
        eligible = [s for s in candidates if s.priority < w.priority
                    or (s.priority == w.priority and now - s.started >= quantum_s)]
        if not eligible:
            continue
        victim = min(eligible, key=lambda s: (s.priority, s.started))
        candidates.remove(victim)
        preempt.append(victim.job_id)
    return start, preempt


def _priority(job: JobInfo) -> int:
    p = job.request.get("priority", 0)
    return p if isinstance(p, int) else 0


class JobManager:
    """Runs the scheduling loop in a background thread; `wake()` after a submit or cancel."""

    def __init__(self, db: TuningDB, settings: ServiceSettings, executor: Executor | None, *,
                 on_event: Callable[[str], None] | None = None,
                 on_running: Callable[[int], None] | None = None) -> None:
        """`on_event(kind)` hears every event counted in `events`; `on_running(n)` the number of
        jobs this process runs, after each round and at stop (both feed /metrics)."""
        self.db, self.settings, self.executor = db, settings, executor
        self.running: dict[str, Slot] = {}
        self.last_start: dict[str, float] = {}
        self.attempts: Counter[str] = Counter()
        self.events: Counter[str] = Counter()  # started, preempted, done, failed, requeued: for /metrics
        self._on_event, self._on_running = on_event, on_running
        self._wake = threading.Event()
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.executor is not None and self.settings.max_running_jobs > 0

    def start(self) -> None:
        if not self.enabled:
            return
        for job in self.db.list_jobs(JobState.RUNNING):
            self._requeue(job.id, "resumed after a restart of the job manager")
        self._thread = threading.Thread(target=self._loop, name="autosched-job-manager", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Stop scheduling; running jobs stop between batches and go back to the queue."""
        self._halt.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.executor is not None:
            self.executor.shutdown()
            for out in self.executor.poll():
                self.running.pop(out.job_id, None)
        for job_id in list(self.running):
            self._requeue(job_id, "")
        self.running.clear()
        self._report_running()

    def _event(self, kind: str) -> None:
        self.events[kind] += 1
        if self._on_event is not None:
            self._on_event(kind)

    def _report_running(self) -> None:
        if self._on_running is not None:
            self._on_running(len(self.running))

    # ---------------------------------------------------------------- loop
    def _loop(self) -> None:
        while not self._halt.is_set():
            try:
                self.tick()
            except Exception:  # noqa: BLE001  a database hiccup must not end scheduling for good
                log.exception("job manager tick failed")
            self._wake.wait(self.settings.poll_interval_s)
            self._wake.clear()

    def tick(self) -> None:
        """One round: settle ended jobs, then start and preempt by `plan`."""
        assert self.executor is not None
        with self._lock:
            for out in self.executor.poll():
                self._settle(out)
            waiting = [Waiting(j.id, _priority(j), self.last_start.get(j.id, j.created.timestamp()))
                       for j in self.db.list_jobs(JobState.QUEUED)]
            start, preempt = plan(waiting, self.running, self.settings.max_running_jobs, time.monotonic(),
                                  self.settings.quantum_s)
            for job_id in preempt:
                if self._requeue(job_id, ""):
                    self.running[job_id].preempting = True
                    self._event("preempted")
            by_id = {w.job_id: w for w in waiting}
            for job_id in start:
                self._launch(job_id, by_id[job_id].priority)
            self._report_running()

    def _launch(self, job_id: str, priority: int) -> None:
        assert self.executor is not None
        try:
            self.db.update_job(job_id, state=JobState.RUNNING, error="")
        except ValueError:  # cancelled between the listing and now
            return
        self.running[job_id] = Slot(job_id, priority, time.monotonic())
        self.last_start[job_id] = time.time()
        self._event("started")
        self.executor.launch(JobSpec(job_id, self.settings.db_url, self.settings.ray_address))

    def _requeue(self, job_id: str, why: str) -> bool:
        try:
            self.db.update_job(job_id, state=JobState.QUEUED, error=why)
            return True
        except ValueError:  # already final (cancelled, done): nothing to requeue
            return False

    def _finish(self, job_id: str, state: JobState, error: str = "") -> None:
        try:
            self.db.update_job(job_id, state=state, error=error)
            self._event(state.value)
        except ValueError:  # cancelled or requeued meanwhile: that state stands
            pass

    def _settle(self, out: JobOutcome) -> None:
        """Turn an ended job body into the job's state (only a job still "running" moves)."""
        self.running.pop(out.job_id, None)
        job = self.db.get_job(out.job_id)
        if job is None or job.state != JobState.RUNNING:
            return  # cancelled, or preempted (queued): that state stands
        if out.status == "finished":
            if out.best_cost is None and job.best_median is None:
                errs = ", ".join(f"{k}: {v}" for k, v in sorted(out.errors.items())) or "none"
                what = (f"verifying {out.trials} candidate(s) found none valid"
                        if job.request.get("mode") == "verify" else f"no valid schedule found in {out.trials} trials")
                self._finish(out.job_id, JobState.FAILED, f"{what} (errors: {errs})")
            else:
                self._finish(out.job_id, JobState.DONE)
        elif out.status == "lost":
            self.attempts[out.job_id] += 1
            if self.attempts[out.job_id] >= self.settings.job_attempts:
                self._finish(out.job_id, JobState.FAILED,
                             f"job runner lost {self.attempts[out.job_id]} times; last: {out.message}")
            else:
                self._requeue(out.job_id, f"runner lost ({out.message[:200]}); resuming")
                self._event("requeued")
        elif out.status == "error":
            self._finish(out.job_id, JobState.FAILED, out.message)
        # "stopped" with the row still running: this process is shutting down; stop() requeues it
