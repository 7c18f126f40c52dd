"""LocalRunner on planted kernels: every failure is a named result; the good ones are timed."""

from __future__ import annotations

import os
import socket
import time

import numpy as np
import pytest

from autosched.codegen.source import ArgSpec, KernelSource
from autosched.compile.builder import LocalBuilder
from autosched.compile.types import BuildResult, ErrorCode
from autosched.measure.config import RunnerConfig
from autosched.measure.local_runner import LocalRunner
from autosched.measure.sandbox import describe_exit
from autosched.target.host import cpu_model
from tests.support.measure_kernels import AddReference, kernel, measure_input, spin_kernel

FAST = RunnerConfig(number=2, repeat=3, min_repeat_ms=5, timeout=3.0)


@pytest.fixture(scope="module")
def builder(tmp_path_factory):
    with LocalBuilder(n_workers=2, timeout=30, cache_dir=tmp_path_factory.mktemp("kernels")) as b:
        yield b


@pytest.fixture()
def runner():
    with LocalRunner(FAST, AddReference()) as r:
        yield r


def _batch(builder, runner, kinds: list[str], tag: str):
    builds = builder.build_sources([kernel(k, tag) for k in kinds])
    results = runner.run([measure_input(f"{tag}{i}") for i in range(len(kinds))], builds)
    return dict(zip(kinds, results, strict=True)), results


@pytest.mark.slow
def test_planted_batch_every_failure_named_good_ones_measured(builder, runner) -> None:
    kinds = ["good", "segfault", "abort", "hang", "good_omp", "wrong", "skips_last",
             "compile_error", "off_by_tiny"]
    t0 = time.perf_counter()
    by, results = _batch(builder, runner, kinds, "batch")
    assert len(results) == len(kinds)
    for k in ("good", "good_omp", "off_by_tiny"):
        assert by[k].ok and by[k].median > 0 and len(by[k].costs) == FAST.repeat, (k, by[k])
    assert by["segfault"].error_code == ErrorCode.WORKER_CRASHED and "SIGSEGV" in by["segfault"].error_msg
    assert by["abort"].error_code == ErrorCode.WORKER_CRASHED and "SIGABRT" in by["abort"].error_msg
    assert "planted kernel gives up" in by["abort"].error_msg  # the kernel's stderr is quoted
    assert by["hang"].error_code == ErrorCode.RUN_TIMEOUT and "3 s" in by["hang"].error_msg
    assert by["wrong"].error_code == ErrorCode.WRONG_ANSWER and "max abs err" in by["wrong"].error_msg
    assert by["skips_last"].error_code == ErrorCode.WRONG_ANSWER and "NaN" in by["skips_last"].error_msg
    assert by["compile_error"].error_code == ErrorCode.COMPILE_ERROR and "error" in by["compile_error"].error_msg
    for r in results:
        assert (r.median == float("inf")) != r.ok
    assert time.perf_counter() - t0 < 60
    ok = by["good"]
    assert ok.host == socket.gethostname() and cpu_model() in ok.device
    assert f"local:{os.getpid()}" in ok.worker_id and "kernel-pid=" in ok.worker_id
    assert ok.timestamp > 0 and ok.run_seconds > 0 and ok.build_seconds > 0
    # crashes respawned the kernel process: the good kernel after them ran in another one
    assert by["good"].worker_id != by["good_omp"].worker_id
    assert runner.worker.sandbox.restarts >= 3


def test_candidates_share_buffers_but_each_gets_fresh_inputs_and_poisoned_outputs(builder, runner) -> None:
    """One kernel process runs every candidate of a workload on the same memory (steady timings);
    an input ruined by one candidate is restored and an output it wrote is poisoned again."""
    by, _ = _batch(builder, runner, ["scribbles_input", "good_omp", "skips_last", "good"], "shared")
    assert by["scribbles_input"].ok and by["good_omp"].ok and by["good"].ok
    assert by["skips_last"].error_code == ErrorCode.WRONG_ANSWER and "NaN" in by["skips_last"].error_msg
    assert len({r.worker_id for r in by.values()}) == 1  # one kernel process: the buffers were shared


def test_arg_buffers_are_kept_per_argument_list() -> None:
    from autosched.measure.executor import ArgBuffers

    bufs = ArgBuffers(max_sets=2)
    small = (ArgSpec("A", (8,), "float32", False), ArgSpec("C", (8,), "float32", True))
    big = (ArgSpec("A", (16,), "float32", False), ArgSpec("C", (16,), "float32", True))
    first = bufs.get(small)
    assert [b.ctypes.data for b in bufs.get(small)] == [b.ctypes.data for b in first]
    assert all(b.ctypes.data % 64 == 0 for b in first) and first[0].shape == (8,)
    assert bufs.get(big)[0].shape == (16,)
    bufs.get((ArgSpec("X", (4,), "float64", False),))  # a third list evicts the least recent (small)
    assert bufs.get(small) is not first


