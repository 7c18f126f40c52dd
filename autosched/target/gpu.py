"""GPU facts: the model probe and what one kernel launch of the target may use.

The defaults describe compute capability 9.0 (H100/H200 SXM), the cards the `cuda` and `triton`
targets are built for (PTX for sm_90).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass

SM_COUNT = 132
"""Multiprocessors of the H100/H200 SXM: a grid of fewer blocks than this leaves part of the chip idle."""


@dataclass(frozen=True)
class GpuLimits:
    """What one kernel launch may use (defaults: an H200, compute capability 9.0)."""

    max_threads_per_block: int = 1024
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2 ** 31 - 1, 65535, 65535)
    max_shared_bytes: int = 227 * 1024  # per block, opt-in dynamic shared memory on sm_90
    max_local_bytes: int = 16 * 1024  # register/local arrays per thread: more is surely a mistake
    name: str = "sm_90"


H200 = GpuLimits()


@functools.lru_cache(maxsize=1)
def gpu_model() -> str:
    """The first GPU's model ("NVIDIA H200") from nvidia-smi; "" where there is none (CI)."""
    if shutil.which("nvidia-smi") is None:
        return ""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "--id=0"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return lines[0].strip().replace("|", " ") if lines else ""
