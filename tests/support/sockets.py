"""Listening TCP sockets of a set of processes, read from /proc (no psutil in the venv).

A socket is matched to a process through the `socket:[INODE]` links under /proc/PID/fd, and its
local address comes from /proc/net/tcp and /proc/net/tcp6 (hex, little-endian per 32-bit word).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    pid: int
    name: str
    host: str
    port: int

    @property
    def wildcard(self) -> bool:
        """Bound to every interface (0.0.0.0 or ::), reachable from other machines."""
        return ipaddress.ip_address(self.host).is_unspecified

    @property
    def loopback(self) -> bool:
        """Reachable from this machine only (127.0.0.0/8, ::1, or ::ffff:127.x.y.z)."""
        ip = ipaddress.ip_address(self.host)
        mapped = getattr(ip, "ipv4_mapped", None)
        return (mapped or ip).is_loopback


def _decode(hex_addr: str) -> tuple[str, int]:
    host_hex, port_hex = hex_addr.split(":")
    raw = bytes.fromhex(host_hex)
    # the kernel prints each 32-bit word in host (little-endian) order
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words)), int(port_hex, 16)


def listening_inodes() -> dict[int, tuple[str, int]]:
    """inode -> (host, port) of every listening TCP socket of this network namespace."""
    out: dict[int, tuple[str, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == LISTEN:
                out[int(fields[9])] = _decode(fields[1])
    return out


def listeners(pids: list[int]) -> list[Listener]:
    """The listening TCP sockets held open by `pids`."""
    table = listening_inodes()
    found: list[Listener] = []
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inode = int(link[8:-1])
                if inode in table:
                    found.append(Listener(pid, name, *table[inode]))
    return found
