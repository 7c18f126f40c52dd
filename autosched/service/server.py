"""Starting the service: optionally a Ray head node, then uvicorn with the app.

A Ray node started here is `ray start --block` in its own session, stopped at exit by killing
exactly the processes of that session (never `ray stop`, which would stop every Ray node of the
machine, other users' included), and also when this process dies unannounced (a parent-death
signal); a head a crashed serve left anyway is found through its state file and replaced. When
uvicorn returns, every process this one started and that still runs is stopped too.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from autosched.measure import ray_node
from autosched.service.settings import ServiceSettings

log = logging.getLogger("autosched.service")
HEAD_STATE = "head.json"


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
    return ray_node.session_pids(sid)


def kill_session(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, every process of `proc`'s session (it was started with a new one)."""
    ray_node.kill_session(proc.pid, grace_s)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def head_state_dir(port: int) -> Path:
    """The head's own folder, /tmp/autosched-UID/ray-PORT: the same on every start (so a restart
    finds what the last one left), short (Ray's unix socket paths), and private to this user."""
    uid = os.getuid()
    base = Path("/tmp") / f"autosched-{uid}"
    for d in (base, base / f"ray-{port}"):
        d.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
            raise RuntimeError(f"{d} must be a directory owned by uid {uid} with mode 0700 "
                               "(it holds the Ray head's state and token): fix or remove it")
    return base / f"ray-{port}"


def _is_our_head(pid: int) -> bool:
    """`pid` is alive, leads its session, and runs our `ray start` launcher (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return os.getsid(pid) == pid and b"autosched.measure.ray_node" in cmdline and b"start" in cmdline


def stop_recorded_head(state_dir: Path) -> int | None:
    """Stop the head a previous `serve` recorded in `state_dir` (it outlived a SIGKILL-ed serve,
    and a second head on its port would join its GCS: "Session name ... does not match persisted
    value"); returns its pid, or None when nothing of ours was running."""
    state = state_dir / HEAD_STATE
    try:
        pid = int(json.loads(state.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    stopped = None
    if _is_our_head(pid):
        log.warning("stopping the Ray head (session %d) a previous serve left running", pid)
        ray_node.kill_session(pid)
        stopped = pid
    state.unlink(missing_ok=True)
    return stopped


def start_ray_head(port: int, num_cpus: int | None, node_ip: str = "127.0.0.1", *,
                   object_store_memory: int | None = None, temp_dir: str | None = None) -> subprocess.Popen:
    """`ray start --head --block` in a new session, tied to this process (it dies with us, even on
    SIGKILL) and recorded in the state folder so a restart replaces a head left behind; returns once
    the node is up. A loopback `node_ip` keeps every Ray listener on loopback (see ray_node.py)."""
    root = Path(temp_dir) if temp_dir else head_state_dir(port)
    stop_recorded_head(root)
    args = [sys.executable, "-m", "autosched.measure.ray_node", "--parent", str(os.getpid()),
            "start", "--head", "--block", f"--port={port}", f"--node-ip-address={node_ip}",
            f"--temp-dir={root / 'ray'}", "--include-dashboard=false", "--disable-usage-stats"]
    if num_cpus is not None:
        args.append(f"--num-cpus={num_cpus}")
    if object_store_memory:
        args.append(f"--object-store-memory={object_store_memory}")
    log_path = root / "head.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    (root / HEAD_STATE).write_text(json.dumps({"pid": proc.pid, "port": port, "node_ip": node_ip}))
    atexit.register(kill_session, proc)
    deadline = time.monotonic() + 90
    while b"Ray runtime started" not in log_path.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            kill_session(proc)
            raise RuntimeError(f"ray head failed to start:\n{log_path.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    return proc


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for child, state, parent, _ in ray_node.process_table():
        if state != "Z":
            children.setdefault(parent, []).append(child)
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def stop_descendants(grace_s: float = 3.0) -> list[int]:
    """SIGTERM, then SIGKILL, whatever this process started and is still running (feature-pool,
    builder and kernel processes of local jobs): nothing may outlive the service."""
    found: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = descendants(os.getpid())
        if not pids:
            break
        found += [p for p in pids if p not in found]
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and descendants(os.getpid()):
            time.sleep(0.05)
    for pid in found:  # reap our own children so none stays a zombie
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    return found


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

    def exit_on(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    # uvicorn re-raises the SIGTERM it caught once it has shut down: exit through `finally`, not at once
    signal.signal(signal.SIGTERM, exit_on)
    try:
        uvicorn.run(app, host=settings.host, port=settings.port, log_level=log_level, access_log=access_log,
                    timeout_graceful_shutdown=30)
    finally:
        from autosched.tuning import feature_pool

        feature_pool.shutdown()
        stop_descendants()
