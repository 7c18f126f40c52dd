"""What Ray build tasks ship and actors unpack, without Ray: C libraries as their bytes, GPU
artifact folders as a tar; and which builder a candidate's target picks."""

from __future__ import annotations

import json
import shutil
import tarfile

import pytest

from autosched.compile.types import ErrorCode, MeasureInput
from autosched.measure.ray_actors import _build_any, input_kind, input_to_json, pack_artifact, unpack_artifact
from tests.support.measure_kernels import cuda_kernel, kernel, measure_input


def test_folders_travel_as_tar_and_files_as_bytes(tmp_path) -> None:
    art = tmp_path / "cuda-abc"
    art.mkdir()
    (art / "kernel.cubin").write_bytes(bytes(range(256)) * 4)
    (art / "launch.json").write_text('{"entry": "k"}')
    data = pack_artifact(art)
    out = unpack_artifact(data, tmp_path / "shipped" / "cuda-abc", folder=True)
    assert sorted(p.name for p in out.iterdir()) == ["kernel.cubin", "launch.json"]
    assert (out / "kernel.cubin").read_bytes() == (art / "kernel.cubin").read_bytes()
    # unpacking the same artifact again (a second actor of the host) keeps one complete copy
    assert unpack_artifact(data, out, folder=True) == out
    assert [p.name for p in out.parent.iterdir()] == ["cuda-abc"]
    lib = tmp_path / "k.so"
    lib.write_bytes(b"\x7fELF...")
    assert pack_artifact(lib) == b"\x7fELF..."
    assert unpack_artifact(b"\x7fELF...", tmp_path / "shipped" / "h.so", folder=False).read_bytes() == b"\x7fELF..."
    with pytest.raises(tarfile.TarError):
        unpack_artifact(b"\x7fELF...", tmp_path / "shipped" / "cuda-bad", folder=True)
    assert sorted(p.name for p in (tmp_path / "shipped").iterdir()) == ["cuda-abc", "h.so"]  # nothing half-made


def test_tar_members_cannot_escape_the_artifact_folder(tmp_path) -> None:
    evil = tmp_path / "evil.tar"
    (tmp_path / "x").write_text("x")
    with tarfile.open(evil, "w") as tar:
        tar.add(tmp_path / "x", arcname="../outside")
    with pytest.raises(tarfile.TarError):
        unpack_artifact(evil.read_bytes(), tmp_path / "shipped" / "cuda-evil", folder=True)
    assert not (tmp_path / "shipped" / "outside").exists() and not list((tmp_path / "shipped").iterdir())


def test_the_target_picks_the_builder(tmp_path) -> None:
    assert input_kind(measure_input("a")) == "cpu"
    assert input_kind(MeasureInput("k", "{}", "cuda|NVIDIA H200|0", "[]")) == "gpu"
    assert input_kind(MeasureInput("k", "{}", "triton", "[]")) == "gpu"
    assert _build_any(kernel("good", "any"), str(tmp_path), 30.0).language == "c"
    if shutil.which("nvcc"):
        res = _build_any(cuda_kernel("good", "any"), str(tmp_path), 60.0)
        assert res.error_code == ErrorCode.NO_ERROR and res.language == "cuda", res.error_msg
        assert {p.name for p in (tmp_path / res.artifact_path).iterdir()} >= {"kernel.cubin", "launch.json"}
        # a cuda-target MeasureInput is rendered and compiled by the GPU builder, not the C one
        from autosched.schedule.schedule import Schedule
        from autosched.space import gpu_templates as gt
        from autosched.workload import Workload

        w = Workload.create("gelu", 1000)
        steps = json.dumps(gt.cuda_elementwise(Schedule(w.dag), 128, 2).steps_json())
        built = _build_any(input_to_json(MeasureInput(w.key, w.to_json(), "cuda|x|0", steps)), str(tmp_path), 60.0)
        assert built.error_code == ErrorCode.NO_ERROR and built.language == "cuda", built.error_msg
