"""The tuned CPU suite compares like with like (`benchmarks/bench_tune_cpu.py` and its helpers): TVM
gets the machine's cores, peers write into preallocated outputs or are marked, tuning starts from a
cold kernel cache, and the tables say where a peer is ahead. No TVM and no tuning run here."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))  # the scripts import each other as top-level modules


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench = _load("bench_tune_cpu")
tvm_peer = _load("tvm_peer")
cpu_peers = _load("cpu_peers")
results_table = _load("results_table")
docs = _load("docs_benchmarks")
CORES = len(os.sched_getaffinity(0))


def test_tvm_gets_every_core_even_when_the_caller_set_one(monkeypatch):
    monkeypatch.setenv("TVM_NUM_THREADS", "1")  # planted: TVM's x86 default on a 2-vCPU VM
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    env = bench.tvm_env(CORES)
    assert env["TVM_NUM_THREADS"] == str(CORES)
    assert "OMP_WAIT_POLICY" not in env


def _fake_tvm(monkeypatch, tmp_path, answer: dict) -> list:
    py = tmp_path / "python"
    py.write_text("")
    monkeypatch.setattr(bench, "TVM_PY", py)
    seen = []

    def run(cmd, **kw):
        seen.append(kw["env"])
        return subprocess.CompletedProcess(cmd, 0, stdout="log line\n" + json.dumps(answer) + "\n", stderr="")

    monkeypatch.setattr(bench.subprocess, "run", run)
    return seen


def test_a_tvm_figure_from_fewer_threads_than_cores_is_refused(monkeypatch, tmp_path):
    _fake_tvm(monkeypatch, tmp_path, {"best_seconds": 0.01, "threads": CORES - 1 or 0})
    out = bench.run_tvm("matmul", (64, 64, 64), 4)
    assert "missing" in out and f"not the machine's {CORES}" in out["missing"]


def test_a_tvm_figure_from_all_cores_is_kept_and_the_child_env_says_so(monkeypatch, tmp_path):
    seen = _fake_tvm(monkeypatch, tmp_path, {"best_seconds": 0.01, "threads": CORES, "tvm_curve": [[1, 5.0]]})
    out = bench.run_tvm("matmul", (64, 64, 64), 4)
    assert "missing" not in out and out["tvm_curve"] == [[1, 5.0]]
    assert seen[0]["TVM_NUM_THREADS"] == str(CORES)


def test_tvm_curve_is_best_so_far_and_a_failed_trial_keeps_it():
    flops = 2e9
    run_secs = [[0.02], [1e10], [0.01, 0.01], [0.04], []]  # 100, failed, 200, 50, no result GFLOP/s
    assert tvm_peer.tuning_curve(run_secs, flops) == [[1, 100.0], [2, 100.0], [3, 200.0], [4, 200.0], [5, 200.0]]


def test_softmax_has_a_tvm_definition():
    assert "softmax" in tvm_peer.TE_OPS


def test_our_kernel_cache_is_cold_for_tuning(monkeypatch, tmp_path):
    from autosched.compile.c_compiler import default_cache_dir

    warm = tmp_path / "warm"
    monkeypatch.setenv("XDG_CACHE_HOME", str(warm))  # planted: a cache full of earlier kernels
    bench.cold_cache(str(tmp_path / "run"))
    assert default_cache_dir().is_relative_to(tmp_path / "run")
    assert not default_cache_dir().exists()


def test_rows_of_other_workloads_are_kept_only_from_runs_with_thread_counts(tmp_path):
    path = tmp_path / "r.json"
    old = [{"workload": "conv2d", "threads": {"autosched": 2}}, {"workload": "softmax"},  # pre-protocol
           {"workload": "matmul1024", "threads": {"autosched": 2}, "autosched_ms": 9.0}]
    path.write_text(json.dumps({"rows": old}))
    new = [{"workload": "matmul1024", "threads": {"autosched": 2}, "autosched_ms": 5.0}]
    merged = bench.merged_rows(path, new)
    assert [r["workload"] for r in merged] == ["conv2d", "matmul1024"]
    assert merged[-1]["autosched_ms"] == 5.0
    path.write_text("{not json")
    with pytest.raises(SystemExit, match="not a bench_tune_cpu results file"):
        bench.merged_rows(path, new)


class _W:
    """The parts of a Workload cpu_peers reads."""

    def __init__(self, name: str, args: tuple, out_shape: tuple) -> None:
        from types import SimpleNamespace

        self.name, self.args = name, args
        self.dag = SimpleNamespace(outputs=[SimpleNamespace(shape=out_shape, dtype="float32")])


def _storage(v) -> int:
    return v.data_ptr() if hasattr(v, "data_ptr") else v.ctypes.data


@pytest.mark.parametrize("name,args,inputs,ref", [
    ("matmul", (8, 6, 5), {"A": (8, 5), "B": (5, 6)}, lambda x: x["A"] @ x["B"]),
    ("dense_bias_relu", (8, 6, 5), {"X": (8, 5), "W": (6, 5), "bias": (6,)},
     lambda x: np.maximum(x["X"] @ x["W"].T + x["bias"], 0)),
    ("softmax", (8, 6), {"X": (8, 6)},
     lambda x: (lambda e: e / e.sum(1, keepdims=True))(np.exp(x["X"] - x["X"].max(1, keepdims=True)))),
])
def test_peers_said_to_preallocate_write_into_one_buffer(name, args, inputs, ref):
    rng = np.random.default_rng(0)
    x = {k: rng.standard_normal(s).astype("float32") for k, s in inputs.items()}
    want = ref(x)
    fns = cpu_peers.peers(_W(name, args, want.shape), x, compile_torch=False)
    for peer, fn in fns.items():
        assert not cpu_peers.allocates(name, peer)
        first, second = fn(), fn()
        assert _storage(first) == _storage(second), f"{peer} allocated a new output"
        got = first.numpy() if hasattr(first, "numpy") else first
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_peers_without_out_are_marked_allocating():
    assert cpu_peers.allocates("conv2d_nchw", "torch eager")
    assert cpu_peers.allocates("layernorm", "numpy")
    assert cpu_peers.allocates("matmul", "torch.compile")


def test_thread_counts_name_every_contender():
    from common import thread_counts

    counts = thread_counts()
    assert counts["autosched"] >= 1 and "numpy" in counts and "torch eager" in counts


def _run(tmp_path, torch_ms: float, tvm_ms: float) -> Path:
    row = {"workload": "matmul1024", "autosched_ms": 10.0, "gflop": 2.147, "torch eager_ms": torch_ms,
           "numpy_ms": 30.0, "threads": {"autosched": 2, "torch eager": 2, "numpy": 2},
           "allocates": {"torch eager": False, "numpy": True}, "measured": 230, "tune_seconds": 100.0,
           "speed_vs_torch": torch_ms / 10.0, "date": "d",
           "tvm": {"threads": 2, "measured": 200, "tune_seconds": 300.0, "best_seconds": tvm_ms / 1e3,
                   "side_by_side": {"tvm_seconds": tvm_ms / 1e3, "autosched_seconds": 0.01, "tvm_threads": 2,
                                    "autosched_threads": 2, "speedup_vs_tvm": tvm_ms / 10.0}}}
    p = tmp_path / "bench_tune_cpu_x.json"
    p.write_text(json.dumps({"machine": {"cpu": "Some CPU", "cores": 2, "date": "d"}, "machine_tag": "x",
                             "trials": 200, "rows": [row]}))
    return p


def test_table_shows_threads_allocation_and_a_peer_that_is_ahead(tmp_path):
    md = results_table.table(_run(tmp_path, torch_ms=8.0, tvm_ms=12.0))
    assert "30.00 ms (2 thr, allocates)" in md and "8.00 ms (2 thr)" in md
    assert "**torch eager** (1.25x ours)" in md
    assert "230 / 200" in md
    assert "torch eager 1.25x faster" in docs.ahead_sentence(_run(tmp_path, torch_ms=8.0, tvm_ms=12.0))
    assert docs.ahead_sentence(_run(tmp_path, torch_ms=11.0, tvm_ms=12.0)).startswith("No peer is ahead")


def test_tvm_counts_as_ahead_when_its_own_timer_beats_ours(tmp_path):
    p = _run(tmp_path, torch_ms=11.0, tvm_ms=12.0)  # side by side: ours 10 ms, TVM 12 ms
    data = json.loads(p.read_text())
    data["rows"][0]["tvm"]["best_seconds"] = 0.008  # planted: TVM's time_evaluator says 8 ms
    p.write_text(json.dumps(data))
    assert "TVM 1.25x faster" in docs.ahead_sentence(p)


def test_docs_page_lists_reports_it_does_not_know_and_places_the_protocol_ones(tmp_path, monkeypatch):
    _run(tmp_path, torch_ms=11.0, tvm_ms=9.0)
    (tmp_path / "efficiency_znver4.md").write_text("# Efficiency protocol\n\nrows\n")
    (tmp_path / "someone_else.md").write_text("# A new report\n\nMeasured 2027-01-01 on Some CPU (2 cores).\n")
    monkeypatch.setattr(docs, "RESULTS", tmp_path)
    page = docs.render()
    assert "**TVM** (1.11x ours)" in page and "TVM 1.11x faster" in page
    eff = page.index("## Search efficiency protocol")
    assert page.index("## Efficiency protocol") > eff
    others = page[page.index("## Other reports"):]
    assert "A new report (Some CPU, 2027-01-01)" in others and "efficiency_znver4" not in others


def test_docs_check_flags_a_stale_page(tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(docs, "RESULTS", tmp_path / "results")
    out = tmp_path / "benchmarks.md"
    out.write_text("hand-edited\n")
    assert docs.main(["--check", "--out", str(out)]) == 1
    assert docs.main(["--out", str(out)]) == 0 and docs.main(["--check", "--out", str(out)]) == 0


def test_results_table_names_a_missing_run():
    with pytest.raises(SystemExit, match="no such run"):
        results_table.resolve("bench_tune_cpu_no_such_machine")
