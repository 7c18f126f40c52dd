"""The cuda target without a GPU: lowering, limits, CPU emulation of the nest, nvcc PTX compile."""

from __future__ import annotations

import pytest

import autosched as asc
from autosched.compile.gpu_compile import compile_cuda, ptx_check
from autosched.lowering.gpu import Barrier
from autosched.schedule.schedule import Schedule
from autosched.schedule.state import ScheduleError
from autosched.space import gpu_templates as gt
from autosched.workload import Workload
from tests.support.gpu_helpers import CUDA_CASES, case, emulate_cuda, require_nvcc


@pytest.mark.parametrize("name", sorted(CUDA_CASES))
def test_cuda_lowering_matches_reference_emulated(name):
    w, s = case(CUDA_CASES, name)
    assert emulate_cuda(w, s) < 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("name", ["matmul", "matmul_uneven", "conv2d", "gelu", "softmax", "dense_bias_relu",
                                  "matmul_fast", "matmul_fast_uneven", "conv2d_fast"])
def test_cuda_source_compiles_to_ptx_for_sm90(name):
    require_nvcc()
    w, s = case(CUDA_CASES, name)
    src, _ = asc.render(s, w.tensors(), "cuda")
    ptx = ptx_check(src.code)
    assert ".target sm_90" in ptx and f".entry {src.entry}" in ptx


def test_matmul_kernel_shape_shared_memory_and_barriers():
    s, args = gt.cuda_matmul(256, 256, 64, bm=128, bn=128, bk=8, tm=8, tn=8)
    src, f = asc.render(s, args, "cuda")
    assert src.launch == {"grid": [4, 1, 1], "block": [256, 1, 1], "shared_bytes": (128 * 8 + 8 * 128) * 4}
    assert src.code.count("__syncthreads();") == 2
    assert "extern __shared__" in src.code and "__launch_bounds__(256)" in src.code
    assert "float C_local[64];" in src.code  # the register tile
    nest = asc.lower(s, args, target="cuda")
    assert "__syncthreads" in nest.show()
    assert any(isinstance(x, Barrier) for x in _walk(nest.body))


def _walk(s):
    yield s
    for x in getattr(s, "stmts", []):
        yield from _walk(x)
    if hasattr(s, "body"):
        yield from _walk(s.body)


def test_cuda_build_compiles_a_cubin():
    require_nvcc()
    s, args = gt.cuda_matmul(128, 128, 32, bm=64, bn=64, bk=8, tm=4, tn=4)
    src, _ = asc.render(s, args, "cuda")
    d = compile_cuda(src)
    assert (d / "kernel.cubin").stat().st_size > 0 and (d / "launch.json").exists()


def test_too_many_threads_is_a_schedule_error():
    w = Workload.create("matmul", 256, 256, 16)
    s = gt.cuda_gemm(Schedule(w.dag), (32, 64), (1, 1), (4,))
    with pytest.raises(ScheduleError, match="2048 threads exceeds the 1024"):
        asc.render(s, w.tensors(), "cuda")


def test_too_much_shared_memory_is_a_schedule_error():
    w = Workload.create("matmul", 512, 512, 512)
    s = gt.cuda_gemm(Schedule(w.dag), (16, 16), (8, 8), (256,))
    with pytest.raises(ScheduleError, match="shared memory of .* exceeds"):
        asc.render(s, w.tensors(), "cuda")


def test_cpu_annotations_and_misplaced_block_loops_are_refused():
    w = Workload.create("gelu", 1024)
    s = Schedule(w.dag)
    o, i = s["out"].split("i0", factor=128)
    s["out"].parallel(o)
    with pytest.raises(ScheduleError, match="'parallel' is a CPU annotation"):
        asc.render(s, w.tensors(), "cuda")
    s = Schedule(w.dag)
    o, i = s["out"].split("i0", factor=128)
    s["out"].bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match="block indices must be the outermost"):
        asc.render(s, w.tensors(), "cuda")


def test_unfused_root_stage_is_refused_with_a_reason():
    w = Workload.create("softmax", 16, 16)
    s = Schedule(w.dag)
    with pytest.raises(ScheduleError, match="one schedule is one kernel"):
        asc.render(s, w.tensors(), "cuda")
