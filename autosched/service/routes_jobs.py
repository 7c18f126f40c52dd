"""Job routes: submit, list, inspect, cancel, and the tuning curve (JSON or PNG).

A job may only name a target some live worker offers (`service.targets`), so its records are
filed under the device they are measured on; only its owner or an admin may cancel it."""

from __future__ import annotations

import math
import tempfile
import threading
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Response
from fastapi import Path as PathParam

from autosched.service.deps import Reader, ServiceState, Svc, WriteCaller, Writer
from autosched.service.guards import GuardedRoute
from autosched.service.schemas import CurveOut, JobCreate, JobList, JobOut, Problem, gflops
from autosched.service.targets import resolve_target
from autosched.service.workloads import build_workload
from autosched.tuning.api import register
from tuning_db.types import JobInfo, JobState

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=GuardedRoute)
JobId = Annotated[str, PathParam(min_length=1, max_length=36, pattern=r"^[A-Za-z0-9-]+$")]
_PLOT_LOCK = threading.Lock()  # pyplot keeps global state


def job_out(svc: ServiceState, job: JobInfo, records: int | None = None) -> JobOut:
    info = svc.workload(job.workload_key)
    flops = info.flops if info else 0.0
    req = job.request
    best = job.best_median
    return JobOut(
        id=job.id, state=job.state, workload_key=job.workload_key, workload_name=info.name if info else "?",
        target=job.target_key, trials=int(req.get("trials", 0)), trials_done=job.trials_done, records=records,
        best_median_ms=best * 1e3 if best else None,
        best_gflops=gflops(flops, best) if best and flops else None,
        searcher=str(req.get("searcher", "")), cost_model=str(req.get("cost_model", "")),
        priority=int(req.get("priority", 0)), owner=job.owner, cancelled_by=job.cancelled_by,
        mode="verify" if req.get("mode") == "verify" else "tune", error=job.error,
        created=job.created, updated=job.updated)


def _get(svc: ServiceState, job_id: str) -> JobInfo:
    job = svc.db.get_job(job_id)
    if job is None:
        raise HTTPException(404, f"no job with id {job_id!r}")
    return job


@router.post("", status_code=201, response_model=JobOut,
             responses={401: {"model": Problem}, 403: {"model": Problem}, 422: {"model": Problem}})
def submit_job(body: JobCreate, owner: Writer, svc: Svc) -> JobOut:
    """Queue a tuning job; it runs on the cluster (or local workers) as slots free up."""
    s = svc.settings
    if body.trials > s.max_trials:
        raise HTTPException(422, f"trials={body.trials} is over this server's limit of {s.max_trials}")
    if body.batch_size > s.max_batch_size:
        raise HTTPException(422, f"batch_size={body.batch_size} is over this server's limit of {s.max_batch_size}")
    target = resolve_target(body.target, svc.offered_targets())  # TargetRefused -> 422 naming the offered ones
    w = build_workload(body.workload, s)
    register(svc.db, w, target)
    request = body.model_dump(exclude={"workload"})
    request["workload"] = body.workload.model_dump()
    job = svc.db.create_job(w.key, target.key, request=request, owner=owner)
    svc.manager.wake()
    return job_out(svc, job)


@router.get("", response_model=JobList)
def list_jobs(svc: Svc, _: Reader,
              state_: Annotated[Literal["queued", "running", "done", "failed", "cancelled"] | None,
                                Query(alias="state")] = None,
              limit: Annotated[int, Query(ge=1, le=10_000)] = 200) -> JobList:
    """Jobs, newest first."""
    jobs = svc.db.list_jobs(state_)[::-1][: min(limit, svc.settings.max_list)]
    return JobList(jobs=[job_out(svc, j) for j in jobs])


@router.get("/{job_id}", response_model=JobOut, responses={404: {"model": Problem}})
def get_job(job_id: JobId, svc: Svc, _: Reader) -> JobOut:
    """State, trials done, best so far, error, and how many measurements the job stored."""
    return job_out(svc, _get(svc, job_id), svc.db.count_records(job_id=job_id))


@router.delete("/{job_id}", response_model=JobOut,
               responses={403: {"model": Problem}, 404: {"model": Problem}, 409: {"model": Problem}})
def cancel_job(job_id: JobId, who: WriteCaller, svc: Svc) -> JobOut:
    """Cancel a queued or running job (a running one stops after its current batch). Only the
    job's owner or an admin token may; 403 for any other token."""
    job = _get(svc, job_id)
    if not who.admin and who.name != job.owner:
        raise HTTPException(403, f"only the job's owner ({job.owner or 'none recorded'}) or an admin token may "
                                 f"cancel job {job_id}; this token belongs to {who.name}")
    if job.finished:
        raise HTTPException(409, f"job {job_id} is already {job.state}")
    try:
        job = svc.db.update_job(job_id, state=JobState.CANCELLED, error=f"cancelled by {who.name}",
                                cancelled_by=who.name)
    except ValueError as exc:  # it finished meanwhile
        raise HTTPException(409, str(exc)) from None
    svc.manager.wake()
    return job_out(svc, job)


def curve_points(svc: ServiceState, job: JobInfo) -> list[tuple[int, float]]:
    """(measurements so far, best GFLOP/s so far) over the job's records in insertion order."""
    info = svc.workload(job.workload_key)
    flops = info.flops if info else 0.0
    best, pts = math.inf, []
    for n, rec in enumerate(svc.db.record_outcomes(job.id), 1):
        if rec.ok and rec.median:
            best = min(best, rec.median)
        pts.append((n, gflops(flops, best) if math.isfinite(best) and flops else 0.0))
    return pts


@router.get("/{job_id}/curve", response_model=CurveOut,
            responses={200: {"content": {"image/png": {}}}, 404: {"model": Problem}})
def job_curve(job_id: JobId, svc: Svc, _: Reader,
              format: Literal["json", "png"] = "json") -> CurveOut | Response:  # noqa: A002  the query name
    """The tuning curve; `?format=png` draws it with matplotlib."""
    job = _get(svc, job_id)
    info = svc.workload(job.workload_key)
    name = info.name if info else job.workload_key[:12]
    pts = curve_points(svc, job)
    if format == "json":
        return CurveOut(job_id=job.id, workload_name=name, points=pts)
    from autosched.tuning.api import plot_curves

    with _PLOT_LOCK, tempfile.TemporaryDirectory() as tmp:
        path = plot_curves({name: pts}, Path(tmp) / "curve.png", title=f"job {job.id[:8]}: {name}")
        data = path.read_bytes()
    return Response(data, media_type="image/png")
