"""Facts about the machine a result was measured on (host name, CPU model, cache size).

Results carry them so that a database holding records from many nodes can tell them apart;
the last-level cache size sizes the buffer that flushes the cache between repeats.
"""

from __future__ import annotations

import functools
import os
import platform
import socket
from pathlib import Path

DEFAULT_LLC_BYTES = 32 << 20


@functools.cache
def hostname() -> str:
    return socket.gethostname()


@functools.cache
def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def cores() -> int:
    """Logical cores of this machine: the threads a parallel kernel runs on."""
    return os.cpu_count() or 1


@functools.cache
def cpu_device() -> str:
    """Device string stored with CPU results: model and logical core count."""
    return f"cpu: {cpu_model()} ({cores()} cores)"


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * mult if digits.isdigit() else 0


@functools.cache
def llc_bytes() -> int:
    """Size of the largest CPU cache, from sysfs; 32 MiB when it cannot be read."""
    best = 0
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in base.glob("index*"):
        try:
            best = max(best, _parse_size((index / "size").read_text()))
        except OSError:
            continue
    return best or DEFAULT_LLC_BYTES
