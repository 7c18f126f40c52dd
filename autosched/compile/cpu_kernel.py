"""`asc.build`: from a schedule to a callable kernel (C compiled here; GPU kernels through `gpu_kernel`)."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from autosched.codegen.render import render
from autosched.codegen.source import KernelSource
from autosched.compile.array_ptr import data_pointer
from autosched.compile.c_compiler import CompiledLibrary, compile_c
from autosched.dtypes import np_dtype
from autosched.lowering.ir import LoweredFunc
from autosched.schedule.schedule import Schedule
from autosched.target.key import Target
from autosched.te.tensor import Tensor

_NDARRAY = np.ndarray  # a module global: one lookup less per argument on the call's fast path


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
        # what the call's fast path compares per argument: (numpy dtype, shape, is an output)
        self._fast = tuple((dt, a.shape, a.is_output) for a, dt in zip(source.args, self._np))
        self._torch_dt: tuple | None = None  # torch dtype per argument, made on the first tensor

    @property
    def source(self) -> str:
        return self.source_obj.code

    @property
    def not_vectorized(self) -> list[int]:
        """Source lines of loops marked `vectorize` that the compiler did not vectorize."""
        return self.library.unvectorized(self.source_obj)

    def _count_error(self, n: int) -> TypeError:
        names = [a.name for a in self.args]
        return TypeError(f"kernel takes {len(self.args)} arrays ({', '.join(names)}), got {n}")

    def check_args(self, arrays: Sequence[object]) -> list[np.ndarray]:
        """The arguments as numpy arrays after every check (CPU torch tensors are viewed as arrays)."""
        if len(arrays) != len(self.args):
            raise self._count_error(len(arrays))
        return [self._check_array(k, x) for k, x in enumerate(arrays)]

    def _check_array(self, k: int, x: object) -> np.ndarray:
        spec, dt = self.args[k], self._np[k]
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
        return x

    def _pointer(self, k: int, x: object) -> int:
        """The slow path of one argument: a torch tensor, an ndarray subclass or another dtype object
        equal to ours, or a wrong argument (raises the error that names what is wrong)."""
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):
            return self._tensor_pointer(k, x, torch)
        return data_pointer(self._check_array(k, x))

    def _tensor_pointer(self, k: int, x: Any, torch: ModuleType) -> int:
        """Data pointer of a CPU torch tensor checked like an array, without a numpy view (which
        costs more than a near-empty kernel)."""
        spec = self.args[k]
        if self._torch_dt is None:
            self._torch_dt = tuple(getattr(torch, a.dtype, None) for a in self.args)
        if x.layout != torch.strided:
            raise TypeError(f"argument {k} ({spec.name}): a {x.layout} tensor; expected a dense (strided) one")
        if not x.is_cpu:
            raise TypeError(f"argument {k} ({spec.name}): a tensor on {x.device}; this kernel runs on the CPU "
                            "(move it with .cpu())")
        if x.dtype != self._torch_dt[k]:
            raise TypeError(f"argument {k} ({spec.name}): dtype {str(x.dtype).removeprefix('torch.')}, "
                            f"expected {spec.dtype}")
        if tuple(x.shape) != spec.shape:
            raise ValueError(f"argument {k} ({spec.name}): shape {tuple(x.shape)}, expected {spec.shape}")
        if not x.is_contiguous():
            raise ValueError(f"argument {k} ({spec.name}): tensor must be C-contiguous (use .contiguous())")
        if x.is_neg():
            raise ValueError(f"argument {k} ({spec.name}): tensor has its negative bit set "
                             "(use .resolve_neg())")
        return x.data_ptr()

    def __call__(self, *arrays: object) -> None:
        """Run the kernel. A C-contiguous ndarray of the exact dtype and shape (and writeable, for an
        output) takes the fast path, checked on every call at the cost of a few attribute reads;
        anything else goes through the full checks, which name what is wrong
        (docs/decisions/kernel-call-path.md)."""
        fast = self._fast
        if len(arrays) != len(fast):
            raise self._count_error(len(arrays))
        ptrs: list[int] = []
        for x, (dt, shape, is_out) in zip(arrays, fast):
            if type(x) is _NDARRAY and x.dtype is dt and x.shape == shape:
                fl = x.flags
                if fl.c_contiguous and (fl.writeable or not is_out):
                    ptrs.append(data_pointer(x))
                    continue
            ptrs.append(self._pointer(len(ptrs), x))  # len(ptrs): this argument's position
        if self._fn(*ptrs) != 0:
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
