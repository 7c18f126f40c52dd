"""The triton target without a GPU: kernels run by Triton's interpreter on torch CPU tensors
against the numpy reference, ahead-of-time compile for sm_90, and refusals with a reason.

(Triton 3.6's interpreter has no bfloat16 arithmetic, so bf16 kernels are AOT-compiled here and
run on the device in the `gpu` tests.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import autosched as asc
from autosched.schedule.schedule import Schedule
from autosched.schedule.state import ScheduleError
from autosched.space import gpu_templates as gt
from autosched.workload import Workload
from tests.support.gpu_helpers import TRITON_CASES, require_module

require_module("triton")
require_module("torch")


@pytest.fixture(scope="module")
def interpreted() -> dict:
    """Every TRITON_CASES kernel run once by the interpreter, in one subprocess (see helpers)."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "tests.support.gpu_helpers", *sorted(TRITON_CASES)],
                          capture_output=True, text=True, env=env, cwd=root, timeout=300)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TRITON_CASES))
def test_triton_kernel_matches_reference_interpreted(name, interpreted):
    err = interpreted[name]
    assert isinstance(err, float), err
    assert err < (5e-3 if "fp16" in name else 1e-4)


@pytest.mark.parametrize("name,dtype", [("matmul", "bfloat16"), ("matmul", "float32"), ("softmax", None),
                                        ("layernorm", None), ("layernorm", "welford")])
def test_triton_kernels_compile_ahead_of_time_for_sm90(name, dtype):
    from autosched.compile.gpu_compile import compile_triton

    if name == "matmul":
        s, args = gt.triton_matmul(256, 256, 128, bm=128, bn=128, bk=64, dtype=dtype)
    else:
        from tests.support.gpu_helpers import welford

        w = Workload.create(name, 64, 1024)
        s, args = gt.triton_rowwise(Schedule(w.dag), 1, 256 if dtype else None, 4), w.tensors()
        if dtype == "welford":
            welford(s)
    src, _ = asc.render(s, args, "triton")
    d = compile_triton(src, aot=True)
    meta = (d / "launch.json").read_text()
    assert '"compiler": "triton"' in meta
    if dtype == "bfloat16":
        from autosched.compile.gpu_compile import load_triton_module, triton_compile

        mod = load_triton_module(d / "kernel.py", src.entry)
        ptx = triton_compile(getattr(mod, src.entry), src.launch).asm["ptx"]
        assert "wgmma" in ptx or "mma" in ptx  # tensor cores, not FMA


def test_dot_precision_is_explicit():
    s, args = gt.triton_matmul(64, 64, 64, bm=32, bn=32, bk=32, dtype="float32")
    code = asc.render(s, args, "triton")[0].code
    assert 'input_precision="ieee"' in code
    s["C"].pragma(s["C"].leaf_iter_vars[0], "allow_tf32", 1)
    assert 'input_precision="tf32"' in asc.render(s, args, "triton")[0].code
    s, args = gt.triton_matmul(64, 64, 64, bm=32, bn=32, bk=32, dtype="bfloat16")
    code = asc.render(s, args, "triton")[0].code
    assert "tl.dot(" in code and "input_precision" not in code and "tl.float32" in code


def test_softmax_reads_each_row_once():
    w = Workload.create("softmax", 64, 1024)
    code = asc.render(gt.triton_rowwise(Schedule(w.dag), 1), w.tensors(), "triton")[0].code
    assert code.count("tl.load(") == 1


def test_welford_walks_a_chunked_layernorm_row_twice_not_three_times():
    from tests.support.gpu_helpers import welford

    w = Workload.create("layernorm", 64, 4096)
    plain = asc.render(gt.triton_rowwise(Schedule(w.dag), 1, 1024), w.tensors(), "triton")[0].code
    fused = asc.render(welford(gt.triton_rowwise(Schedule(w.dag), 1, 1024)), w.tensors(), "triton")[0].code
    assert plain.count("tl.load(X_ptr") == 3 and "evict" not in plain
    assert fused.count("tl.load(X_ptr") == 2 and fused.count("for ") == 2
    assert 'eviction_policy="evict_last"' in fused and 'eviction_policy="evict_first"' in fused
    # a chunk that does not divide the row (masked lanes) and softmax's max/sum pair are left as they were
    for name, n in (("layernorm", 200), ("softmax", 256)):
        w = Workload.create(name, 8, n)
        code = asc.render(welford(gt.triton_rowwise(Schedule(w.dag), 1, 64)), w.tensors(), "triton")[0].code
        assert code == asc.render(gt.triton_rowwise(Schedule(w.dag), 1, 64), w.tensors(), "triton")[0].code


def test_welford_knob_in_the_triton_space():
    from autosched.space.gpu_sketch import _triton_rowwise

    w = Workload.create("layernorm", 64, 4096)
    _, valid = _triton_rowwise(w.dag)
    assert valid({"rows": 1, "block_n": 1024, "num_warps": 8, "welford": 1})
    assert not valid({"rows": 1, "block_n": 0, "num_warps": 8, "welford": 1})  # a duplicate of welford 0


def test_store_evict_hints_the_output_store_only():
    from tests.support.gpu_helpers import store_evict, welford

    w = Workload.create("layernorm", 64, 4096)
    plain = asc.render(welford(gt.triton_rowwise(Schedule(w.dag), 1, 1024)), w.tensors(), "triton")[0].code
    hinted = asc.render(store_evict(welford(gt.triton_rowwise(Schedule(w.dag), 1, 1024))), w.tensors(),
                        "triton")[0].code
    stores = [ln for ln in hinted.splitlines() if "tl.store(" in ln]
    assert len(stores) == 1 and stores[0].rstrip().endswith('eviction_policy="evict_first")')
    assert hinted.replace(', eviction_policy="evict_first")', ")") == plain.replace(', eviction_policy="evict_first")',
                                                                                   ")")
    w = Workload.create("softmax", 10, 100)  # masked (padded row): the hint follows the mask
    code = asc.render(store_evict(gt.triton_rowwise(Schedule(w.dag), 2)), w.tensors(), "triton")[0].code
    assert "mask=" in code and 'mask=' in code.split("tl.store(")[1] and "evict_first" in code.split("tl.store(")[1]


def test_store_evict_knob_and_seeds_in_the_triton_space():
    from autosched.space.registry import make_space

    space = make_space(Workload.create("layernorm", 64, 4096), "triton")
    assert all("store_evict" in v for v in space.seeds)
    idx = space.space.index_of({"rows": 1, "block_n": 2048, "num_warps": 16, "welford": 1, "store_evict": 1})
    assert space.space.valid(idx)


def test_thread_bindings_are_refused_with_a_reason():
    w = Workload.create("gelu", 1024)
    s = Schedule(w.dag)
    o, i = s["out"].split("i0", factor=128)
    s["out"].bind(o, "blockIdx.x")
    s["out"].bind(i, "threadIdx.x")
    with pytest.raises(ScheduleError, match="threadIdx.x does not exist in Triton"):
        asc.render(s, w.tensors(), "triton")


def test_stages_outside_the_output_are_refused():
    w = Workload.create("softmax", 16, 64)
    with pytest.raises(ScheduleError, match="triton target: one kernel computes one output"):
        asc.render(Schedule(w.dag), w.tensors(), "triton")
