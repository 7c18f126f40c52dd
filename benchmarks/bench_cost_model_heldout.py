"""The cost model's accuracy on workloads it was not trained on, beside the random model.

Records come from tuning databases (e.g. the efficiency runs' `--keep-dbs` folder). Each schedule
counts once per workload: one point per steps hash, its median cost over every valid record of it
in every database, so a schedule measured by several runs (or re-measured) does not repeat in both
the training and the test set. Split: leave one workload out — the XGBoost model is trained on the
points of every other workload and ranks the held-out workload's points; reported are pairwise
accuracy and top-k recall, and the same for the random model (mean over `--random-seeds` seeds),
which is what a model that knows nothing scores (pairwise 0.5, top-k recall about k / points).

Run: `.venv/bin/python benchmarks/bench_cost_model_heldout.py --dbs /tmp/eff/*.db`
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TOP_K = (5, 10)


@dataclass(frozen=True)
class Points:
    """One workload's deduplicated schedules: features and measured throughput (FLOP/s)."""

    name: str
    key: str
    op: str
    x: np.ndarray
    y: np.ndarray


def load_points(db_paths: list[Path], target_key: str = "cpu", min_points: int = 10) -> list[Points]:
    """Every workload with at least `min_points` distinct valid schedules across the databases."""
    from autosched.target.key import Target
    from autosched.tuning.candidates import features_of_steps
    from autosched.workload import Workload
    from tuning_db import TuningDB

    target = Target.parse(target_key)
    kind, target_key = target.kind, target.key
    costs: dict[str, dict[str, list[float]]] = {}  # workload key -> steps hash -> medians
    steps: dict[str, dict[str, str]] = {}
    specs: dict[str, str] = {}
    for p in db_paths:
        if not p.exists():
            raise FileNotFoundError(f"database {p}: no such file")
        db = TuningDB(f"sqlite:///{p}")
        try:
            for info in db.workloads():
                specs.setdefault(info.key, info.spec)
                for r in db.records(info.key, target_key, ok_only=True):
                    if r.median and r.median > 0:
                        costs.setdefault(info.key, {}).setdefault(r.steps_hash, []).append(r.median)
                        steps.setdefault(info.key, {})[r.steps_hash] = r.steps_json
        finally:
            db.close()
    out = []
    for key, by_hash in costs.items():
        w = Workload.from_json(specs[key])
        xs, ys = [], []
        for h, meds in sorted(by_hash.items()):
            f = features_of_steps(w, steps[key][h], kind)
            if f is not None:
                xs.append(f)
                ys.append(w.flops / float(np.median(meds)))
        if len(ys) >= min_points:
            out.append(Points(f"{w.name}{tuple(w.args)}", key, w.name, np.array(xs), np.array(ys)))
    return out


def scores(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    from autosched.cost_model.metrics import pairwise_accuracy, top_k_recall

    return {"pairwise": float(pairwise_accuracy(y, p)), **{f"top{k}": float(top_k_recall(y, p, k)) for k in TOP_K}}


def held_out(points: list[Points], seed: int = 0, random_seeds: int = 10) -> list[dict]:
    """Leave one workload out: train on the others, rank the held-out one; the random model beside it."""
    from autosched.cost_model.random_model import RandomModel
    from autosched.cost_model.xgb_model import XGBModel

    if len(points) < 2:
        raise ValueError(f"held-out accuracy needs records of at least 2 workloads, got {len(points)}"
                         + (f" ({points[0].name})" if points else ""))
    rows = []
    for test in points:
        train = [p for p in points if p.key != test.key]
        m = XGBModel(seed=seed, min_samples=8)
        m.fit(np.concatenate([p.x for p in train]), np.concatenate([p.y for p in train]),
              [p.key for p in train for _ in range(len(p.y))])
        rnd = [scores(test.y, RandomModel(seed=s).predict(test.x)) for s in range(random_seeds)]
        rows.append({"held_out": test.name, "trained_on": [p.name for p in train],
                     "same_operator_in_training": any(p.op == test.op for p in train),
                     "train_points": int(sum(len(p.y) for p in train)), "test_points": int(len(test.y)),
                     "xgb": scores(test.y, m.predict(test.x)),
                     "random": {k: float(np.mean([r[k] for r in rnd])) for k in rnd[0]}})
    return rows


def table(rows: list[dict]) -> list[str]:
    ks = "".join(f" top-{k} recall xgb / random |" for k in TOP_K)
    out = ["| held-out workload | trained on | same operator in training | train / test points | "
           f"pairwise xgb / random |{ks}", "|---|---|---|---|---|" + "---|" * len(TOP_K)]
    for r in rows:
        x, rd = r["xgb"], r["random"]
        tops = "".join(f" {x[f'top{k}']:.2f} / {rd[f'top{k}']:.2f} |" for k in TOP_K)
        same = "yes" if r["same_operator_in_training"] else "no"
        out.append(f"| {r['held_out']} | {', '.join(r['trained_on'])} | {same}"
                   f" | {r['train_points']} / {r['test_points']} | {x['pairwise']:.3f} / {rd['pairwise']:.3f} |{tops}")
    return out


def main(argv: list[str] | None = None) -> dict:
    from common import command_line, machine, machine_tag

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dbs", nargs="+", type=Path, required=True, help="SQLite tuning databases")
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--min-points", type=int, default=10)
    ap.add_argument("--random-seeds", type=int, default=10)
    ap.add_argument("--tag", default=None)
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    a = ap.parse_args(argv)
    points = load_points(a.dbs, a.target, a.min_points)
    rows = held_out(points, random_seeds=a.random_seeds)
    out = {"machine": machine(), "command": command_line("bench_cost_model_heldout.py"), "protocol": __doc__,
           "databases": len(a.dbs), "workloads": {p.name: len(p.y) for p in points}, "rows": rows}
    tag = a.tag or machine_tag()
    a.out_dir.mkdir(parents=True, exist_ok=True)
    stem = a.out_dir / f"cost_model_heldout_{tag}"
    stem.with_suffix(".json").write_text(json.dumps(out, indent=1))
    md = [f"# Cost model: held-out workloads ({tag})", "", f"`{out['command']}`", "",
          "One point per distinct schedule (median cost over its records); the model never saw the held-out "
          "workload's records. Random model: mean of "
          f"{a.random_seeds} seeds.", "", *table(rows), ""]
    stem.with_suffix(".md").write_text("\n".join(md))
    print("\n".join(md))
    return out


if __name__ == "__main__":
    main()
