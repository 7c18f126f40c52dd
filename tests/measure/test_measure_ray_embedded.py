"""RayRunner on an embedded cluster (`ray.init()` here): same results as LocalRunner, no leak."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autosched.compile.types import BuildResult, ErrorCode
from autosched.measure.batch import measure_batch
from autosched.measure.config import RunnerConfig
from tests.support.measure_kernels import AddReference, kernel, measure_input

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(180)]


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def test_embedded_cluster_batch_and_clean_shutdown(tmp_path, monkeypatch) -> None:
    import ray

    # Same auth mode as the loopback-cluster tests: in one process, Ray 2.60 cancels the actors of
    # an auth-disabled cluster joined after a token-auth session, so the file order must not matter.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    from autosched.measure.ray_runner import RayRunner

    assert not ray.is_initialized()
    before = set(_descendants(os.getpid()))
    runner = RayRunner(config=RunnerConfig(number=2, repeat=3, min_repeat_ms=2, timeout=3.0),
                       reference=AddReference(), cache_dir=tmp_path, num_cpus=2)
    try:
        kinds = ["good", "segfault", "hang", "wrong", "compile_error", "good_omp"]
        inputs = [measure_input(k) for k in kinds]
        builds = runner.build_sources([kernel(k, "embedded") for k in kinds])
        seen = []
        results = runner.run(inputs, builds, on_result=lambda i, r: seen.append(i))
        by = dict(zip(kinds, results, strict=True))
        assert sorted(seen) == list(range(len(kinds)))
        assert by["good"].ok and by["good_omp"].ok and by["good"].median > 0
        assert by["segfault"].error_code == ErrorCode.WORKER_CRASHED and "SIGSEGV" in by["segfault"].error_msg
        assert by["hang"].error_code == ErrorCode.RUN_TIMEOUT
        assert by["wrong"].error_code == ErrorCode.WRONG_ANSWER
        assert by["compile_error"].error_code == ErrorCode.COMPILE_ERROR
        node = ray.get_runtime_context().get_node_id()
        assert f"node={node}" in by["good"].worker_id and "actor=" in by["good"].worker_id
        # the build travelled as bytes: the actor ran its own copy, not the builder's file
        Path(builds[0].artifact_path).unlink()
        again = runner.run(inputs[:1], builds[:1])[0]
        assert again.ok
        # a build made elsewhere whose file is gone and whose bytes are unknown is rebuilt there
        orphan = BuildResult("/nonexistent.so", "k_good", builds[0].args, "0" * 64)
        rebuilt = runner.run([measure_input("orphan")], [orphan])[0]
        assert rebuilt.error_code == ErrorCode.INSTANTIATION_ERROR  # the planted input has no schedule
        # measure_batch uses the same object as builder and runner
        assert measure_batch(inputs[:1], _AsBuilder(runner), runner)[0].ok
    finally:
        runner.shutdown()
    assert not ray.is_initialized()
    leaked = [p for p in _descendants(os.getpid()) if p not in before]
    assert leaked == [], f"processes left behind: {leaked}"


class _AsBuilder:
    """measure_batch calls builder.build(inputs); planted kernels come from build_sources."""

    def __init__(self, runner) -> None:
        self.runner = runner

    def build(self, inputs):
        return self.runner.build_sources([kernel("good", "as_builder") for _ in inputs])
