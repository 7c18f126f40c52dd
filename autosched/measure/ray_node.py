"""Ray nodes that listen where they are told, and die with the process that started them.

Ray (2.60) rewrites a loopback node address (`127.0.0.1`, `localhost`) into the machine's outward
address, and its gRPC servers (GCS, raylet, every worker and driver) listen on every interface
unless the node address *is* 127.0.0.1. So `ray start --node-ip-address=127.0.0.1` ended up
reachable from the network. Ray has no setting for this; `keep_loopback()` makes its resolver keep
a loopback address as given, so a loopback node binds loopback only. A node on a real address
still listens on every interface (Ray cannot bind one address): token auth and a firewall guard it.

`python -m autosched.measure.ray_node [--parent PID] start ...` is `ray start` with that fix, for
the nodes `autosched serve --ray-head` and the tests start; with `--parent` the node (its whole
session) is stopped when that process dies, even by SIGKILL (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import signal
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1


def is_loopback(host: str) -> bool:
    """True for localhost and 127.0.0.0/8 / ::1 addresses."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_of(address: str) -> str:
    """The host part of HOST:PORT (IPv6 in brackets allowed)."""
    host = address.rsplit(":", 1)[0] if address.count(":") == 1 or address.startswith("[") else address
    return host.strip("[]")


def keep_loopback() -> None:
    """Make Ray keep loopback addresses instead of swapping in the machine's outward address.

    Idempotent; applies to this process (a driver, or the `ray start` of `main`)."""
    from ray._private import services

    original = getattr(services, "resolve_ip_for_localhost", None)
    if original is None:
        raise RuntimeError("this Ray version has no ray._private.services.resolve_ip_for_localhost: "
                           "autosched cannot keep a loopback Ray node off the network")
    if getattr(original, "_autosched_keeps_loopback", False):
        return

    def resolve(host: str) -> str:
        if host and is_loopback(host):
            return "::1" if host.strip("[]") == "::1" else "127.0.0.1"
        return original(host)

    resolve._autosched_keeps_loopback = True  # type: ignore[attr-defined]
    services.resolve_ip_for_localhost = resolve


def process_table() -> list[tuple[int, str, int, int]]:
    """(pid, state, parent pid, session id) of every process, from /proc: one reader for the session
    and descendant walks that stop what a node or the service started."""
    table = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        table.append((int(entry), fields[0], int(fields[1]), int(fields[3])))
    return table


def session_pids(sid: int, include_zombies: bool = False) -> list[int]:
    """Processes whose session id is `sid` (live ones unless `include_zombies`): everything a node started."""
    return [pid for pid, state, _, s in process_table() if s == sid and (include_zombies or state != "Z")]


def kill_session(sid: int, grace_s: float = 5.0, *, spare: int | None = None) -> None:
    """SIGTERM, then SIGKILL, every process of session `sid` (except `spare`)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [p for p in session_pids(sid) if p != spare]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and [p for p in session_pids(sid) if p != spare]:
            time.sleep(0.1)


def set_parent_death_signal(sig: int = signal.SIGTERM) -> bool:
    """Ask Linux to send `sig` to this process when its parent dies; False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def main(argv: list[str] | None = None) -> None:
    """`[--parent PID] start ARGS...`: Ray's CLI with loopback kept, tied to PID's life."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--parent"]:
        parent = int(args[1])
        args = args[2:]
        me = os.getpid()

        def stop_node(signum: int, frame: object) -> None:
            kill_session(os.getsid(0), grace_s=3.0, spare=me)
            os._exit(0)

        signal.signal(signal.SIGTERM, stop_node)
        set_parent_death_signal(signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the death signal was armed
            stop_node(signal.SIGTERM, None)
    keep_loopback()
    from ray.scripts.scripts import main as ray_main

    sys.argv = ["ray", *args]
    ray_main()


if __name__ == "__main__":
    main()
