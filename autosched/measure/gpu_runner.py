"""GPU measurement: a builder that compiles CUDA/Triton candidates, a runner that times them.

`GpuBuilder` renders and compiles in the same worker-process pool as the CPU builder (NVRTC and
Triton's ahead-of-time compile need no GPU), so builds run in parallel. `GpuRunner` is the CPU
`LocalRunner` with a GPU kernel process (`GpuSandbox`): the reference is computed once per
workload in the tuner, each candidate runs in the long-lived GPU process, and a candidate that
faults is reported (RUNTIME_ERROR, or WORKER_CRASHED if the process dies) and the process is
replaced, since a CUDA context that saw an illegal address is unusable for the next kernel.
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from multiprocessing.connection import Connection

from autosched.codegen.source import KernelSource
from autosched.compile.builder import LocalBuilder, _Deadline, _deadline, _error, _is_schedule_error
from autosched.compile.c_compiler import CompileError, CompileTimeout
from autosched.compile.types import BuildResult, ErrorCode, MeasureInput
from autosched.measure.config import RunnerConfig
from autosched.measure.device_lock import default_lock_path
from autosched.measure.executor import KernelCall, RunOutcome
from autosched.measure.local_runner import DeviceWorker, LocalRunner
from autosched.measure.reference import Reference, ReferenceProvider
from autosched.measure.sandbox import KernelSandbox, kernel_env

# one call per repeat (each after an L2 flush), many repeats: GPU kernels are short
GPU_RUNNER_CONFIG = RunnerConfig(number=1, repeat=25, min_repeat_ms=0.0, timeout=60.0, flush_cache=True,
                                 warmup=3)


@functools.cache
def gpu_name(index: int | str = 0) -> str:
    """The GPU's model ("NVIDIA H200") from nvidia-smi, without touching CUDA in this process."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", f"--id={index}"],
                             capture_output=True, text=True, timeout=20)
        name = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        name = ""
    return name or f"cuda:{index}"


def build_gpu_input(inp: MeasureInput, cache_dir: str | None = None, timeout: float = 60.0) -> BuildResult:
    """Render and compile one GPU candidate; every failure is a BuildResult with its code."""
    from autosched.compile.instantiate import render_candidate

    t0 = time.perf_counter()
    try:
        with _deadline(timeout):
            source = render_candidate(inp)
    except _Deadline:
        return _error(ErrorCode.BUILD_TIMEOUT, f"lowering/rendering ran past the {timeout:g} s build timeout", t0)
    except Exception as exc:  # noqa: BLE001
        if _is_schedule_error(exc):
            return _error(ErrorCode.INSTANTIATION_ERROR, f"ScheduleError: {exc}", t0)
        where = traceback.format_exc(limit=-1).strip().splitlines()[-1]
        return _error(ErrorCode.INSTANTIATION_ERROR, f"instantiating the schedule failed: {where}", t0)
    return build_gpu_source(source, cache_dir, timeout, t0)


def build_gpu_source(source: KernelSource, cache_dir: str | None = None, timeout: float = 60.0,
                     t0: float | None = None) -> BuildResult:
    """Compile a rendered cuda/triton kernel into its artifact folder; failures are BuildResults.
    (The GPU twin of `builder.build_source`; Ray build tasks call it for non-C sources.)"""
    from pathlib import Path

    from autosched.compile.gpu_compile import artifact_key, compile_gpu

    t0 = time.perf_counter() if t0 is None else t0
    try:
        path = compile_gpu(source, Path(cache_dir) if cache_dir else None)
    except CompileTimeout as exc:
        return _error(ErrorCode.BUILD_TIMEOUT, str(exc), t0, source)
    except (CompileError, OSError) as exc:
        return _error(ErrorCode.COMPILE_ERROR, str(exc)[-3000:], t0, source)
    # keyed like the artifact (source, launch, arguments): caches of shipped artifacts (Ray) use it
    return BuildResult(str(path), source.entry, tuple(source.args), artifact_key(source),
                       build_seconds=time.perf_counter() - t0, language=source.language)


