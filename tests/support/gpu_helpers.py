"""Helpers of the GPU tests: workloads with schedules, a CPU emulation of GPU-lowered nests,
and running generated Triton kernels under TRITON_INTERPRET=1 on torch CPU tensors."""

from __future__ import annotations

import ctypes
import os
import shutil

import numpy as np
import pytest

from autosched import te
from autosched.codegen.c import render_c
from autosched.compile.c_compiler import compile_c
from autosched.lowering.gpu import Barrier, lower_gpu
from autosched.lowering.ir import Allocate, For, IfThen, LoweredFunc, Seq
from autosched.schedule.schedule import Schedule
from autosched.space import gpu_templates as gt
from autosched.workload import Workload


def bias_relu(M: int, N: int) -> Workload:
    X = te.placeholder((M, N), "X")
    b = te.placeholder((N,), "bias")
    out = te.compute((M, N), lambda i, j: te.maximum(X[i, j] + b[j], 0.0), "out")
    return Workload.from_tensors([X, b, out], "bias_relu")


CUDA_CASES = {
    "matmul": (lambda: Workload.create("matmul", 96, 80, 40), lambda s: gt.cuda_gemm(s, (8, 4), (4, 4), (8,))),
    "matmul_uneven": (lambda: Workload.create("matmul", 100, 70, 30), lambda s: gt.cuda_gemm(s, (4, 4), (2, 2), (8,))),
    "dense_bias_relu": (lambda: Workload.create("dense_bias_relu", 64, 48, 40),
                        lambda s: gt.cuda_gemm(s, (4, 8), (4, 2), (8,))),
    "batch_matmul": (lambda: Workload.create("batch_matmul", 3, 32, 24, 20),
                     lambda s: gt.cuda_gemm(s, (1, 4, 4), (1, 4, 2), (4,))),
    "conv2d": (lambda: Workload.create("conv2d_nchw", 2, 8, 10, 10, 16, 3, 3, 1, 1),
               lambda s: gt.cuda_gemm(s, (1, 4, 2, 4), (2, 2, 1, 2), (4, 3, 3))),
    "matmul_vthread": (lambda: Workload.create("matmul", 64, 64, 48),
                       lambda s: gt.cuda_gemm(s, (4, 8), (2, 2), (8,), (2, 2))),
    "matmul_fast": (lambda: Workload.create("matmul", 64, 128, 48),
                    lambda s: gt.cuda_gemm(s, (4, 8), (4, 4), (8,), (2, 2), vector_fetch=4, smem_layout=2,
                                           double_buffer=1)),
    "matmul_fast_uneven": (lambda: Workload.create("matmul", 70, 60, 36),
                           lambda s: gt.cuda_gemm(s, (4, 4), (4, 4), (8,), (2, 2), vector_fetch=4, smem_layout=1,
                                                  double_buffer=1)),
    "conv2d_fast": (lambda: Workload.create("conv2d_nchw", 2, 8, 10, 10, 16, 3, 3, 1, 1),
                    lambda s: gt.cuda_gemm(s, (1, 4, 2, 4), (1, 2, 1, 2), (4, 3, 3), (1, 2, 1, 1), vector_fetch=2,
                                           smem_layout=2, double_buffer=1)),
    "gelu": (lambda: Workload.create("gelu", 1000), lambda s: gt.cuda_elementwise(s, 128, 2)),
    "bias_relu": (lambda: bias_relu(33, 70), lambda s: gt.cuda_elementwise(s, 64, 4)),
    "softmax": (lambda: Workload.create("softmax", 50, 30), lambda s: gt.cuda_rows(s, 32)),
    "layernorm": (lambda: Workload.create("layernorm", 50, 30), lambda s: gt.cuda_rows(s, 32)),
}

TRITON_CASES = {
    "matmul": (lambda: Workload.create("matmul", 100, 72, 40), lambda s: gt.triton_gemm(s, 32, 32, 16, 8, 4, 2)),
    "matmul_fp16": (lambda: Workload.create("matmul", 64, 64, 48, "float16"), lambda s: gt.triton_gemm(s, 32, 32, 16)),
    "dense_bias_relu": (lambda: Workload.create("dense_bias_relu", 64, 48, 40),
                        lambda s: gt.triton_gemm(s, 32, 32, 16)),
    "batch_matmul": (lambda: Workload.create("batch_matmul", 3, 40, 48, 24), lambda s: gt.triton_gemm(s, 32, 32, 16)),
    "softmax": (lambda: Workload.create("softmax", 6, 100), lambda s: gt.triton_rowwise(s, 1)),
    "softmax_chunked": (lambda: Workload.create("softmax", 8, 200), lambda s: gt.triton_rowwise(s, 2, 64)),
    "layernorm": (lambda: Workload.create("layernorm", 5, 96), lambda s: gt.triton_rowwise(s, 2)),
    "layernorm_welford": (lambda: Workload.create("layernorm", 6, 256), lambda s: welford(gt.triton_rowwise(s, 2, 64))),
    "layernorm_welford_uneven": (lambda: Workload.create("layernorm", 5, 200),  # padded chunks: not fused
                                 lambda s: welford(gt.triton_rowwise(s, 1, 64))),
    "softmax_welford": (lambda: Workload.create("softmax", 4, 256), lambda s: welford(gt.triton_rowwise(s, 1, 64))),
    "layernorm_welford_store_evict": (lambda: Workload.create("layernorm", 6, 256),
                                      lambda s: store_evict(welford(gt.triton_rowwise(s, 1, 64)))),
    "softmax_store_evict": (lambda: Workload.create("softmax", 5, 100),
                            lambda s: store_evict(gt.triton_rowwise(s, 2))),
    "gelu": (lambda: Workload.create("gelu", 1000), lambda s: gt.triton_elementwise(s, 256)),
    "bias_relu": (lambda: bias_relu(33, 70), lambda s: gt.triton_elementwise(s, 512)),
    "reduce": (lambda: Workload.create("reduce", (6, 50), 1), lambda s: gt.triton_reduce(s, 4, 16)),
}


