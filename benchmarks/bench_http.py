"""Best-schedule lookups over HTTP under 100 concurrent clients: SQLite vs PostgreSQL.

What a fleet of model servers starting up does: `GET /v1/schedules/{key}?target=cpu` for the
workloads they know. The server is `autosched serve` (one uvicorn process, no jobs run) on a
loopback port; the clients are asyncio tasks sharing one httpx.AsyncClient (100 connections).
Each run is bounded in requests and time. Two request kinds: the full answer (steps, primitive
calls and generated C source; the rendering is cached per record after the first request) and
`source=false` (steps and cost only).

    .venv/bin/python benchmarks/bench_http.py                  # writes benchmarks/results/bench_http.{md,json}
    .venv/bin/python benchmarks/bench_http.py --requests 500 --no-write

Client and server share the machine's cores, so the figures are a floor for the server alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from autosched.target.key import Target, cpu_model  # noqa: E402
from autosched.tuning.api import register  # noqa: E402
from autosched.workload import Workload  # noqa: E402
from tuning_db import TuningDB, sqlite_url  # noqa: E402
from tuning_db.types import RecordIn  # noqa: E402

TOKEN = "bench-token-0123456789"


def seed(db_url: str, n_workloads: int, per_workload: int, seed_: int = 0) -> list[str]:
    """`n_workloads` matmul shapes with `per_workload` valid records each (the default schedule)."""
    rng = random.Random(seed_)
    db = TuningDB(db_url)
    tgt = Target.parse("cpu")
    keys = []
    sizes = [16, 24, 32, 48, 64, 96, 128, 192]
    shapes = [(m, n, k) for m in sizes for n in sizes for k in sizes][:n_workloads]
    for m, n, k in shapes:
        w = Workload.create("matmul", m, n, k)
        register(db, w, tgt)
        recs = [RecordIn(w.key, tgt.key, [], tuple(rng.uniform(1e-5, 1e-3) for _ in range(3)))
                for _ in range(per_workload)]
        db.commit_records(recs)
        keys.append(w.key)
    db.close()
    return keys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def api_server(db_url: str, log: Path) -> Iterator[tuple[str, int]]:
    """`autosched serve` in its own process group on loopback; stopped by its pid."""
    port = _free_port()
    cmd = [sys.executable, "-m", "autosched.cli.main", "--db", db_url, "serve", "--port", str(port),
           "--token", f"bench:{TOKEN}", "--max-running-jobs", "0", "--log-level", "warning"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("server did not start:\n" + log.read_text(errors="replace")[-2000:])
            time.sleep(0.2)
        yield url, proc.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


async def load(url: str, keys: list[str], total: int, clients: int, max_s: float, source: bool,
               seed_: int = 1) -> dict[str, Any]:
    """`clients` tasks, each with its own keep-alive connection (one httpx.AsyncClient per
    client, as separate model servers would have), issue lookups until `total` are done or
    `max_s` passes. (One shared client with a 100-connection pool costs ~3 ms CPU per request
    in httpx's pool bookkeeping on this machine: more than the server.)"""
    rng = random.Random(seed_)
    order = [rng.choice(keys) for _ in range(total)]
    lat: list[float] = []
    errors: dict[str, int] = {}
    next_i = 0
    params = {"target": "cpu", "source": "true" if source else "false"}
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    pool = [httpx.AsyncClient(base_url=url, limits=limits, timeout=30) for _ in range(clients)]
    try:
        for i, k in enumerate(keys[: min(len(keys), 200)]):  # warm-up: caches, first renders
            await pool[i % clients].get(f"/v1/schedules/{k}", params=params)
        await asyncio.gather(*(c.get("/healthz") for c in pool))  # every client holds its connection
        deadline = time.perf_counter() + max_s

        async def worker(client: httpx.AsyncClient) -> None:
            nonlocal next_i
            while next_i < total and time.perf_counter() < deadline:
                key = order[next_i]
                next_i += 1
                t0 = time.perf_counter()
                try:
                    r = await client.get(f"/v1/schedules/{key}", params=params)
                    ok = r.status_code == 200
                    tag = str(r.status_code)
                except httpx.HTTPError as exc:
                    ok, tag = False, type(exc).__name__
                lat.append(time.perf_counter() - t0)
                if not ok:
                    errors[tag] = errors.get(tag, 0) + 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in pool))
        wall = time.perf_counter() - t0
    finally:
        await asyncio.gather(*(c.aclose() for c in pool))
    lat.sort()
    q = statistics.quantiles(lat, n=100) if len(lat) >= 100 else [lat[-1]] * 99
    return {"requests": len(lat), "seconds": round(wall, 3), "rps": round(len(lat) / wall, 1),
            "p50_ms": round(statistics.median(lat) * 1e3, 2), "p90_ms": round(q[89] * 1e3, 2),
            "p99_ms": round(q[98] * 1e3, 2), "max_ms": round(lat[-1] * 1e3, 2), "errors": errors}


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (the server), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_backend(name: str, db_url: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    keys = seed(db_url, args.workloads, args.records_per_workload)
    seeded = time.perf_counter() - t0
    out: dict[str, Any] = {"backend": name, "workloads": len(keys), "records": len(keys) * args.records_per_workload,
                           "seed_s": round(seeded, 1)}
    with api_server(db_url, tmp / f"server-{name}.log") as (url, pid):
        for mode, source in (("with_source", True), ("steps_only", False)):
            server0, client0 = process_cpu_s(pid), own_cpu_s()
            res = asyncio.run(load(url, keys, args.requests, args.clients, args.max_seconds, source))
            n = res["requests"] + min(len(keys), 200) + args.clients  # with the warm-up requests
            res["server_cpu_ms_per_request"] = round((process_cpu_s(pid) - server0) / n * 1e3, 3)
            res["client_cpu_ms_per_request"] = round((own_cpu_s() - client0) / n * 1e3, 3)
            out[mode] = res
            print(f"{name:9s} {mode:12s} {res['requests']:6d} req  {res['rps']:8.1f} req/s  "
                  f"p50 {res['p50_ms']:7.2f} ms  p99 {res['p99_ms']:7.2f} ms  server CPU "
                  f"{res['server_cpu_ms_per_request']:.2f} ms/req  errors {res['errors'] or 0}", flush=True)
    return out


def write_docs(results: dict[str, Any], md: Path, js: Path) -> None:
    js.write_text(json.dumps(results, indent=2) + "\n")
    rows = []
    for b in results["backends"]:
        for mode in ("with_source", "steps_only"):
            r = b[mode]
            rows.append(f"| {b['backend']} | {mode.replace('_', ' ')} | {r['requests']:,} | {r['rps']:,.0f} | "
                        f"{r['p50_ms']:.1f} | {r['p90_ms']:.1f} | {r['p99_ms']:.1f} | "
                        f"{r['server_cpu_ms_per_request']:.2f} | {r['client_cpu_ms_per_request']:.2f} | "
                        f"{sum(r['errors'].values())} |")
    cfg = results["config"]
    md.write_text(f"""# Service: best-schedule lookups over HTTP

Date: {results['date']}. Machine: {results['machine']}; Python {results['python']}, uvicorn {results['uvicorn']}
({results['uvicorn_http']}), FastAPI {results['fastapi']}, SQLAlchemy {results['sqlalchemy']}.

{cfg['clients']} concurrent clients (asyncio tasks, each with its own `httpx.AsyncClient` and keep-alive connection)
send `GET /v1/schedules/{{key}}?target=cpu` for random keys among {results['backends'][0]['workloads']} workloads
({results['backends'][0]['records']:,} records, {cfg['records_per_workload']} per workload), at most {cfg['requests']:,}
requests or {cfg['max_seconds']:.0f} s per run, after a warm-up of one request per key. The server is
`autosched serve` (one uvicorn worker process, no jobs) on a loopback port. "with source" answers with the steps,
the primitive calls and the generated C source (rendered once per record, then cached); "steps only" is
`source=false`. Produced by `benchmarks/bench_http.py`; raw figures in `benchmarks/results/bench_http.json`.

| backend | answer | requests | req/s | p50 ms | p90 ms | p99 ms | server CPU ms/req | client CPU ms/req | errors |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

Notes: the client and the server share the machine's {os.cpu_count()} cores (load average {results['load_avg_start'][0]}
at the start, {results['load_avg_end'][0]} at the end: other work ran too), so requests/s are a floor for the server
alone; "server CPU ms/req" (from /proc, warm-up included) is the server's own cost, so one uvicorn process on one
free core would answer about 1000 / that many lookups per second. Latency under 100 concurrent clients is mostly
queueing in the single server process (Little's law: 100 in flight / throughput); one lookup is a
sub-millisecond index seek (see `results/bench_db.md`). A bare kind `target=cpu` resolves to this host's target key
with one `best()` call. PostgreSQL is a throwaway local cluster (fsync on) reached over loopback TCP; every lookup
checks its pooled connection first (`pool_pre_ping`). For more throughput, put more lookup-only API processes
(`autosched serve --max-running-jobs 0`) behind a load balancer on the same database: lookups share no state but a
per-process render cache.
""")


def _uvicorn_impl() -> str:
    """Which HTTP parser and event loop uvicorn picks here (it prefers httptools/uvloop if installed)."""
    import importlib.util

    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    return f"{http} + {loop}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=100)
    p.add_argument("--requests", type=int, default=5000, help="per run (backend x answer kind)")
    p.add_argument("--max-seconds", type=float, default=60.0, help="per run")
    p.add_argument("--workloads", type=int, default=200)
    p.add_argument("--records-per-workload", type=int, default=25)
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    os.environ.setdefault("AUTOSCHED_QUIET", "1")
    import fastapi
    import sqlalchemy
    import uvicorn

    results: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()}-core {platform.machine()} ({cpu_model()}), {platform.platform()}",
        "python": platform.python_version(), "uvicorn": uvicorn.__version__, "fastapi": fastapi.__version__,
        "sqlalchemy": sqlalchemy.__version__, "uvicorn_http": _uvicorn_impl(),
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
        "config": {k: v for k, v in vars(args).items() if k != "no_write"}, "backends": [],
    }
    with tempfile.TemporaryDirectory(prefix="bench-http-") as d:
        tmp = Path(d)
        for backend in args.backends.split(","):
            if backend == "sqlite":
                results["backends"].append(run_backend("sqlite", sqlite_url(tmp / "bench.db"), args, tmp))
            elif backend == "postgres":
                from tests.support.postgres import throwaway_postgres

                with throwaway_postgres("bench_http", fast_unsafe=False) as url:
                    results["backends"].append(run_backend("postgres", url, args, tmp))
            else:
                raise SystemExit(f"unknown backend {backend!r}")
    results["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    if not args.no_write:
        results_dir = ROOT / "benchmarks" / "results"
        results_dir.mkdir(exist_ok=True)
        write_docs(results, results_dir / "bench_http.md", results_dir / "bench_http.json")
        print("wrote benchmarks/results/bench_http.md and benchmarks/results/bench_http.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