class GpuBuilder(LocalBuilder):
    """LocalBuilder whose workers compile CUDA (NVRTC/nvcc) and Triton (AOT) candidates."""

    def __init__(self, n_workers: int | None = None, timeout: float = 120.0, cache_dir=None) -> None:
        super().__init__(n_workers, timeout, cache_dir)

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        return self._map(build_gpu_input, list(inputs))


class GpuSandbox(KernelSandbox):
    """KernelSandbox whose child is `autosched.measure.gpu_worker` (CUDA, torch, CuPy, Triton)."""

    def __init__(self, device_index: int = 0, **kw) -> None:
        super().__init__(**kw)
        self.device_index = device_index

    def _start(self) -> None:
        fd, log = tempfile.mkstemp(prefix="autosched-gpu-kernel-", suffix=".log")
        os.unlink(log)
        parent_sock, child_sock = socket.socketpair()
        env = kernel_env()
        env.setdefault("CUDA_VISIBLE_DEVICES", str(self.device_index))
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "autosched.measure.gpu_worker", str(child_sock.fileno())],
                pass_fds=(child_sock.fileno(),), stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=env)
        except BaseException:
            os.close(fd)
            raise
        finally:
            child_sock.close()
        self._conn = Connection(parent_sock.detach())
        self._log_fd = fd
        self._refs.clear()
        if not self._conn.poll(self.start_timeout):
            self._kill()
            raise RuntimeError(f"GPU kernel process did not start within {self.start_timeout:.0f} s")
        try:
            self._conn.recv()
        except (EOFError, OSError) as exc:
            tail = self._stderr_tail()
            self._kill()
            raise RuntimeError(f"GPU kernel process failed to start: {tail}") from exc

    def run(self, call: KernelCall, config: RunnerConfig, ref_key: str | None = None,
            reference: Reference | None = None) -> RunOutcome:
        from autosched.measure.gpu_worker import CONTEXT_LOST

        out = super().run(call, config, ref_key, reference)
        if CONTEXT_LOST in out.error_msg:
            with self._lock:  # its CUDA context is poisoned: the next candidate gets a fresh process
                self._kill()
                self.restarts += 1
        return out


class GpuDeviceWorker(DeviceWorker):
    """One GPU: a `GpuSandbox` and the host-wide lock of that GPU.

    `device_index` is the index the kernel process uses (within CUDA_VISIBLE_DEVICES, which a
    Ray actor inherits already narrowed to its GPU); `physical_id` names the GPU on the host
    (nvidia-smi's index, Ray's GPU id), so the lock and the device name are the host's, shared
    by every process that times on that GPU."""

    def __init__(self, device_index: int = 0, *, worker_id: str | None = None,
                 lock_path: str | os.PathLike | None | bool = True, physical_id: str | None = None) -> None:
        phys = str(device_index) if physical_id is None else str(physical_id)
        lock = default_lock_path(f"cuda{phys}") if lock_path is True else lock_path
        super().__init__(device=gpu_name(phys), worker_id=worker_id, lock_path=lock or None)
        self.sandbox.close()
        self.sandbox = GpuSandbox(device_index)


class GpuRunner(LocalRunner):
    """LocalRunner for one GPU: isolated kernel process, reference check, CUDA-event timing."""

    def __init__(self, config: RunnerConfig | None = None, reference: ReferenceProvider | None = None, *,
                 device_index: int = 0, lock_path: str | os.PathLike | None | bool = True,
                 reference_cache_size: int = 4) -> None:
        super().__init__(config or GPU_RUNNER_CONFIG, reference, lock_path=None,
                         reference_cache_size=reference_cache_size)
        self.worker.close()
        self.worker = GpuDeviceWorker(device_index, lock_path=lock_path)
