"""LocalBuilder: parallel builds in worker processes; errors and timeouts are results."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from autosched.codegen.source import KernelSource
from autosched.compile import builder as builder_mod
from autosched.compile.builder import LocalBuilder, build_input
from autosched.compile.types import ErrorCode
from tests.support.measure_kernels import kernel, measure_input


@pytest.fixture(scope="module")
def local_builder():
    with LocalBuilder(n_workers=2, timeout=20) as b:
        yield b


def _wrapped(tmp_path: Path, script: str, tag: str) -> KernelSource:
    """A kernel compiled through `gcc -wrapper SCRIPT`: lets a test slow down or kill a build."""
    path = tmp_path / f"wrapper_{tag}.sh"
    path.write_text("#!/bin/sh\n" + script + '\nexec "$@"\n')
    path.chmod(0o755)
    src = kernel("good", tag)
    return KernelSource(src.language, src.code, src.entry, src.args, ("-wrapper", str(path)))


def test_builds_in_parallel_and_reports_compile_errors(local_builder, cache_dir) -> None:
    local_builder.cache_dir = str(cache_dir)
    srcs = [kernel("good", "b1"), kernel("compile_error", "b1"), kernel("wrong", "b1")]
    res = local_builder.build_sources(srcs)
    assert [r.error_code for r in res] == [ErrorCode.NO_ERROR, ErrorCode.COMPILE_ERROR, ErrorCode.NO_ERROR]
    assert Path(res[0].artifact_path).parent == cache_dir
    assert res[0].source_hash == srcs[0].source_hash and res[0].entry == "k_good" and res[0].args == srcs[0].args
    assert "error" in res[1].error_msg and "k_compile_error" in res[1].error_msg
    assert res[1].source_hash == srcs[1].source_hash and res[1].artifact_path is None


def test_artifact_cache_by_source_hash(local_builder, cache_dir) -> None:
    local_builder.cache_dir = str(cache_dir)
    src = kernel("good", "cache")
    first = local_builder.build_sources([src])[0]
    t0 = time.perf_counter()
    again = local_builder.build_sources([src])[0]
    assert again.artifact_path == first.artifact_path and again.build_seconds < first.build_seconds
    assert time.perf_counter() - t0 < 5


@pytest.mark.slow
def test_build_timeout_is_a_result(tmp_path, cache_dir) -> None:
    slow = _wrapped(tmp_path, "sleep 4", "slow")
    with LocalBuilder(n_workers=2, timeout=1.0, cache_dir=cache_dir) as b:
        res = b.build_sources([slow, kernel("good", "next_to_slow")])
    assert res[0].error_code == ErrorCode.BUILD_TIMEOUT and "past" in res[0].error_msg
    assert res[1].error_code == ErrorCode.NO_ERROR


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.mark.slow
def test_build_timeout_stops_the_whole_compiler(tmp_path, cache_dir) -> None:
    # the compiler driver's child (here the wrapper gcc runs, standing for cc1) must not outlive the
    # timeout: an orphaned cc1 of a huge kernel otherwise runs on for minutes beside the measurements
    pidfile = tmp_path / "child.pid"
    slow = _wrapped(tmp_path, f"echo $$ > {pidfile}; sleep 60", "orphan")
    with LocalBuilder(n_workers=1, timeout=1.5, cache_dir=cache_dir) as b:
        res = b.build_sources([slow])
    assert res[0].error_code == ErrorCode.BUILD_TIMEOUT
    pid = int(pidfile.read_text())
    deadline = time.perf_counter() + 5
    while _alive(pid) and time.perf_counter() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), f"compiler child {pid} outlived the build timeout"


@pytest.mark.slow
def test_crashed_build_worker_is_a_result_and_neighbours_build(tmp_path, cache_dir) -> None:
    # the wrapper kills its grandparent: the builder's worker process that ran the compiler
    killer = _wrapped(tmp_path, "kill -9 $(cut -d' ' -f4 /proc/$PPID/stat)", "killer")
    good = [kernel("good", f"crash_neighbour{i}") for i in range(3)]
    with LocalBuilder(n_workers=2, timeout=20, cache_dir=cache_dir) as b:
        res = b.build_sources([good[0], killer, good[1], good[2]])
        assert res[1].error_code == ErrorCode.WORKER_CRASHED and "died" in res[1].error_msg
        assert all(res[i].error_code == ErrorCode.NO_ERROR for i in (0, 2, 3))
        assert b.build_sources([kernel("good", "after_crash")])[0].error_code == ErrorCode.NO_ERROR


def test_build_input_maps_render_failures(monkeypatch, cache_dir) -> None:
    class FakeScheduleError(ValueError):
        pass

    def broken(inp):
        raise FakeScheduleError("step Split: stage 'C' has no loop 'k'")

    monkeypatch.setattr(builder_mod, "render", broken)
    res = build_input(measure_input("x"), str(cache_dir), 10)
    assert res.error_code == ErrorCode.INSTANTIATION_ERROR and "no loop 'k'" in res.error_msg

    def slow(inp):
        time.sleep(5)

    monkeypatch.setattr(builder_mod, "render", slow)
    t0 = time.perf_counter()
    res = build_input(measure_input("x"), str(cache_dir), 0.3)
    assert res.error_code == ErrorCode.BUILD_TIMEOUT and time.perf_counter() - t0 < 3

    monkeypatch.setattr(builder_mod, "render", lambda inp: kernel("good", "rendered"))
    res = build_input(measure_input("x"), str(cache_dir), 10)
    assert res.error_code == ErrorCode.NO_ERROR and Path(res.artifact_path).exists()


def test_unknown_language_is_a_compile_error(local_builder) -> None:
    src = kernel("good", "cuda")
    res = local_builder.build_sources([KernelSource("cuda", src.code, src.entry, src.args)])[0]
    assert res.error_code == ErrorCode.COMPILE_ERROR and "'cuda'" in res.error_msg


def test_bogus_measure_input_is_an_instantiation_error(local_builder) -> None:
    # whatever state the lowering stack is in, a workload that is not a DAG cannot be rendered
    res = local_builder.build([measure_input("bogus")])[0]
    assert res.error_code == ErrorCode.INSTANTIATION_ERROR and res.error_msg
