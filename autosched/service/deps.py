"""What every route shares: the service state, bearer-token checks, the body-size limit and the
body timeout.

`ServiceState` is built once per app (in `create_app`) from the settings; routes get it through
`Depends(state)`, so nothing reads configuration on its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from autosched.service.guards import send_json, write_problem
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

    def offered_targets(self) -> list[str]:
        """Target keys the live workers measure on: the executor's, or this host's when this process
        runs no jobs (another process on this host does)."""
        ex = self.manager.executor
        if ex is not None:
            return ex.offered_targets()
        from autosched.service.targets import host_offers

        return host_offers()


def state(request: Request) -> ServiceState:
    return request.app.state.svc


_bearer = HTTPBearer(auto_error=False, description="a token from AUTOSCHED_TOKENS / --token")
Svc = Annotated[ServiceState, Depends(state)]
Creds = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _owner(creds: HTTPAuthorizationCredentials | None, svc: ServiceState, write: bool) -> str:
    token = creds.credentials if creds is not None and creds.credentials else None
    if write:
        problem = write_problem(svc.settings, token)
        if problem is not None:
            status, detail = problem
            raise HTTPException(status, detail, headers={"WWW-Authenticate": "Bearer"} if status == 401 else None)
    if token is None:
        raise HTTPException(401, "this request needs a bearer token (Authorization: Bearer TOKEN)",
                            headers={"WWW-Authenticate": "Bearer"})
    owner = svc.settings.owner_of(token, write=write)
    if owner is None:
        raise HTTPException(401, "unknown bearer token", headers={"WWW-Authenticate": "Bearer"})
    return owner


def writer(creds: Creds, svc: Svc) -> str:
    """The owner name of a write token; 401/403 otherwise (there is no anonymous write)."""
    return _owner(creds, svc, write=True)


@dataclass(frozen=True)
class Caller:
    """Who makes a write request: the token's owner name, and whether it is an admin token."""

    name: str
    admin: bool


def caller(creds: Creds, svc: Svc) -> Caller:
    """The write token's owner and admin flag (for rules that depend on who asks, e.g. cancel)."""
    name = _owner(creds, svc, write=True)
    return Caller(name, creds is not None and svc.settings.is_admin(creds.credentials))


def reader(creds: Creds, svc: Svc) -> str:
    """Reads are open unless the server was started with read auth."""
    if not svc.settings.read_auth:
        return ""
    return _owner(creds, svc, write=False)


Writer = Annotated[str, Depends(writer)]
Reader = Annotated[str, Depends(reader)]
WriteCaller = Annotated[Caller, Depends(caller)]


class BodyTooLarge(HTTPException):
    """Raised while the body streams in; an HTTPException so FastAPI's body parsing passes it on."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body is larger than this server's limit of {limit} bytes")


class BodyTimeout(HTTPException):
    """Raised when a client stops sending its body; an HTTPException so FastAPI passes it on."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(408, f"the request body stalled: no data arrived for {timeout_s:g} s "
                              "(this server's body timeout, AUTOSCHED_BODY_TIMEOUT_S)")


class BodyLimitMiddleware:
    """413 for a body over the limit, checked on Content-Length and again while it streams in
    (a chunked upload has no length). Record imports get their own, larger limit. A body that
    stops arriving for `timeout_s` before it is complete gets 408 (a stalled client must not hold a
    request open for ever)."""

    def __init__(self, app: Any, limit: int, import_limit: int, import_path: str = "/v1/records/import",
                 timeout_s: float = 30.0) -> None:
        self.app, self.limit, self.import_limit, self.import_path = app, limit, import_limit, import_path
        self.timeout_s = timeout_s

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
        seen = {"n": 0, "started": False, "complete": False}

        async def limited_receive() -> dict:
            if seen["complete"]:  # the body is in: what follows is a wait for the disconnect
                return await receive()
            try:
                msg = await asyncio.wait_for(receive(), self.timeout_s)
            except TimeoutError:
                raise BodyTimeout(self.timeout_s) from None
            if msg["type"] == "http.request":
                seen["n"] += len(msg.get("body", b""))
                if seen["n"] > limit:
                    raise BodyTooLarge(limit)
                seen["complete"] = not msg.get("more_body", False)
            return msg

        async def tracking_send(msg: dict) -> None:
            if msg["type"] == "http.response.start":
                seen["started"] = True
            await send(msg)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except (BodyTooLarge, BodyTimeout) as exc:
            if not seen["started"]:
                await _plain(send, exc.status_code, str(exc.detail))


async def _plain(send: Any, status: int, detail: str) -> None:
    await send_json(send, status, detail)
