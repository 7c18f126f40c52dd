"""A real multi-node Ray cluster on 127.0.0.1 for tests and benchmarks, and its clean-up.

Each node is `ray start --block` in a NEW SESSION (start_new_session): every process of the
node (GCS, raylet, agents, workers, their kernel processes) inherits that session id, so a
node is stopped by killing exactly the pids of its session, never by name and never with a
global `ray stop` (which would hit other users' clusters). Every listener is on loopback
(`autosched.measure.ray_node`). Token auth is explicitly disabled on nodes and driver, for
tests only (`autosched serve`/`worker` keep it on); health checks are shortened on the head so
a killed node is declared dead in a few seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from autosched.measure import ray_node

# `python -m` rather than the `ray` console script: where Ray is unpacked from its wheel onto
# PYTHONPATH (the device machine, see tools/device-wheels.sh) there is no script. The launcher
# is Ray's CLI that keeps 127.0.0.1 as the node address, so every listener stays on loopback.
RAY = [sys.executable, "-m", "autosched.measure.ray_node"]
ROOT = Path(__file__).resolve().parents[2]
FAST_HEALTH = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_pids(sid: int, include_zombies: bool = True) -> list[int]:
    """Pids whose session id is `sid`, zombies included unless asked otherwise."""
    return ray_node.session_pids(sid, include_zombies)


class LoopbackCluster:
    """Head + workers on loopback. Use as a context manager; `stop()` kills what it started."""

    def __init__(self, object_store_memory: int = 200_000_000) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="asr", dir="/tmp"))  # short: unix socket paths
        self.port = free_port()
        self.object_store_memory = object_store_memory
        self.nodes: dict[str, subprocess.Popen] = {}
        self.sessions: list[int] = []  # every node ever started, for the leak check
        # token auth OFF, explicitly: a throwaway cluster on loopback (production nodes keep it on)
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": path, **FAST_HEALTH}

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")
        cmd = [*RAY, "start", "--block", f"--temp-dir={self.root / name}", "--disable-usage-stats",
               f"--object-store-memory={self.object_store_memory}", *args]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                start_new_session=True, cwd=self.root)
        log.close()
        self.nodes[name] = proc
        self.sessions.append(proc.pid)
        deadline = time.monotonic() + 60
        while b"Ray runtime started" not in (self.root / f"{name}.log").read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.root / f"{name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"ray node {name} failed to start:\n{tail}")
            time.sleep(0.2)
        return proc

    def start_head(self, name: str = "node_a", num_cpus: int = 1, num_gpus: int = 0) -> None:
        self._start(name, ["--head", f"--port={self.port}", "--node-ip-address=127.0.0.1",
                           f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}",
                           f"--resources={json.dumps({name: 1})}", "--include-dashboard=false"])

    def start_worker(self, name: str = "node_b", num_cpus: int = 1, num_gpus: int = 0) -> None:
        self._start(name, [f"--address={self.address}", "--node-ip-address=127.0.0.1",
                           f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}",
                           f"--resources={json.dumps({name: 1})}"])

    def kill_node(self, name: str) -> list[int]:
        """SIGKILL every process of node `name` (its session), by pid; returns the pids.

        Repeated until the session is empty: a raylet may fork a worker while we kill."""
        proc = self.nodes.pop(name, None)
        if proc is None:
            return []
        killed: list[int] = []
        for _ in range(5):
            pids = session_pids(proc.pid, include_zombies=False)
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            killed.extend(pids)
            time.sleep(0.1)
        proc.wait(timeout=10)
        return killed

    def leftover_pids(self) -> list[int]:
        """Live (non-zombie) processes of any node this cluster ever started."""
        return [p for sid in self.sessions for p in session_pids(sid, include_zombies=False)]

    def stop(self) -> None:
        for name in reversed(list(self.nodes)):
            self.kill_node(name)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LoopbackCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def running_cluster(start: Callable[[LoopbackCluster], None]) -> Iterator[LoopbackCluster]:
    """A started loopback cluster with Ray's token auth off (driver too); stopped by process id on exit,
    with a check that nothing it started is left, and the caller's RAY_AUTH_MODE restored."""
    old = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # Ray 2.60 default: token auth
    c = LoopbackCluster()
    try:
        start(c)
        yield c
    finally:
        c.stop()
        assert c.leftover_pids() == []
        if old is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = old
