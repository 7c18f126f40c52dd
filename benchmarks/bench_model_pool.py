"""How much the cost model's picks beat random picks, offline on a pool of measured schedules.

A pool of `--pool` random schedules of the workload is measured once (random search, no model),
plus `--transfer-trials` records of each `--transfer` workload (what a team's database holds).
Then, per seed and per model variant, without measuring anything more:
  * first batch: the model trained on the transferred records alone ranks 200 pool schedules and
    its top `--batch` are "measured" (their pool throughput is read);
  * guided batches: after one random batch, `--rounds` times: train on what was picked so far
    (plus the transferred records when warm), pick the top `--batch` of the rest of the pool.
Reported: the mean throughput of the picked schedules and the best after all batches, against
random picks of the same count. It isolates the model (features, columns, objective) from the
searchers and from measurement noise: every variant ranks the same measured pool.

Run: `.venv/bin/python benchmarks/bench_model_pool.py` (about 3 minutes on 2 cores; writes
benchmarks/results/model_pool.md and .json).
"""

from __future__ import annotations

import os

os.environ.setdefault("GOMP_SPINCOUNT", "10000000")  # as the tuner's kernel sandbox times kernels

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import command_line, machine, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.cost_model.xgb_model import XGBModel  # noqa: E402
from autosched.target.key import Target  # noqa: E402
from autosched.tuning.candidates import features_of_steps  # noqa: E402
from autosched.workload import Workload  # noqa: E402

VARIANTS = {
    "xgb, every column (default)": {},
    "xgb, size-free columns when several workloads": {"transfer_columns": "size_free"},
    "xgb, ndcg objective": {"objective": "rank:ndcg"},
}


def parse(spec: str) -> tuple[str, tuple[int, ...]]:
    op, _, args = spec.partition(":")
    return op, tuple(int(v) for v in args.split(","))


def pool_data(db, w: Workload, target_key: str) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for rec in db.records(w.key, target_key, ok_only=True):
        f = features_of_steps(w, rec.steps_json)
        if f is not None and rec.median:
            xs.append(f)
            ys.append(w.flops / rec.median / 1e9)
    return np.array(xs), np.array(ys)


def first_batch(opts: dict, transfer, x, y, batch: int, seed: int) -> tuple[float, float]:
    m = XGBModel(seed=seed, min_samples=16, **opts)
    m.fit(np.concatenate([t[1] for t in transfer]), np.concatenate([t[2] for t in transfer]),
          sum(([t[0]] * len(t[2]) for t in transfer), []))
    sub = np.random.default_rng(seed).choice(len(y), min(200, len(y)), replace=False)
    top = sub[np.argsort(-m.predict(x[sub]), kind="stable")[:batch]]
    return float(y[top].mean()), float(y[top].max())


def guided_batches(opts: dict, key: str, transfer, x, y, picked: list, batch: int, rounds: int,
                   seed: int) -> list[float]:
    """`rounds` model-guided batches after `picked` (extended in place): each time the model is trained
    on what was picked so far (plus the transferred records) and the top `batch` of the rest of the
    pool are picked. Returns the mean throughput of each batch."""
    means = []
    for _ in range(rounds):
        m = XGBModel(seed=seed, min_samples=16, **opts)
        xs, ys, gs = [x[picked]], [y[picked]], [key] * len(picked)
        for k, xt, yt in transfer:
            xs.insert(0, xt)
            ys.insert(0, yt)
            gs = [k] * len(yt) + gs
        m.focus_group = key
        m.fit(np.concatenate(xs), np.concatenate(ys), gs)
        done = set(picked)
        cand = np.array([i for i in range(len(y)) if i not in done])
        top = cand[np.argsort(-m.predict(x[cand]), kind="stable")[:batch]]
        means.append(float(y[top].mean()))
        picked += [int(i) for i in top]
    return means


