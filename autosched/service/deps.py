"""What every route shares: the service state, bearer-token checks, and the body-size limit.

`ServiceState` is built once per app (in `create_app`) from the settings; routes get it through
`Depends(state)`, so nothing reads configuration on its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from autosched.service.manager import JobManager
from autosched.service.metrics import ServiceMetrics
from autosched.service.settings import ServiceSettings
from tuning_db import TuningDB
from tuning_db.types import WorkloadInfo


@dataclass
class ServiceState:
    settings: ServiceSettings
    db: TuningDB
    manager: JobManager
    metrics: ServiceMetrics
    started: float
    _workloads: dict[str, WorkloadInfo] = field(default_factory=dict)
    _sources: OrderedDict[tuple[int, str], Any] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def workload(self, key: str) -> WorkloadInfo | None:
        """Stored workloads never change, so they are cached for the job listings."""
        info = self._workloads.get(key)
        if info is None:
            info = self.db.workload(key)
            if info is not None:
                self._workloads[key] = info
        return info

    def cached_source(self, key: tuple[int, str]) -> Any:
        with self._lock:
            v = self._sources.get(key)
            if v is not None:
                self._sources.move_to_end(key)
            return v

    def cache_source(self, key: tuple[int, str], value: Any) -> None:
        with self._lock:
            self._sources[key] = value
            while len(self._sources) > 512:
                self._sources.popitem(last=False)


def state(request: Request) -> ServiceState:
    return request.app.state.svc


_bearer = HTTPBearer(auto_error=False, description="a token from AUTOSCHED_TOKENS / --token")
Svc = Annotated[ServiceState, Depends(state)]
Creds = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _owner(creds: HTTPAuthorizationCredentials | None, svc: ServiceState, write: bool) -> str:
    if creds is None or not creds.credentials:
        raise HTTPException(401, "this request needs a bearer token (Authorization: Bearer TOKEN)",
                            headers={"WWW-Authenticate": "Bearer"})
    owner = svc.settings.owner_of(creds.credentials, write=write)
    if owner is None:
        if write and svc.settings.owner_of(creds.credentials, write=False) is not None:
            raise HTTPException(403, "this token may read but not write")
        raise HTTPException(401, "unknown bearer token", headers={"WWW-Authenticate": "Bearer"})
    return owner


def writer(creds: Creds, svc: Svc) -> str:
    """The owner name of a write token; 401/403 otherwise (there is no anonymous write)."""
    if not svc.settings.can_write:
        raise HTTPException(403, "this server has no write tokens configured; writes are disabled")
    return _owner(creds, svc, write=True)


def reader(creds: Creds, svc: Svc) -> str:
    """Reads are open unless the server was started with read auth."""
    if not svc.settings.read_auth:
        return ""
    return _owner(creds, svc, write=False)


Writer = Annotated[str, Depends(writer)]
Reader = Annotated[str, Depends(reader)]


class BodyTooLarge(HTTPException):
    """Raised while the body streams in; an HTTPException so FastAPI's body parsing passes it on."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body is larger than this server's limit of {limit} bytes")


class BodyLimitMiddleware:
    """413 for a body over the limit, checked on Content-Length and again while it streams in
    (a chunked upload has no length). Record imports get their own, larger limit."""

    def __init__(self, app: Any, limit: int, import_limit: int, import_path: str = "/v1/records/import") -> None:
        self.app, self.limit, self.import_limit, self.import_path = app, limit, import_limit, import_path

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.import_limit if scope.get("path") == self.import_path else self.limit
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    too_big = int(value) > limit
                except ValueError:
                    await _plain(send, 400, "Content-Length is not a number")
                    return
                if too_big:
                    await _plain(send, 413, f"request body is larger than this server's limit of {limit} bytes")
                    return
        seen = {"n": 0, "started": False}

        async def limited_receive() -> dict:
            msg = await receive()
            if msg["type"] == "http.request":
                seen["n"] += len(msg.get("body", b""))
                if seen["n"] > limit:
                    raise BodyTooLarge(limit)
            return msg

        async def tracking_send(msg: dict) -> None:
            if msg["type"] == "http.response.start":
                seen["started"] = True
            await send(msg)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not seen["started"]:
                await _plain(send, 413, f"request body is larger than this server's limit of {limit} bytes")


async def _plain(send: Any, status: int, detail: str) -> None:
    import json

    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
