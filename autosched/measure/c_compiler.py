"""Compile generated C into a shared library with the system compiler, cached by source hash.

Compilation happens in a subprocess with a timeout, so a pathological source cannot hang the
caller; the artifact cache makes rebuilding an identical schedule free. gcc's vectorization
report (`-fopt-info-vec-optimized`) is kept next to the library so callers can check that the
loops a schedule marked `vectorize` really became vector code.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autosched.codegen.source import KernelSource

BASE_FLAGS: tuple[str, ...] = (
    "-O3",
    "-march=native",
    "-mprefer-vector-width=512",
    "-fopenmp",
    "-fno-math-errno",
    "-fPIC",
    "-shared",
    "-std=gnu11",
)
LINK_FLAGS: tuple[str, ...] = ("-lmvec", "-lm")


class CompileError(RuntimeError):
    """The C compiler rejected the source; the message carries the compiler's diagnostics."""


class CompileTimeout(RuntimeError):
    """The C compiler ran past its time limit."""


@dataclass(frozen=True)
class CompiledLibrary:
    path: Path
    source_hash: str
    vectorized_lines: frozenset[int]  # source lines gcc reports as vectorized
    seconds: float
    cached: bool


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "autosched" / "kernels"


def _parse_vec_report(text: str) -> frozenset[int]:
    lines = set()
    for m in re.finditer(r"^[^:\n]*:(\d+):\d+: optimized: loop vectorized", text, re.M):
        lines.add(int(m.group(1)))
    return frozenset(lines)


def compile_c(
    source: KernelSource,
    *,
    cache_dir: Path | None = None,
    timeout: float = 60.0,
    compiler: str = "cc",
) -> CompiledLibrary:
    """Compile `source` (language "c") to a shared library; reuse the cached one if present."""
    if source.language != "c":
        raise ValueError(f"compile_c got a {source.language!r} kernel; it compiles only C")
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    key = source.source_hash
    so_path = cache / f"{key}.so"
    report_path = cache / f"{key}.vec"
    if so_path.exists() and report_path.exists():
        return CompiledLibrary(so_path, key, _parse_vec_report(report_path.read_text()), 0.0, True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        c_path = Path(tmp) / "kernel.c"
        c_path.write_text(source.code)
        out = Path(tmp) / "kernel.so"
        vec = Path(tmp) / "kernel.vec"
        cmd = [compiler, *BASE_FLAGS, *source.compile_flags, f"-fopt-info-vec-optimized={vec}",
               str(c_path), "-o", str(out), *LINK_FLAGS]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise CompileTimeout(f"C compiler ran past {timeout:.0f} s") from exc
        if proc.returncode != 0:
            raise CompileError(f"C compiler failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        report = vec.read_text() if vec.exists() else ""
        # atomic publish: concurrent builders of the same source both succeed
        os.replace(out, so_path)
        report_path.write_text(report)
    return CompiledLibrary(so_path, key, _parse_vec_report(report), time.perf_counter() - t0, False)
