"""On the device (an H200): generated kernels run and match, the GPU runner checks, times and
survives faulting kernels, and `tune` works on both GPU targets. Skipped without a CUDA GPU."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import autosched as asc
from autosched.codegen.source import KernelSource
from autosched.compile.types import BuildResult, ErrorCode, MeasureInput
from autosched.space import gpu_templates as gt

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (device machine)")]


def _rel(out, ref) -> float:
    return float((out.double() - ref).norm() / ref.norm())


def test_cuda_matmul_runs_and_matches_on_torch_tensors():
    s, args = gt.cuda_matmul(512, 512, 256, bm=128, bn=128, bk=8, tm=8, tn=8)
    k = asc.build(s, args, "cuda")
    a, b = torch.randn(512, 256, device="cuda"), torch.randn(256, 512, device="cuda")
    c = torch.full((512, 512), float("nan"), device="cuda")
    k(a, b, c)
    assert _rel(c, a.double() @ b.double()) < 1e-5


def test_cuda_kernel_takes_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    s, args = gt.cuda_matmul(128, 128, 64, bm=64, bn=64, bk=8, tm=4, tn=4)
    k = asc.build(s, args, "cuda")
    a, b = cupy.random.rand(128, 64, dtype=cupy.float32), cupy.random.rand(64, 128, dtype=cupy.float32)
    c = cupy.empty((128, 128), dtype=cupy.float32)
    k(a, b, c)
    assert float(cupy.abs(c - a @ b).max()) < 1e-3


@pytest.mark.parametrize("dtype,tol", [("bfloat16", 1e-2), ("float32", 1e-5)])
def test_triton_matmul_runs_and_matches(dtype, tol):
    s, args = gt.triton_matmul(512, 512, 256, bm=128, bn=128, bk=64, dtype=dtype)
    k = asc.build(s, args, "triton")
    dt = getattr(torch, dtype)
    a, b = torch.randn(512, 256, device="cuda").to(dt), torch.randn(256, 512, device="cuda").to(dt)
    c = torch.empty(512, 512, device="cuda", dtype=dt)
    k(a, b, c)
    assert _rel(c, a.double() @ b.double()) < tol


def _measure(target: str, s, w, build=None, reference=None):
    from autosched.measure.gpu_runner import GpuRunner, build_gpu_input

    inp = MeasureInput(w.key, w.to_json(), f"{target}|x|0", json.dumps(s.steps_json()))
    build = build or build_gpu_input(inp)
    with GpuRunner(reference=reference) as r:
        return r.run([inp], [build])[0], r


def test_gpu_runner_checks_and_times_a_candidate():
    from autosched.schedule.schedule import Schedule
    from autosched.workload import Workload

    w = Workload.create("matmul", 256, 256, 128)
    res, _ = _measure("cuda", gt.cuda_gemm(Schedule(w.dag), (16, 16), (4, 4), (8,)), w)
    assert res.ok, res.error_msg
    assert len(res.costs) >= 10 and 0 < res.median < 1e-2 and "H" in res.device


def test_gpu_runner_reports_wrong_answers():
    from autosched.schedule.schedule import Schedule
    from autosched.workload import Workload

    w = Workload.create("gelu", 4096)

    def wrong(inp, args):
        x = np.random.default_rng(0).uniform(-1, 1, 4096).astype(np.float32)
        return {"X": x}, {"out": x}  # gelu(x) != x

    res, _ = _measure("triton", gt.triton_elementwise(Schedule(w.dag), 1024), w, reference=wrong)
    assert res.error_code == ErrorCode.WRONG_ANSWER, res.error_msg


def test_gpu_runner_survives_a_faulting_kernel():
    from autosched.codegen.source import ArgSpec
    from autosched.compile.gpu_compile import compile_cuda
    from autosched.schedule.schedule import Schedule
    from autosched.workload import Workload

    w = Workload.create("gelu", 4096)
    code = ('extern "C" __global__ void bad(const float* X, float* out) '
            '{ out[(long long)threadIdx.x << 36] = X[0]; }')
    src = KernelSource("cuda", code, "bad", (ArgSpec("X", (4096,), "float32", False),
                                             ArgSpec("out", (4096,), "float32", True)),
                       ("-arch=sm_90",), {"grid": [1, 1, 1], "block": [32, 1, 1], "shared_bytes": 0})
    build = BuildResult(str(compile_cuda(src)), "bad", src.args, src.source_hash, language="cuda")
    res, runner = _measure("cuda", Schedule(w.dag), w, build=build)
    assert res.error_code in (ErrorCode.RUNTIME_ERROR, ErrorCode.WORKER_CRASHED), res.error_msg
    ok, _ = _measure("triton", gt.triton_elementwise(Schedule(w.dag), 1024), w)
    assert ok.ok, ok.error_msg


@pytest.mark.parametrize("target", ["cuda", "triton"])
def test_tune_on_gpu_targets(target, tmp_path):
    res = asc.tune(asc.Workload.create("matmul", 512, 512, 512), target, 8, searcher="random", cost_model=None,
                   db=str(tmp_path / "db.sqlite"), batch_size=8, progress=False)
    assert math.isfinite(res.best_cost) and res.best_gflops > 100, res.errors
