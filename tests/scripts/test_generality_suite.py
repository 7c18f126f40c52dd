"""The generality suite of issue 29 (`benchmarks/generality_dags.py`, `bench_generality.py`) keeps its
promises: >= 24 user-written DAGs covering every kind the issue lists, at shapes that 8 divides in no
dimension of any tensor, each building with `autosched.te`, each torch twin agreeing with autosched's
reference (and writing into `out=` when it says it does); the script refuses unknown names and its
verdicts follow the issue's targets. No tuning here except one `slow` smoke run."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autosched import te
from autosched.codegen.source import ArgSpec
from autosched.compile.types import MeasureInput
from autosched.measure.checking import check_outputs
from autosched.measure.reference import DagReferenceProvider, longest_reduction
from autosched.workload import Workload

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))  # the scripts import each other as top-level modules


def _load(name: str):
    """A benchmark script as the top-level module it is to its siblings (one copy of each)."""
    return importlib.import_module(name)


gd = _load("generality_dags")
report = _load("generality_report")
WL = gd.WORKLOADS
NAMES = list(WL)

# dims of a default shape that may be divisible by 8, with the reason; the suite needs none so far
DIVISIBLE_BY_8_ALLOWED: dict[tuple[str, str], str] = {}


def _workload(name: str, shape: tuple[int, ...] | None = None) -> Workload:
    tensors, flops = WL[name].tensors(te, shape)
    assert flops > 0
    return Workload.from_tensors(tensors, name=name)


def _reference(w: Workload):
    args = [ArgSpec(t.name, tuple(int(d) for d in t.shape), t.dtype, k >= len(w.dag.placeholders))
            for k, t in enumerate(w.tensors())]
    return DagReferenceProvider(seed=3)(MeasureInput(w.key, w.to_json(), "cpu", "[]"), args)


def test_the_suite_has_24_workloads_covering_every_kind() -> None:
    assert len(WL) >= 24
    assert all(w.name == n for n, w in WL.items())
    kinds = {w.kind for w in WL.values()}
    assert kinds == set(gd.KINDS), kinds ^ set(gd.KINDS)
    assert sum(w.tvm for w in WL.values()) >= 10


def _by(builder) -> list:
    return [w for w in WL.values() if w.build is builder]


def test_the_issue_list_is_covered() -> None:
    """Each item of issue 29's list, read from the builders and shapes (not from the names)."""
    for layout in (gd.matmul_nn, gd.matmul_nt, gd.matmul_tn, gd.matmul_tt):  # each operand transposed
        assert _by(layout), layout.__name__
    mm = [w.shape for w in WL.values() if w.kind == "skinny_matmul"]
    assert any(s[0] == 1 for s in mm) and any(min(s) <= 64 and max(s) >= 500 for s in mm)
    assert any(all(d <= 32 for d in w.shape[1:]) for w in _by(gd.batch_matmul))  # small matrices
    conv = [w.shape for w in _by(gd.conv2d) + _by(gd.conv2d_guarded)]
    assert {1, 3, 5} <= {s[1] for s in conv}  # input channels
    assert {2, 3} <= {s[7] for s in conv}  # strides
    assert {1, 7} <= {s[5] for s in conv}  # kernels 1x1 to 7x7
    assert any(s[8] > 0 for s in conv) and any(s[9] > 1 for s in conv)  # padding, dilation
    assert _by(gd.depthwise) and _by(gd.max_pool) and _by(gd.avg_pool)
    for red in (gd.reduce_rows, gd.reduce_cols, gd.reduce_mid, gd.reduce_outer_inner):  # along each axis
        assert _by(red), red.__name__
    for norm in (gd.softmax, gd.layernorm):
        cols = [w.shape[1] for w in _by(norm)]
        assert min(cols) <= 64 and any(c >= 65536 for c in cols), cols  # short and very long rows
        assert any(100 < c < 4096 and c % 2 for c in cols), cols  # odd
    assert _by(gd.matmul_softmax) and _by(gd.matmul_bias_gelu) and _by(gd.chain_tanh) and _by(gd.chain_silu)


