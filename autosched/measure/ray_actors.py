"""What runs inside Ray workers: the build task and the device actor.

Plain functions and classes (`ray_runner.py` wraps them with `ray.remote`), so this module
imports without starting Ray. Inputs arrive as JSON text, never as objects that would need a
registry re-imported on the remote node. A build ships the compiled artifact's BYTES back with
its result, because the run may happen on another node whose disk does not have the file; the
actor writes them into its own cache and, failing all else, rebuilds from the MeasureInput.

C kernels are one shared library (shipped as its bytes, run by `KernelSandbox`); cuda/triton
kernels are an artifact FOLDER (cubin or kernel.py + launch.json, see `gpu_compile.py`), built by
the GPU builder, shipped as an uncompressed tar and run by the GPU sandbox (`GpuSandbox`), whose
kernel process absorbs faults (an illegal address is a RUNTIME_ERROR, not a dead actor).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

from autosched.codegen.source import KernelSource
from autosched.compile.builder import build_input, build_source
from autosched.compile.c_compiler import default_cache_dir
from autosched.compile.types import BuildResult, ErrorCode, MeasureInput
from autosched.measure.config import RunnerConfig
from autosched.measure.device_lock import default_lock_path
from autosched.measure.local_runner import DeviceWorker, failed_build_result
from autosched.measure.reference import Reference
from autosched.measure.types import MeasureResult
from autosched.target.host import cpu_device, hostname


def input_to_json(inp: MeasureInput) -> str:
    return json.dumps(dataclasses.asdict(inp))


def input_from_json(text: str) -> MeasureInput:
    return MeasureInput(**json.loads(text))


def current_node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


GPU_LANGUAGES = ("cuda", "triton")


def input_kind(inp: MeasureInput) -> str:
    """"gpu" for inputs of the cuda/triton targets (target key 'kind|device|cores'), else "cpu"."""
    return "gpu" if inp.target.split("|", 1)[0].strip() in GPU_LANGUAGES else "cpu"


def pack_artifact(path: str | Path) -> bytes:
    """The bytes that carry an artifact across nodes: a file's own bytes, a folder as a tar."""
    path = Path(path)
    if not path.is_dir():
        return path.read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:  # cubins barely compress: no gzip
        for f in sorted(path.iterdir()):
            tar.add(f, arcname=f.name, recursive=False)
    return buf.getvalue()


