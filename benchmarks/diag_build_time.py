"""Diagnostic: how long candidates of a generality workload take to lower, render and compile.

Why: a tuning run on 2 cores spends its time building as much as measuring; a space that holds
configs gcc takes a minute over makes the first run slow whatever the searcher. This samples valid
configs of the workload's CPU space (a fixed seed, so two commits see the same draw where their
spaces agree), builds each into an empty cache and prints the times and the slowest configs.

    .venv/bin/python benchmarks/diag_build_time.py conv_c5_3x3_s3 --samples 24
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import common
import generality_dags as gd
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=sorted(gd.WORKLOADS))
    ap.add_argument("--samples", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    from autosched import te
    from autosched.codegen.render import render
    from autosched.compile.c_compiler import compile_c
    from autosched.space.registry import make_space
    from autosched.workload import Workload

    wl = gd.WORKLOADS[a.workload]
    tensors, _ = wl.tensors(te)
    space = make_space(Workload.from_tensors(tensors, name=wl.name), "cpu")
    rng = np.random.default_rng(a.seed)
    cache = Path(tempfile.mkdtemp(prefix="diag-build-"))
    rows = []
    for _ in range(a.samples):
        config = space.space.sample_valid(rng)
        if config is None:
            continue
        t0 = time.perf_counter()
        src, _ = render(space.apply(config), tensors, "cpu")
        t1 = time.perf_counter()
        error = ""
        try:
            compile_c(src, cache_dir=cache)
        except Exception as e:  # a compiler time-out is a result here, not a failure of the script
            error = str(e).splitlines()[0]
        rows.append((time.perf_counter() - t1, t1 - t0, src.code.count("\n"), error, space.space.values(config)))
    print(f"{a.workload}: {len(rows)} configs, {common.machine()['cpu']}, commit {common.git_commit()}")
    builds = [r[0] for r in rows]
    print(f"  compile s: median {statistics.median(builds):.2f}, max {max(builds):.2f}, "
          f"over 10 s: {sum(b > 10 for b in builds)}, failed: {sum(bool(r[3]) for r in rows)}")
    print(f"  lower+render s: median {statistics.median(r[1] for r in rows):.2f}")
    for b, _, lines, error, values in sorted(rows, key=lambda r: -r[0])[:3]:
        print(f"  slowest: {b:.1f} s, {lines} lines {error} {values}")


if __name__ == "__main__":
    main()