@pytest.mark.parametrize("name", NAMES)
def test_builds_at_its_default_shape_and_8_divides_no_dimension(name: str) -> None:
    w = _workload(name)
    dag = w.dag
    for t in list(dag.placeholders) + list(dag.computes):
        for d in (int(x) for x in t.shape):
            if d >= 8 and d % 8 == 0:
                assert (name, t.name) in DIVISIBLE_BY_8_ALLOWED, f"{name}: tensor {t.name} {tuple(t.shape)}"
    assert len(dag.outputs) == 1 and w.args_order[-1] == dag.outputs[0].name


@pytest.mark.parametrize("name", NAMES)
def test_torch_twin_agrees_with_the_reference_at_a_small_shape(name: str) -> None:
    import torch

    wl = WL[name]
    w = _workload(name, wl.small)
    ref = _reference(w)
    out_name = w.dag.outputs[0].name
    inputs = [torch.from_numpy(np.asarray(ref.inputs[n])) for n in w.args_order[:-1]]
    out = torch.full(ref.expected[out_name].shape, float("nan"))
    got = wl.torch_call(wl.small)(*inputs, out=out)
    c = check_outputs({out_name: got.numpy()}, ref.expected, ref.reduce_len)
    assert c.ok, c.message
    assert (got.data_ptr() == out.data_ptr()) == (not wl.torch_allocates), "torch_allocates says otherwise"


