"""Run one compiled kernel in THIS process: load it, feed it, check it, time it.

Only the kernel process (see `sandbox.py`) executes this: a kernel that segfaults takes this
process down and nothing else. Every candidate gets fresh copies of the inputs (a kernel that
scribbles on an input cannot corrupt the next candidate's data) and outputs poisoned with NaN
or a sentinel, so an element the kernel forgot to write cannot pass the check by luck.

The copies are written into the same buffers for every candidate of a workload (`ArgBuffers`):
memory freshly mapped for each candidate lands on other physical pages, huge or not as the OS
happens to have them free, which is a difference between candidates that is not theirs (the
buffers remove a cause; see docs/decisions/reused-argument-buffers.md).
"""

from __future__ import annotations

import ctypes
import os
import time
import traceback
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autosched.codegen.source import ArgSpec
from autosched.compile.types import ErrorCode
from autosched.measure.checking import check_outputs
from autosched.measure.config import RunnerConfig
from autosched.measure.reference import Reference, np_dtype, random_arrays
from autosched.measure.timing import CacheFlusher, time_evaluator

ALIGN = 64  # cache-line aligned buffers: vector loads behave the same for every candidate


@dataclass(frozen=True)
class KernelCall:
    """What to call: a shared library, its entry symbol and the arguments in call order."""

    lib_path: str
    entry: str
    args: tuple[ArgSpec, ...]
    language: str = "c"


@dataclass(frozen=True)
class RunJob:
    """One candidate for the kernel process. `reference` is attached only when the process
    does not hold `ref_key` yet; `drop_keys` evicts references the parent no longer tracks."""

    call: KernelCall
    config: RunnerConfig
    ref_key: str | None = None
    reference: Reference | None = None
    drop_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunOutcome:
    costs: tuple[float, ...]
    error_code: ErrorCode
    error_msg: str
    run_seconds: float
    pid: int
    number: int = 0


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGN, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGN
    return raw[offset : offset + nbytes].view(dtype).reshape(shape)


def poison(arr: np.ndarray) -> None:
    """NaN for floats, a recognisable sentinel for integers."""
    if arr.dtype.kind == "f" or arr.dtype.name == "bfloat16":
        arr.fill(np.nan)
    elif arr.dtype.kind in "iu":
        arr.fill(np.iinfo(arr.dtype).min + 7 if arr.dtype.kind == "i" else np.iinfo(arr.dtype).max - 7)
    else:
        arr.view(np.uint8).fill(0xA5)


def _dlclose(lib: ctypes.CDLL) -> None:
    try:
        import _ctypes

        _ctypes.dlclose(lib._handle)
    except (ImportError, AttributeError, OSError):
        pass


class ArgBuffers:
    """Argument buffers kept per argument list (the `max_sets` most recent), so every candidate of a
    workload runs on the same memory; the contents are rewritten for each candidate."""

    def __init__(self, max_sets: int = 4) -> None:
        self._sets: OrderedDict[tuple[ArgSpec, ...], list[np.ndarray]] = OrderedDict()
        self._max_sets = max_sets

    def get(self, args: Sequence[ArgSpec]) -> list[np.ndarray]:
        key = tuple(args)
        bufs = self._sets.get(key)
        if bufs is None:
            bufs = [aligned_empty(tuple(a.shape), np_dtype(a.dtype)) for a in args]
            self._sets[key] = bufs
            while len(self._sets) > self._max_sets:
                self._sets.popitem(last=False)
        else:
            self._sets.move_to_end(key)
        return bufs


class KernelExecutor:
    """State kept by one kernel process: references by key, the cache flusher, random inputs and
    the argument buffers."""

    def __init__(self, max_random: int = 4) -> None:
        self._refs: dict[str, Reference] = {}
        self._random: OrderedDict[tuple, dict[str, np.ndarray]] = OrderedDict()
        self._max_random = max_random
        self._flusher: CacheFlusher | None = None
        self._buffers = ArgBuffers(max_random)

    def execute(self, job: RunJob) -> RunOutcome:
        t0 = time.perf_counter()
        for key in job.drop_keys:
            self._refs.pop(key, None)
        if job.reference is not None and job.ref_key is not None:
            self._refs[job.ref_key] = job.reference
        try:
            code, msg, costs, number = self._execute(job)
        except Exception as exc:  # a bad artifact is a result, not a dead kernel process
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
            code, msg, costs, number = ErrorCode.RUNTIME_ERROR, f"{type(exc).__name__}: {exc} (at {where})", (), 0
        return RunOutcome(costs, code, msg, time.perf_counter() - t0, os.getpid(), number)

    def _inputs(self, args: Sequence[ArgSpec], ref: Reference | None, seed: int) -> dict[str, np.ndarray]:
        if ref is not None:
            return dict(ref.inputs)
        key = (seed, tuple(args))
        if key not in self._random:
            self._random[key] = random_arrays(args, seed)
            while len(self._random) > self._max_random:
                self._random.popitem(last=False)
        return self._random[key]

    def _arrays(self, args: Sequence[ArgSpec], inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        arrays = self._buffers.get(args)
        for a, arr in zip(args, arrays):
            if a.is_output:
                poison(arr)
            elif a.name in inputs:
                arr[...] = inputs[a.name]
            else:
                arr.fill(0)
        return arrays

    def _execute(self, job: RunJob) -> tuple[ErrorCode, str, tuple[float, ...], int]:
        call, cfg = job.call, job.config
        if call.language != "c":
            msg = f"no executor for {call.language!r} kernels in this process"
            return ErrorCode.RUNTIME_ERROR, msg, (), 0
        ref = None
        if cfg.enable_check:
            ref = self._refs.get(job.ref_key or "")
            if ref is None:
                return ErrorCode.RUNTIME_ERROR, f"kernel process holds no reference {job.ref_key!r}", (), 0
        arrays = self._arrays(call.args, self._inputs(call.args, ref, cfg.seed))
        try:
            lib = ctypes.CDLL(call.lib_path, mode=ctypes.RTLD_LOCAL)
        except OSError as exc:
            return ErrorCode.RUNTIME_ERROR, f"cannot load {call.lib_path}: {exc}", (), 0
        fn = None
        try:
            try:
                fn = getattr(lib, call.entry)
            except AttributeError:
                msg = f"entry {call.entry!r} is not exported by {call.lib_path}"
                return ErrorCode.RUNTIME_ERROR, msg, (), 0
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p] * len(arrays)
            ptrs = tuple(ctypes.c_void_p(a.ctypes.data) for a in arrays)
            if ref is not None:
                fn(*ptrs)
                outputs = {a.name: arr for a, arr in zip(call.args, arrays) if a.is_output}
                check = check_outputs(outputs, ref.expected, ref.reduce_len)
                if not check.ok:
                    return ErrorCode.WRONG_ANSWER, check.message, (), 0
            flush = None
            if cfg.flush_cache:
                self._flusher = self._flusher or CacheFlusher()
                flush = self._flusher
            res = time_evaluator(
                fn, ptrs, number=cfg.number, repeat=cfg.repeat, min_repeat_ms=cfg.min_repeat_ms,
                warmup=cfg.warmup, flush=flush, max_number=cfg.max_number,
            )
            return ErrorCode.NO_ERROR, "", res.costs, res.number
        finally:
            fn = None
            _dlclose(lib)