def unpack_artifact(data: bytes, target: Path, folder: bool) -> Path:
    """Write shipped bytes to `target` (a folder if `folder`: a tar of a GPU artifact; a file
    otherwise) atomically: two actors of one host unpacking one artifact end with one copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if not folder:
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
        return target
    tmp_dir = Path(tempfile.mkdtemp(dir=target.parent, prefix=target.name + ".", suffix=".part"))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            tar.extractall(tmp_dir, filter="data")  # plain files only, nothing outside tmp_dir
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    try:
        os.rename(tmp_dir, target)
    except OSError:  # published by another actor first
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return target


def _build_any(payload: str | KernelSource, cache_dir: str | None, timeout: float) -> BuildResult:
    if isinstance(payload, str):
        inp = input_from_json(payload)
        if input_kind(inp) == "gpu":
            from autosched.measure.gpu_runner import build_gpu_input

            return build_gpu_input(inp, cache_dir, timeout)
        return build_input(inp, cache_dir, timeout)
    if payload.language in GPU_LANGUAGES:
        from autosched.measure.gpu_runner import build_gpu_source

        return build_gpu_source(payload, cache_dir, timeout)
    return build_source(payload, cache_dir, timeout)


def build_task(payload: str | KernelSource, cache_dir: str | None, timeout: float
               ) -> tuple[BuildResult, bytes | None, str]:
    """Ray task: build one candidate (MeasureInput JSON, or an already rendered KernelSource,
    a plain dataclass) with the builder of its target; returns (result, artifact bytes or None,
    node id)."""
    res = _build_any(payload, cache_dir, timeout)
    data = None
    if res.error_code == ErrorCode.NO_ERROR and res.artifact_path:
        data = pack_artifact(res.artifact_path)
    return res, data, current_node_id()


class DeviceActor:
    """Owns one device of one node ("cpu": the node's CPU; "gpu": one GPU Ray assigned)."""

    def __init__(self, kind: str, cache_dir: str | None, build_timeout: float, max_refs: int = 8) -> None:
        import ray

        ctx = ray.get_runtime_context()
        self.kind = kind
        self.node_id = ctx.get_node_id()
        self.actor_id = ctx.get_actor_id()
        self.gpu_ids = [str(g) for g in ray.get_gpu_ids()] if kind == "gpu" else []
        worker_id = f"ray node={self.node_id} actor={self.actor_id}"
        if kind == "gpu":
            from autosched.measure.gpu_runner import GpuDeviceWorker

            # Ray narrowed CUDA_VISIBLE_DEVICES to this actor's GPU: index 0 in the kernel process
            phys = self.gpu_ids[0] if self.gpu_ids else "0"
            self.worker: DeviceWorker = GpuDeviceWorker(0, worker_id=worker_id, physical_id=phys)
        else:
            self.worker = DeviceWorker(device=cpu_device(), lock_path=default_lock_path("cpu"), worker_id=worker_id)
        base = Path(cache_dir) if cache_dir else default_cache_dir()
        self.build_dir = str(base)
        self.shipped = base / "shipped"
        self.shipped.mkdir(parents=True, exist_ok=True)
        self.build_timeout = build_timeout
        self.max_refs = max_refs
        self._refs: OrderedDict[str, Reference] = OrderedDict()

    def info(self) -> dict:
        return {"kind": self.kind, "node_id": self.node_id, "actor_id": self.actor_id, "host": hostname(),
                "device": self.worker.device, "pid": os.getpid(), "gpu_ids": self.gpu_ids}

    def _materialize(self, inp_json: str, build: BuildResult, lib: bytes | None) -> str | BuildResult:
        """A local path to the artifact: shipped bytes, the builder's file, or a rebuild here."""
        folder = build.language != "c"
        target = self.shipped / (f"{build.language}-{build.source_hash}" if folder else f"{build.source_hash}.so")
        if target.exists():
            return str(target)
        if lib is not None:
            return str(unpack_artifact(lib, target, folder))
        if build.artifact_path and Path(build.artifact_path).exists():
            return build.artifact_path
        rebuilt = _build_any(inp_json, self.build_dir, self.build_timeout)
        return rebuilt if rebuilt.error_code != ErrorCode.NO_ERROR else str(rebuilt.artifact_path)

    def _reference(self, key: str | None, box: list | None) -> Reference | None:
        if key is None:
            return None
        if key in self._refs:
            self._refs.move_to_end(key)
            return self._refs[key]
        if not box:
            return None
        import ray

        ref = ray.get(box[0])
        self._refs[key] = ref
        while len(self._refs) > self.max_refs:
            self._refs.popitem(last=False)
        return ref

    def measure(self, inp_json: str, build: BuildResult, lib: bytes | None, config: RunnerConfig,
                ref_key: str | None, ref_box: list | None) -> MeasureResult:
        try:
            path = self._materialize(inp_json, build, lib)
        except (tarfile.TarError, OSError) as exc:  # bytes that are not this kind of artifact
            return MeasureResult((), ErrorCode.RUNTIME_ERROR, f"cannot unpack the shipped artifact: {exc}",
                                 build.build_seconds, 0.0, hostname(), self.worker.device, self.worker.worker_id,
                                 time.time())
        if isinstance(path, BuildResult):
            return failed_build_result(path, host=hostname(), device=self.worker.device)
        return self.worker.measure(build, config, ref_key, self._reference(ref_key, ref_box), artifact_path=path)

    def close(self) -> None:
        self.worker.close()