def welford(s: Schedule) -> Schedule:
    from autosched.space.gpu_sketch import welford as pragma

    pragma(s)
    return s


def store_evict(s: Schedule) -> Schedule:
    from autosched.space.gpu_sketch import store_evict as pragma

    pragma(s)
    return s


def case(table: dict, name: str) -> tuple[Workload, Schedule]:
    make_w, sched = table[name]
    w = make_w()
    return w, sched(Schedule(w.dag))


def require_nvcc() -> None:
    if shutil.which("nvcc") is None:
        if os.environ.get("CI"):
            pytest.fail("nvcc is required in CI for the CUDA compile checks")
        pytest.skip("nvcc is not installed on this machine (CUDA compile check)")


def require_module(name: str) -> None:
    """Skip without `name` (a pip package the venv installs), but fail under CI: CI must run it."""
    try:
        __import__(name)
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is required in CI (scripts/venv.sh installs it)", pytrace=False)
        pytest.skip(f"{name} is not installed in this environment", allow_module_level=True)


def emulate_cuda(w: Workload, s: Schedule) -> float:
    """Max abs error of the GPU-lowered nest run on the CPU: bound loops as plain loops (the shared
    stage is then refilled per thread, which checks the regions, not the barriers)."""
    args = w.tensors()
    g = lower_gpu(s, args, "emu", emulate=True)
    body = _drop_barriers(g.func.body)
    for b, _ in g.shared:
        body = Allocate(b, body)
    src = render_c(LoweredFunc("emu", g.func.params, body, g.func.uses_math))
    fn = getattr(ctypes.CDLL(str(compile_c(src).path)), src.entry)
    ins = w.dag.random_inputs(1)
    ref = w.dag.evaluate(ins)
    arrs = [np.full(a.shape, np.nan, np.dtype(a.dtype)) if a.is_output else np.ascontiguousarray(ins[a.name])
            for a in src.args]
    fn(*[x.ctypes.data_as(ctypes.c_void_p) for x in arrs])
    out = next(x for x, a in zip(arrs, src.args) if a.is_output)
    name = next(a.name for a in src.args if a.is_output)
    return float(np.abs(out.astype(np.float64) - ref[name]).max())


def _drop_barriers(s):
    if isinstance(s, Seq):
        return Seq([_drop_barriers(x) for x in s.stmts if not isinstance(x, Barrier)])
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, _drop_barriers(s.body), s.loop_name, s.stage, s.unroll, s.thread_tag)
    if isinstance(s, IfThen):
        return IfThen(s.cond, _drop_barriers(s.body))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _drop_barriers(s.body))
    return s


def run_triton_interpreted(w: Workload, s: Schedule) -> float:
    """Max abs error of the generated Triton kernel run by Triton's interpreter on CPU tensors.
    Needs TRITON_INTERPRET=1 set before triton is imported (its own library functions are
    decorated at import), so the tests call this in a subprocess (`interp_main`)."""
    import torch

    import autosched as asc
    from autosched.compile.gpu_compile import compile_triton, load_triton_module

    src, _ = asc.render(s, w.tensors(), "triton")
    d = compile_triton(src, aot=False)
    kern = getattr(load_triton_module(d / "kernel.py", src.entry, tag="interpret"), src.entry)
    ins = w.dag.random_inputs(1)
    ref = w.dag.evaluate(ins)
    ts = [torch.full(a.shape, float("nan"), dtype=getattr(torch, a.dtype)) if a.is_output
          else torch.from_numpy(np.asarray(ins[a.name], dtype=np.float32)).to(getattr(torch, a.dtype))
          for a in src.args]
    kern[tuple(src.launch["grid"])](*ts)
    out = next(t for t, a in zip(ts, src.args) if a.is_output).float().numpy()
    name = next(a.name for a in src.args if a.is_output)
    return float(np.abs(out.astype(np.float64) - ref[name]).max())


def interp_main(names: list[str]) -> None:
    import json
    import traceback

    out = {}
    for n in names:
        try:
            out[n] = run_triton_interpreted(*case(TRITON_CASES, n))
        except Exception:  # noqa: BLE001  reported per case
            out[n] = traceback.format_exc(limit=3)
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    import sys

    interp_main(sys.argv[1:])
