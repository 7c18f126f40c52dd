"""softmax 4096x1024: hand-written schedule variants timed interleaved with torch eager in one process.

Why: the tuner chooses among near-equal softmax kernels, and on a shared VM their times move 20-50%
between processes started minutes apart. Timing the variants side by side, round after round, shows
which differences are real: whether streaming (non-temporal) stores of the normalized row, the
vector width, or the rfactor'd vector max matter. Every variant's output is checked against torch.

Run: `.venv/bin/python benchmarks/bench_softmax_variants.py [--reps 2]` (prints one line per rep:
median ms per variant and its speed relative to torch eager).
"""

from __future__ import annotations

import argparse
import os
import sys

# both OpenMP runtimes spin briefly between calls, as a kernel loaded by autosched does (set before load)
os.environ.setdefault("GOMP_SPINCOUNT", "10000000")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import interleaved  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.measure.executor import aligned_empty  # noqa: E402
from autosched.workload import Workload  # noqa: E402

M, N = 4096, 1024
VARIANTS = {
    "rows, plain stores, vector max": dict(stream=False, vec=0),
    "vec16 plain stores": dict(stream=False, vec=16),
    "vec16 streaming stores": dict(stream=True, vec=16),
    "vec16 streaming, scalar max": dict(stream=True, vec=16, rfactor=False),
    "vec32 streaming stores": dict(stream=True, vec=32),
}


def schedule(stream: bool, vec: int, rfactor: bool = True):
    """Row reductions and exp at the row loop of the output (the tuner's softmax sketch)."""
    X, out = Workload.create("softmax", M, N).tensors()
    s = asc.create_schedule(out)
    i, j = s[out].op.axis
    s[out].parallel(i)
    if vec:
        _, ji = s[out].split(j, factor=vec)
        s[out].vectorize(ji)
        if stream:
            s[out].pragma(ji, "nontemporal", 1)
    s["rsum"].compute_inline()
    if rfactor:
        s["maxelem"].split(s["maxelem"].op.reduce_axis[0], factor=16)
        s.rfactor("maxelem", "k.inner", factor_axis=0)
        s["maxelem.rf"].reorder("i", "k_outer", "k_inner")
        s["maxelem.rf"].vectorize("k_inner")
        s["maxelem.rf"].compute_at(s[out], i)
    for name in ("maxelem", "expsum", "expv"):
        s[name].compute_at(s[out], i)
    return s, [X, out]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    import torch

    x = aligned_empty((M, N), np.dtype("float32"))
    x[...] = np.random.default_rng(0).standard_normal((M, N)).astype("float32")
    tx = torch.from_numpy(x)
    ref = torch.softmax(tx, -1).numpy()
    fns = {}
    for name, kw in VARIANTS.items():
        f = asc.build(*schedule(**kw))
        out = aligned_empty((M, N), np.dtype("float32"))
        f(x, out)
        err = float(np.abs(out - ref).max())
        if err > 1e-5:
            raise SystemExit(f"{name}: max abs error {err:.3g} against torch")
        fns[name] = lambda f=f, out=out: f(x, out)
    fns["torch eager"] = lambda: torch.softmax(tx, -1)
    for _ in range(a.reps):
        t = interleaved(fns, rounds=a.rounds)
        base = t["torch eager"]
        print("  ".join(f"{k}: {v * 1e3:.3f} ms ({base / v:.2f}x)" for k, v in t.items()), flush=True)


if __name__ == "__main__":
    main()
