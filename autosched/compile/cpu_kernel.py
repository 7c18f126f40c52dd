"""`asc.build`: from a schedule to a callable kernel (C compiled here; GPU kernels through `gpu_kernel`)."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from autosched.codegen.render import render
from autosched.codegen.source import KernelSource
from autosched.compile.c_compiler import CompiledLibrary, compile_c
from autosched.dtypes import np_dtype
from autosched.lowering.ir import LoweredFunc
from autosched.schedule.schedule import Schedule
from autosched.target.key import Target
from autosched.te.tensor import Tensor


def _openmp_wait_policy() -> None:
    """Spinning OpenMP workers before libgomp loads (it reads its settings once, at load).

    With libgomp's default, workers fall asleep between calls and waking them can cost more than
    the kernel (see docs/decisions/openmp-spin-wait.md); the measurement sandbox spins too, so a
    kernel called here behaves as it did when it was timed. A user's own OMP_WAIT_POLICY/GOMP_SPINCOUNT wins.
    """
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", "10000000")


class BuiltKernel:
    """A compiled kernel; call it with numpy arrays in the argument order given to `build`."""

    def __init__(self, source: KernelSource, lib: CompiledLibrary, lowered: LoweredFunc) -> None:
        self.source_obj = source
        self.lowered = lowered
        self.library = lib
        _openmp_wait_policy()
        self._dll = ctypes.CDLL(str(lib.path))
        self._fn = getattr(self._dll, source.entry)
        self._fn.restype = ctypes.c_int
        self._fn.argtypes = [ctypes.c_void_p] * len(source.args)
        self.args = source.args
        self._np = [np_dtype(a.dtype) for a in source.args]

    @property
    def source(self) -> str:
        return self.source_obj.code

    @property
    def not_vectorized(self) -> list[int]:
        """Source lines of loops marked `vectorize` that the compiler did not vectorize."""
        return self.library.unvectorized(self.source_obj)

    def check_args(self, arrays: Sequence[object]) -> list[np.ndarray]:
        if len(arrays) != len(self.args):
            names = [a.name for a in self.args]
            raise TypeError(f"kernel takes {len(self.args)} arrays ({', '.join(names)}), got {len(arrays)}")
        out = []
        for k, (x, spec, dt) in enumerate(zip(arrays, self.args, self._np)):
            if hasattr(x, "detach") and hasattr(x, "numpy"):  # a CPU torch tensor
                x = x.detach().numpy()
            if not isinstance(x, np.ndarray):
                raise TypeError(f"argument {k} ({spec.name}): expected a numpy array, got {type(x).__name__}")
            if x.dtype != dt:
                raise TypeError(f"argument {k} ({spec.name}): dtype {x.dtype}, expected {spec.dtype}")
            if tuple(x.shape) != spec.shape:
                raise ValueError(f"argument {k} ({spec.name}): shape {tuple(x.shape)}, expected {spec.shape}")
            if not x.flags.c_contiguous:
                raise ValueError(f"argument {k} ({spec.name}): array must be C-contiguous "
                                 "(use np.ascontiguousarray)")
            if spec.is_output and not x.flags.writeable:
                raise ValueError(f"argument {k} ({spec.name}): output array is read-only")
            out.append(x)
        return out

    def __call__(self, *arrays: object) -> None:
        xs = self.check_args(arrays)
        rc = self._fn(*[x.ctypes.data for x in xs])
        if rc != 0:
            raise MemoryError("kernel could not allocate its temporary buffers")

    def __repr__(self) -> str:
        return f"BuiltKernel({self.source_obj.entry}, args={[a.name for a in self.args]})"


def build(s: Schedule, args: Sequence[Tensor] | None = None, target: str | Target = "cpu",
          name: str = "default_function", cache_dir: Path | None = None) -> BuiltKernel:
    """Lower, render and compile `s`; the compiled library is cached by source hash. GPU targets
    give a kernel that takes CuPy arrays or torch CUDA tensors (see `measure.gpu_kernel`)."""
    src, f = render(s, args, target, name)
    if src.language != "c":
        from autosched.compile.gpu_kernel import build_gpu_kernel

        return build_gpu_kernel(src, f, cache_dir)
    lib = compile_c(src, cache_dir=cache_dir)
    return BuiltKernel(src, lib, f)
