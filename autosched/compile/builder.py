"""`LocalBuilder`: lower, render and compile candidates in a pool of worker processes.

Building is CPU-bound and independent per candidate, so it runs in parallel (unlike timing).
Worker processes rather than threads because lowering is Python (the GIL) and because a
builder that dies (a renderer bug, the OOM killer) must not take the tuner with it: a dead
worker breaks the pool, which comes back here as WORKER_CRASHED results after one retry, one
candidate at a time, to find the culprit. Each build has a deadline: compilation runs in a
subprocess with a timeout (`compile_c`), rendering is interrupted by an interval timer in the
worker, and a backstop on the whole batch kills the pool if a worker stops responding.
Artifacts are cached by source hash by `compile_c`, so rebuilding the same source is free.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path

from autosched.codegen.source import KernelSource
from autosched.compile.c_compiler import CompileError, CompileTimeout, compile_c
from autosched.compile.types import BuildResult, ErrorCode, MeasureInput

BACKSTOP_SLACK_S = 30.0


class _Deadline(BaseException):  # BaseException: renderer code catching Exception cannot swallow it
    pass


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise `_Deadline` in this (main) thread after `seconds`; a no-op off the main thread."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: object) -> None:
        raise _Deadline()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _error(code: ErrorCode, msg: str, t0: float, source: KernelSource | None = None) -> BuildResult:
    return BuildResult(
        artifact_path=None, entry=source.entry if source else "", args=tuple(source.args) if source else (),
        source_hash=source.source_hash if source else "", error_code=code, error_msg=msg,
        build_seconds=time.perf_counter() - t0, language=source.language if source else "c",
    )


def build_source(source: KernelSource, cache_dir: str | None = None, timeout: float = 30.0,
                 t0: float | None = None) -> BuildResult:
    """Compile a rendered kernel; compiler errors and timeouts become BuildResults."""
    t0 = time.perf_counter() if t0 is None else t0
    if source.language != "c":
        msg = f"no compiler for {source.language!r} kernels in this builder (it compiles 'c')"
        return _error(ErrorCode.COMPILE_ERROR, msg, t0, source)
    remaining = max(timeout - (time.perf_counter() - t0), 1.0)
    try:
        lib = compile_c(source, cache_dir=Path(cache_dir) if cache_dir else None, timeout=remaining)
    except CompileTimeout as exc:
        return _error(ErrorCode.BUILD_TIMEOUT, f"{exc} (build timeout {timeout:g} s)", t0, source)
    except CompileError as exc:
        return _error(ErrorCode.COMPILE_ERROR, str(exc), t0, source)
    except (OSError, ValueError) as exc:  # no compiler, unwritable cache...
        return _error(ErrorCode.COMPILE_ERROR, f"{type(exc).__name__}: {exc}", t0, source)
    return BuildResult(str(lib.path), source.entry, tuple(source.args), source.source_hash,
                       build_seconds=time.perf_counter() - t0, language=source.language)


def _is_schedule_error(exc: BaseException) -> bool:
    try:
        from autosched.schedule import ScheduleError
    except ImportError:
        return False
    return isinstance(exc, ScheduleError)


def render(inp: MeasureInput) -> KernelSource:
    """Lower the steps on the workload and render source (imported lazily: the lead's module)."""
    from autosched.compile.instantiate import render_candidate

    return render_candidate(inp)


def build_input(inp: MeasureInput, cache_dir: str | None = None, timeout: float = 30.0) -> BuildResult:
    """Render then compile one candidate; every failure is a BuildResult with its code."""
    t0 = time.perf_counter()
    try:
        with _deadline(timeout):
            source = render(inp)
    except _Deadline:
        msg = f"lowering/rendering ran past the {timeout:g} s build timeout"
        return _error(ErrorCode.BUILD_TIMEOUT, msg, t0)
    except Exception as exc:
        if _is_schedule_error(exc):
            return _error(ErrorCode.INSTANTIATION_ERROR, f"ScheduleError: {exc}", t0)
        where = traceback.format_exc(limit=-1).strip().splitlines()
        where_line = where[-3].strip() if len(where) >= 3 else ""
        return _error(ErrorCode.INSTANTIATION_ERROR,
                      f"instantiating the schedule failed: {type(exc).__name__}: {exc} [{where_line}]", t0)
    return build_source(source, cache_dir, timeout, t0)


class LocalBuilder:
    """Builds in `n_workers` worker processes (spawn context); reusable across batches.

    As with any spawn-started pool, a script that uses it needs the `if __name__ == "__main__":`
    guard (the workers re-import the main module)."""

    def __init__(self, n_workers: int | None = None, timeout: float = 30.0,
                 cache_dir: str | os.PathLike | None = None, *, start_method: str = "spawn") -> None:
        self.n_workers = max(1, n_workers or os.cpu_count() or 1)
        self.timeout = timeout
        self.cache_dir = str(cache_dir) if cache_dir is not None else None
        self._ctx = mp.get_context(start_method)
        self._pool: ProcessPoolExecutor | None = None

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        return self._map(build_input, list(inputs))

    def build_sources(self, sources: Sequence[KernelSource]) -> list[BuildResult]:
        return self._map(build_source, list(sources))

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.n_workers, mp_context=self._ctx)
        return self._pool

    def _kill_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for proc in list(getattr(pool, "_processes", {}).values()):  # no public kill in the stdlib
            if proc.is_alive():
                proc.kill()
        pool.shutdown(wait=True, cancel_futures=True)

    def _map(self, fn: Callable[..., BuildResult], items: list) -> list[BuildResult]:
        results: list[BuildResult | None] = [None] * len(items)
        t0 = time.perf_counter()
        crashed = self._run_round(fn, items, list(range(len(items))), results, t0)
        for i in crashed:  # retry alone, so an innocent neighbour of the culprit gets built
            if self._run_round(fn, items, [i], results, t0):
                results[i] = BuildResult(
                    None, "", (), "", ErrorCode.WORKER_CRASHED,
                    "the build worker process died while building this candidate, twice "
                    "(killed by a signal or out of memory?)", time.perf_counter() - t0)
        return [r if r is not None else BuildResult(None, "", (), "", ErrorCode.WORKER_CRASHED,
                                                    "build lost", time.perf_counter() - t0) for r in results]

    def _run_round(self, fn: Callable[..., BuildResult], items: list, todo: list[int],
                   results: list[BuildResult | None], t0: float) -> list[int]:
        """Build `todo`; returns the indices whose worker died (the pool is then discarded)."""
        if not todo:
            return []
        pool = self._get_pool()
        futures = {pool.submit(fn, items[i], self.cache_dir, self.timeout): i for i in todo}
        backstop = self.timeout * math.ceil(len(todo) / self.n_workers) + BACKSTOP_SLACK_S
        done, not_done = wait(futures, timeout=backstop)
        crashed: list[int] = []
        for fut in done:
            i = futures[fut]
            try:
                results[i] = fut.result()
            except BrokenProcessPool:
                crashed.append(i)
            except Exception as exc:  # e.g. an unpicklable input: this candidate's problem only
                msg = f"build failed: {type(exc).__name__}: {exc}"
                results[i] = BuildResult(None, "", (), "", ErrorCode.COMPILE_ERROR, msg,
                                         time.perf_counter() - t0)
        for fut in not_done:
            msg = f"build worker unresponsive past the {backstop:.0f} s batch backstop"
            results[futures[fut]] = BuildResult(None, "", (), "", ErrorCode.BUILD_TIMEOUT, msg,
                                                time.perf_counter() - t0)
        if crashed or not_done:
            self._kill_pool()
        return sorted(crashed)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> LocalBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
