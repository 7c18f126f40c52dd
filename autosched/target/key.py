"""Targets: which renderer, which compiler, which device. The key names the device model, so
records measured on different machines never mix in the tuning database. For the CPU it also names
the ISA `-march=native` compiles for here (e.g. "AMD EPYC (znver3)"): VMs report one model name for
CPU generations with and without AVX-512, and a schedule's speed differs between them by up to 10x."""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass

TARGET_KINDS = ("cpu", "cuda", "triton")


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def gpu_model() -> str:
    """The first GPU's model ("NVIDIA H200") from nvidia-smi; "" where there is none (CI)."""
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return ""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "--id=0"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return lines[0].strip().replace("|", " ") if lines else ""


@dataclass(frozen=True)
class Target:
    kind: str
    device: str = ""  # device model, e.g. "AMD EPYC" or "NVIDIA H200"
    cores: int = 0

    @staticmethod
    def parse(spec: str | Target) -> Target:
        """`"cpu"`, `"cuda"`, `"triton"`, or a full key `"cpu|AMD EPYC|2"`."""
        if isinstance(spec, Target):
            return spec
        if not isinstance(spec, str) or not spec:
            raise ValueError(f"target must be one of {TARGET_KINDS} (or a target key), got {spec!r}")
        parts = spec.split("|")
        kind = parts[0]
        if kind not in TARGET_KINDS:
            raise ValueError(f"unknown target {kind!r}; known targets: {', '.join(TARGET_KINDS)}")
        if len(parts) == 1:
            return Target.host(kind)
        if len(parts) != 3 or not parts[2].isdigit():
            raise ValueError(f"malformed target key {spec!r}; expected 'kind|device|cores'")
        return Target(kind, parts[1], int(parts[2]))

    @staticmethod
    def host(kind: str = "cpu") -> Target:
        if kind == "cpu":
            from autosched.target.host_isa import native_arch

            arch = native_arch()
            device = cpu_model() if arch == "unknown" else f"{cpu_model()} ({arch})"
            return Target("cpu", device.replace("|", " "), len(os.sched_getaffinity(0)))
        return Target(kind, gpu_model(), 0)

    @property
    def key(self) -> str:
        return f"{self.kind}|{self.device}|{self.cores}"

    def __str__(self) -> str:
        return self.key
