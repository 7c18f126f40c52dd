"""Candidates made in worker processes: the model-guided searchers' cost is lowering, not prediction.

A guided simulated-annealing batch scores about 2,000 new configs, and each one is applied, lowered
(and on GPU targets rendered, to refuse device-limit breakers) in pure Python before its features
exist, so proposing dominates a batch (see docs/decisions/feature-worker-pool.md). Ansor extracts
features on a thread pool in C++; here the GIL makes that a process pool.

Workers cannot receive the space itself (sketch spaces hold closures that do not pickle), so they
rebuild it from what `make_space` was given: the workload's JSON and the target kind, recorded on
the space as `rebuild_spec`. A space without it (an expert's own template) stays serial. A
candidate is a pure function of its config, so the result is the same with or without workers;
`CandidateCache` still checks the first config of each space against its own lowering before it
trusts the workers, and falls back to serial work on any worker failure.

`AUTOSCHED_FEATURE_WORKERS` sets the number of workers (0 or 1: serial; default: the CPU count,
at most 8). The pool is shared by every cache in the process and started on first need.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

log = logging.getLogger(__name__)

MIN_PARALLEL = 16  # fewer missing configs than this are made in the caller: a round trip costs more
_pool: ProcessPoolExecutor | None = None
_workers: int | None = None
_disabled_reason = ""


def worker_count() -> int:
    """Workers the pool uses (1 means serial work)."""
    raw = os.environ.get("AUTOSCHED_FEATURE_WORKERS", "")
    if raw.strip():
        try:
            return max(1, int(raw))
        except ValueError:
            raise ValueError(f"AUTOSCHED_FEATURE_WORKERS must be an integer, got {raw!r}") from None
    return max(1, min(8, os.cpu_count() or 1))


def _get_pool() -> ProcessPoolExecutor | None:
    global _pool, _workers
    if _disabled_reason:
        return None
    n = worker_count()
    if n <= 1:
        return None
    if multiprocessing.current_process().daemon:
        disable("this process is a daemonic worker, which may not start processes")
        return None
    if _pool is None or _workers != n:
        shutdown()
        try:
            # spawn, not fork: the tuner may hold threads (Ray, a build pool) that a fork would copy mid-lock
            _pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_die_with_parent, initargs=(os.getpid(),))
            _workers = n
        except (OSError, ValueError, AssertionError) as exc:  # a daemonic process may not have children
            disable(f"the feature pool could not start: {exc}")
            return None
    return _pool


def disable(reason: str) -> None:
    """Serial work from now on in this process (a worker died, or its results disagreed)."""
    global _disabled_reason
    if not _disabled_reason:
        log.warning("candidate features are made serially from now on: %s", reason)
    _disabled_reason = reason
    shutdown()


def _die_with_parent(parent: int) -> None:
    """Worker initializer: Linux kills this worker when the process that made the pool dies, even
    by SIGKILL, so an idle pool (about 170 MB a worker) never outlives a service or a tuner."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the shutdown below still stops the workers
        pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def shutdown() -> None:
    """Stop the pool now: queued work is cancelled and the workers are terminated, not left to
    finish (a process that exits right after would otherwise leave them running)."""
    global _pool, _workers
    if _pool is not None:
        procs = list((getattr(_pool, "_processes", None) or {}).values())
        _pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
    _pool, _workers = None, None


atexit.register(shutdown)


class WorkerFailed(RuntimeError):
    """The workers could not make this space's candidates (the caller makes them itself)."""


def make_candidates(spec: tuple[str, str], configs: list[tuple[int, ...]],
                    make_chunk: Callable[[tuple[str, str], list[tuple[int, ...]]], list]) -> list | None:
    """Candidates of `configs` made by the workers, in order; None where the pool is off or the
    batch is small. `make_chunk(spec, configs)` runs in a worker and must be a module-level function
    (it is pickled by name); the candidates module passes its own, so this pool imports nothing of
    ours. Raises WorkerFailed when the workers fail on this space (say, a workload whose
    JSON does not rebuild it); a pool that broke (a worker died) is also turned off for the process."""
    pool = _get_pool()
    if pool is None or len(configs) < MIN_PARALLEL:
        return None
    n = _workers or 1
    size = max(4, -(-len(configs) // (2 * n)))
    chunks = [configs[i:i + size] for i in range(0, len(configs), size)]
    try:
        futures = [pool.submit(make_chunk, spec, chunk) for chunk in chunks]
        return [c for f in futures for c in f.result()]
    except BrokenProcessPool as exc:
        disable(f"a worker died: {exc}")
        raise WorkerFailed(f"a worker died: {exc}") from None
    except Exception as exc:  # noqa: BLE001  whatever the worker raised: serial work is still right
        raise WorkerFailed(f"{type(exc).__name__}: {exc}") from None
