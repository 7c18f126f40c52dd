"""Diagnostic: build every rule seed of a generality workload and time it beside torch eager.

Why: when a first run of the generality suite is slow, the question is whether the space's seeds
are slow (a lowering or a rule to fix) or the search never reached them. This times the seeds as
the tuner builds them, optionally with knobs overridden (`--set`), interleaved with the workload's
torch twin in one process (`common.interleaved`), and can write the fastest variant's C source.

    .venv/bin/python benchmarks/diag_seeds.py conv_c5_3x3_s3 --set '{"conv.tile.y": [115, 1]}'
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import common
import generality_dags as gd
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=sorted(gd.WORKLOADS))
    ap.add_argument("--set", action="append", default=[], metavar="JSON",
                    help="knob overrides applied to every seed (one more variant per --set)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--source", help="write the fastest variant's C source here")
    a = ap.parse_args()

    import torch

    import autosched as asc
    from autosched import te
    from autosched.space.registry import make_space
    from autosched.workload import Workload

    wl = gd.WORKLOADS[a.workload]
    tensors, flops = wl.tensors(te)
    w = Workload.from_tensors(tensors, name=wl.name)
    space = make_space(w, "cpu")
    overrides = [{k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(s).items()} for s in a.set]
    variants = [{**seed, **o} for seed in space.seeds for o in ([{}] + overrides)]
    if not variants:
        raise SystemExit(f"{a.workload}: the space has no rule seeds")
    first = {k.name: k.choices[0] for k in space.space.knobs}
    rng = np.random.default_rng(0)
    args = [rng.random(tuple(int(d) for d in t.shape), dtype=np.float32) for t in tensors]
    built = [asc.build(space.apply(space.space.index_of(v)), tensors, target="cpu") for v in variants]
    twin = wl.torch_call()
    targs = [torch.from_numpy(x) for x in args[:-1]]
    contenders: dict[str, Callable[[], object]] = {f"v{i}": (lambda f=f: f(*args)) for i, f in enumerate(built)}
    contenders["torch"] = lambda: twin(*targs)
    med = common.interleaved(contenders, rounds=a.rounds)
    print(f"{a.workload}: {common.machine()['cpu']}, threads {common.thread_counts()}, commit {common.git_commit()}")
    best = min(range(len(built)), key=lambda i: med[f"v{i}"])
    for i, v in enumerate(variants):
        t = med[f"v{i}"]
        diff = {k: x for k, x in v.items() if x != first[k]}
        print(f"  variant {i}: {t * 1e3:.3f} ms, {flops / t / 1e9:.1f} GFLOP/s {'(best) ' if i == best else ''}{diff}")
    print(f"  torch eager: {med['torch'] * 1e3:.3f} ms")
    if a.source:
        with open(a.source, "w") as out:
            out.write(built[best].source)


if __name__ == "__main__":
    main()
