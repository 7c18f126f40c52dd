"""Model-guided search variants without transferred schedules, side by side with random search.

Why: the efficiency runs (bench_search_efficiency.py) show that the guided runs' early lead comes from
the transferred schedules (its --ablate rows); this compares what the model alone does under searcher
options (diversity-aware batches, a larger random share) and with or without the warm start, on one
database in lockstep, so every variant sees the same machine drift.

Run: `.venv/bin/python benchmarks/bench_guided_variants.py --trials 96 --seeds 3 --out guided_variants`
(the variants are the VARIANTS table; the database warms itself with 64 trials each of matmul 512^3
and dense+bias+relu 384^3 when it holds none).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

VARIANTS: dict[str, tuple[str, str | None, bool, dict]] = {
    # label: (searcher, cost model, warm-started from the other workloads' records, searcher options)
    "random": ("random", None, False, {}),
    "genetic+xgb (warm, no transfer)": ("genetic", "xgb", True, {}),
    "genetic+xgb (warm, no transfer), diversity 1": ("genetic", "xgb", True, {"diversity": 1.0}),
    "genetic+xgb (warm, no transfer), eps 0.25": ("genetic", "xgb", True, {"eps_greedy": 0.25}),
    "genetic+xgb (cold)": ("genetic", "xgb", False, {}),
    "genetic+xgb (cold), diversity 1": ("genetic", "xgb", False, {"diversity": 1.0}),
}
POINTS = (1, 8, 16, 24, 32, 48, 64, 80, 96, 128, 160, 200)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=96)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--db", default=None, help="database URL (default: a new SQLite file)")
    ap.add_argument("--out", default="guided_variants")
    a = ap.parse_args()

    from bench_search_efficiency import run_lockstep, trials_to
    from common import machine, write_results

    import autosched as asc
    from autosched.space.registry import make_space
    from autosched.target.key import Target
    from autosched.tuning.api import RecordToDB, default_measurer, open_db, register, warm_start
    from autosched.tuning.tuner import TaskTuner, TuneOptions, make_cost_model
    from autosched.workload import Workload

    db_url = a.db or f"sqlite:///{tempfile.mkdtemp()}/variants.db"
    w, tgt = Workload.create("matmul", 256, 256, 256), Target.host()
    db = open_db(db_url)
    for ww in (Workload.create("matmul", 512, 512, 512), Workload.create("dense_bias_relu", 384, 384, 384)):
        if not db.records(ww.key, tgt.key, ok_only=True):
            r = asc.tune(ww, "cpu", 64, db=db_url, progress=False)
            print(f"warm: {ww.name} 64 trials, best {r.best_gflops:.1f} GFLOP/s", flush=True)
    register(db, w, tgt)
    measurer = default_measurer(None, None, [RecordToDB(db)], kind=tgt.kind)
    known = {r.steps_hash: r.median for r in db.records(w.key, tgt.key, ok_only=True) if r.median}
    info = machine()
    tasks: dict[str, list[TaskTuner]] = {}
    for label, (searcher, model_name, warm, opts) in VARIANTS.items():
        tasks[label] = []
        for seed in range(a.seeds):
            model = make_cost_model(model_name, seed)
            if model is not None and warm:
                warm_start(model, db, tgt, exclude_key=w.key, seed=seed)
            space = make_space(w, tgt.kind)
            space.seeds = ()  # no rule-derived seeds: this compares how the searches find good points
            t = TaskTuner(w, tgt, measurer, TuneOptions(a.trials, 16, searcher, model_name, seed,
                                                        searcher_options=opts, verify=0, transfer=False),
                          known=known, model=model, space=space)
            t.known = known  # shared: a schedule one run measured is looked up by the others
            tasks[label].append(t)
    t0 = time.perf_counter()
    run_lockstep(tasks)
    seconds = time.perf_counter() - t0
    rows, curves = [], {}
    points = [p for p in POINTS if p <= a.trials]
    for label, ts in tasks.items():
        runs = []
        for t in ts:
            c = [g for _, g in t.curve]
            c += [c[-1]] * (a.trials - len(c))
            runs.append(c[: a.trials])
        mean = np.mean(runs, axis=0)
        curves[label] = mean.tolist()
        rows.append({"label": label, "trials_to_95pct": trials_to(list(mean), 0.95),
                     "final_gflops": float(mean[-1]), "per_seed_finals": [float(r[-1]) for r in runs],
                     "curve_at": {p: float(mean[p - 1]) for p in points}})
        print(f"{label:46s} 95% at {rows[-1]['trials_to_95pct']}  final {mean[-1]:.1f}", flush=True)
    head = "| variant | trials to 95% of own final | final (mean) | per-seed finals | " + \
        " | ".join(f"@{p}" for p in points) + " |"
    lines = [head, "|" + "---|" * (4 + len(points))]
    for r in rows:
        lines.append(f"| {r['label']} | {r['trials_to_95pct']} | {r['final_gflops']:.1f} | "
                     + ", ".join(f"{v:.0f}" for v in r["per_seed_finals"]) + " | "
                     + " | ".join(f"{r['curve_at'][p]:.0f}" for p in points) + " |")
    payload = {"machine": info, "workload": ["matmul", [256, 256, 256]], "trials": a.trials, "seeds": a.seeds,
               "seconds": seconds, "rows": rows, "curves": curves}
    method = (f"Command: `.venv/bin/python benchmarks/bench_guided_variants.py --trials {a.trials} --seeds {a.seeds} "
              f"--out {a.out}`. Workload matmul 256^3, batches of 16 (ramped from 8 with a model), no rule seeds, "
              f"no transferred schedules; curves are the best single measurement so far (GFLOP/s), mean of seeds.")
    write_results(a.out, payload, "\n".join(lines), "Model-guided search without transferred schedules", method)
    print(json.dumps({r["label"]: r["trials_to_95pct"] for r in rows}))


if __name__ == "__main__":
    main()
