"""Data routes: the best schedule of a workload (what a deployment asks at start-up), the
workloads the database knows, and record export/import as JSON lines.

The schedule served is never a disqualified one (a wrong answer, a runtime error or a worker
crash on any of its measurements), and the response says whether it is verified (measured valid
here at least 3 times) or rests on fewer or imported measurements. An import streams to a
temporary file and every line is checked before it is stored (`autosched.tuning.imports`).
"""

from __future__ import annotations

import codecs
import io
import json
import logging
import tempfile
from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi import Path as PathParam
from starlette.concurrency import run_in_threadpool

from autosched.service.deps import Reader, ServiceState, Svc, Writer
from autosched.service.guards import GuardedRoute
from autosched.service.schemas import (
    MAX_REFUSED_SHOWN,
    BestOut,
    ImportOut,
    Problem,
    RefusedOut,
    ScheduleOut,
    SourceOut,
    WorkloadList,
    WorkloadOut,
    gflops,
)
from autosched.target.key import Target
from autosched.tuning.imports import import_records as import_checked
from autosched.workload import registered_workloads
from tuning_db.types import ORIGIN_IMPORT, Record, Standing

log = logging.getLogger("autosched.service")
router = APIRouter(tags=["schedules"], route_class=GuardedRoute)
WorkloadKey = Annotated[str, PathParam(pattern=r"^[0-9a-f]{64}$", description="sha256 hex of the workload")]
TargetQ = Annotated[str, Query(min_length=1, max_length=128, description="'cpu' or a full key 'cpu|device|cores'")]
T = TypeVar("T")
IMPORT_CHUNK = 1 << 16


def resolve_key(svc: ServiceState, target: str, find: Callable[[str], T | None]) -> tuple[str, T | None]:
    """(target key, `find(key)`). A full key is used as given; for a bare kind, this host's key if
    `find` has something there, else the first stored key of that kind where it has (a lookup host
    need not be the tuning host). One lookup in the common case."""
    if "|" in target:
        Target.parse(target)  # ValueError (422) for a malformed key
        return target, find(target)
    host = Target.parse(target).key
    hit = find(host)
    if hit is not None:
        return host, hit
    for k in sorted(t.key for t in svc.db.targets() if t.kind == target and t.key != host):
        hit = find(k)
        if hit is not None:
            return k, hit
    return host, None


def resolve_best(svc: ServiceState, workload_key: str, target: str) -> tuple[str, Record | None]:
    """(target key, best record or None): `TuningDB.best` never returns a disqualified schedule."""
    return resolve_key(svc, target, lambda k: svc.db.best(workload_key, k))


def served(svc: ServiceState, workload_key: str, target: str) -> tuple[str, Record | None, Standing | None]:
    """(target key, record, its standing) of the schedule `GET /v1/schedules/{key}` serves. The
    standing is checked again here, so a disqualified schedule is never served whatever ranks it."""
    tk, rec = resolve_best(svc, workload_key, target)
    if rec is None:
        return tk, None, None
    st = svc.db.standing(workload_key, tk, rec.steps_hash)
    if st is not None and not st.disqualified:
        return tk, rec, st
    for cand in svc.db.standings(workload_key, tk):
        if cand.record is not None and not cand.disqualified and cand.record.median is not None:
            return tk, cand.record, cand
    return tk, None, None


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
    tk, rec, st = served(svc, workload_key, target)
    info = svc.workload(workload_key)
    if rec is None or st is None or info is None or rec.median is None:
        raise HTTPException(404, f"no tuned schedule for workload {workload_key} on target {tk}; "
                                 "submit a tuning job for it (POST /v1/jobs), or see why candidates are not "
                                 f"served: GET /v1/schedules/{workload_key}/standings")
    primitives, src = _render(svc, rec.id, dict(info.spec), tk, rec.steps_json) if source else (None, None)
    return ScheduleOut(
        workload_key=workload_key, workload_name=info.name, target=tk, record_id=rec.id,
        median_ms=rec.median * 1e3, gflops=gflops(info.flops, rec.median), steps=rec.steps,
        primitives=primitives, source=src, host=rec.host, device=rec.device, created=rec.created,
        verified=st.verified, n_valid=st.n_valid, n_imported=st.n_imported, origin=rec.origin)


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
async def import_records(request: Request, owner: Writer, svc: Svc) -> ImportOut:
    """Import JSON lines written by the export. Every line is checked (its steps replay on its
    workload, the workload key is the hash of its spec, costs are finite and positive) and stored
    unverified with its origin; refused lines are listed with their number and reason (still 200).
    422 for a wrong header, an empty body or one that is not UTF-8."""
    limit = svc.settings.max_import_bytes
    decoder = codecs.getincrementaldecoder("utf-8")()
    with tempfile.TemporaryFile(prefix="autosched-import-") as tmp:
        size, content = 0, False
        async for chunk in request.stream():  # to disk as it arrives: never the whole body in memory
            if not chunk:
                continue
            try:
                text = decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                raise HTTPException(422, f"the body is not UTF-8 text (invalid byte at offset "
                                         f"{size + max(0, exc.start)})") from None
            content = content or bool(text.strip())
            size += len(chunk)
            if size > limit:
                raise HTTPException(413, f"request body is larger than this server's import limit of {limit} bytes")
            tmp.write(chunk)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise HTTPException(422, "the body is not UTF-8 text (it ends inside a character)") from None
        if not content:
            raise HTTPException(422, "the body is empty; expected JSON lines starting with the format header")
        tmp.seek(0)
        origin = f"{ORIGIN_IMPORT}:{owner}" if owner else ORIGIN_IMPORT
        text_file = io.TextIOWrapper(tmp, encoding="utf-8", newline="")
        try:
            report = await run_in_threadpool(import_checked, svc.db, text_file, origin=origin)  # ValueError: 422
        finally:
            text_file.detach()
    return ImportOut(imported=report.imported, duplicates=report.duplicates, n_refused=report.n_refused,
                     refused=[RefusedOut(line=r.line_no, reason=r.reason) for r in report.refused[:MAX_REFUSED_SHOWN]])
