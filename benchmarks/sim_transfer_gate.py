"""Offline check of the tuner's transfer hedge and check, on a database of measured records.

Replays the first batches of a warm-started model-guided search on the records a search-efficiency
run left behind (the retired `bench_search_efficiency.py` kept its database in a fresh temporary
directory, the newest `/tmp/tmp*/eff.db`; `bench_efficiency.py --keep-dbs DIR` keeps one per
run): with or without the hedge (half of the first batch random), with
or without the check (drop the other workloads' records when the model ranks its own first batch
below 0.6 pairwise). Prints the first batch's pairwise accuracy per seed, how many seeds kept the
transferred records, and the best found after each batch of 16, mean of 6 seeds.

Run: `.venv/bin/python benchmarks/sim_transfer_gate.py sqlite:////tmp/tmpXXXX/eff.db
matmul:256,256,256 matmul:512,512,512 dense_bias_relu:384,384,384` (the tuned workload first,
then the transferred ones).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_model_pool import guided_batches, pool_data  # noqa: E402

from autosched.cost_model.metrics import pairwise_accuracy  # noqa: E402
from autosched.cost_model.xgb_model import XGBModel  # noqa: E402
from autosched.target.key import Target  # noqa: E402
from autosched.tuning.api import open_db  # noqa: E402
from autosched.tuning.tuner import TRANSFER_MIN_PAIRWISE  # noqa: E402
from autosched.workload import Workload  # noqa: E402


def workload(spec: str) -> Workload:
    op, _, args = spec.partition(":")
    return Workload.create(op, *(int(v) for v in args.split(",")))


def replay(x, y, key, transfer, hedge: bool, check: bool, seed: int, rounds: int = 3, batch: int = 16):
    rng = np.random.default_rng(seed)
    m = XGBModel(seed=seed, min_samples=16)
    m.fit(np.concatenate([t[1] for t in transfer]), np.concatenate([t[2] for t in transfer]),
          sum(([t[0]] * len(t[2]) for t in transfer), []))
    sub = rng.choice(len(y), min(300, len(y)), replace=False)
    n_model = batch // 2 if hedge else batch - 1
    picked = [int(i) for i in sub[np.argsort(-m.predict(x[sub]), kind="stable")[:n_model]]]
    chosen = set(picked)
    picked += [int(i) for i in rng.permutation(len(y)) if int(i) not in chosen][: batch - n_model]
    acc = float(pairwise_accuracy(y[picked], m.predict(x[picked])))
    keep = not (check and acc < TRANSFER_MIN_PAIRWISE)
    curve = [float(y[picked].max())]
    for _ in range(rounds):
        guided_batches({}, key, transfer if keep else [], x, y, picked, batch, 1, seed)
        curve.append(float(y[picked].max()))
    return acc, keep, curve


def main() -> None:
    db = open_db(sys.argv[1])
    tk = Target.host().key
    w = workload(sys.argv[2])
    x, y = pool_data(db, w, tk)
    transfer = []
    for spec in sys.argv[3:]:
        o = workload(spec)
        transfer.append((o.key, *pool_data(db, o, tk)))
    print(f"pool {len(y)} records of {w.name}: mean {y.mean():.1f}, best {y.max():.1f} GFLOP/s")
    for hedge in (False, True):
        for check in (False, True):
            res = [replay(x, y, w.key, transfer, hedge, check, s) for s in range(6)]
            print(f"hedge {hedge!s:5} check {check!s:5} first-batch pairwise {np.round([r[0] for r in res], 2)} "
                  f"kept {sum(r[1] for r in res)}/6  best after 16/32/48/64: "
                  f"{np.mean([r[2] for r in res], axis=0).round(1)}")


if __name__ == "__main__":
    main()
