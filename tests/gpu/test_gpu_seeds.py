"""Rule-derived seeds of the GPU spaces (no device): every seed is a valid config of its space for
shapes of several kinds and sizes, the rules scale the tiles to the problem, the cuda seeds lower
to correct kernels (CPU emulation of the nest), and a tuning run measures the seeds first."""

from __future__ import annotations

import pytest

from autosched.compile.types import ErrorCode
from autosched.measure.types import MeasureResult
from autosched.space.gpu_seeds import _operand_sides
from autosched.space.gpu_sketch import MAX_SEEDS
from autosched.space.registry import make_space
from autosched.target.key import Target
from autosched.tuning.candidates import CandidateCache
from autosched.tuning.tuner import TaskTuner, TuneOptions
from autosched.workload import Workload
from tests.support.gpu_helpers import bias_relu, emulate_cuda

GEMMS = {
    "matmul4096": lambda: Workload.create("matmul", 4096, 4096, 4096),
    "matmul1000": lambda: Workload.create("matmul", 1000, 1000, 1000),
    "matmul64": lambda: Workload.create("matmul", 64, 64, 64),
    "matmul_bf16": lambda: Workload.create("matmul", 4096, 4096, 4096, "bfloat16"),
    "batch_matmul": lambda: Workload.create("batch_matmul", 8, 512, 512, 256),
    "dense_bias_relu": lambda: Workload.create("dense_bias_relu", 1024, 1000, 512),
    "conv2d_suite": lambda: Workload.create("conv2d_nchw", 32, 256, 14, 14, 256, 3, 3, 1, 1),
    "conv2d_odd": lambda: Workload.create("conv2d_nchw", 3, 24, 17, 17, 40, 3, 3, 1, 1),
}
OTHERS = {
    "softmax": lambda: Workload.create("softmax", 16384, 4096),
    "layernorm": lambda: Workload.create("layernorm", 1000, 768),
    "gelu": lambda: Workload.create("gelu", 1 << 20),
    "bias_relu": lambda: bias_relu(300, 4096),
}


def _block(seed: dict, d: int) -> int:
    v, t, i = seed[f"tile{d}"]
    return v * t * i


@pytest.mark.parametrize("target", ["cuda", "triton"])
@pytest.mark.parametrize("name", sorted(GEMMS) + sorted(OTHERS))
def test_seeds_are_valid_distinct_configs(name, target):
    w = {**GEMMS, **OTHERS}[name]()
    space = make_space(w, target)
    seeds = space.seeds
    if name in GEMMS or target == "triton" or name in ("gelu", "bias_relu"):
        assert 1 <= len(seeds) <= MAX_SEEDS
    configs = [space.space.index_of(v) for v in seeds]
    assert all(space.space.valid(c) for c in configs)
    assert len(set(configs)) == len(configs)


@pytest.mark.parametrize("name", ["matmul4096", "matmul1000", "batch_matmul", "dense_bias_relu", "conv2d_suite"])
def test_cuda_seeds_instantiate(name):
    w = GEMMS[name]()
    space = make_space(w, "cuda")
    cands = CandidateCache(w, space, "cuda")
    for v in space.seeds:
        c = cands.get(space.space.index_of(v))
        assert c.ok, (v, c.error)


