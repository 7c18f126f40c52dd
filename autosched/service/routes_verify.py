"""Why a schedule is (not) served, and re-measuring candidates here.

`GET /v1/schedules/{key}/standings` lists the candidates of a workload on a target, disqualified
ones included with their reason, so a user sees why the fastest record is not what is served.
`POST /v1/schedules/{key}/verify` queues a job (`request.mode == "verify"`) that the job manager
runs like any other (listed, cancellable, resumable by priority) and whose runner calls
`autosched.tuning.verify.verify_schedules` on this service's workers.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from autosched.service.deps import Reader, ServiceState, Svc, Writer
from autosched.service.guards import GuardedRoute
from autosched.service.routes_data import TargetQ, WorkloadKey, resolve_key, served
from autosched.service.routes_jobs import job_out
from autosched.service.schemas import JobOut, Problem, StandingList, StandingOut, gflops
from autosched.service.targets import resolve_target
from tuning_db.types import MIN_VERIFIED, Standing

router = APIRouter(tags=["schedules"], route_class=GuardedRoute)


def _reason(st: Standing, served_hash: str | None) -> str:
    if st.disqualified:
        return f"disqualified: {st.reason}" if st.reason else "disqualified"
    if st.steps_hash == served_hash:
        return "served" + ("" if st.verified else " (unverified: no verified schedule exists yet)")
    if st.record is None or st.cost is None:
        return "no valid measurement"
    if not st.verified:
        return (f"unverified: {st.n_valid} valid local measurement(s), {MIN_VERIFIED} needed; verified "
                "schedules rank first (POST .../verify re-measures it here)")
    return "slower than the served schedule"


def _standing_out(st: Standing, flops: float, served_hash: str | None) -> StandingOut:
    cost = st.cost
    return StandingOut(
        steps_hash=st.steps_hash, record_id=st.record.id if st.record is not None else None,
        median_ms=cost * 1e3 if cost else None, gflops=gflops(flops, cost) if cost and flops else None,
        n_valid=st.n_valid, n_imported=st.n_imported, n_disqualifying=st.n_disqualifying,
        verified=st.verified, disqualified=st.disqualified,
        origin=st.record.origin if st.record is not None else "", reason=_reason(st, served_hash))


@router.get("/v1/schedules/{workload_key}/standings", response_model=StandingList,
            responses={404: {"model": Problem}, 422: {"model": Problem}})
def schedule_standings(workload_key: WorkloadKey, svc: Svc, _: Reader, target: TargetQ = "cpu",
                       k: Annotated[int, Query(ge=1, le=1000)] = 20) -> StandingList:
    """Candidates of a workload on a target, best first, disqualified ones included (last) with
    the reason: what `GET /v1/schedules/{key}` chooses from, and why it serves what it serves."""
    info = svc.workload(workload_key)
    if info is None:
        raise HTTPException(404, f"no workload {workload_key} in the database")
    tk, rows = resolve_key(svc, target, lambda key: svc.db.standings(workload_key, key, include_disqualified=True)
                           or None)
    _, rec, _ = served(svc, workload_key, tk)
    served_hash = rec.steps_hash if rec is not None else None
    ordered = sorted(rows or [], key=lambda s: s.disqualified)[:k]  # stable: the database's order otherwise
    return StandingList(workload_key=workload_key, target=tk, served_steps_hash=served_hash,
                        standings=[_standing_out(s, info.flops, served_hash) for s in ordered])


def queue_verify(svc: ServiceState, workload_key: str, target: str, top: int, priority: int, owner: str) -> JobOut:
    """Create the verify job of `workload_key` on the offered `target` (404 with nothing to verify)."""
    if svc.workload(workload_key) is None:
        raise HTTPException(404, f"no workload {workload_key} in the database")
    tk = resolve_target(target, svc.offered_targets()).key  # TargetRefused -> 422 naming what is offered
    if not svc.db.standings(workload_key, tk, 1):
        raise HTTPException(404, f"no schedule of workload {workload_key} on target {tk} to verify "
                                 f"(see GET /v1/schedules/{workload_key}/standings?target={tk})")
    request = {"mode": "verify", "top": top, "repeats": MIN_VERIFIED, "trials": top, "priority": priority}
    job = svc.db.create_job(workload_key, tk, request=request, owner=owner)
    svc.manager.wake()
    return job_out(svc, job)


@router.post("/v1/schedules/{workload_key}/verify", status_code=201, response_model=JobOut,
             responses={401: {"model": Problem}, 403: {"model": Problem}, 404: {"model": Problem},
                        422: {"model": Problem}})
def verify_schedule(workload_key: WorkloadKey, owner: Writer, svc: Svc, target: TargetQ = "cpu",
                    top: Annotated[int, Query(ge=1, le=64)] = 5,
                    priority: Annotated[int, Query(ge=-100, le=100)] = 0) -> JobOut:
    """Queue a job that re-measures the `top` best candidates on this service's workers
    (MIN_VERIFIED times each): one that now fails is ruled out, the others become verified."""
    return queue_verify(svc, workload_key, target, top, priority, owner)
