"""RayRunner on a real two-node cluster on loopback: runs land on both nodes, a node dies.

The cluster is two `ray start` nodes (head "node_a"; worker "node_b" declaring a fake GPU),
each in its own session so that stopping a node kills exactly its pids (see loopback_cluster).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from autosched.compile.types import BuildResult, ErrorCode
from autosched.measure.config import RunnerConfig
from tests.support.gpu_helpers import require_nvcc
from tests.support.loopback_cluster import LoopbackCluster, running_cluster
from tests.support.measure_kernels import AddReference, cuda_kernel, kernel, measure_input, spin_kernel

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(240)]


def _node(result) -> str:
    return result.worker_id.split("node=")[1].split()[0] if "node=" in result.worker_id else ""


@pytest.fixture(scope="module")
def cluster():
    def start(c: LoopbackCluster) -> None:
        c.start_head("node_a")
        c.start_worker("node_b", num_gpus=1)

    with running_cluster(start) as c:
        yield c


@pytest.fixture(scope="module")
def runner(cluster, tmp_path_factory):
    import ray

    from autosched.measure.ray_runner import RayRunner

    r = RayRunner(cluster.address, RunnerConfig(number=1, repeat=3, min_repeat_ms=40, timeout=5.0),
                  reference=AddReference(), cache_dir=tmp_path_factory.mktemp("kernels"))
    try:
        deadline = time.monotonic() + 30
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            assert time.monotonic() < deadline, "node_b never joined"
            time.sleep(0.2)
        yield r
    finally:
        r.shutdown()


def _node_ids() -> dict[str, str]:
    import ray

    return {name: n["NodeID"] for n in ray.nodes() if n["Alive"] for name in ("node_a", "node_b")
            if name in n["Resources"]}


def test_runs_land_on_both_nodes_and_gpus_get_actors(runner) -> None:
    t0 = time.monotonic()
    ids = _node_ids()
    devices = runner.devices(("cpu", "gpu"))
    cpu_nodes = {d["node_id"] for d in devices if d["kind"] == "cpu"}
    gpus = [d for d in devices if d["kind"] == "gpu"]
    assert cpu_nodes == set(ids.values())
    assert len(gpus) == 1 and gpus[0]["node_id"] == ids["node_b"] and gpus[0]["gpu_ids"] == ["0"]

    n = 8
    builds = runner.build_sources([spin_kernel(500, f"both{i}") for i in range(n)] + [kernel("segfault", "c2")])
    results = runner.run([measure_input(f"both{i}") for i in range(n + 1)], builds)
    assert all(r.ok and r.median >= 500e-6 for r in results[:n]), [r.error_msg for r in results]
    assert results[n].error_code == ErrorCode.WORKER_CRASHED and "SIGSEGV" in results[n].error_msg
    assert {_node(r) for r in results[:n]} == set(ids.values())  # both nodes measured
    assert all(r.host and "cpu:" in r.device for r in results)

    # a non-C build whose bytes are no artifact folder: reported by the GPU actor (node_b), not fatal
    fake = BuildResult(builds[0].artifact_path, "k_spin", builds[0].args, "f" * 64, language="cuda")
    res = runner.run([measure_input("gpu")], [fake])[0]
    assert _node(res) == ids["node_b"] and "cpu:" not in res.device
    assert res.error_code == ErrorCode.RUNTIME_ERROR and "unpack" in res.error_msg, res.error_msg
    assert time.monotonic() - t0 < 90


def test_cuda_sources_build_on_the_gpu_node_and_run_in_its_gpu_sandbox(runner, tmp_path) -> None:
    """The GPU path without a GPU: cuda sources go to the GPU builder on the (fake) GPU node, the
    artifact folder travels as a tar, and the GPU actor runs it in its GPU kernel process, which
    has no CUDA here: each candidate comes back as an error result, the actor survives them."""
    require_nvcc()  # CUDA C without NVRTC; under CI a missing nvcc fails the test
    ids = _node_ids()
    srcs = [cuda_kernel("good", "ray"), cuda_kernel("compile_error", "ray")]
    builds = runner.build_sources(srcs)
    assert builds[0].error_code == ErrorCode.NO_ERROR, builds[0].error_msg
    assert builds[1].error_code == ErrorCode.COMPILE_ERROR and "nvcc" in builds[1].error_msg
    assert runner.build_nodes == [ids["node_b"]] * 2  # soft affinity: the node that has the GPU
    assert builds[0].language == "cuda" and Path(builds[0].artifact_path, "kernel.cubin").exists()
    Path(builds[0].artifact_path, "kernel.cubin").unlink()  # the actor must use the shipped copy
    results = runner.run([measure_input("cuda0"), measure_input("cuda1"), measure_input("c")],
                         [builds[0], builds[1], runner.build_sources([kernel("good", "after_cuda")])[0]])
    gpu, failed, cpu = results
    assert _node(gpu) == ids["node_b"] and "kernel-pid=" in gpu.worker_id and "cpu:" not in gpu.device
    assert gpu.error_code in (ErrorCode.RUNTIME_ERROR, ErrorCode.WORKER_CRASHED), gpu.error_msg
    assert "no executor" not in gpu.error_msg  # the GPU kernel process, not the C one, ran it
    print("GPU kernel process without CUDA:", gpu.error_msg[:300])
    assert failed.error_code == ErrorCode.COMPILE_ERROR and cpu.ok
    shipped = [p for p in Path(runner.cache_dir, "shipped").iterdir() if p.name.startswith("cuda-")]
    assert [sorted(f.name for f in p.iterdir()) for p in shipped] == [["kernel.cu", "kernel.cubin", "launch.json"]]
    again = runner.run([measure_input("cuda2")], builds[:1])[0]  # the actor lived through it
    assert _node(again) == ids["node_b"] and again.error_code == gpu.error_code


def test_killing_a_node_mid_batch_still_gives_every_result(cluster, runner) -> None:
    t0 = time.monotonic()
    ids = _node_ids()
    n = 12
    builds = runner.build_sources([spin_kernel(1000, f"kill{i}") for i in range(n)])
    assert all(b.error_code == ErrorCode.NO_ERROR for b in builds)
    killed: list[int] = []

    def on_result(i, res) -> None:
        if not killed and _node(res) == ids["node_b"]:
            killed.extend(cluster.kill_node("node_b"))  # by pid, mid-batch

    results = runner.run([measure_input(f"kill{i}") for i in range(n)], builds, on_result=on_result)
    assert killed, "node_b never measured anything before the kill"
    assert len(results) == n
    assert all(r.ok or r.error_code == ErrorCode.WORKER_CRASHED for r in results), [r.error_msg for r in results]
    # the calls lost with node_b were retried on node_a (retries left: max_retries=2)
    assert runner.last_retries >= 1 and all(r.ok for r in results), [r.error_msg for r in results]
    assert any(_node(r) == ids["node_a"] for r in results)
    assert time.monotonic() - t0 < 90
    # the next batch runs on the surviving node only
    again = runner.run([measure_input("after")], builds[:1])[0]
    assert again.ok and _node(again) == ids["node_a"]
