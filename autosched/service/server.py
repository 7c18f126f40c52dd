"""Starting the service: optionally a Ray head node, then uvicorn with the app.

A Ray node started here is `ray start --block` in its own session, stopped at exit by killing
exactly the processes of that session (never `ray stop`, which would stop every Ray node of the
machine, other users' included).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autosched.service.settings import ServiceSettings

log = logging.getLogger("autosched.service")


def ray_executable() -> str:
    """The `ray` script next to this interpreter (the venv's), else the one on PATH."""
    local = Path(sys.executable).with_name("ray")
    if local.exists():
        return str(local)
    found = shutil.which("ray")
    if not found:
        raise RuntimeError("the `ray` command is not installed next to this Python or on PATH")
    return found


def session_pids(sid: int) -> list[int]:
    """Live processes whose session id is `sid` (from /proc): everything a node started."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(entry))
    return pids


def kill_session(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, every process of `proc`'s session (it was started with a new one)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = session_pids(proc.pid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and session_pids(proc.pid):
            time.sleep(0.1)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def start_ray_head(port: int, num_cpus: int | None, node_ip: str = "127.0.0.1", *,
                   object_store_memory: int | None = None, temp_dir: str | None = None) -> subprocess.Popen:
    """`ray start --head --block` in a new session; returns once the node is up."""
    root = Path(temp_dir or tempfile.mkdtemp(prefix="asray", dir="/tmp"))
    args = [ray_executable(), "start", "--head", "--block", f"--port={port}", f"--node-ip-address={node_ip}",
            f"--temp-dir={root / 'ray'}", "--include-dashboard=false", "--disable-usage-stats"]
    if num_cpus is not None:
        args.append(f"--num-cpus={num_cpus}")
    if object_store_memory:
        args.append(f"--object-store-memory={object_store_memory}")
    log_path = root / "head.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    atexit.register(kill_session, proc)
    deadline = time.monotonic() + 90
    while b"Ray runtime started" not in log_path.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            kill_session(proc)
            raise RuntimeError(f"ray head failed to start:\n{log_path.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    return proc


def detect_gpus() -> list[str]:
    """GPU names from `nvidia-smi -L` (empty when there is no NVIDIA driver)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_gpu_list(out)


def parse_gpu_list(text: str) -> list[str]:
    """Names from `nvidia-smi -L` lines: "GPU 0: NVIDIA H200 (UUID: GPU-...)" -> "NVIDIA H200"."""
    return [line.split(":", 1)[1].split("(UUID")[0].strip() for line in text.splitlines()
            if line.startswith("GPU ") and ":" in line]


def worker_command(address: str, num_cpus: int | None, num_gpus: int | None, gpus: list[str],
                   temp_dir: str | None = None, object_store_memory: int | None = None) -> list[str]:
    """The `ray start` line that joins this machine to the cluster as an autosched worker."""
    n_gpus = len(gpus) if num_gpus is None else num_gpus
    resources = {"autosched_worker": 1}
    if n_gpus and gpus:
        model = "".join(c if c.isalnum() else "_" for c in gpus[0])
        resources[f"gpu_model_{model}"] = n_gpus
    cmd = [ray_executable(), "start", f"--address={address}", "--block", "--disable-usage-stats",
           f"--num-gpus={n_gpus}", f"--resources={json.dumps(resources)}"]
    if num_cpus is not None:
        cmd.append(f"--num-cpus={num_cpus}")
    if temp_dir:
        cmd.append(f"--temp-dir={temp_dir}")
    if object_store_memory:
        cmd.append(f"--object-store-memory={object_store_memory}")
    return cmd


def serve(settings: ServiceSettings, *, log_level: str = "info", access_log: bool = False) -> None:
    """Run uvicorn with the app until SIGINT/SIGTERM (the lifespan stops the job manager)."""
    import uvicorn

    from autosched.service.app import create_app

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=log_level, access_log=access_log,
                timeout_graceful_shutdown=30)
