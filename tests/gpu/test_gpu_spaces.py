"""GPU search spaces: every op class has a space on both GPU targets, sampled configs render,
device-limit violations are dropped before building, and `tune` picks the GPU measurer."""

from __future__ import annotations

import numpy as np
import pytest

from autosched.space.gpu_sketch import op_class
from autosched.space.registry import make_space
from autosched.tuning.candidates import CandidateCache
from autosched.workload import Workload
from tests.support.gpu_helpers import bias_relu

WORKLOADS = {
    "matmul": lambda: Workload.create("matmul", 256, 256, 128),
    "dense_bias_relu": lambda: Workload.create("dense_bias_relu", 128, 64, 64),
    "conv2d": lambda: Workload.create("conv2d_nchw", 2, 16, 8, 8, 16, 3, 3, 1, 1),
    "softmax": lambda: Workload.create("softmax", 64, 512),
    "layernorm": lambda: Workload.create("layernorm", 64, 512),
    "gelu": lambda: Workload.create("gelu", 4096),
    "bias_relu": lambda: bias_relu(64, 256),
    "reduce": lambda: Workload.create("reduce", (64, 256), 1),
}


@pytest.mark.parametrize("target", ["cuda", "triton"])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_sampled_gpu_configs_render(name, target):
    w = WORKLOADS[name]()
    space = make_space(w, target)
    cands = CandidateCache(w, space, target)
    rng = np.random.default_rng(0)
    got = [cands.get(c) for c in (space.space.sample_valid(rng) for _ in range(6)) if c is not None]
    assert got and sum(c.ok for c in got) >= len(got) // 2, [c.error for c in got if not c.ok]


def test_op_classes():
    assert [op_class(WORKLOADS[n]().dag) for n in ("matmul", "conv2d", "softmax", "gelu", "reduce")] == \
        ["gemm", "gemm", "rowwise", "elementwise", "reduce"]


def test_validity_drops_oversized_triton_tiles():
    space = make_space(Workload.create("matmul", 4096, 4096, 4096, "bfloat16"), "triton").space
    v = {"bm": 256, "bn": 256, "bk": 128, "group_m": 8, "num_warps": 4, "num_stages": 5}
    assert not space.valid(space.index_of(v))
    v.update(bm=128, bn=128, bk=64, num_stages=3, num_warps=8)
    assert space.valid(space.index_of(v))


def test_tune_uses_the_gpu_measurer_for_gpu_targets():
    from autosched.measure.gpu_runner import GpuBuilder, GpuRunner
    from autosched.tuning.api import _LOCAL_MEASURE, _load

    for kind in ("cuda", "triton"):
        run, build = _LOCAL_MEASURE[kind]
        assert _load(run) is GpuRunner and _load(build) is GpuBuilder
