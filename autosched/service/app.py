"""The FastAPI application: routes, error mapping, metrics, dashboard, and the job manager's life.

`create_app(settings)` is the whole service for one settings object; it opens the database and
starts the job manager (on the Ray cluster when `settings.ray_address` is set, else in worker
threads) in the app's lifespan, and stops them when the server stops.

Every malformed request gets a 4xx that says what is wrong: pydantic's 422 for the shape of a
body, and the library's own errors (ValueError and its kin: WorkloadError, DAGFormatError,
ScheduleError) mapped to 422 with their message. Only a bug is a 500. A write is refused for its
token before its body is read, a body stalled mid-way gets 408, and JSON bodies are checked
against named limits (`service.guards`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from autosched.service.dashboard import PAGE
from autosched.service.deps import BodyLimitMiddleware, Reader, ServiceState, Svc
from autosched.service.guards import WriteAuthMiddleware
from autosched.service.manager import JobManager
from autosched.service.metrics import MetricsMiddleware, ServiceMetrics
from autosched.service.settings import ServiceSettings
from tuning_db import TuningDB

log = logging.getLogger("autosched.service")


def make_executor(settings: ServiceSettings) -> Any:
    if settings.max_running_jobs <= 0:
        return None
    if settings.ray_address:
        from autosched.service.executors import RayExecutor

        return RayExecutor(settings.ray_address)
    from autosched.service.executors import ThreadExecutor

    return ThreadExecutor(settings.max_running_jobs)


def _unprocessable(_: Request, exc: Exception) -> JSONResponse:
    msg = str(exc) or type(exc).__name__
    if isinstance(exc, RecursionError):
        msg = f"the request nests too deeply (over the parser's nesting depth limit of about {sys.getrecursionlimit()})"
    return JSONResponse({"detail": msg}, status_code=422)


def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
    # pydantic's errors may hold the offending input (bytes, huge values): keep what says where and why
    errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
              for e in exc.errors()][:20]
    return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)


def create_app(settings: ServiceSettings, *, start_manager: bool = True) -> FastAPI:
    metrics = ServiceMetrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = TuningDB(settings.db_url)
        executor = make_executor(settings) if start_manager else None
        manager = JobManager(db, settings, executor, on_event=metrics.job_event, on_running=metrics.set_running)
        app.state.svc = ServiceState(settings, db, manager, metrics, time.time())
        metrics.db = db
        manager.start()
        log.info("autosched service up: db=%s executor=%s", db, type(executor).__name__ if executor else "none")
        try:
            yield
        finally:
            manager.stop()
            metrics.db = None
            metrics.close()
            db.close()

    app = FastAPI(
        title="autosched tuning service",
        version="1",
        lifespan=lifespan,
        description="Submit tuning jobs for tensor operators, follow them, and look up the best schedule of a "
                    "workload key. Writes need a bearer token. No request ever runs code: an operator is a "
                    "registered op with arguments, or a tensor expression in JSON form.",
    )
    from autosched.service import routes_data, routes_jobs, routes_verify

    app.include_router(routes_jobs.router)
    app.include_router(routes_data.router)
    app.include_router(routes_verify.router)
    for exc_type in (ValueError, LookupError, TypeError, RecursionError):
        app.add_exception_handler(exc_type, _unprocessable)
    app.add_exception_handler(RequestValidationError, _validation)

    @app.get("/healthz", tags=["ops"])
    def healthz(svc: Svc) -> dict[str, Any]:
        """Liveness and a one-line summary (open to everyone: holds no data)."""
        mgr = svc.manager
        return {"status": "ok", "executor": type(mgr.executor).__name__ if mgr.executor else "none",
                "running": len(mgr.running), "records": svc.db.count_records(),
                "uptime_s": round(time.time() - svc.started, 1)}

    @app.get("/metrics", response_class=PlainTextResponse, tags=["ops"])
    def prometheus(request: Request, svc: Svc, _: Reader) -> Response:
        """Prometheus text format (OpenMetrics when the Accept header asks for it): jobs by state,
        records, workloads, job manager events, request counts and latency."""
        svc.metrics.set_running(len(svc.manager.running))
        body, content_type = svc.metrics.exposition(request.headers.get("accept"))
        return Response(body, media_type=content_type)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    @app.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
    def dashboard() -> HTMLResponse:
        return HTMLResponse(PAGE)

    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes, import_limit=settings.max_import_bytes,
                       timeout_s=settings.body_timeout_s)
    app.add_middleware(WriteAuthMiddleware, settings=settings)  # outside the limit: no token, no body read
    app.add_middleware(MetricsMiddleware, metrics=metrics)  # added last: outermost, so it sees 401s and 413s too
    return app
