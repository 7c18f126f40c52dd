"""Load a compiled GPU artifact and launch it on CuPy arrays or torch CUDA tensors.

Both kinds of kernel take device arrays in the build-argument order; torch tensors go in
through their data pointers (same device memory, no copy; CuPy's and torch's default streams
are the legacy default stream, so launches stay ordered with the caller's work). Arguments are
checked (dtype, shape, contiguity, device) before launch: a wrong pointer on a GPU is not a
segfault of the caller but a corrupted context for every later kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

from autosched.codegen.source import ArgSpec, KernelSource

_TORCH_DT = {"float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "bfloat16",
             "int32": "int32", "int64": "int64", "bool": "bool"}


class _Ptr:
    """What Triton's launcher accepts for a pointer argument."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def data_ptr(self) -> int:
        return self.ptr


def device_pointer(x: object, spec: ArgSpec, k: int) -> int:
    """Data pointer of a CuPy array or torch CUDA tensor after checking it against `spec`."""
    if hasattr(x, "data_ptr") and hasattr(x, "is_cuda"):  # torch
        if not x.is_cuda:
            raise TypeError(f"argument {k} ({spec.name}): a CPU tensor; GPU kernels take CUDA tensors")
        dt = str(x.dtype).replace("torch.", "")
        ok_contig = x.is_contiguous()
        ptr = int(x.data_ptr())
    elif hasattr(x, "data") and hasattr(x.data, "ptr"):  # cupy
        dt = "bfloat16" if x.dtype.name in ("bfloat16", "V2") else x.dtype.name
        ok_contig = bool(x.flags.c_contiguous)
        ptr = int(x.data.ptr)
    else:
        raise TypeError(f"argument {k} ({spec.name}): expected a CuPy array or torch CUDA tensor, "
                        f"got {type(x).__name__}")
    if dt != _TORCH_DT[spec.dtype]:
        raise TypeError(f"argument {k} ({spec.name}): dtype {dt}, expected {spec.dtype}")
    if tuple(x.shape) != tuple(spec.shape):
        raise ValueError(f"argument {k} ({spec.name}): shape {tuple(x.shape)}, expected {spec.shape}")
    if not ok_contig:
        raise ValueError(f"argument {k} ({spec.name}): must be C-contiguous")
    return ptr


class GpuKernel:
    """Base: argument checking and the artifact's metadata."""

    def __init__(self, artifact: Path) -> None:
        self.artifact = Path(artifact)
        self.meta = json.loads((self.artifact / "launch.json").read_text())
        self.args = tuple(ArgSpec.from_dict(a) for a in self.meta["args"])
        self.entry = self.meta["entry"]
        self.launch = self.meta["launch"]

    def pointers(self, arrays: tuple) -> list[int]:
        if len(arrays) != len(self.args):
            names = [a.name for a in self.args]
            raise TypeError(f"kernel takes {len(self.args)} arrays ({', '.join(names)}), got {len(arrays)}")
        return [device_pointer(x, spec, k) for k, (x, spec) in enumerate(zip(arrays, self.args))]

    def __call__(self, *arrays: object) -> None:
        self.launch_ptrs(self.pointers(arrays))

    def launch_ptrs(self, ptrs: list[int]) -> None:
        raise NotImplementedError


class CudaKernel(GpuKernel):
    """A cubin loaded with CuPy; launched with the grid, block and dynamic shared memory it was
    lowered for (the 48 KB default limit is raised when the kernel needs more)."""

    def __init__(self, artifact: Path) -> None:
        super().__init__(artifact)
        import cupy

        self._cp = cupy
        self.module = cupy.RawModule(path=str(self.artifact / "kernel.cubin"))
        self.fn = self.module.get_function(self.entry)
        self.grid = tuple(self.launch["grid"])
        self.block = tuple(self.launch["block"])
        self.shared = int(self.launch.get("shared_bytes", 0))
        if self.shared > 48 * 1024:
            self.fn.max_dynamic_shared_size_bytes = self.shared

    def launch_ptrs(self, ptrs: list[int]) -> None:
        import numpy as np

        args = tuple(np.uint64(p) for p in ptrs)
        self.fn(self.grid, self.block, args, shared_mem=self.shared)


class TritonKernel(GpuKernel):
    """A generated Triton module compiled for the current GPU with the recorded launch options."""

    def __init__(self, artifact: Path) -> None:
        super().__init__(artifact)
        from triton.runtime import driver

        from autosched.compile.gpu_compile import load_triton_module, triton_compile

        mod = load_triton_module(self.artifact / "kernel.py", self.entry)
        self.compiled = triton_compile(getattr(mod, self.entry), self.launch, driver.active.get_current_target())
        self.grid = tuple(self.launch["grid"])
        self._run = self.compiled[self.grid]

    def launch_ptrs(self, ptrs: list[int]) -> None:
        self._run(*[_Ptr(p) for p in ptrs])


LOADERS = {"cuda": CudaKernel, "triton": TritonKernel}


def load_kernel(artifact: Path) -> GpuKernel:
    meta = json.loads((Path(artifact) / "launch.json").read_text())
    return LOADERS[meta["language"]](Path(artifact))


class BuiltGpuKernel:
    """What `asc.build` returns for a GPU target: the source, and a callable loaded on first call
    (so building works on a machine without a GPU: the compile check still runs)."""

    def __init__(self, source: KernelSource, artifact: Path, lowered) -> None:
        self.source_obj, self.artifact, self.lowered = source, artifact, lowered
        self.args = source.args
        self._kernel: GpuKernel | None = None

    @property
    def source(self) -> str:
        return self.source_obj.code

    def __call__(self, *arrays: object) -> None:
        if self._kernel is None:
            self._kernel = load_kernel(self.artifact)
        self._kernel(*arrays)

    def __repr__(self) -> str:
        return f"BuiltGpuKernel({self.source_obj.language}:{self.source_obj.entry}, args={[a.name for a in self.args]})"


def build_gpu_kernel(source: KernelSource, lowered, cache_dir: Path | None = None) -> BuiltGpuKernel:
    from autosched.compile.gpu_compile import compile_gpu

    return BuiltGpuKernel(source, compile_gpu(source, cache_dir), lowered)
