"""Service subcommands of `autosched`: serve, worker, and the HTTP client commands.

    autosched serve [--ray-head | --ray-address HOST:PORT] [--token NAME:TOKEN] [--port 8000]
    autosched worker --address HOST:PORT          (joins this machine to the Ray cluster; blocks)
    autosched submit matmul 512 512 512 --trials 200 [--server URL] [--token T] [--wait]
    autosched status [JOB]   autosched cancel JOB   autosched best KEY --server URL
    autosched verify KEY --server URL [--target cpu] [--top 5] [--wait]   (a verify job on the service)

Client commands take `--server` (default $AUTOSCHED_SERVER, else http://127.0.0.1:8000) and
`--token` (default $AUTOSCHED_TOKEN); the CLI is an edge, so it may read those here.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Any

DEFAULT_SERVER = "http://127.0.0.1:8000"
FINAL = ("done", "failed", "cancelled")


# ---------------------------------------------------------------- client
class ApiError(RuntimeError):
    """An HTTP error from the service, with its status and the server's message."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"HTTP {status}: {detail if isinstance(detail, str) else json.dumps(detail)}")
        self.status, self.detail = status, detail


class Client:
    """A thin synchronous httpx client of the service API."""

    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=server.rstrip("/"), headers=headers, timeout=timeout)

    def call(self, method: str, path: str, **kw: Any) -> Any:
        r = self.http.request(method, path, **kw)
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise ApiError(r.status_code, detail)
        return r.json() if "json" in r.headers.get("content-type", "") else r.text

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", "/v1/jobs", json=body)

    def job(self, job_id: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/jobs/{job_id}")

    def wait(self, job_id: str, timeout_s: float = 3600.0, poll_s: float = 1.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.job(job_id)
            if job["state"] in FINAL or time.monotonic() > deadline:
                return job
            time.sleep(poll_s)


def _client(args: argparse.Namespace) -> Client:
    return Client(args.server or os.environ.get("AUTOSCHED_SERVER") or DEFAULT_SERVER,
                  args.token or os.environ.get("AUTOSCHED_TOKEN"))


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def submit_body(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /v1/jobs body for the submit command's arguments."""
    if args.dag:
        with open(args.dag) as f:
            d = json.load(f)
        if "dag" not in d:  # a bare DAG: the build order is given on the command line
            d = {"dag": d, "args_order": [a for a in (args.args_order or "").split(",") if a]}
        workload = {k: d[k] for k in ("dag", "args_order", "name") if k in d}
    else:
        if not args.op:
            raise ValueError("submit needs an op name (e.g. `autosched submit matmul 64 64 64`) or --dag FILE")
        kwargs = {}
        for kv in args.param or []:
            k, sep, v = kv.partition("=")
            if not sep:
                raise ValueError(f"--param wants NAME=VALUE, got {kv!r}")
            kwargs[k] = _value(v)
        workload = {"op": args.op, "args": [_value(a) for a in args.args], "kwargs": kwargs}
    body = {"workload": workload, "target": args.target, "trials": args.trials, "searcher": args.searcher,
            "cost_model": args.cost_model, "batch_size": args.batch_size, "seed": args.seed,
            "priority": args.priority}
    if args.early_stopping:
        body["early_stopping"] = args.early_stopping
    return body


def _show_job(job: dict[str, Any]) -> str:
    best = f"{job['best_gflops']:.2f} GFLOP/s" if job.get("best_gflops") else "-"
    return (f"{job['id']}  {job['state']:<9} {job['workload_name']:<14} {job['trials_done']:>5}/{job['trials']:<5} "
            f"best {best:<16} {job['target'].split('|')[0]:<6} {job['owner']} {job['error'][:60]}")


def cmd_submit(args: argparse.Namespace) -> int:
    c = _client(args)
    job = c.submit(submit_body(args))
    print(f"submitted job {job['id']} for {job['workload_name']} (key {job['workload_key']})", flush=True)
    if args.wait:
        job = c.wait(job["id"], timeout_s=args.wait_timeout)
        print(_show_job(job))
        return 0 if job["state"] == "done" else 1
    if args.json:
        print(json.dumps(job, indent=2))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    c = _client(args)
    if args.job:
        job = c.job(args.job)
        print(json.dumps(job, indent=2) if args.json else _show_job(job))
        return 0
    params = {"state": args.state} if args.state else {}
    jobs = c.call("GET", "/v1/jobs", params=params)["jobs"]
    if args.json:
        print(json.dumps(jobs, indent=2))
    else:
        for job in jobs:
            print(_show_job(job))
        if not jobs:
            print("no jobs")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """Only the job's owner or an admin token may cancel; the server's 403 says whose job it is."""
    job = _client(args).call("DELETE", f"/v1/jobs/{args.job}")
    print(_show_job(job))
    if job.get("cancelled_by"):
        print(f"cancelled by {job['cancelled_by']}")
    return 0


def cmd_remote_best(args: argparse.Namespace) -> int:
    """`autosched best KEY --server URL`: the best schedule from the service instead of a database."""
    try:
        s = _client(args).call("GET", f"/v1/schedules/{args.key}",
                               params={"target": args.target, "source": str(bool(args.source)).lower()})
    except ApiError as exc:
        if exc.status == 404:
            print(exc.detail, file=sys.stderr)
            return 2
        raise
    status = "verified" if s.get("verified") else "UNVERIFIED"
    if args.source and s.get("source"):
        print(f"# {s['workload_name']}  {s['median_ms']:.4f} ms  {s['gflops']:.2f} GFLOP/s on {s['target']} "
              f"({status}, {s.get('n_valid', 0)} valid measurements there)")
        print(s.get("primitives") or "")
        print(s["source"]["code"])
    else:
        keys = ("workload_key", "target", "median_ms", "gflops", "verified", "n_valid", "n_imported", "origin",
                "host", "steps")
        print(json.dumps({k: s.get(k) for k in keys}, indent=2))
    if not s.get("verified"):
        print(f"warning: unverified ({s.get('n_valid', 0)} valid measurements on the service); "
              f"`autosched verify {args.key} --server URL` measures it again there", file=sys.stderr)
    return 0


def cmd_remote_verify(args: argparse.Namespace) -> int:
    """`autosched verify KEY --server URL`: a verify job on the service's workers (listed, cancellable)."""
    c = _client(args)
    job = c.call("POST", f"/v1/schedules/{args.key}/verify",
                 params={"target": args.target, "top": args.top, "priority": args.priority})
    print(f"submitted verify job {job['id']} for {job['workload_name']} on {job['target']}", flush=True)
    if not args.wait:
        return 0
    job = c.wait(job["id"], timeout_s=args.wait_timeout)
    print(_show_job(job))
    if job["state"] != "done":
        return 1
    standings = c.call("GET", f"/v1/schedules/{args.key}/standings", params={"target": job["target"], "k": args.top})
    for st in standings["standings"]:
        cost = f"{st['median_ms']:.4f} ms" if st.get("median_ms") else "-"
        print(f"{st['steps_hash'][:12]}  {cost:>12}  {st['n_valid']} valid  {st['reason']}")
    return 0


# ---------------------------------------------------------------- server side
def settings_from_args(args: argparse.Namespace) -> Any:
    """Environment first (`settings_from_env`), then every flag that was given."""
    from autosched.service.settings import parse_tokens, settings_from_env

    s = settings_from_env()
    changes: dict[str, Any] = {"host": args.host, "port": args.port}
    if args.db:
        from autosched.tuning.api import open_db

        changes["db_url"] = open_db(args.db).settings.url
    if args.token:
        changes["write_tokens"] = {**s.write_tokens, **parse_tokens(",".join(args.token))}
    if args.read_token:
        changes["read_tokens"] = {**s.read_tokens, **parse_tokens(",".join(args.read_token))}
    if args.read_auth:
        changes["read_auth"] = True
    for name in ("max_running_jobs", "max_trials", "quantum_s", "max_tensor_elements", "max_body_bytes"):
        v = getattr(args, name)
        if v is not None:
            changes[name] = v
    if args.ray_address:
        changes["ray_address"] = args.ray_address
    return dataclasses.replace(s, **changes)


def cmd_serve(args: argparse.Namespace) -> int:
    import secrets

    from autosched.service import ray_auth, server

    settings = settings_from_args(args)
    if args.ray_head:
        state_dir = server.head_state_dir(args.ray_port)
        print(ray_auth.setup_head(os.environ, state_dir), file=sys.stderr, flush=True)
        server.start_ray_head(args.ray_port, args.num_cpus, args.node_ip,
                              object_store_memory=args.object_store_memory)
        settings = dataclasses.replace(settings, ray_address=f"{args.node_ip}:{args.ray_port}")
        print(f"ray head on {settings.ray_address}; join workers with "
              f"`autosched worker --address {settings.ray_address}`", flush=True)
    elif settings.ray_address:
        ray_auth.setup_driver(os.environ)
    if not settings.write_tokens and not settings.admin_tokens:
        token = secrets.token_urlsafe(18)
        settings = dataclasses.replace(settings, admin_tokens={token: "admin"})
        print(f"no --token / AUTOSCHED_TOKENS / AUTOSCHED_ADMIN_TOKENS given: writes need this generated "
              f"admin token: {token}", file=sys.stderr, flush=True)
    where = settings.ray_address or f"{settings.max_running_jobs} local worker thread(s)"
    print(f"autosched service on http://{settings.host}:{settings.port}  (jobs on {where})", flush=True)
    server.serve(settings, log_level=args.log_level, access_log=args.access_log)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from autosched.measure import ray_node
    from autosched.service import ray_auth, server

    gpus = server.detect_gpus()
    cmd = server.worker_command(args.address, args.num_cpus, args.num_gpus, gpus, args.temp_dir,
                                args.object_store_memory)
    print(f"joining {args.address} with {len(gpus) if args.num_gpus is None else args.num_gpus} GPU(s) "
          f"{gpus or ''}: {' '.join(cmd)}", flush=True)
    try:
        ray_auth.setup_worker(os.environ)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        if not args.dry_run:
            return 2
    if ray_node.is_loopback(ray_node.host_of(args.address)):
        # Ray would swap a loopback address for the outward one and miss a loopback-only head
        cmd = [sys.executable, "-m", "autosched.measure.ray_node", *cmd[1:]]
    if args.dry_run:
        return 0
    sys.stdout.flush()
    os.execv(cmd[0], cmd)  # becomes `ray start --block`: signals reach the node directly
    return 0  # not reached


def _client_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", default=None, help=f"service URL (default $AUTOSCHED_SERVER or {DEFAULT_SERVER})")
    p.add_argument("--token", default=None, help="bearer token (default $AUTOSCHED_TOKEN)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the service subcommands to `autosched`'s parser (called by cli.build_parser)."""
    s = sub.add_parser("serve", help="run the HTTP API and job manager (optionally a Ray head)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--token", action="append", help="write token NAME:TOKEN (repeatable; or $AUTOSCHED_TOKENS)")
    s.add_argument("--read-token", action="append", help="read-only token NAME:TOKEN (repeatable)")
    s.add_argument("--read-auth", action="store_true", help="reads need a token too")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--ray-address", default=None, help="run jobs on this Ray cluster (HOST:PORT)")
    g.add_argument("--ray-head", action="store_true", help="start a Ray head node here and run jobs on it")
    s.add_argument("--ray-port", type=int, default=6379)
    s.add_argument("--node-ip", default="127.0.0.1", help="address the Ray head binds and advertises")
    s.add_argument("--num-cpus", type=int, default=None, help="CPUs the Ray head offers")
    s.add_argument("--object-store-memory", type=int, default=None)
    s.add_argument("--max-running-jobs", dest="max_running_jobs", type=int, default=None)
    s.add_argument("--max-trials", dest="max_trials", type=int, default=None)
    s.add_argument("--quantum", dest="quantum_s", type=float, default=None,
                   help="seconds a job keeps its slot while an equal-priority job waits")
    s.add_argument("--max-tensor-elements", dest="max_tensor_elements", type=int, default=None)
    s.add_argument("--max-body-bytes", dest="max_body_bytes", type=int, default=None)
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    s.add_argument("--access-log", action="store_true")
    s.set_defaults(fn=cmd_serve)

    w = sub.add_parser("worker", help="join this machine to the service's Ray cluster (blocks)")
    w.add_argument("--address", required=True, help="the Ray head, HOST:PORT")
    w.add_argument("--num-cpus", type=int, default=None)
    w.add_argument("--num-gpus", type=int, default=None, help="default: what nvidia-smi finds")
    w.add_argument("--temp-dir", default=None)
    w.add_argument("--object-store-memory", type=int, default=None)
    w.add_argument("--dry-run", action="store_true", help="print the ray command and exit")
    w.set_defaults(fn=cmd_worker)

    m = sub.add_parser("submit", help="submit a tuning job to the service")
    m.add_argument("op", nargs="?", help="registered op name, e.g. matmul")
    m.add_argument("args", nargs="*", help="op arguments, e.g. 512 512 512")
    m.add_argument("--param", action="append", help="keyword argument NAME=VALUE (repeatable)")
    m.add_argument("--dag", default=None, help="JSON file: {'dag': ..., 'args_order': [...]} or a bare DAG")
    m.add_argument("--args-order", default=None, help="build order for a bare --dag, comma separated")
    m.add_argument("--target", default="cpu",
                   help="cpu, cuda, triton, or the exact key of a target a live worker of the service offers")
    m.add_argument("--trials", type=int, default=64)
    m.add_argument("--searcher", default="genetic")
    m.add_argument("--cost-model", default="xgb", choices=["xgb", "random", "none"])
    m.add_argument("--batch-size", type=int, default=16)
    m.add_argument("--early-stopping", type=int, default=None)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--priority", type=int, default=0)
    m.add_argument("--wait", action="store_true", help="follow the job until it ends")
    m.add_argument("--wait-timeout", type=float, default=3600.0)
    m.add_argument("--json", action="store_true")
    _client_args(m)
    m.set_defaults(fn=_guarded(cmd_submit))

    st = sub.add_parser("status", help="jobs on the service, or one job")
    st.add_argument("job", nargs="?")
    st.add_argument("--state", default=None, choices=list(FINAL) + ["queued", "running"])
    st.add_argument("--json", action="store_true")
    _client_args(st)
    st.set_defaults(fn=_guarded(cmd_status))

    c = sub.add_parser("cancel", help="cancel a job on the service")
    c.add_argument("job")
    _client_args(c)
    c.set_defaults(fn=_guarded(cmd_cancel))

    best = sub.choices.get("best")
    if best is not None:  # `autosched best KEY --server URL` asks the service instead of a database
        _client_args(best)
        best.add_argument("--source", action="store_true", help="with --server: print primitives and source")
        _remote_or_local(best, cmd_remote_best)

    verify = sub.choices.get("verify")
    if verify is not None:  # `autosched verify KEY --server URL` queues a verify job on the service
        _client_args(verify)
        verify.add_argument("--priority", type=int, default=0, help="with --server: the verify job's priority")
        verify.add_argument("--wait", action="store_true", help="with --server: follow the job until it ends")
        verify.add_argument("--wait-timeout", type=float, default=3600.0)
        _remote_or_local(verify, cmd_remote_verify)


def _remote_or_local(parser: argparse.ArgumentParser, remote: Any) -> None:
    """`remote` (guarded) when the command was given --server, else the command's local function."""
    local = parser.get_default("fn")

    def fn(args: argparse.Namespace) -> int:
        return _guarded(remote)(args) if args.server else local(args)

    parser.set_defaults(fn=fn)


def _guarded(fn: Any) -> Any:
    """A client command whose HTTP and connection errors become one line and exit code 2."""

    def run(args: argparse.Namespace) -> int:
        import httpx

        try:
            return int(fn(args) or 0)
        except ApiError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except httpx.HTTPError as exc:
            print(f"error: cannot reach the service: {exc}", file=sys.stderr)
            return 2

    return run
