"""The GPU artifact cache keys on the launch and the arguments, not the source text alone: one
unmasked Triton element-wise kernel text serves every size (the size is only in the grid), and a
device run once handed gelu(4096) the cached launch of gelu(64M)."""

from __future__ import annotations

import json

import autosched as asc
from autosched.compile.gpu_compile import artifact_dir, compile_triton
from autosched.schedule.schedule import Schedule
from autosched.space import gpu_templates as gt
from autosched.workload import Workload


def _gelu_source(n: int):
    w = Workload.create("gelu", n)
    src, _ = asc.render(gt.triton_elementwise(Schedule(w.dag), 1024), w.tensors(), "triton")
    return src


def test_same_text_other_size_gets_its_own_artifact(tmp_path):
    small, big = _gelu_source(4096), _gelu_source(1 << 20)
    assert small.code == big.code and small.source_hash == big.source_hash  # the case the key must separate
    assert artifact_dir(small, tmp_path) != artifact_dir(big, tmp_path)
    assert artifact_dir(small, tmp_path) == artifact_dir(_gelu_source(4096), tmp_path)
    for src, programs in ((big, 1024), (small, 4)):
        meta = json.loads((compile_triton(src, tmp_path, aot=False) / "launch.json").read_text())
        assert meta["launch"]["grid"][0] == programs and meta["args"][0]["shape"] == list(src.args[0].shape)


def test_gpu_build_result_carries_the_artifact_key(tmp_path):
    """BuildResult.source_hash of a GPU build is the artifact's key, so caches of shipped artifacts
    (the Ray runner's, its actors' unpacked folders) tell the two sizes apart too."""
    from autosched.compile.gpu_compile import artifact_key
    from autosched.measure.gpu_runner import build_gpu_source

    small, big = _gelu_source(4096), _gelu_source(1 << 20)
    res = [build_gpu_source(src, str(tmp_path)) for src in (small, big)]
    assert all(r.artifact_path for r in res), [r.error_msg for r in res]
    assert [r.source_hash for r in res] == [artifact_key(small), artifact_key(big)]
    assert res[0].source_hash != res[1].source_hash and res[0].artifact_path != res[1].artifact_path