def test_cuda_seed_rules_scale_with_the_problem():
    big = make_space(GEMMS["matmul4096"](), "cuda").seeds
    # device-sized first: a 128x128 block, 128 threads of 2x4 tiles of 4x4, BK 16, every fast knob on
    assert big[0] == {"tile0": (2, 16, 4), "tile1": (4, 8, 4), "rk0": 16, "vector_fetch": 4, "smem_layout": 2,
                      "double_buffer": 2, "group": 8}
    assert {s["rk0"] for s in big} == {8, 16, 32}
    small = make_space(GEMMS["matmul64"](), "cuda").seeds
    assert all(_block(s, d) <= 64 for s in small for d in (0, 1))
    # 1000 = 8 x 125: guarded power-of-two tiles rather than 8-wide ones; the grid fills the device first
    odd = make_space(GEMMS["matmul1000"](), "cuda").seeds
    assert all(_block(s, 0) >= 64 and _block(s, 1) >= 64 for s in odd)
    assert -(-1000 // _block(odd[0], 0)) * -(-1000 // _block(odd[0], 1)) >= 132
    # batch_matmul: one batch per block; conv2d: window axes whole, 4 channels per step, 14 = 2 x 7
    for s in make_space(GEMMS["batch_matmul"](), "cuda").seeds:
        assert s["tile0"] == (1, 1, 1)
    conv = make_space(GEMMS["conv2d_suite"](), "cuda").seeds
    assert all((s["rk0"], s["rk1"], s["rk2"], s["vector_fetch"]) == (4, 3, 3, 1) for s in conv)
    assert all(14 % _block(s, 3) == 0 and 14 % _block(s, 2) == 0 for s in conv)


def test_operand_sides():
    sides = {n: _operand_sides(next(t.op for t in reversed(GEMMS[n]().dag.computes) if t.op.reduce_axis))
             for n in ("matmul64", "batch_matmul", "conv2d_suite", "dense_bias_relu")}
    assert sides == {"matmul64": ([0], [1]), "batch_matmul": ([1], [2]), "conv2d_suite": ([0, 2, 3], [1]),
                     "dense_bias_relu": ([0], [1])}


def test_triton_seeds_are_the_hopper_configs_clamped():
    bf16 = make_space(GEMMS["matmul_bf16"](), "triton").seeds
    assert bf16[0] == {"bm": 128, "bn": 256, "bk": 64, "group_m": 8, "num_warps": 8, "num_stages": 3}
    assert len(bf16) == MAX_SEEDS
    small = make_space(GEMMS["matmul64"](), "triton").seeds
    assert all(s["bm"] <= 64 and s["bn"] <= 64 and s["bk"] <= 64 for s in small)
    ln = make_space(Workload.create("layernorm", 16384, 4096), "triton").seeds
    assert ln[0] == {"rows": 1, "block_n": 2048, "num_warps": 16, "welford": 1, "store_evict": 1}
    assert {"rows": 1, "block_n": 2048, "num_warps": 8, "welford": 1, "store_evict": 1} in ln
    assert {"rows": 4, "block_n": 0, "num_warps": 16, "welford": 0, "store_evict": 0} in ln
    sm = make_space(Workload.create("softmax", 16384, 4096), "triton").seeds  # max and sum: no Welford pair
    assert [v["block_n"] for v in sm] == [0, 0] and not any(v["welford"] or v["store_evict"] for v in sm)


CUDA_EMULATED = {
    "matmul_ragged": lambda: Workload.create("matmul", 100, 70, 30),
    "batch_matmul": lambda: Workload.create("batch_matmul", 2, 40, 48, 24),
    "conv2d": lambda: Workload.create("conv2d_nchw", 1, 8, 14, 14, 16, 3, 3, 1, 1),
}


@pytest.mark.parametrize("name", sorted(CUDA_EMULATED))
def test_cuda_seeds_compute_the_right_answer_emulated(name):
    w = CUDA_EMULATED[name]()
    space = make_space(w, "cuda")
    assert space.seeds
    for v in space.seeds[:2]:
        assert emulate_cuda(w, space.apply(space.space.index_of(v))) < 1e-4, v


class _RecordingMeasurer:
    """Stands in for the GPU builder/runner: records what it is asked to measure, and times each
    candidate by a fixed function of its steps."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def measure(self, inputs):
        out = []
        for inp in inputs:
            self.seen.append(inp.steps_json)
            out.append(MeasureResult((1e-3 * (1 + hash(inp.steps_json) % 97 / 97),), ErrorCode.NO_ERROR))
        return out


@pytest.mark.slow
@pytest.mark.parametrize("target,name", [("cuda", "matmul4096"), ("triton", "matmul_bf16"), ("cuda", "conv2d_suite")])
@pytest.mark.parametrize("searcher", ["genetic", "random"])
def test_tuning_measures_the_seeds_first(target, name, searcher):
    w = GEMMS[name]()
    space = make_space(w, target)
    m = _RecordingMeasurer()
    tuner = TaskTuner(w, Target.parse(target), m, TuneOptions(trials=24, batch_size=16, searcher=searcher,
                                                              cost_model=None, verify=0), space=space)
    tuner.run()
    cands = CandidateCache(w, space, target)
    seeds = [cands.get(space.space.index_of(v)).steps_json for v in space.seeds]
    assert m.seen[:len(seeds)] == seeds
    # the rest of the budget went to the searcher (a config that fails to instantiate is not measured)
    assert tuner.trials == 24 and len(set(m.seen)) == len(m.seen) > len(seeds)