def test_bench_refuses_unknown_names_and_bad_trials() -> None:
    bench = _load("bench_generality")
    for argv in (["--only", "matmul_nn", "nope"], ["--tvm", "nope"]):
        with pytest.raises(SystemExit):
            bench.parse(argv)
    r = subprocess.run([sys.executable, str(BENCH / "bench_generality.py"), "--only", "no_such_op"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode != 0 and "no_such_op" in r.stderr and "matmul_nn" in r.stderr  # names the list
    with pytest.raises(SystemExit):
        bench.parse(["--trials-first", "32", "--trials", "32"])
    a = bench.parse(["--tvm"])
    assert bench.tvm_names(a, NAMES) == {n for n in NAMES if WL[n].tvm}
    a = bench.parse(["--tvm", "matmul_tt"])
    assert bench.tvm_names(a, NAMES) == {"matmul_tt"}
    assert bench.tvm_names(bench.parse([]), NAMES) == set()
    q = bench.parse(["--quick"])
    assert (q.trials_first, q.trials) == (bench.QUICK["trials_first"], bench.QUICK["trials"])


def _row(name: str, first: float, full: float, tvm: float | None = None, tune: float = 10.0) -> dict:
    r = {"workload": name, "kind": "matmul", "shape": [3, 5], "ours_first_ms": 1.0, "ours_ms": 1.0, "torch_ms": 1.0,
         "ratio_first": first, "ratio": full, "tune_seconds": tune, "correct": True, "threads": {}, "measured": [1, 2]}
    if tvm is not None:
        r["tvm"] = {"tune_seconds": 100.0, "side_by_side": {"speedup_vs_tvm": tvm, "tvm_seconds": 1e-3}}
    return r


def test_the_verdict_caps_each_ratio_and_reads_floors_and_tvm() -> None:
    rows = [_row("a", 8.0, 1.0, tvm=1.5), _row("b", 0.5, 0.7, tvm=1.1)]
    text = report.summary({"trials_first": 32, "trials": 200, "suite_size": 2, "rows": rows})
    lines = {ln.split("|")[1].strip(): ln for ln in text.splitlines() if ln.startswith("| ")}
    geo = next(v for k, v in lines.items() if "geomean vs torch" in k)
    assert "1.00x" in geo and "**met**" in geo  # sqrt(min(8, 2) * 0.5): capped, not 2.00x
    assert "not met" not in next(v for k, v in lines.items() if "none below 0.5x" in k)  # 0.5 is not below
    assert "**met**" in next(v for k, v in lines.items() if "none below 0.6x" in k)
    assert "**met**" in next(v for k, v in lines.items() if "ahead of TVM" in k)
    tg = next(v for k, v in lines.items() if "geomean vs TVM" in k)
    assert f"{math.sqrt(1.5 * 1.1):.2f}x" in tg and "**met**" in tg
    assert "**met**" in next(v for k, v in lines.items() if "tuning time" in k)  # 20 s of 200 s
    rows.append({"workload": "c", "kind": "conv2d", "shape": [1], "correct": False, "error": "boom", "threads": {}})
    text = report.summary({"trials_first": 32, "trials": 200, "suite_size": 3, "rows": rows})
    assert "| 2 of 3 | **not met** |" in text
    assert "boom" in report.table({"trials_first": 32, "trials": 200, "rows": rows})


TVM_TWIN = """
import sys, numpy as np, tvm
from tvm import te
from generality_dags import WORKLOADS
out = {}
for name, wl in WORKLOADS.items():
    ts, _ = wl.tensors(te, wl.small)
    lib = tvm.compile(tvm.IRModule({"main": te.create_prim_func(ts).with_attr("global_symbol", "main")}), target="llvm")
    rng = np.random.default_rng(0)
    host = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32") for t in ts]
    arrays = [tvm.runtime.tensor(h) for h in host]
    lib["main"](*arrays)
    for k, h in enumerate(host[:-1]):
        out[f"{name}/{k}"] = h
    out[f"{name}/out"] = arrays[-1].numpy()
np.savez(sys.argv[1], **out)
"""


@pytest.mark.slow
def test_the_same_builders_make_tvm_twins_that_agree_with_ours(tmp_path: Path) -> None:
    """Built with `tvm.te` (unscheduled) in TVM's environment, every DAG computes what ours does.
    Skipped without benchmarks/.tvm-venv: TVM is a benchmark peer, never a dependency (CI has none)."""
    tvm_py = BENCH / ".tvm-venv" / "bin" / "python"
    if not tvm_py.exists():
        pytest.skip("no TVM environment (benchmarks/bench_tune_cpu.py --install-tvm makes it)")
    npz = tmp_path / "tvm.npz"
    r = subprocess.run([str(tvm_py), "-c", TVM_TWIN, str(npz)], capture_output=True, text=True, timeout=600,
                       check=False, cwd=BENCH)
    assert r.returncode == 0, r.stderr[-3000:]
    got = np.load(npz)
    for name, wl in WL.items():
        w = _workload(name, wl.small)
        x = {n: got[f"{name}/{k}"] for k, n in enumerate(w.args_order[:-1])}
        ref = w.dag.evaluate(x)
        c = check_outputs({"out": got[f"{name}/out"]}, {"out": ref[w.args_order[-1]]}, longest_reduction(w.dag))
        assert c.ok, f"{name}: {c.message}"


@pytest.mark.slow
def test_quick_run_of_one_small_workload(tmp_path: Path) -> None:
    stem = tmp_path / "generality_smoke"
    r = subprocess.run([sys.executable, str(BENCH / "bench_generality.py"), "--quick", "--only", "softmax_short",
                        "--rounds", "2", "--out", str(stem)], capture_output=True, text=True, timeout=900,
                       check=False, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    data = json.loads(stem.with_suffix(".json").read_text())
    (row,) = data["rows"]
    assert row["workload"] == "softmax_short" and row["correct"], row.get("checks", row.get("error"))
    assert row["ours_ms"] > 0 and row["torch_ms"] > 0 and sum(row["measured"]) > 0
    assert "| softmax_short | softmax | 17x37 |" in stem.with_suffix(".md").read_text()
