"""A host-wide lock that makes timed runs on one device take turns.

Two tuners (or two Ray actors of a loopback cluster) on the same machine share its CPU: if
they timed kernels at the same time, each would measure the other's load. An advisory
`flock` on a file in the temp folder serializes them across processes, and the kernel
releases it if the holder dies, so a crashed runner never blocks the device.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path


def default_lock_path(device: str = "cpu") -> Path:
    safe = "".join(c if c.isalnum() else "_" for c in device)
    return Path(tempfile.gettempdir()) / f"autosched-device-{safe}.lock"


class DeviceLock:
    """Context manager holding an exclusive flock on `path` (no-op when `path` is None)."""

    def __init__(self, path: str | os.PathLike | None) -> None:
        self._path = None if path is None else Path(path)
        self._fd: int | None = None

    def __enter__(self) -> DeviceLock:
        if self._path is not None:
            try:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o666)
            except PermissionError:  # created by another user: flock works on a read-only fd too
                self._fd = os.open(self._path, os.O_RDONLY)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
