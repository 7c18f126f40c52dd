"""Prometheus text exposition (format 0.0.4) without a client library: a few counters, a
latency histogram per route, and gauges read from the database at scrape time.

Request metrics are recorded by a pure ASGI middleware (cheaper than BaseHTTPMiddleware on the
lookup hot path) and keyed by the route TEMPLATE (`/v1/jobs/{job_id}`), never the raw path, so a
scraper's series count stays bounded whatever URLs clients send.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**kv: str) -> str:
    return "{" + ",".join(f'{k}="{_esc(str(v))}"' for k, v in kv.items()) + "}"


class RequestMetrics:
    """Request counts by (method, route, status) and latency histograms by (method, route)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[tuple[str, str, str], int] = defaultdict(int)
        self.hist: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0] * (len(BUCKETS) + 1))
        self.sums: dict[tuple[str, str], float] = defaultdict(float)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.counts[(method, route, str(status))] += 1
            h = self.hist[(method, route)]
            for i, b in enumerate(BUCKETS):
                if seconds <= b:
                    h[i] += 1
                    break
            else:
                h[-1] += 1
            self.sums[(method, route)] += seconds

    def lines(self) -> Iterable[str]:
        with self._lock:
            yield "# HELP autosched_http_requests_total HTTP requests by method, route template and status."
            yield "# TYPE autosched_http_requests_total counter"
            for (m, r, s), n in sorted(self.counts.items()):
                yield f"autosched_http_requests_total{_labels(method=m, route=r, status=s)} {n}"
            yield "# HELP autosched_http_request_duration_seconds Time to answer an HTTP request."
            yield "# TYPE autosched_http_request_duration_seconds histogram"
            for (m, r), h in sorted(self.hist.items()):
                acc = 0
                for b, n in zip(BUCKETS, h):
                    acc += n
                    yield f"autosched_http_request_duration_seconds_bucket{_labels(method=m, route=r, le=str(b))} {acc}"
                acc += h[-1]
                yield f"autosched_http_request_duration_seconds_bucket{_labels(method=m, route=r, le='+Inf')} {acc}"
                yield f"autosched_http_request_duration_seconds_sum{_labels(method=m, route=r)} {self.sums[(m, r)]:.6f}"
                yield f"autosched_http_request_duration_seconds_count{_labels(method=m, route=r)} {acc}"


class MetricsMiddleware:
    """Times every HTTP request and records it under its route template."""

    def __init__(self, app: ASGIApp, metrics: RequestMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = {"code": 500}

        async def send_wrapper(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.observe(scope.get("method", ""), template, status["code"], time.perf_counter() - t0)


def gauge(name: str, help_text: str, samples: Iterable[tuple[dict[str, str], float]]) -> list[str]:
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for labels, value in samples:
        out.append(f"{name}{_labels(**labels) if labels else ''} {value:g}")
    return out
