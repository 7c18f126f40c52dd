"""Compile generated C into a shared library with the system compiler, cached by source hash.

Compilation happens in a subprocess with a timeout, so a pathological source cannot hang the
caller; the artifact cache makes rebuilding an identical schedule free. gcc's vectorization
report (`-fopt-info-vec-optimized`) is kept next to the library so callers can check that the
loops a schedule marked `vectorize` really became vector code.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autosched.codegen.source import KernelSource
from autosched.target.host_isa import native_arch, native_macros

BASE_FLAGS: tuple[str, ...] = (
    "-O3",
    "-march=native",
    "-mprefer-vector-width=512",
    "-fopenmp",
    "-fno-math-errno",
    # reassociation lets gcc vectorize float sum/max reductions; results are checked against the
    # reference with tolerances, and NaN/inf semantics are kept (no -ffinite-math-only)
    "-fassociative-math",
    "-fno-signed-zeros",
    "-fno-trapping-math",
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
    library_call_lines: frozenset[int] = frozenset()  # loop nests gcc replaced by memset/memcpy

    def unvectorized(self, source: KernelSource) -> list[int]:
        """First lines of the loops `source` marks vectorized that gcc did not turn into vector code."""
        missing = []
        for start, end, outer, *rest in source.vector_loops:
            nested = rest[0] if rest else ()

            def own(ln: int, start=start, end=end, nested=nested) -> bool:
                return start <= ln <= end and not any(a <= ln <= b for a, b in nested)

            if any(own(ln) for ln in self.vectorized_lines):
                continue
            if any(start <= ln <= end or ln in outer for ln in self.library_call_lines):
                continue
            missing.append(start)
        return missing


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "autosched" / "kernels"


def _parse_vec_report(text: str) -> tuple[frozenset[int], frozenset[int]]:
    vec = {int(m.group(1)) for m in re.finditer(r"^[^:\n]*:(\d+):\d+: optimized: loop vectorized", text, re.M)}
    lib = {int(m.group(1)) for m in re.finditer(r"^[^:\n]*:(\d+):\d+: optimized: Loop (?:nest )?\d+ distributed: "
                                                 r"split to 0 loops", text, re.M)}
    return frozenset(vec), frozenset(lib)


REPORT_FLAG = "-fopt-info-vec-loop-optimized"


@functools.lru_cache(maxsize=8)
def _compiler_id(compiler: str) -> str:
    try:
        return subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return compiler


def _cache_key(source: KernelSource, compiler: str) -> str:
    """Artifacts depend on the source, every flag, the compiler version and what `-march=native`
    means on this host (a cache shared by machines of other ISAs must not hand an AVX-512 library to
    an AVX2 one): all go into the key."""
    h = hashlib.sha256(source.source_hash.encode())
    isa = ",".join(sorted(m for m in native_macros(compiler) if m.startswith("__AVX") or m.startswith("__FMA")))
    for part in (*BASE_FLAGS, *LINK_FLAGS, REPORT_FLAG, _compiler_id(compiler), native_arch(compiler), isa):
        h.update(b"\0" + part.encode())
    return h.hexdigest()


def run_bounded(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run a compiler with a time limit that stops all of it.

    `subprocess.run(timeout=...)` kills only the driver (gcc, nvcc); its cc1/ptxas children then
    run on as orphans, minutes long for a huge unrolled kernel, and steal the cores from the
    measurements. So the driver gets its own process group and the whole group is killed.
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:  # the timeout, or an interruption (a deadline signal): no compiler left behind
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


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
    key = _cache_key(source, compiler)
    so_path = cache / f"{key}.so"
    report_path = cache / f"{key}.vec"
    if so_path.exists() and report_path.exists():
        vec, lib = _parse_vec_report(report_path.read_text())
        return CompiledLibrary(so_path, key, vec, 0.0, True, lib)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        c_path = Path(tmp) / "kernel.c"
        c_path.write_text(source.code)
        out = Path(tmp) / "kernel.so"
        vec = Path(tmp) / "kernel.vec"
        cmd = [compiler, *BASE_FLAGS, *source.compile_flags, f"{REPORT_FLAG}={vec}",
               str(c_path), "-o", str(out), *LINK_FLAGS]
        try:
            proc = run_bounded(cmd, timeout)
        except subprocess.TimeoutExpired as exc:
            raise CompileTimeout(f"C compiler ran past {timeout:.0f} s") from exc
        if proc.returncode != 0:
            raise CompileError(f"C compiler failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        report = vec.read_text() if vec.exists() else ""
        # atomic publish: concurrent builders of the same source both succeed
        os.replace(out, so_path)
        report_path.write_text(report)
    vecl, libl = _parse_vec_report(report)
    return CompiledLibrary(so_path, key, vecl, time.perf_counter() - t0, False, libl)
