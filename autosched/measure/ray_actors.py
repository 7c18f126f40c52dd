"""What runs inside Ray workers: the build task and the device actor.

Plain functions and classes (`ray_runner.py` wraps them with `ray.remote`), so this module
imports without starting Ray. Inputs arrive as JSON text, never as objects that would need a
registry re-imported on the remote node. A build ships the compiled library's BYTES back with
its result, because the run may happen on another node whose disk does not have the file; the
actor writes them into its own cache and, failing all else, rebuilds from the MeasureInput.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections import OrderedDict
from pathlib import Path

from autosched.codegen.source import KernelSource
from autosched.measure.builder import build_input, build_source
from autosched.measure.c_compiler import default_cache_dir
from autosched.measure.config import RunnerConfig
from autosched.measure.device_lock import default_lock_path
from autosched.measure.hostinfo import cpu_device, hostname
from autosched.measure.reference import Reference
from autosched.measure.runner import DeviceWorker, failed_build_result
from autosched.measure.types import BuildResult, ErrorCode, MeasureInput, MeasureResult


def input_to_json(inp: MeasureInput) -> str:
    return json.dumps(dataclasses.asdict(inp))


def input_from_json(text: str) -> MeasureInput:
    return MeasureInput(**json.loads(text))


def current_node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def build_task(payload: str | KernelSource, cache_dir: str | None, timeout: float
               ) -> tuple[BuildResult, bytes | None, str]:
    """Ray task: build one candidate (MeasureInput JSON, or an already rendered KernelSource,
    a plain dataclass); returns (result, library bytes or None, node id)."""
    if isinstance(payload, str):
        res = build_input(input_from_json(payload), cache_dir, timeout)
    else:
        res = build_source(payload, cache_dir, timeout)
    data = None
    if res.error_code == ErrorCode.NO_ERROR and res.artifact_path:
        data = Path(res.artifact_path).read_bytes()
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
        if kind == "gpu":
            device, lock = f"gpu: {','.join(self.gpu_ids)}", default_lock_path(f"gpu{'_'.join(self.gpu_ids)}")
        else:
            device, lock = cpu_device(), default_lock_path("cpu")
        self.worker = DeviceWorker(device=device, lock_path=lock,
                                   worker_id=f"ray node={self.node_id} actor={self.actor_id}")
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
        """A local path to the library: shipped bytes, the builder's file, or a rebuild here."""
        target = self.shipped / f"{build.source_hash}.so"
        if target.exists():
            return str(target)
        if lib is not None:
            fd, tmp = tempfile.mkstemp(dir=self.shipped, suffix=".part")
            with os.fdopen(fd, "wb") as f:
                f.write(lib)
            os.replace(tmp, target)  # atomic: concurrent actors of one host both succeed
            return str(target)
        if build.artifact_path and Path(build.artifact_path).exists():
            return build.artifact_path
        rebuilt = build_input(input_from_json(inp_json), self.build_dir, self.build_timeout)
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
        path = self._materialize(inp_json, build, lib)
        if isinstance(path, BuildResult):
            return failed_build_result(path, host=hostname(), device=self.worker.device)
        return self.worker.measure(build, config, ref_key, self._reference(ref_key, ref_box), artifact_path=path)

    def close(self) -> None:
        self.worker.close()
