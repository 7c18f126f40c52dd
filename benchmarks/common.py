"""Shared helpers for the benchmark scripts: interleaved timing, machine facts, result files.

Contenders are timed round-robin in the same run (one batch of calls each per round), so a
noisy neighbour slows all of them alike; medians over rounds are reported with their ratios.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def command_line(script: str) -> str:
    """How this run was started, quoted so it can be pasted back (an empty argument shows as '')."""
    return shlex.join([".venv/bin/python", f"benchmarks/{script}", *sys.argv[1:]])


def machine() -> dict:
    from autosched.target.key import cpu_model

    info = {"date": _dt.date.today().isoformat(), "cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "numpy": np.__version__}
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    info["loadavg_at_start"] = round(os.getloadavg()[0], 2)
    info["commit"] = git_commit()
    return info


def git_commit() -> str | None:
    """The checkout's commit, with "+changes" when the working tree differs from it: which code a
    figure measured."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "autosched",
                                "tuning_db", "benchmarks"], cwd=root, capture_output=True, text=True,
                               timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+changes" if dirty else "")


def machine_tag() -> str:
    """Short name of this machine's ISA for result file names (`bench_tune_cpu_<tag>.json`): the latest
    run of a suite per machine replaces the one before it, and runs on other machines stay apart."""
    from autosched.target.host_isa import native_arch

    return re.sub(r"[^a-z0-9]+", "_", native_arch().lower()).strip("_") or "unknown"


def our_threads() -> int:
    """OpenMP threads our kernels' parallel regions use: libgomp's omp_get_max_threads() (it honours
    OMP_NUM_THREADS and the affinity mask), else the affinity mask's size."""
    import ctypes

    try:
        return int(ctypes.CDLL("libgomp.so.1").omp_get_max_threads())
    except (OSError, AttributeError):
        env = os.environ.get("OMP_NUM_THREADS", "")
        return int(env) if env.isdigit() else len(os.sched_getaffinity(0))


def numpy_threads() -> int | str:
    """numpy's BLAS threads as threadpoolctl reports them, or "unknown" without threadpoolctl."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown"
    blas = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas" and "numpy" in i["filepath"]]
    return blas[0] if blas else "unknown"


def thread_counts() -> dict[str, int | str]:
    """Threads each CPU contender computes with in this process, stored beside its figures."""
    counts: dict[str, int | str] = {"autosched": our_threads(), "numpy": numpy_threads()}
    try:
        import torch

        counts["torch eager"] = counts["torch.compile"] = torch.get_num_threads()
    except ImportError:
        pass
    return counts


# untimed pause before each contender's batch: longer than a thread pool spins after its last call.
# Ours and torch's libgomp spin GOMP_SPINCOUNT (10M pause-loop iterations, a few hundred ms on these
# CPUs); with 0.2 s the previous contender's pool still held a core, which doubled numpy's matmul time
# and TVM's in the side-by-side timing.
SETTLE_S = 1.0


def interleaved(contenders: dict[str, Callable[[], object]], rounds: int = 15, min_batch_s: float = 0.05,
                settle_s: float = SETTLE_S) -> dict[str, float]:
    """Median seconds per call of each contender, timed round-robin."""
    batch = {}
    for name, fn in contenders.items():
        fn()
        fn()  # warm-up: page faults, thread pools, JIT
        t0 = time.perf_counter()
        fn()
        one = max(time.perf_counter() - t0, 1e-7)
        batch[name] = max(1, int(min_batch_s / one))
    samples: dict[str, list[float]] = {n: [] for n in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            n = batch[name]
            # untimed pause: the previous contender's thread pool (OpenBLAS, MKL, libgomp) may still be
            # spinning on the 2 cores; let it go to sleep so it does not tax this contender (SETTLE_S)
            time.sleep(settle_s)
            fn()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples[name].append((time.perf_counter() - t0) / n)
    return {n: float(np.median(v)) for n, v in samples.items()}


METHOD_INTERLEAVED = ("Medians of interleaved rounds; our kernels write into a preallocated output, torch and "
                      "numpy as noted.")


def write_results(stem: str, payload: dict, table_md: str, title: str, method: str = METHOD_INTERLEAVED) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
    m = payload.get("machine", {})
    head = (f"# {title}\n\nMeasured {m.get('date')} on {m.get('cpu')} ({m.get('cores')} cores), Python "
            f"{m.get('python')}, numpy {m.get('numpy')}, torch {m.get('torch', 'absent')}; load average at start "
            f"{m.get('loadavg_at_start')}. {method}\n\n")
    (RESULTS / f"{stem}.md").write_text(head + table_md + "\n")