def guided(opts: dict, key: str, transfer, x, y, batch: int, rounds: int, seed: int) -> tuple[float, float]:
    picked = [int(i) for i in np.random.default_rng(seed).permutation(len(y))[:batch]]
    means = guided_batches(opts, key, transfer, x, y, picked, batch, rounds, seed)
    return float(np.mean(means)), float(y[picked].max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="matmul:256,256,256")
    ap.add_argument("--pool", type=int, default=400)
    ap.add_argument("--transfer", nargs="*", default=["matmul:512,512,512", "dense_bias_relu:384,384,384"])
    ap.add_argument("--transfer-trials", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=5)
    a = ap.parse_args()
    tk = Target.host().key
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/pool.db"
        op, args = parse(a.workload)
        w = Workload.create(op, *args)
        asc.tune(w, "cpu", a.pool, searcher="random", cost_model=None, db=url, progress=False, seed=7)
        others = []
        for spec in a.transfer:
            top, targs = parse(spec)
            o = Workload.create(top, *targs)
            asc.tune(o, "cpu", a.transfer_trials, searcher="random", cost_model=None, db=url, progress=False, seed=7)
            others.append(o)
        from autosched.tuning.api import open_db

        db = open_db(url)
        x, y = pool_data(db, w, tk)
        transfer = [(o.key, *pool_data(db, o, tk)) for o in others]
    b, r = a.batch, a.rounds
    rand = [np.random.default_rng(s).permutation(len(y)) for s in range(a.seeds)]
    rows = [{"variant": "random picks", "first_batch_mean": float(np.mean([y[p[:b]].mean() for p in rand])),
             "guided_mean": float(np.mean([y[p[b:b * (r + 1)]].mean() for p in rand])),
             "cold_best": float(np.mean([y[p[:b * (r + 1)]].max() for p in rand]))}]
    rows[0]["warm_best"] = rows[0]["cold_best"]
    for name, opts in VARIANTS.items():
        fb = [first_batch(opts, transfer, x, y, b, s) for s in range(a.seeds)]
        cold = [guided(opts, w.key, [], x, y, b, r, s) for s in range(a.seeds)]
        warm = [guided(opts, w.key, transfer, x, y, b, r, s) for s in range(a.seeds)]
        rows.append({"variant": name, "first_batch_mean": float(np.mean([m for m, _ in fb])),
                     "guided_mean": float(np.mean([m for m, _ in cold])),
                     "cold_best": float(np.mean([v for _, v in cold])),
                     "warm_guided_mean": float(np.mean([m for m, _ in warm])),
                     "warm_best": float(np.mean([v for _, v in warm]))})
    for row in rows:
        print(row, flush=True)
    payload = {"machine": machine(), "workload": a.workload, "pool": len(y), "pool_best": float(y.max()),
               "pool_mean": float(y.mean()), "transfer": {o.name: len(t[2]) for o, t in zip(others, transfer)},
               "batch": b, "rounds": r, "seeds": a.seeds, "rows": rows}
    lines = [f"Pool: {len(y)} measured random schedules of {a.workload} (best {y.max():.1f}, mean {y.mean():.1f} "
             f"GFLOP/s); transferred records: " + ", ".join(f"{o.name} {len(t[2])}" for o, t in zip(others, transfer))
             + f". Batches of {b}, {r} guided rounds, mean of {a.seeds} seeds. GFLOP/s of the picked schedules.", "",
             "| model | first batch from transferred records only (mean) | guided batches, no transfer (mean) | "
             f"best after {b * (r + 1)} (no transfer) | guided batches with transfer (mean) | "
             f"best after {b * (r + 1)} (with transfer) |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['variant']} | {row['first_batch_mean']:.1f} | {row['guided_mean']:.1f} | "
                     f"{row['cold_best']:.1f} | {row.get('warm_guided_mean', row['guided_mean']):.1f} | "
                     f"{row['warm_best']:.1f} |")
    command = command_line("bench_model_pool.py")
    write_results("model_pool", payload, "\n".join(lines), "Cost model picks vs random picks on a measured pool",
                  method=f"Offline: every variant ranks the same measured pool (no timing here). Command: `{command}`.")


if __name__ == "__main__":
    main()
