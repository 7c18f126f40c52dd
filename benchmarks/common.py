"""Shared helpers for the benchmark scripts: interleaved timing, machine facts, result files.

Contenders are timed round-robin in the same run (one batch of calls each per round), so a
noisy neighbour slows all of them alike; medians over rounds are reported with their ratios.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
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
    return info


def interleaved(contenders: dict[str, Callable[[], object]], rounds: int = 15, min_batch_s: float = 0.05,
                settle_s: float = 0.2) -> dict[str, float]:
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
            # spinning on the 2 cores; let it go to sleep so it does not tax this contender
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
