"""TVM MetaSchedule peer: tunes one workload with `tune_tir` and times the best schedule.

Runs inside the TVM environment (benchmarks/.tvm-venv, made by bench_tune_cpu.py --install-tvm),
never imported by autosched. Prints one JSON line: best seconds per call, tuning wall time.
Usage: python tvm_peer.py matmul 1024 1024 1024 --trials 200
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np


def te_workload(op: str, args: list[int]):
    from tvm import te

    if op == "matmul":
        m, n, k = args
        a = te.placeholder((m, k), name="A")
        b = te.placeholder((k, n), name="B")
        r = te.reduce_axis((0, k), name="k")
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
        return [a, b, c], 2.0 * m * n * k
    if op == "softmax":
        m, n = args
        x = te.placeholder((m, n), name="X")
        k1 = te.reduce_axis((0, n), name="k1")
        mx = te.compute((m,), lambda i: te.max(x[i, k1], axis=k1), name="mx")
        e = te.compute((m, n), lambda i, j: te.exp(x[i, j] - mx[i]), name="e")
        k2 = te.reduce_axis((0, n), name="k2")
        s = te.compute((m,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
        o = te.compute((m, n), lambda i, j: e[i, j] / s[i], name="o")
        return [x, o], 5.0 * m * n
    raise SystemExit(f"tvm_peer: no TE definition for {op}")


def main() -> None:
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    ap = argparse.ArgumentParser()
    ap.add_argument("op")
    ap.add_argument("args", nargs="+", type=int)
    ap.add_argument("--trials", type=int, default=200)
    a = ap.parse_args()
    tensors, flops = te_workload(a.op, a.args)
    func = te.create_prim_func(tensors).with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func})
    cores = len(os.sched_getaffinity(0))
    # the target BENCHMARKS.md measured TVM with on this machine (AVX-512 + FMA)
    target = tvm.target.Target({"kind": "llvm", "mcpu": "rocketlake", "num-cores": cores})
    with tempfile.TemporaryDirectory() as work:
        t0 = time.perf_counter()
        db = ms.tune_tir(mod, target, work, max_trials_global=a.trials, num_trials_per_iter=64, database="memory")
        tune_s = time.perf_counter() - t0
        sch = ms.tir_integration.compile_tir(db, mod, target)
        lib = tvm.compile(sch.mod, target=target)
        dev = tvm.cpu()
        rng = np.random.default_rng(0)
        arrays = [tvm.runtime.tensor(rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32"), dev)
                  for t in tensors]
        timer = lib.time_evaluator(lib.entry_name, dev, number=10, repeat=15, min_repeat_ms=50)
        res = timer(*arrays)
        med = float(np.median(res.results))
    print(json.dumps({"peer": "tvm-metaschedule", "tvm": tvm.__version__, "op": a.op, "args": a.args,
                      "trials": a.trials, "tune_seconds": tune_s, "best_seconds": med,
                      "gflops": flops / med / 1e9}))


if __name__ == "__main__":
    main()
