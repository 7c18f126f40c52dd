"""A real API server for tests: `autosched serve` in its own session on a free loopback port.

Stopped by the pids of its session (SIGTERM for a clean stop, SIGKILL to simulate a crash),
never by name. The server's log is kept so a failing test can show it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from autosched.service.server import session_pids

TOKEN = "test-admin-token-0123"
READ_TOKEN = "test-read-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ApiServer:
    """`python -m autosched.cli.main --db URL serve ...` as a subprocess."""

    def __init__(self, db_url: str, log_dir: Path, *, ray_address: str | None = None, max_running_jobs: int = 1,
                 extra: list[str] | None = None, port: int | None = None) -> None:
        self.db_url, self.log_dir = db_url, log_dir
        self.ray_address, self.max_running_jobs = ray_address, max_running_jobs
        self.extra = list(extra or [])
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> ApiServer:
        self.starts += 1
        cmd = [sys.executable, "-m", "autosched.cli.main", "--db", self.db_url, "serve", "--port", str(self.port),
               "--token", f"admin:{TOKEN}", "--read-token", f"viewer:{READ_TOKEN}",
               "--max-running-jobs", str(self.max_running_jobs), "--log-level", "warning", *self.extra]
        if self.ray_address:
            cmd += ["--ray-address", self.ray_address]
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "AUTOSCHED_QUIET": "1"}
        self.log = self.log_dir / f"api-{self.port}-{self.starts}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:]
                self.kill()
                raise RuntimeError(f"API server did not come up:\n{tail}")
            time.sleep(0.3)

    def _signal_session(self, sig: int) -> None:
        assert self.proc is not None
        for pid in session_pids(self.proc.pid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL every process of the server's session: a crash, no clean-up."""
        if self.proc is None:
            return
        for _ in range(5):
            if not session_pids(self.proc.pid):
                break
            self._signal_session(signal.SIGKILL)
            time.sleep(0.2)
        self.proc.wait(timeout=10)
        self.proc = None

    def stop(self, timeout: float = 40.0) -> None:
        """SIGTERM (uvicorn's clean shutdown: jobs stop and are re-queued), then kill leftovers."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def client(self, token: str | None = TOKEN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def log_tail(self, n: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-n:] if getattr(self, "log", None) else ""


def wait_job(c: httpx.Client, job_id: str, pred: Any, timeout: float = 120.0, what: str = "") -> dict:
    """Poll GET /v1/jobs/{id} until `pred(job)`; fail with the last state seen."""
    deadline = time.monotonic() + timeout
    job: dict = {}
    while time.monotonic() < deadline:
        r = c.get(f"/v1/jobs/{job_id}")
        if r.status_code == 200:
            job = r.json()
            if pred(job):
                return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} never reached {what or pred}: last {job}")


def finished(job: dict) -> bool:
    return job["state"] in ("done", "failed", "cancelled")


def job_body(op: str, args: list, trials: int = 8, **kw: Any) -> dict:
    """A small, fast job: random search without a cost model, batches of 4."""
    body = {"workload": {"op": op, "args": args}, "target": "cpu", "trials": trials, "searcher": "random",
            "cost_model": "none", "batch_size": 4}
    body.update(kw)
    return body


def sample_steps(w: Any, seed: int) -> list:
    """A random valid CPU schedule of workload `w` as steps JSON (distinct seeds: distinct schedules)."""
    import numpy as np

    from autosched.space.registry import make_space

    space = make_space(w, "cpu")
    return space.apply(space.space.sample(np.random.default_rng(seed))).steps_json()


def export_line(w: Any, target: Any, steps: list, costs: list[float], **fields: Any) -> dict:
    """One record line of the export format (`POST /v1/records/import` reads them after the header)."""
    from tuning_db.canonical import steps_hash

    line = {"workload": {"key": w.key, "name": w.name, "spec": w.to_dict(), "flops": w.flops},
            "target": {"key": target.key, "kind": target.kind,
                       "spec": {"kind": target.kind, "device": target.device, "cores": target.cores}},
            "steps": steps, "steps_hash": steps_hash(steps), "costs": costs, "error_code": 0, "error_msg": "",
            "build_seconds": 0.1, "run_seconds": 0.1, "host": "elsewhere", "device": "", "worker_id": "",
            "created": "2025-01-01T00:00:00+00:00", "format_version": 1}
    line.update(fields)
    return line


EXPORT_HEADER = '{"format": "autosched-records", "version": 1}'

ALICE_TOKEN, BOB_TOKEN, ROOT_TOKEN = "alice-token-0123", "bob-token-012345", "root-token-012345"


def hostile_settings(db_url: str, **kw: Any) -> Any:
    """Settings for the hostile-input tests: write tokens admin/alice/bob, a viewer, an admin token
    "root", no job runs, small limits."""
    from autosched.service.settings import ServiceSettings

    base = dict(db_url=db_url, write_tokens={TOKEN: "admin", ALICE_TOKEN: "alice", BOB_TOKEN: "bob"},
                read_tokens={READ_TOKEN: "viewer"}, admin_tokens={ROOT_TOKEN: "root"}, max_running_jobs=0,
                max_trials=500, max_tensor_elements=1 << 20, max_body_bytes=64 * 1024, max_import_bytes=1 << 20)
    base.update(kw)
    return ServiceSettings(**base)


def set_gpu(monkeypatch: Any, model: str) -> None:
    """What this host's GPU probe says ("" for none), in both modules that hold the function."""
    monkeypatch.setattr("autosched.target.gpu.gpu_model", lambda: model)
    monkeypatch.setattr("autosched.target.key.gpu_model", lambda: model)


def seed_records(db_url: str, rows: list[tuple[list, tuple[float, ...], int, str]], w: Any = None) -> None:
    """Records (steps, costs, error_code, error_msg) of workload `w` (matmul 16^3 by default) on this
    host's CPU target."""
    from autosched.target.key import Target
    from autosched.tuning.api import register
    from autosched.workload import Workload
    from tuning_db import TuningDB
    from tuning_db.types import RecordIn

    w = w or Workload.create("matmul", 16, 16, 16)
    db = TuningDB(db_url)
    t = Target.parse("cpu")
    register(db, w, t)
    db.commit_records([RecordIn(w.key, t.key, steps, costs, error_code=code, error_msg=msg)
                       for steps, costs, code, msg in rows])
    db.close()
