"""The GPU kernel process: load a compiled artifact, check it, time it with CUDA events.

It runs under `GpuSandbox` (see `gpu_runner.py`), so an illegal address, a hang or a dead
context costs this process, never the tuner. Inputs live on the device for as long as their
reference does (uploaded once per workload), outputs are poisoned with NaN before the checked
run, and every timed call is preceded by a write of a buffer larger than L2, so each call
starts with cold caches (what `triton.testing.do_bench` does). Device memory and events come
from torch (it has bfloat16); CUDA cubins are launched through CuPy on the same default stream.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

from autosched.codegen.source import ArgSpec
from autosched.compile.types import ErrorCode
from autosched.measure.checking import check_outputs
from autosched.measure.executor import RunJob, RunOutcome
from autosched.measure.reference import Reference, np_dtype, random_arrays

L2_FLUSH_BYTES = 256 << 20
CONTEXT_LOST = "[cuda context lost]"  # the sandbox restarts the process on this marker


def to_device(arr: np.ndarray, dtype: str):
    """A torch CUDA tensor holding `arr` (bfloat16 travels as its 16-bit pattern)."""
    import torch

    if dtype == "bfloat16":
        bits = np.ascontiguousarray(arr.astype(np_dtype("bfloat16"))).view(np.int16)
        return torch.from_numpy(bits).cuda().view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(arr.astype(np_dtype(dtype)))).cuda()


def to_host(t, dtype: str) -> np.ndarray:
    import torch

    if dtype == "bfloat16":
        return t.view(torch.int16).cpu().numpy().view(np_dtype("bfloat16"))
    return t.cpu().numpy()


def empty_poisoned(spec: ArgSpec):
    import torch

    dt = getattr(torch, spec.dtype)
    t = torch.empty(tuple(spec.shape), dtype=dt, device="cuda")
    if t.is_floating_point():
        t.fill_(float("nan"))
    else:
        t.fill_(-7)
    return t


class GpuExecutor:
    """State of one GPU process: references, their device inputs, loaded kernels, the flush buffer."""

    def __init__(self) -> None:
        self._refs: dict[str, Reference] = {}
        self._dev: dict[str, dict] = {}
        self._flush = None

    def execute(self, job: RunJob) -> RunOutcome:
        t0 = time.perf_counter()
        for key in job.drop_keys:
            self._refs.pop(key, None)
            self._dev.pop(key, None)
        if job.reference is not None and job.ref_key is not None:
            self._refs[job.ref_key] = job.reference
        try:
            code, msg, costs = self._execute(job)
        except Exception as exc:  # noqa: BLE001  a bad kernel is a result
            text = f"{type(exc).__name__}: {exc}"
            lost = any(s in text for s in ("illegal", "CUDA error", "cudaError", "CUDA_ERROR", "misaligned",
                                           "unspecified launch failure"))
            tb = traceback.format_exc(limit=2).strip().splitlines()[-1]
            code, msg, costs = ErrorCode.RUNTIME_ERROR, f"{text} ({tb}){' ' + CONTEXT_LOST if lost else ''}", ()
        return RunOutcome(tuple(costs), code, msg, time.perf_counter() - t0, os.getpid(), 1)

    def _inputs(self, job: RunJob, args: tuple[ArgSpec, ...]) -> dict:
        key = job.ref_key or f"random:{job.config.seed}:{args}"
        if key not in self._dev:
            ref = self._refs.get(job.ref_key or "")
            host = dict(ref.inputs) if ref is not None else random_arrays(args, job.config.seed)
            self._dev[key] = {a.name: to_device(host[a.name], a.dtype) for a in args
                              if not a.is_output and a.name in host}
        return self._dev[key]

    def _execute(self, job: RunJob) -> tuple[ErrorCode, str, tuple[float, ...]]:
        import torch

        from autosched.compile.gpu_kernel import load_kernel

        call, cfg = job.call, job.config
        ref = None
        if cfg.enable_check:
            ref = self._refs.get(job.ref_key or "")
            if ref is None:
                return ErrorCode.RUNTIME_ERROR, f"kernel process holds no reference {job.ref_key!r}", ()
        kern = load_kernel(Path(call.lib_path))
        ins = self._inputs(job, call.args)
        tensors = []
        for a in call.args:
            if a.is_output:
                tensors.append(empty_poisoned(a))
            elif a.name in ins:
                tensors.append(ins[a.name].clone())  # a kernel that scribbles on an input harms only itself
            else:
                tensors.append(torch.zeros(tuple(a.shape), dtype=getattr(torch, a.dtype), device="cuda"))
        ptrs = kern.pointers(tuple(tensors))
        kern.launch_ptrs(ptrs)
        torch.cuda.synchronize()
        if ref is not None:
            outs = {a.name: to_host(t, a.dtype) for a, t in zip(call.args, tensors) if a.is_output}
            check = check_outputs(outs, ref.expected, ref.reduce_len)
            if not check.ok:
                return ErrorCode.WRONG_ANSWER, check.message, ()
        return ErrorCode.NO_ERROR, "", self._time(kern, ptrs, cfg)

    def _time(self, kern, ptrs: list[int], cfg) -> tuple[float, ...]:
        import torch

        if cfg.flush_cache and self._flush is None:
            self._flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
        for _ in range(cfg.warmup):
            kern.launch_ptrs(ptrs)
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(cfg.repeat)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(cfg.repeat)]
        for r in range(cfg.repeat):
            if self._flush is not None:
                self._flush.zero_()
            starts[r].record()
            for _ in range(cfg.number):
                kern.launch_ptrs(ptrs)
            ends[r].record()
        torch.cuda.synchronize()
        return tuple(s.elapsed_time(e) / 1e3 / cfg.number for s, e in zip(starts, ends))


def main(argv: list[str]) -> None:
    from multiprocessing.connection import Connection

    from autosched.measure.sandbox import _orphan_watchdog

    conn = Connection(int(argv[0]))
    threading.Thread(target=_orphan_watchdog, args=(os.getppid(),), daemon=True).start()
    executor = GpuExecutor()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        conn.send(executor.execute(job))


if __name__ == "__main__":
    main(sys.argv[1:])
