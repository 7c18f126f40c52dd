"""Diagnostic: the rule seeds of one workload as two commits build them, timed side by side.

Why: a change to lowering or to the seed rules must not slow the workloads it was not aimed at. Run
`build` once per commit (each from its own checkout, e.g. a `git worktree`), then `time` in one
process: every seed's compiled library of each commit, interleaved round-robin
(`common.interleaved`), on the same inputs.

    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/diag_seed_commits.py build /tmp/a conv2d_nchw 1 64 56 56 64 3 3 1 1
    .venv/bin/python benchmarks/diag_seed_commits.py build /tmp/b conv2d_nchw 1 64 56 56 64 3 3 1 1
    .venv/bin/python benchmarks/diag_seed_commits.py time /tmp/a /tmp/b
"""

from __future__ import annotations

import argparse
import ctypes
import json
import shutil
import subprocess
from pathlib import Path

import common
import generality_dags as gd
import numpy as np


def build(out: Path, op: str, args: list[int]) -> None:
    import autosched as asc
    from autosched.space.registry import make_space
    from autosched.workload import Workload

    if op in gd.WORKLOADS:  # a generality workload, written with `te` (its own shape unless args)
        from autosched import te

        tensors, _ = gd.WORKLOADS[op].tensors(te, tuple(args) or None)
        w = Workload.from_tensors(tensors, name=op)
    else:
        w = Workload.create(op, *args)
        tensors = [w.dag[a] for a in w.args_order]
    space = make_space(w, "cpu")
    out.mkdir(parents=True, exist_ok=True)
    seeds = []
    for i, v in enumerate(space.seeds):
        f = asc.build(space.apply(space.space.index_of(v)), tensors)
        shutil.copy(f.library.path, out / f"seed{i}.so")
        seeds.append({k: str(x) for k, x in v.items()})
    package = Path(asc.__file__).resolve().parent.parent  # the checkout whose autosched built them
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=package, capture_output=True,
                            text=True, check=False).stdout.strip() or str(package)
    meta = {"workload": f"{op}{tuple(args)}", "commit": commit, "seeds": seeds,
            "shapes": [[int(d) for d in t.shape] for t in tensors]}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    print(f"{len(seeds)} seeds of {meta['workload']} at {meta['commit']} in {out}")


def time_side_by_side(dirs: list[Path], rounds: int) -> None:
    metas = [json.loads((d / "meta.json").read_text()) for d in dirs]
    if len({json.dumps(m["shapes"]) for m in metas}) != 1:
        raise SystemExit("the builds are of different workloads: " + ", ".join(m["workload"] for m in metas))
    rng = np.random.default_rng(0)
    arrays = [rng.random(s, dtype=np.float32) for s in metas[0]["shapes"]]
    ptrs = [a.ctypes.data_as(ctypes.c_void_p) for a in arrays]
    calls = {}
    for d, m in zip(dirs, metas):
        for i in range(len(m["seeds"])):
            fn = ctypes.CDLL(str(d / f"seed{i}.so")).default_function
            calls[f"{m['commit']} seed {i}"] = (lambda fn=fn: fn(*ptrs))
    med = common.interleaved(calls, rounds=rounds)
    print(f"{metas[0]['workload']}: {common.machine()['cpu']}, {common.our_threads()} threads")
    for m in metas:
        best = min((med[f"{m['commit']} seed {i}"], i) for i in range(len(m["seeds"])))
        for i, seed in enumerate(m["seeds"]):
            t = med[f"{m['commit']} seed {i}"]
            print(f"  {m['commit']} seed {i}: {t * 1e3:.3f} ms{' (best)' if i == best[1] else ''} {seed}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("build")
    b.add_argument("out", type=Path)
    b.add_argument("op", help="an op of the library, or a workload of the generality suite")
    b.add_argument("args", type=int, nargs="*")
    t = sub.add_parser("time")
    t.add_argument("dirs", type=Path, nargs=2)
    t.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    if a.mode == "build":
        build(a.out, a.op, a.args)
    else:
        time_side_by_side(a.dirs, a.rounds)


if __name__ == "__main__":
    main()
