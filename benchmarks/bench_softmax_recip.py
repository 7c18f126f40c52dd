"""softmax 4096x1024 normalized by a division per element vs by the row's reciprocal sum, each tuned
exhaustively (grid, no model) and timed interleaved with torch eager in one run.

Run: `.venv/bin/python benchmarks/bench_softmax_recip.py` (prints both tuned times and torch's).
"""
import os
import sys
import tempfile
import time

# both OpenMP runtimes (ours and torch's) spin a while between calls, as a kernel loaded by autosched does
# (build_module and the measurement sandbox set this): a sleeping pool's wake-up costs milliseconds per
# call on these VMs, which would time the hypervisor. Contenders are timed in turns with a pause between
# them, so one's spinning pool does not tax the next. Set before either runtime loads.
os.environ.setdefault("GOMP_SPINCOUNT", "10000000")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
from common import interleaved

import autosched as asc
from autosched import te
from autosched.measure.executor import aligned_empty
from autosched.workload import Workload


def dag(recip: bool, M=4096, N=1024):
    X = te.placeholder((M, N), "X")
    k = te.reduce_axis(N, "k")
    mx = te.compute((M,), lambda i: te.max(X[i, k], axis=k), "maxelem")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), "expv")
    k2 = te.reduce_axis(N, "k")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), "expsum")
    if recip:
        rs = te.compute((M,), lambda i: 1.0 / sm[i], "rsum")
        out = te.compute((M, N), lambda i, j: ex[i, j] * rs[i], "norm")
    else:
        out = te.compute((M, N), lambda i, j: ex[i, j] / sm[i], "norm")
    return Workload.from_tensors([X, out], f"softmax_{'recip' if recip else 'div'}")

def main():
    import torch
    fns = {}
    x = aligned_empty((4096, 1024), np.dtype("float32"))
    x[...] = np.random.default_rng(0).standard_normal((4096, 1024)).astype("float32")
    tx = torch.from_numpy(x)
    ref = torch.softmax(tx, -1).numpy()
    for recip in (False, True):
        w = dag(recip)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            r = asc.tune(w, "cpu", 400, searcher="grid", cost_model=None, db=f"sqlite:///{tmp}/t.db", progress=False)
            f = asc.apply_best(w, db=f"sqlite:///{tmp}/t.db")
        out = aligned_empty((4096, 1024), np.dtype("float32"))
        f(x, out)
        print(w.name, "trials", r.trials, "tuned", round(time.perf_counter() - t0), "s; max err",
              float(np.abs(out - ref).max()))
        fns[w.name] = (lambda f=f, out=out: f(x, out))
    fns["torch eager"] = lambda: torch.softmax(tx, -1)
    t = interleaved(fns, rounds=21)
    print({k: round(v * 1e3, 3) for k, v in t.items()})

if __name__ == '__main__':
    main()
