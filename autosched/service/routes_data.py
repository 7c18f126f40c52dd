"""Data routes: the best schedule of a workload (what a deployment asks at start-up), the
workloads the database knows, and record export/import as JSON lines."""

from __future__ import annotations

import io
import json
import logging
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi import Path as PathParam

from autosched.service.deps import Reader, ServiceState, Svc, Writer
from autosched.service.schemas import (
    BestOut,
    ImportOut,
    Problem,
    ScheduleOut,
    SourceOut,
    WorkloadList,
    WorkloadOut,
    gflops,
)
from autosched.target.key import Target
from autosched.workload import registered_workloads
from tuning_db.types import Record

log = logging.getLogger("autosched.service")
router = APIRouter(tags=["schedules"])
WorkloadKey = Annotated[str, PathParam(pattern=r"^[0-9a-f]{64}$", description="sha256 hex of the workload")]
TargetQ = Annotated[str, Query(min_length=1, max_length=128, description="'cpu' or a full key 'cpu|device|cores'")]


def resolve_best(svc: ServiceState, workload_key: str, target: str) -> tuple[str, Record | None]:
    """(target key, best record or None). A full key is used as given; for a bare kind, this
    host's key if it has a record, else the first stored key of that kind that has one (a lookup
    host need not be the tuning host). One index seek in the common case."""
    if "|" in target:
        Target.parse(target)  # ValueError (422) for a malformed key
        return target, svc.db.best(workload_key, target)
    host = Target.parse(target).key
    rec = svc.db.best(workload_key, host)
    if rec is not None:
        return host, rec
    for k in sorted(t.key for t in svc.db.targets() if t.kind == target and t.key != host):
        rec = svc.db.best(workload_key, k)
        if rec is not None:
            return k, rec
    return host, None


def _render(svc: ServiceState, rec_id: int, workload_spec: dict, target_key: str, steps_json: str
            ) -> tuple[str | None, SourceOut | None]:
    key = (rec_id, target_key)
    hit = svc.cached_source(key)
    if hit is not None:
        return hit
    from autosched.codegen.render import render
    from autosched.schedule.replay import schedule_from_steps
    from autosched.workload import Workload

    out: tuple[str | None, SourceOut | None]
    try:
        wjson = json.dumps(workload_spec)
        s, args = schedule_from_steps(Workload.from_json(wjson), steps_json)
        try:
            src, _f = render(s, args, target_key)
            out = (s.as_python(), SourceOut(language=src.language, entry=src.entry, code=src.code))
        except Exception as exc:  # noqa: BLE001  e.g. no renderer for this target in this build
            log.info("no source for record %s: %s", rec_id, exc)
            out = (s.as_python(), None)
    except Exception as exc:  # noqa: BLE001  a record from an older format still answers with its steps
        log.warning("record %s does not replay: %s", rec_id, exc)
        out = (None, None)
    svc.cache_source(key, out)
    return out


@router.get("/v1/schedules/{workload_key}", response_model=ScheduleOut,
            responses={404: {"model": Problem}, 422: {"model": Problem}})
def best_schedule(workload_key: WorkloadKey, svc: Svc, _: Reader,
                  target: TargetQ = "cpu", source: bool = True) -> ScheduleOut:
    """The best record of a workload on a target: steps, cost, primitive calls and generated source.

    404 with a plain message when the database has none: never a silent fallback."""
    tk, rec = resolve_best(svc, workload_key, target)
    info = svc.workload(workload_key)
    if rec is None or info is None or rec.median is None:
        raise HTTPException(404, f"no tuned schedule for workload {workload_key} on target {tk}; "
                                 "submit a tuning job for it (POST /v1/jobs)")
    primitives, src = _render(svc, rec.id, dict(info.spec), tk, rec.steps_json) if source else (None, None)
    return ScheduleOut(
        workload_key=workload_key, workload_name=info.name, target=tk, record_id=rec.id,
        median_ms=rec.median * 1e3, gflops=gflops(info.flops, rec.median), steps=rec.steps,
        primitives=primitives, source=src, host=rec.host, device=rec.device, created=rec.created)


@router.get("/v1/workloads", response_model=WorkloadList)
def list_workloads(svc: Svc, _: Reader,
                   target: Annotated[str | None, Query(max_length=128)] = None) -> WorkloadList:
    """Workloads in the database with their best record per target, and the registered ops."""
    best: dict[str, list[BestOut]] = {}
    for rec in svc.db.best_per_workload(target):
        info = svc.workload(rec.workload_key)
        if info is None or not rec.median:
            continue
        best.setdefault(rec.workload_key, []).append(BestOut(
            target=rec.target_key, median_ms=rec.median * 1e3, gflops=gflops(info.flops, rec.median),
            record_id=rec.id))
    out = []
    for w in svc.db.workloads()[: svc.settings.max_list]:
        spec = dict(w.spec)
        out.append(WorkloadOut(key=w.key, name=w.name, kind=str(spec.get("kind", "op")),
                               args=list(spec.get("args", [])), kwargs=dict(spec.get("kwargs", {})),
                               flops=w.flops, best=best.get(w.key, [])))
    return WorkloadList(workloads=out, ops=registered_workloads())


@router.get("/v1/records/export", response_class=Response,
            responses={200: {"content": {"application/x-ndjson": {}}}})
def export_records(svc: Svc, _: Reader,
                   workload_key: Annotated[str | None, Query(pattern=r"^[0-9a-f]{64}$")] = None,
                   target: Annotated[str | None, Query(min_length=1, max_length=128)] = None) -> Response:
    """Records as JSON lines (header line first): what `POST /v1/records/import` and
    `autosched import` read."""
    buf = io.StringIO()
    svc.db.export_jsonl(buf, workload_key=workload_key, target_key=target)
    return Response(buf.getvalue(), media_type="application/x-ndjson")


@router.post("/v1/records/import", response_model=ImportOut,
             responses={401: {"model": Problem}, 413: {"model": Problem}, 422: {"model": Problem}},
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/x-ndjson": {"schema": {"type": "string"}}}}})
async def import_records(request: Request, _: Writer,
                         svc: Svc) -> ImportOut:
    """Import JSON lines written by the export; all or nothing, duplicates skipped."""
    body = await request.body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPException(422, f"the body is not UTF-8 text: {exc}") from None
    if not text.strip():
        raise HTTPException(422, "the body is empty; expected JSON lines starting with the format header")
    from starlette.concurrency import run_in_threadpool

    n = await run_in_threadpool(svc.db.import_jsonl, io.StringIO(text))  # ValueError -> 422 naming the line
    return ImportOut(imported=n)
