"""What stands between a hostile client and the routes: the write token checked before any body
byte is read, and JSON bodies checked against named limits before FastAPI parses them.

FastAPI reads a route's body before it resolves the route's dependencies, and answers every JSON
failure other than a syntax error with "There was an error parsing the body". So the token check
for writes is an ASGI middleware (`WriteAuthMiddleware`: a 50 MiB upload without a token is
refused before it is read), and the JSON checks are a route class (`GuardedRoute`) that parses
the body once, names the limit a body broke (UTF-8, nesting depth, integer digits, NaN, NUL
characters), and leaves the parsed value for FastAPI.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from starlette.routing import Match

from autosched.service.settings import ServiceSettings

MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects a JSON body may have (a DAG at `max_expr_depth` 64 needs
about 67; Python's parser itself gives up near 1000 with a RecursionError)."""

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


# ---------------------------------------------------------------- tokens before bodies
def bearer_token(authorization: str | None) -> str | None:
    """The credentials of an `Authorization: Bearer TOKEN` header (None when absent or another scheme),
    read as FastAPI's HTTPBearer reads them."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def write_problem(settings: ServiceSettings, token: str | None) -> tuple[int, str] | None:
    """(status, message) when `token` may not write, else None: one rule for the middleware and the
    route dependency."""
    if not settings.can_write:
        return 403, "this server has no write tokens configured; writes are disabled"
    if token is None:
        return 401, "this request needs a bearer token (Authorization: Bearer TOKEN)"
    if settings.owner_of(token, write=True) is not None:
        return None
    if settings.owner_of(token, write=False) is not None:
        return 403, "this token may read but not write"
    return 401, "unknown bearer token"


class WriteAuthMiddleware:
    """401/403 for a write (POST, PUT, PATCH, DELETE under /v1/) without a write token, answered
    from the headers alone: the body is never received, so an anonymous upload costs nothing."""

    def __init__(self, app: Any, settings: ServiceSettings, prefix: str = "/v1/") -> None:
        self.app, self.settings, self.prefix = app, settings, prefix

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if (scope["type"] != "http" or scope.get("method") not in WRITE_METHODS
                or not str(scope.get("path", "")).startswith(self.prefix)):
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers", []) if k == b"authorization"), None)
        token = bearer_token(header.decode("latin-1") if header is not None else None)
        problem = write_problem(self.settings, token)
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, detail = problem
        _mark_route(scope)
        extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
        await send_json(send, status, detail, extra)


def _mark_route(scope: dict) -> None:
    """Put the matching route in the scope, as routing would have, so metrics count a refused write
    under its route template (`/v1/jobs`), not as unmatched."""
    app = scope.get("app")
    for route in getattr(getattr(app, "router", None), "routes", ()):
        match, _ = route.matches(scope)
        if match == Match.FULL:
            scope["route"] = route
            return


async def send_json(send: Any, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A complete `{"detail": ...}` response from an ASGI middleware (the app never ran)."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------- JSON bodies
def _no_constant(name: str) -> Any:
    raise ValueError(f"the body uses {name}, which JSON does not allow (numbers must be finite)")


def json_depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), without recursion."""
    depth, stack = 0, [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            d += 1
            depth = max(depth, d)
            stack.extend((x, d) for x in (v.values() if isinstance(v, dict) else v))
    return depth


def first_nul(value: Any, root: str = "") -> str | None:
    """The JSON path (`workload.args[2]`) of the first key or string holding a NUL character, or None.
    PostgreSQL cannot store NUL in text, and no field of the API has a use for one."""
    stack: list[tuple[Any, str]] = [(value, root)]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                return path or "the body"
        elif isinstance(v, dict):
            if any("\x00" in k for k in v):
                return f"a key of {path or 'the body'}"
            stack.extend(reversed([(x, f"{path}.{k}" if path else str(k)) for k, x in v.items()]))
        elif isinstance(v, list):
            stack.extend(reversed([(x, f"{path}[{i}]") for i, x in enumerate(v)]))  # reversed: document order
    return None


def parse_json_body(body: bytes) -> Any:
    """The parsed body, or HTTPException(422) naming the rule it broke; None for an empty body."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPException(422, f"the body is not UTF-8 text (invalid byte at offset {exc.start}); "
                                 "JSON bodies must be UTF-8") from None
    if not text.strip():
        return None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise HTTPException(422, f"the JSON body nests deeper than the JSON nesting depth limit of "
                                 f"{MAX_JSON_DEPTH}") from None
    except json.JSONDecodeError:
        return None  # a syntax error: FastAPI's own 422 says where
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise HTTPException(422, f"a JSON integer in the body has more digits than the integer digit limit "
                                     f"of {sys.get_int_max_str_digits()}") from None
        raise HTTPException(422, str(exc)) from None
    depth = json_depth(value)
    if depth > MAX_JSON_DEPTH:
        raise HTTPException(422, f"the JSON body nests {depth} deep; the JSON nesting depth limit is {MAX_JSON_DEPTH}")
    where = first_nul(value)
    if where is not None:
        raise HTTPException(422, f"{where} contains a NUL character (\\u0000), which no text field may hold")
    return value


def check_parameters(request: Request) -> None:
    """422 naming a query or path parameter that holds a NUL character (before any database sees it)."""
    items = [*request.query_params.multi_items(), *request.path_params.items()]
    for name, value in items:
        if "\x00" in str(name) or "\x00" in str(value):
            raise HTTPException(422, f"parameter {str(name).replace(chr(0), '?')!r} contains a NUL character, "
                                     "which no text field may hold")


def _wants_json(request: Request) -> bool:
    ctype = request.headers.get("content-type")
    if not ctype:
        return True  # FastAPI parses a body without a content type as JSON
    main = ctype.split(";", 1)[0].strip().lower()
    return main == "application/json" or (main.startswith("application/") and main.endswith("+json"))


class GuardedRoute(APIRoute):
    """An APIRoute whose parameters and JSON body are checked by the rules above before FastAPI sees
    them. Only routes that declare a body have theirs read here (imports stream their own)."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        original = super().get_route_handler()
        reads_body = self.body_field is not None

        async def handler(request: Request) -> Response:
            check_parameters(request)
            if reads_body and request.method in BODY_METHODS and _wants_json(request):
                parse_json_body(await request.body())  # cached on the request: FastAPI reads it again
            return await original(request)

        return handler