def test_reference_computed_once_per_workload(builder) -> None:
    ref = AddReference()
    with LocalRunner(FAST, ref) as r:
        builds = builder.build_sources([kernel("good", f"once{i}") for i in range(3)])
        res = r.run([measure_input(f"once{i}") for i in range(3)], builds)
    assert all(x.ok for x in res) and ref.calls == 1


def test_check_is_what_catches_wrong_answers(builder) -> None:
    builds = builder.build_sources([kernel("wrong", "nocheck")])
    with LocalRunner(RunnerConfig(number=1, repeat=1, min_repeat_ms=0, enable_check=False)) as r:
        res = r.run([measure_input("nocheck")], builds)[0]
    assert res.ok and res.median > 0


def test_reference_failure_is_a_result(builder) -> None:
    def broken(inp, args):
        raise KeyError("no such workload")

    builds = builder.build_sources([kernel("good", "badref")])
    with LocalRunner(FAST, broken) as r:
        res = r.run([measure_input("badref")], builds)[0]
    assert res.error_code == ErrorCode.RUNTIME_ERROR and "no such workload" in res.error_msg


def test_missing_entry_and_missing_library_are_runtime_errors(builder, runner) -> None:
    good = builder.build_sources([kernel("good", "entry")])[0]
    bad_entry = BuildResult(good.artifact_path, "k_nope", good.args, good.source_hash)
    no_file = BuildResult("/nonexistent/lib.so", "k_good", good.args, "deadbeef")
    res = runner.run([measure_input("e1"), measure_input("e2"), measure_input("e3")], [bad_entry, no_file, good])
    assert res[0].error_code == ErrorCode.RUNTIME_ERROR and "k_nope" in res[0].error_msg
    assert res[1].error_code == ErrorCode.RUNTIME_ERROR and "/nonexistent/lib.so" in res[1].error_msg
    assert res[2].ok


def test_build_errors_pass_through(runner) -> None:
    failed = BuildResult(None, "", (), "", ErrorCode.BUILD_TIMEOUT, "too slow", 2.5)
    res = runner.run([measure_input("bt")], [failed])[0]
    assert res.error_code == ErrorCode.BUILD_TIMEOUT and res.error_msg == "too slow" and res.build_seconds == 2.5
    with pytest.raises(ValueError):
        runner.run([measure_input("bt")], [])


@pytest.mark.slow
def test_spin_kernel_costs_are_plausible_and_number_adapts(builder) -> None:
    build = builder.build_sources([spin_kernel(200.0, "plausible")])[0]
    with LocalRunner(RunnerConfig(number=2, repeat=4, min_repeat_ms=0, timeout=10), AddReference()) as r:
        res = r.run([measure_input("spin")], [build])[0]
    assert res.ok and len(res.costs) == 4
    assert 190e-6 <= res.median < 2e-3
    with LocalRunner(RunnerConfig(number=1, repeat=2, min_repeat_ms=20, timeout=10), AddReference()) as r:
        t0 = time.perf_counter()
        res = r.run([measure_input("spin")], [build])[0]
        took = time.perf_counter() - t0
    assert res.ok and 190e-6 <= res.median < 2e-3
    assert took >= 2 * 0.020  # two repeats of at least min_repeat_ms each


def test_flush_cache_runs(builder) -> None:
    build = builder.build_sources([kernel("good", "flush")])[0]
    cfg = RunnerConfig(number=1, repeat=3, min_repeat_ms=0, flush_cache=True)
    with LocalRunner(cfg, AddReference()) as r:
        res = r.run([measure_input("flush")], [build])[0]
    assert res.ok and len(res.costs) == 3


@pytest.mark.slow
def test_other_dtypes_are_fed_and_checked(builder) -> None:
    code = ("void k_mixed(const double* X, const int* Y, double* Z, int* W) {\n"
            "  for (int i = 0; i < 64; ++i) { Z[i] = 2.0 * X[i]; W[i] = Y[i] + 1; }\n}\n")
    args = (ArgSpec("X", (8, 8), "float64", False), ArgSpec("Y", (64,), "int32", False),
            ArgSpec("Z", (8, 8), "float64", True), ArgSpec("W", (64,), "int32", True))
    build = builder.build_sources([KernelSource("c", code, "k_mixed", args)])[0]
    x = np.random.default_rng(1).standard_normal((8, 8))
    y = np.arange(64, dtype=np.int32)

    def ref(inp, a):
        return {"X": x, "Y": y}, {"Z": 2 * x, "W": y + 1}

    def off_by_one(inp, a):
        return {"X": x, "Y": y}, {"Z": 2 * x, "W": y + 2}

    with LocalRunner(FAST, ref) as r:
        assert r.run([measure_input("mixed")], [build])[0].ok
    with LocalRunner(FAST, off_by_one) as r:
        res = r.run([measure_input("mixed")], [build])[0]
    assert res.error_code == ErrorCode.WRONG_ANSWER and "'W'" in res.error_msg and "int32" in res.error_msg


def test_describe_exit() -> None:
    assert "SIGKILL" in describe_exit(-9) and "status 3" in describe_exit(3)
