"""Offline replay of model-guided search on a pool of randomly chosen, measured schedules.

Why: an end-to-end efficiency run (now bench_efficiency.py) takes many minutes and its outcome moves
with the warm-start records it happens to produce; replaying picks on a fixed pool compares tuner
variants (batch sizes, the transfer hedge, feature columns) on the same data, seed for seed. The pool
is drawn uniformly (random search, no model), so a random-search baseline on it is unbiased; the
records of other pools (picked by guided searches) are not.

Each replayed run: while fewer than 16 records are known, a batch is random; after that a model is
trained on the transferred records plus this run's picks, scores 200 random unpicked pool entries and
the best are picked (the first batch keeps `hedge` of itself random while only transferred records
are known). Prints, per variant and per warm-start database, the trial at which the mean curve over
seeds reaches 95% of its final best, the final best and the best after 16 trials.

Run: `.venv/bin/python benchmarks/sim_search_pool.py --pool-db /tmp/pool.db --transfer-db
sqlite:////tmp/tmpXXXX/eff.db ...` (the pool is measured into --pool-db first if it holds none).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_model_pool import pool_data  # noqa: E402

from autosched.cost_model.xgb_model import XGBModel  # noqa: E402
from autosched.target.key import Target  # noqa: E402
from autosched.tuning.api import open_db  # noqa: E402
from autosched.workload import Workload  # noqa: E402

VARIANTS = {  # name: (XGBModel options, batch (0: the tuner's ramp), first-batch random share)
    "batch 16": ({}, 16, 0.5),
    "ramp 8..16": ({}, 0, 0.5),
    "ramp, size-relative columns": ({"size_relative": True}, 0, 0.5),
}


def workload(spec: str) -> Workload:
    op, _, args = spec.partition(":")
    return Workload.create(op, *(int(v) for v in args.split(",")))


def replay(x, y, key, transfer, opts: dict, batch: int, hedge: float, seed: int, trials: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picked: list[int] = []
    n_transfer = sum(len(t[2]) for t in transfer)
    while len(picked) < trials:
        rest = np.setdiff1d(np.arange(len(y)), picked)
        n = min(batch or min(16, max(8, len(picked) // 2)), trials - len(picked))
        if len(picked) + n_transfer < 16 or (not transfer and len(picked) < 16):
            new = list(rng.choice(rest, n, replace=False))
        else:
            m = XGBModel(seed=seed, min_samples=16, **opts)
            m.focus_group = key
            m.fit(np.concatenate([t[1] for t in transfer] + [x[picked]]),
                  np.concatenate([t[2] for t in transfer] + [y[picked]]),
                  sum(([t[0]] * len(t[2]) for t in transfer), []) + [key] * len(picked))
            cand = rng.choice(rest, min(200, len(rest)), replace=False)
            n_random = int(n * hedge) if not picked and transfer else 0
            top = list(cand[np.argsort(-m.predict(x[cand]), kind="stable")[: n - n_random]])
            new = top + list(rng.choice(np.setdiff1d(rest, top), n_random, replace=False))
        picked += [int(i) for i in new]
    return np.maximum.accumulate(y[picked])


def trials_to(curve: np.ndarray, level: float) -> int | None:
    hit = np.flatnonzero(curve >= level)
    return int(hit[0]) + 1 if hit.size else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool-db", required=True, help="SQLite file of the pool (measured into if empty)")
    ap.add_argument("--pool-size", type=int, default=480)
    ap.add_argument("--workload", default="matmul:256,256,256")
    ap.add_argument("--transfer-db", nargs="*", default=[], help="databases holding the warm-start records")
    ap.add_argument("--transfer", nargs="*", default=["matmul:512,512,512", "dense_bias_relu:384,384,384"])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=12)
    a = ap.parse_args()
    import autosched as asc

    tk, w = Target.host().key, workload(a.workload)
    url = f"sqlite:///{os.path.abspath(a.pool_db)}"
    x, y = pool_data(open_db(url), w, tk)
    if len(y) == 0:
        asc.tune(w, "cpu", a.pool_size, searcher="random", cost_model=None, db=url, progress=False, seed=123)
        x, y = pool_data(open_db(url), w, tk)
    print(f"pool: {len(y)} random {w.name} schedules, best {y.max():.1f}, mean {y.mean():.1f} GFLOP/s")
    warm = {"none": []}
    for path in a.transfer_db:
        db = open_db(path)
        warm[os.path.basename(os.path.dirname(path))] = [(workload(s).key, *pool_data(db, workload(s), tk))
                                                         for s in a.transfer]
    rand = np.mean([np.maximum.accumulate(y[np.random.default_rng(1000 + s).permutation(len(y))[: a.trials]])
                    for s in range(200)], axis=0)
    print(f"random search (mean of 200 orders): final {rand[-1]:.1f}, 95% of it at trial "
          f"{trials_to(rand, 0.95 * rand[-1])}")
    for name, (opts, batch, hedge) in VARIANTS.items():
        cells = []
        for wname, transfer in warm.items():
            c = np.mean([replay(x, y, w.key, transfer, opts, batch, hedge, s, a.trials) for s in range(a.seeds)],
                        axis=0)
            cells.append(f"{wname}: 95% at {trials_to(c, 0.95 * c[-1])}, final {c[-1]:.1f}, at 16 {c[15]:.1f}")
        print(f"{name:28s} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
