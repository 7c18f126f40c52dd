"""Prometheus metrics of one service app, with `prometheus_client`.

Each app owns a `ServiceMetrics` with its own `CollectorRegistry` (never the library's global
one), so several apps in one process (the tests) keep separate counts. It holds:

- request counts by (method, route, status) and a latency histogram by (method, route), recorded
  by a pure ASGI middleware (cheaper than BaseHTTPMiddleware on the lookup hot path) and keyed by
  the route TEMPLATE (`/v1/jobs/{job_id}`), never the raw path, so a scraper's series count stays
  bounded whatever URLs clients send;
- job manager events by kind, and the jobs this process runs now;
- gauges read from the database at scrape time (jobs by state, records, workloads), through
  `TuningDB` only.

Multi-process mode: when `PROMETHEUS_MULTIPROC_DIR` is set before the process starts (the API
behind several uvicorn workers), prometheus_client keeps the counters, histograms and the
running-jobs gauge in files there, and a scrape of any worker aggregates every worker's files
(`MultiProcessCollector`); the running-jobs gauge then sums the live workers. The database gauges
are read once per scrape in either mode (every worker sees the same database). The folder must be
emptied before the workers start, as prometheus_client requires; a worker that stops cleanly
drops its live gauge itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from tuning_db import TuningDB

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def multiproc_dir() -> str | None:
    """The multi-process folder when prometheus_client's multi-process mode is on, else None."""
    return os.environ.get(MULTIPROC_ENV) or os.environ.get(MULTIPROC_ENV.lower()) or None


class DatabaseCollector(Collector):
    """Gauges read from the tuning database at scrape time (nothing before the database is open)."""

    def __init__(self, db: Callable[[], TuningDB | None]) -> None:
        self._db = db

    def collect(self) -> Iterator[Metric]:
        db = self._db()
        if db is None:
            return
        jobs = GaugeMetricFamily("autosched_jobs", "Jobs in the database by state.", labels=["state"])
        for state, n in db.count_jobs_by_state().items():
            jobs.add_metric([state.value], n)
        yield jobs
        yield GaugeMetricFamily("autosched_records", "Measurement records in the database.",
                                value=db.count_records())
        yield GaugeMetricFamily("autosched_workloads", "Workloads in the database.", value=len(db.workloads()))


class WithoutCreated(Collector):
    """`inner`'s metrics without the `*_created` timestamp series prometheus_client adds to counters
    and histograms: the exposition keeps the series names it always had (set per registry, where
    `disable_created_metrics()` would change every registry in the process)."""

    def __init__(self, inner: Collector) -> None:
        self._inner = inner

    def collect(self) -> Iterator[Metric]:
        for metric in self._inner.collect():
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric


class ServiceMetrics:
    """Every metric of one app, in the app's own registry; `exposition` renders a scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.multiproc_dir = multiproc_dir()
        self.db: TuningDB | None = None  # set by the app's lifespan once the database is open
        self.requests = Counter("autosched_http_requests", "HTTP requests by method, route template and status.",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("autosched_http_request_duration_seconds", "Time to answer an HTTP request.",
                                 ["method", "route"], buckets=BUCKETS, registry=self.registry)
        self.job_events = Counter("autosched_job_events", "Job manager events by kind.", ["event"],
                                  registry=self.registry)
        self.running_here = Gauge("autosched_jobs_running_here", "Jobs this process is running now.",
                                  registry=self.registry, multiprocess_mode="livesum")
        self.database = DatabaseCollector(lambda: self.db)
        self.registry.register(self.database)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered HTTP request and its latency."""
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def job_event(self, kind: str) -> None:
        """Count one job manager event (started, preempted, done, failed, requeued, ...)."""
        self.job_events.labels(kind).inc()

    def set_running(self, n: int) -> None:
        """The number of jobs this process runs now."""
        self.running_here.set(n)

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """(body, content type) of a scrape, in the format the Accept header asks for (Prometheus
        text 0.0.4 by default, OpenMetrics when asked)."""
        encoder, content_type = choose_encoder(accept or "")
        if self.multiproc_dir is None:
            return encoder(WithoutCreated(self.registry)), content_type
        registry = CollectorRegistry()  # per scrape, as prometheus_client's multi-process docs say
        multiprocess.MultiProcessCollector(registry, path=self.multiproc_dir)
        registry.register(self.database)
        return encoder(WithoutCreated(registry)), content_type

    def close(self) -> None:
        """This process stops serving: in multi-process mode its live gauge leaves the sum."""
        self.set_running(0)
        if self.multiproc_dir is not None:
            multiprocess.mark_process_dead(os.getpid(), self.multiproc_dir)


class MetricsMiddleware:
    """Times every HTTP request and records it under its route template."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
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
