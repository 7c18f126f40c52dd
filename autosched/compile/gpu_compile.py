"""Compile GPU kernel sources into artifacts a GPU process can load, cached by source, launch and arguments.

- cuda: NVRTC through CuPy's bindings (no GPU or driver needed to compile) to a cubin for
  sm_90; where NVRTC is missing (this CI machine) `nvcc -cubin` does the same job.
- triton: the module is written to a file (Triton reads kernel source with `inspect`, so a
  kernel must live in a file) and compiled ahead of time for sm_90 with `triton.compile`;
  a GPU process compiling the same source and options later hits Triton's own cache.
An artifact is a folder `<hash>/` holding the kernel file and `launch.json` (entry, launch
shape, signature), so a runner needs nothing but the path.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autosched.codegen.source import KernelSource
from autosched.compile.c_compiler import CompileError, CompileTimeout

SM = 90
TRITON_TARGET = ("cuda", SM, 32)


def default_cache_dir() -> Path:
    return Path(os.environ.get("AUTOSCHED_GPU_CACHE", Path(tempfile.gettempdir()) / "autosched-gpu-cache"))


def artifact_key(source: KernelSource) -> str:
    """The cache key of a kernel's artifact: its source hash *and* its launch and arguments. One
    Triton text serves every size when the sizes appear only in the grid (an unmasked element-wise
    kernel), so the source alone would hand a kernel of 4096 elements the launch.json of one of 64M."""
    h = hashlib.sha256(source.source_hash.encode())
    h.update(json.dumps({"entry": source.entry, "launch": source.launch, "args": [a.to_dict() for a in source.args]},
                        sort_keys=True, default=str).encode())
    return h.hexdigest()


def artifact_dir(source: KernelSource, cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / f"{source.language}-{artifact_key(source)[:24]}"


def _write_launch(d: Path, source: KernelSource, extra: dict) -> None:
    meta = {"language": source.language, "entry": source.entry, "launch": source.launch,
            "args": [a.to_dict() for a in source.args], **extra}
    (d / "launch.json").write_text(json.dumps(meta, indent=1))


def nvrtc_compile(code: str, flags: tuple[str, ...]) -> bytes:
    """cubin from NVRTC; ImportError/OSError when this machine has no NVRTC library."""
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(code, "kernel.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, tuple(flags) + ("-std=c++17",))
        except nvrtc.NVRTCError as exc:
            raise CompileError(f"NVRTC: {exc}\n{nvrtc.getProgramLog(prog)}") from None
        return nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)


def nvcc_compile(code: str, flags: tuple[str, ...], out: Path, mode: str = "-cubin", timeout: float = 60.0) -> Path:
    """`nvcc <flags> -cubin` (or `--ptx`) on `code`; raises CompileError with nvcc's diagnostics."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise CompileError("neither NVRTC (CuPy) nor nvcc is available to compile CUDA C")
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "kernel.cu"
        cu.write_text(code)
        try:
            proc = subprocess.run([nvcc, *flags, mode, "-o", str(out), str(cu)], capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CompileTimeout(f"nvcc ran past {timeout:g} s") from None
    if proc.returncode != 0:
        raise CompileError(f"nvcc failed:\n{proc.stderr[-4000:]}")
    return out


def compile_cuda(source: KernelSource, cache_dir: Path | None = None, timeout: float = 60.0) -> Path:
    """The artifact folder of a CUDA kernel (kernel.cubin + launch.json), compiled once."""
    d = artifact_dir(source, cache_dir)
    if (d / "launch.json").exists():
        return d
    tmp = Path(tempfile.mkdtemp(prefix=d.name + ".", dir=_mk(d.parent)))
    t0 = time.perf_counter()
    (tmp / "kernel.cu").write_text(source.code)
    try:
        cubin = nvrtc_compile(source.code, source.compile_flags)
        (tmp / "kernel.cubin").write_bytes(cubin)
        how = "nvrtc"
    except CompileError:
        raise
    except Exception:  # noqa: BLE001  no NVRTC library here (CuPy raises its own loader errors): use nvcc
        nvcc_compile(source.code, source.compile_flags, tmp / "kernel.cubin", timeout=timeout)
        how = "nvcc"
    _write_launch(tmp, source, {"compiler": how, "seconds": time.perf_counter() - t0})
    return _publish(tmp, d)


def _mk(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _publish(tmp: Path, d: Path) -> Path:
    try:
        os.rename(tmp, d)
    except OSError:  # another worker published the same artifact first
        shutil.rmtree(tmp, ignore_errors=True)
    return d


def load_triton_module(path: Path, name: str, tag: str = ""):
    """Import a generated Triton module from its file (Triton needs the source on disk). `tag`
    keeps apart imports made under different modes (TRITON_INTERPRET=1 decorates differently)."""
    mod_name = f"autosched_triton_{hashlib.sha256((str(path) + tag).encode()).hexdigest()[:16]}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod


def triton_ast_source(fn, launch: dict):
    """The ASTSource of a generated kernel: pointers only, each 16-byte aligned (what the JIT would
    specialize on for CuPy/torch allocations), so loads can be 128-bit wide."""
    from triton.compiler import ASTSource

    sig = dict(launch["signature"])
    attrs = {(k,): [["tt.divisibility", 16]] for k in range(len(sig))}
    return ASTSource(fn=fn, signature=sig, attrs=attrs)


def triton_compile(fn, launch: dict, target=None):
    """`triton.compile` of a generated kernel for `target` (default: sm_90, no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget

    target = target or GPUTarget(*TRITON_TARGET)
    opts = {"num_warps": int(launch.get("num_warps", 4)), "num_stages": int(launch.get("num_stages", 3))}
    return triton.compile(triton_ast_source(fn, launch), target=target, options=opts)


def compile_triton(source: KernelSource, cache_dir: Path | None = None, aot: bool = True) -> Path:
    """The artifact folder of a Triton kernel (kernel.py + launch.json); `aot` compiles it for
    sm_90 right away, so compile errors surface in the builder, not on the device."""
    d = artifact_dir(source, cache_dir)
    if (d / "launch.json").exists():
        return d
    tmp = Path(tempfile.mkdtemp(prefix=d.name + ".", dir=_mk(d.parent)))
    (tmp / "kernel.py").write_text(source.code)
    t0 = time.perf_counter()
    extra: dict = {}
    if aot:
        try:
            mod = load_triton_module(tmp / "kernel.py", source.entry)
            ck = triton_compile(getattr(mod, source.entry), source.launch)
        except Exception as exc:  # noqa: BLE001  Triton raises many types; all are compile errors here
            shutil.rmtree(tmp, ignore_errors=True)
            raise CompileError(f"triton.compile: {type(exc).__name__}: {exc}") from None
        extra = {"shared": int(ck.metadata.shared), "num_warps": int(ck.metadata.num_warps),
                 "registers": int(getattr(ck, "n_regs", 0) or 0)}
    _write_launch(tmp, source, {"compiler": "triton", "seconds": time.perf_counter() - t0, **extra})
    return _publish(tmp, d)


COMPILERS = {"cuda": compile_cuda, "triton": compile_triton}


def compile_gpu(source: KernelSource, cache_dir: Path | None = None) -> Path:
    if source.language not in COMPILERS:
        raise CompileError(f"no GPU compiler for {source.language!r} kernels")
    return COMPILERS[source.language](source, cache_dir)


def ptx_check(code: str, flags: tuple[str, ...] = ("-arch=sm_90",)) -> str:
    """PTX of CUDA C from `nvcc --ptx` (CI's compile check where there is no GPU)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = nvcc_compile(code, flags, Path(tmp) / "kernel.ptx", mode="--ptx")
        return out.read_text()
