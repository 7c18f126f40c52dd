"""`autosched serve` owns what it starts: its Ray head listens on loopback only with token auth on,
a SIGKILL-ed serve leaves no head behind (and a head left behind is replaced on the next start),
and a SIGTERM-ed serve leaves no process at all (feature-pool workers included).

Started as the README does (`serve --ray-head --node-ip 127.0.0.1`), with Ray's token auth ON
(the environment has no RAY_AUTH_MODE). Everything is stopped by pid.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from autosched.service.server import HEAD_STATE, descendants, head_state_dir, session_pids
from tests.support.service_helpers import AUTH, TOKEN, finished, free_port, job_body, wait_job
from tests.support.sockets import listeners

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(pid)
    return out


def _wait_gone(pids: list[int], timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _alive(pids)


class Serve:
    """`autosched serve` in its own session, with the environment a user would have."""

    def __init__(self, tmp: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = [sys.executable, "-m", "autosched.cli.main", "--db", f"sqlite:///{tmp / 'svc.db'}", "serve",
                    "--port", str(self.port), "--token", f"admin:{TOKEN}", "--log-level", "warning", *args]
        base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
        self.env = {**base, "AUTOSCHED_QUIET": "1", "HOME": str(tmp), **(env or {})}
        self.log = tmp / f"serve-{self.port}.log"
        self.proc: subprocess.Popen | None = None
        self.seen: set[int] = set()  # every pid ever seen below serve

    def start(self, timeout: float = 120.0) -> Serve:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill_all()
                raise AssertionError(f"serve did not come up:\n{self.log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.3)

    def tree(self) -> list[int]:
        assert self.proc is not None
        pids = descendants(self.proc.pid)
        self.seen |= set(pids)
        return pids

    def kill_all(self) -> None:
        """Clean-up for the test itself: SIGKILL whatever is left, by pid."""
        for pid in _alive(sorted(self.seen | ({self.proc.pid} if self.proc else set()))):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            for pid in session_pids(self.proc.pid):
                os.kill(pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def run_job(self, timeout: float = 240.0) -> dict:
        with httpx.Client(base_url=self.url, headers=AUTH, timeout=30) as c:
            job = c.post("/v1/jobs", json=job_body("matmul", [16, 16, 16], trials=4)).json()
            end = wait_job(c, job["id"], finished, timeout=timeout, what="an end")
        assert end["state"] == "done", (end, self.log.read_text(errors="replace")[-3000:])
        return end


@pytest.mark.ray
def test_ray_head_listens_on_loopback_only_with_token_auth_on(tmp_path: Path) -> None:
    ray_port = free_port()
    serve = Serve(tmp_path, "--ray-head", "--ray-port", str(ray_port), "--node-ip", "127.0.0.1",
                  "--num-cpus", "1", "--max-running-jobs", "1")
    try:
        serve.start()
        serve.run_job()
        assert serve.proc is not None
        pids = [serve.proc.pid, *serve.tree()]
        socks = listeners(pids)
        assert any(s.port == ray_port for s in socks), socks  # we see the GCS, so we see Ray's sockets
        names = {s.name for s in socks}
        assert {"gcs_server", "raylet"} <= names, names
        open_to_all = [s for s in socks if s.wildcard or not s.loopback]
        assert open_to_all == [], f"listeners reachable from other machines: {open_to_all}"
        # token auth is on for the head (and this API's driver), with a private generated token
        state = head_state_dir(ray_port)
        token_file = state / "ray-auth-token"
        assert token_file.stat().st_mode & 0o777 == 0o600 and len(token_file.read_text()) == 64
        gcs = next(s.pid for s in socks if s.name == "gcs_server")
        environ = dict(kv.split("=", 1) for kv in Path(f"/proc/{gcs}/environ").read_text().split("\0") if "=" in kv)
        assert environ.get("RAY_AUTH_MODE") == "token" and environ.get("RAY_AUTH_TOKEN_PATH") == str(token_file)
        assert token_file.read_text() not in serve.log.read_text()  # the path is printed, never the token
    finally:
        serve.kill_all()
        shutil.rmtree(head_state_dir(ray_port), ignore_errors=True)


@pytest.mark.ray
def test_serve_killed_by_sigkill_takes_its_head_along_and_restarts(tmp_path: Path) -> None:
    ray_port = free_port()
    serve = Serve(tmp_path, "--ray-head", "--ray-port", str(ray_port), "--node-ip", "127.0.0.1",
                  "--num-cpus", "1", "--max-running-jobs", "1")
    try:
        serve.start()
        state = json.loads((head_state_dir(ray_port) / HEAD_STATE).read_text())
        first_head = state["pid"]
        assert session_pids(first_head), "the head recorded in the state file is not running"
        assert serve.proc is not None
        serve.tree()
        os.kill(serve.proc.pid, signal.SIGKILL)  # the serve process only, as `kill -9 PID` would
        serve.proc.wait(timeout=10)
        deadline = time.monotonic() + 30
        while session_pids(first_head) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert session_pids(first_head) == [], "the Ray head outlived a SIGKILL-ed serve"
        serve.start()  # the README command again: must come up and run jobs on a fresh head
        serve.run_job()
        assert json.loads((head_state_dir(ray_port) / HEAD_STATE).read_text())["pid"] != first_head
    finally:
        serve.kill_all()
        shutil.rmtree(head_state_dir(ray_port), ignore_errors=True)


@pytest.mark.ray
def test_a_head_left_behind_is_replaced_on_the_next_start(tmp_path: Path) -> None:
    """Plant what a crashed serve of old left: a running head on the port, recorded in the state file."""
    ray_port = free_port()
    state_dir = head_state_dir(ray_port)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}, "RAY_AUTH_MODE": "disabled"}
    log = open(tmp_path / "orphan.log", "wb")
    orphan = subprocess.Popen([sys.executable, "-m", "autosched.measure.ray_node", "start", "--head", "--block",
                               f"--port={ray_port}", "--node-ip-address=127.0.0.1", f"--temp-dir={state_dir / 'ray'}",
                               "--include-dashboard=false", "--disable-usage-stats", "--num-cpus=1"],
                              stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True)
    log.close()
    serve = Serve(tmp_path, "--ray-head", "--ray-port", str(ray_port), "--node-ip", "127.0.0.1",
                  "--num-cpus", "1", "--max-running-jobs", "1", env={"RAY_AUTH_MODE": "disabled"})
    try:
        deadline = time.monotonic() + 90
        while b"Ray runtime started" not in (tmp_path / "orphan.log").read_bytes():
            assert orphan.poll() is None and time.monotonic() < deadline, (tmp_path / "orphan.log").read_text()
            time.sleep(0.3)
        (state_dir / HEAD_STATE).write_text(json.dumps({"pid": orphan.pid, "port": ray_port}))
        serve.start()
        assert session_pids(orphan.pid) == [], "the head left behind still runs beside the new one"
        serve.run_job()
    finally:
        serve.kill_all()
        for pid in session_pids(orphan.pid):
            os.kill(pid, signal.SIGKILL)
        orphan.wait(timeout=10)
        shutil.rmtree(state_dir, ignore_errors=True)


def test_sigterm_leaves_no_process_of_the_service(tmp_path: Path) -> None:
    """A local job with the feature pool on (2 workers) ends, then SIGTERM: nothing serve started
    survives (the idle workers used to stay, about 170 MB each, with the resource tracker)."""
    serve = Serve(tmp_path, "--max-running-jobs", "1", env={"AUTOSCHED_FEATURE_WORKERS": "2"})
    try:
        serve.start()
        with httpx.Client(base_url=serve.url, headers=AUTH, timeout=30) as c:
            body = job_body("matmul", [32, 32, 32], trials=12, verify=0)
            body.update(searcher="annealing", cost_model="xgb", batch_size=4)
            job = c.post("/v1/jobs", json=body).json()
            end = wait_job(c, job["id"], finished, timeout=300, what="an end")
        assert end["state"] == "done", (end, serve.log.read_text(errors="replace")[-3000:])
        workers = [p for p in serve.tree() if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert workers, "the guided job should have started the feature workers (idle now, not stopped)"
        before = serve.tree()
        assert serve.proc is not None
        serve.proc.send_signal(signal.SIGTERM)
        serve.proc.wait(timeout=180)  # the job stops after its batch
        left = _wait_gone(before, timeout=10)
        assert left == [], f"processes outlived serve: {[(p, Path(f'/proc/{p}/cmdline').read_text()) for p in left]}"
    finally:
        serve.kill_all()
