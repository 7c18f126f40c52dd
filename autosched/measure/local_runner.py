"""`LocalRunner`: measure built candidates on this machine's CPU, one timed run at a time.

The runner (tuner side) computes the reference once per workload, hands each candidate to a
`DeviceWorker`, and turns every outcome into a `MeasureResult`. A `DeviceWorker` owns one
device: a kernel process (`KernelSandbox`) plus a host-wide device lock, so kernels never run
in the tuner's process and timed runs never overlap on the device, not even across tuners.
Ray actors reuse `DeviceWorker` unchanged (see `ray_runner.py`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from autosched.compile.types import BuildResult, ErrorCode, MeasureInput
from autosched.measure.config import RunnerConfig
from autosched.measure.device_lock import DeviceLock, default_lock_path
from autosched.measure.executor import KernelCall
from autosched.measure.reference import (
    DagReferenceProvider,
    Reference,
    ReferenceCache,
    ReferenceProvider,
)
from autosched.measure.sandbox import KernelSandbox
from autosched.measure.types import MeasureResult
from autosched.target.host import cpu_device, hostname

__all__ = ["DeviceWorker", "LocalRunner", "RunnerConfig", "failed_build_result", "reference_error_result"]


def failed_build_result(build: BuildResult, *, host: str = "", device: str = "") -> MeasureResult:
    """A build error carried over into a MeasureResult (no device time spent)."""
    return MeasureResult((), build.error_code, build.error_msg, build.build_seconds, 0.0,
                         host, device, "", time.time())


def reference_error_result(build: BuildResult, exc: BaseException) -> MeasureResult:
    msg = f"could not compute the reference: {type(exc).__name__}: {exc}"
    return MeasureResult((), ErrorCode.RUNTIME_ERROR, msg, build.build_seconds, 0.0,
                         hostname(), "", "", time.time())


class DeviceWorker:
    """One device: a kernel process and the lock that keeps timed runs on it one at a time."""

    def __init__(self, *, device: str | None = None, worker_id: str | None = None,
                 lock_path: str | os.PathLike | None | bool = True) -> None:
        self.device = device or cpu_device()
        self.worker_id = worker_id or f"local:{os.getpid()}"
        self.lock_path = default_lock_path("cpu") if lock_path is True else (lock_path or None)
        self.sandbox = KernelSandbox()

    def measure(self, build: BuildResult, config: RunnerConfig, ref_key: str | None = None,
                reference: Reference | None = None, artifact_path: str | None = None) -> MeasureResult:
        if build.error_code != ErrorCode.NO_ERROR:
            return failed_build_result(build, host=hostname(), device=self.device)
        path = artifact_path or build.artifact_path
        if not path:
            return MeasureResult((), ErrorCode.RUNTIME_ERROR, "build result has no artifact",
                                 build.build_seconds, 0.0, hostname(), self.device, self.worker_id,
                                 time.time())
        call = KernelCall(str(path), build.entry, tuple(build.args), build.language)
        with DeviceLock(self.lock_path):
            out = self.sandbox.run(call, config, ref_key, reference)
        return MeasureResult(
            costs=tuple(out.costs), error_code=out.error_code, error_msg=out.error_msg,
            build_seconds=build.build_seconds, run_seconds=out.run_seconds, host=hostname(),
            device=self.device, worker_id=f"{self.worker_id} kernel-pid={out.pid}", timestamp=time.time(),
        )

    def close(self) -> None:
        self.sandbox.close()


class LocalRunner:
    """Runs candidates on this host's CPU in a separate kernel process.

    `reference` is the `ReferenceProvider` for the check (default: the workload DAG's numpy
    evaluation); `lock_path` names the host-wide device lock (True: the default path for
    "cpu"; None: no lock).
    """

    def __init__(self, config: RunnerConfig | None = None, reference: ReferenceProvider | None = None,
                 *, lock_path: str | os.PathLike | None | bool = True, reference_cache_size: int = 8) -> None:
        self.config = config or RunnerConfig()
        provider = reference if reference is not None else DagReferenceProvider(self.config.seed)
        self.references = ReferenceCache(provider, self.config.seed, reference_cache_size)
        self.worker = DeviceWorker(lock_path=lock_path)

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        if len(inputs) != len(builds):
            raise ValueError(f"{len(inputs)} inputs but {len(builds)} builds")
        return [self.run_one(inp, build) for inp, build in zip(inputs, builds)]

    def run_one(self, inp: MeasureInput, build: BuildResult) -> MeasureResult:
        if build.error_code != ErrorCode.NO_ERROR:
            return failed_build_result(build, host=hostname(), device=self.worker.device)
        ref_key, ref = None, None
        if self.config.enable_check:
            try:
                ref_key, ref = self.references.get(inp, build.args)
            except Exception as exc:  # the workload's reference failed: a result, not a crash
                return reference_error_result(build, exc)
        return self.worker.measure(build, self.config, ref_key, ref)

    def close(self) -> None:
        self.worker.close()

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
