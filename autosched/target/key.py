"""Targets: which renderer, which compiler, which device. The key names the device model, so
records measured on different machines never mix in the tuning database. For the CPU it also names
the ISA `-march=native` compiles for here (e.g. "AMD EPYC (znver3)"): VMs report one model name for
CPU generations with and without AVX-512, and a schedule's speed differs widely between them
(see docs/decisions/vector-width-from-the-compiler.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from autosched.target.gpu import gpu_model
from autosched.target.host import cpu_model
from autosched.target.host_isa import native_arch

TARGET_KINDS = ("cpu", "cuda", "triton")


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
            arch = native_arch()
            device = cpu_model() if arch == "unknown" else f"{cpu_model()} ({arch})"
            return Target("cpu", device.replace("|", " "), len(os.sched_getaffinity(0)))
        return Target(kind, gpu_model(), 0)

    @property
    def key(self) -> str:
        return f"{self.kind}|{self.device}|{self.cores}"

    def __str__(self) -> str:
        return self.key
