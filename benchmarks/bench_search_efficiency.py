"""Search efficiency: tuning curves for every searcher, with and without the XGBoost model.

For each (searcher, model) pair and each seed, a tuning run of `--trials` trials on the workload;
curves are best GFLOP/s so far against trials, averaged over seeds. All runs share one database,
so a schedule measured once is looked up (not re-timed) when another run proposes it: the curves
compare which schedules each searcher proposes, on one set of measurements. Reported: trials to
reach 95% of each curve's own final best (the issue's wording) and trials to reach 95% of random
search's final best (one common bar, so a searcher that stalls early cannot look fast), both
against random search without a model; and the cost model's pairwise ranking accuracy and top-k
recall on held-out records (and on another workload).

With `--warm OP:ARGS ...` the database first holds tuning records of those other workloads, as a
team's database does: model-guided runs start from a model trained on them (the tuner's warm
start), random and model-free runs ignore them.

Run: `.venv/bin/python benchmarks/bench_search_efficiency.py --trials 64 --seeds 3 \
        --warm matmul:512,512,512 dense_bias_relu:384,384,384`
"""

from __future__ import annotations

import os

# both OpenMP runtimes (ours and torch's) spin a while between calls, as a kernel loaded by autosched does
# (build_module and the measurement sandbox set this): a sleeping pool's wake-up costs milliseconds per
# call on these VMs, which would time the hypervisor. Contenders are timed in turns with a pause between
# them, so one's spinning pool does not tax the next. Set before either runtime loads.
os.environ.setdefault("GOMP_SPINCOUNT", "10000000")

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from remeasure import TrialTrace, mean_curve, remeasure_tops, remeasured_curve  # noqa: E402

SEARCHERS = ("random", "annealing", "genetic", "rl")


def trials_to(curve: list[float], frac: float, final: float | None = None) -> int | None:
    """First trial whose best reaches `frac` of `final` (default: the curve's own last value); None if never."""
    final = curve[-1] if final is None else final
    for k, v in enumerate(curve, 1):
        if v >= frac * final:
            return k
    return None


def warm_model_accuracy(db, w, target) -> dict:
    """The tuner's warm-start model (other workloads' records only) ranking this workload's records."""
    from autosched.cost_model.metrics import pairwise_accuracy, top_k_recall
    from autosched.cost_model.xgb_model import XGBModel
    from autosched.tuning.api import warm_start
    from autosched.tuning.candidates import features_of_steps

    m = XGBModel(seed=0)
    n = warm_start(m, db, target, exclude_key=w.key)
    xs, ys = [], []
    for rec in db.records(w.key, target.key, ok_only=True):
        f = features_of_steps(w, rec.steps_json, target.kind)
        if f is not None and rec.median:
            xs.append(f)
            ys.append(w.flops / rec.median)
    if not m.is_trained or len(ys) < 10:
        return {"warm_records": n}
    p = m.predict(np.array(xs))
    return {"warm_records": n, "warm_pairwise_accuracy": float(pairwise_accuracy(np.array(ys), p)),
            "warm_top5_recall": float(top_k_recall(np.array(ys), p, 5)), "warm_ranked": len(ys)}


def model_quality(db, w, other, target_key: str, seed: int = 0) -> dict:
    from autosched.cost_model.metrics import pairwise_accuracy, top_k_recall
    from autosched.cost_model.xgb_model import XGBModel
    from autosched.target.key import Target
    from autosched.tuning.candidates import features_of_steps

    kind = Target.parse(target_key).kind

    def data(wl):
        xs, ys = [], []
        for rec in db.records(wl.key, target_key, ok_only=True):
            f = features_of_steps(wl, rec.steps_json, kind)
            if f is not None and rec.median:
                xs.append(f)
                ys.append(wl.flops / rec.median)
        return np.array(xs), np.array(ys)

    x, y = data(w)
    if len(y) < 10:
        raise RuntimeError(f"only {len(y)} of {w.name}'s records on {target_key} have features and a time: "
                           "too few to score the cost model")
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(y))
    cut = int(0.8 * len(y))
    tr, te = idx[:cut], idx[cut:]
    m = XGBModel(seed=seed, min_samples=8)
    m.fit(x[tr], y[tr], [w.key] * len(tr))
    p = m.predict(x[te])
    out = {"records": int(len(y)), "held_out": int(len(te)),
           "pairwise_accuracy": float(pairwise_accuracy(y[te], p)),
           "top5_recall": float(top_k_recall(y[te], p, 5)),
           "random_pairwise_accuracy": float(pairwise_accuracy(y[te], rng.random(len(te))))}
    if other is not None:
        xo, yo = data(other)
        if len(yo) >= 10:
            po = m.predict(xo)
            out["transfer_to"] = other.name
            out["transfer_pairwise_accuracy"] = float(pairwise_accuracy(yo, po))
            out["transfer_top5_recall"] = float(top_k_recall(yo, po, 5))
    return out


def lockstep_tasks(w, db_url: str, searchers, seeds: int, trials: int, ablate: tuple[str, ...] = (),
                   objective: str | None = None, unguided: tuple[str, ...] | None = None, target: str = "cpu",
                   random_trials: int | None = None):
    """One tuner per (searcher, model, seed), all on one database and measurer. Model-guided runs
    start as `asc.tune` does (model warm-started from the other workloads' records, and the same
    operator's best schedules at other shapes measured first); searchers in `ablate` also run
    guided without those transferred schedules ("xgb-notransfer"), to show what each part brings;
    with `objective`, every searcher also runs guided by a model with that XGBoost objective
    ("xgb-<objective>"), side by side with the tuner's own. Searchers not in `unguided` (default: all)
    skip their run without the model; random search always runs without it (the baseline). `target` is
    any `Target.parse` spec ("cpu", "cuda", "triton"): the runs measure on that device. `random_trials`
    (default `trials`) is the budget of random search without the model, the baseline: a longer one
    tells how many trials it needs to reach a level the guided runs reach and it does not within `trials`."""
    from autosched.space.registry import make_space
    from autosched.target.key import Target
    from autosched.tuning.api import RecordToDB, add_transfer_seeds, default_measurer, open_db, register, warm_start
    from autosched.tuning.tuner import TaskTuner, TuneOptions, make_cost_model

    tgt = Target.parse(target)
    db = open_db(db_url)
    register(db, w, tgt)
    measurer = default_measurer(None, None, [RecordToDB(db)], kind=tgt.kind)
    known = {r.steps_hash: r.median for r in db.records(w.key, tgt.key, ok_only=True) if r.median}
    labels, tasks = [], {}
    for name in searchers:
        plain = [(None, False, None)] if unguided is None or name in unguided or name == "random" else []
        variants = [("xgb", True, None)] + plain + \
            ([("xgb", False, None)] if name in ablate else []) + ([("xgb", True, objective)] if objective else [])
        for model_name, transfer, obj in variants:
            label = name + ("" if model_name is None else "+xgb" if transfer else "+xgb-notransfer")
            label += f"-{obj.split(':')[-1]}" if obj else ""
            labels.append(label)
            tasks[label] = []
            for seed in range(seeds):
                model = make_cost_model(model_name, seed)
                if obj:
                    model.objective = obj
                if model is not None:
                    warm_start(model, db, tgt, exclude_key=w.key, seed=seed)
                # the space without its rule-derived seeds (`space_seeds`): every run would measure the
                # same GEMM seeds first, and this compares how the searchers and the model find good points
                space = make_space(w, tgt.kind)
                space.seeds = ()
                budget = random_trials if (random_trials and name == "random" and model_name is None) else trials
                t = TaskTuner(w, tgt, measurer, TuneOptions(budget, 16, name, model_name, seed, transfer=transfer),
                              known=known, model=model, space=space)
                add_transfer_seeds(t, db)
                t.known = known  # shared: a schedule one run measured is looked up by the others
                t.trace = t.on_batch = TrialTrace()
                tasks[label].append(t)
    return labels, tasks


def run_lockstep(tasks: dict) -> None:
    """Batch k of every run before batch k+1 of any: the machine's speed drifts over a long run
    (a shared 2-core host), and run-after-run order would hand that drift to whichever searcher
    ran during the slow minutes. The order inside a round rotates for the same reason."""
    flat = [t for group in tasks.values() for t in group]
    total = sum(t.options.trials for t in flat)
    t0 = time.perf_counter()
    rnd = 0
    while any(not t.done for t in flat):
        k = rnd % len(flat)
        for t in flat[k:] + flat[:k]:
            if not t.done:
                t.step()
        rnd += 1
        # a run stopped at a time limit still shows how far it got and at what pace
        print(f"round {rnd}: {sum(t.trials for t in flat)}/{total} trials ({time.perf_counter() - t0:.0f} s)",
              flush=True)


def cut_random(curves: dict[str, list[float]], trials: int) -> list[float]:
    """Cut random search's curve in `curves` to `trials` points, so every comparison is at one budget, and
    return its whole (possibly longer, `--random-trials`) curve for "random's trials to that level"."""
    whole = curves["random"]
    curves["random"] = whole[:trials]
    return whole


def summarize(labels: list[str], tasks: dict, curves: dict[str, list[float]], trials: int,
              random_long: list[float] | None = None) -> list[dict]:
    """One row per (searcher, model): trials to 95% of its own final, and the same against random search
    in three readings (random's own 95% point, the level this run reaches, random's final). `curves`
    hold `trials` points each; `random_long` is random search's curve over its whole (longer) budget,
    used only for how many trials random search needs to reach each run's level."""
    random_long = curves["random"] if random_long is None else random_long
    rows = []
    for label in labels:
        mean = curves[label]
        name, _, model = label.partition("+")
        rows.append({"label": label, "searcher": name, "model": model or "none", "final_gflops": mean[-1],
                     "transfer_seeds": [len(t.transfer_seeds) for t in tasks[label]],
                     "trials_to_95pct": trials_to(mean, 0.95),
                     "mean_candidate_gflops": float(np.mean([t.trace.mean_proposal_gflops for t in tasks[label]]))})
    rand = next(r for r in rows if r["searcher"] == "random" and r["model"] == "none")
    bar = 0.95 * rand["final_gflops"]
    for r in rows:
        r["vs_random_trials"] = r["trials_to_95pct"] / max(1, rand["trials_to_95pct"])
        r["met_half_of_random_own"] = r["trials_to_95pct"] <= rand["trials_to_95pct"] / 2
        r["trials_to_random_bar"] = trials_to(curves[r["label"]], 1.0, bar)
    rbar = rand["trials_to_random_bar"]
    for r in rows:
        t = r["trials_to_random_bar"]
        r["vs_random_bar"] = None if t is None else t / max(1, rbar)
        # the test read as one level: this run reaches 95% of its final best at trial t; how many
        # trials does random search need to reach that same level (None: not within the budget)?
        level = 0.95 * r["final_gflops"]
        r["random_trials_to_level"] = trials_to(random_long, 1.0, level)
        r["random_budget"] = len(random_long)
        rt = r["random_trials_to_level"]
        # random search not there within its budget: it needs more than that many trials
        r["met_half_of_random"] = (r["trials_to_95pct"] <= len(random_long) / 2) if rt is None else \
            (r["trials_to_95pct"] <= rt / 2)
    return rows


def table_lines(rows: list[dict]) -> list[str]:
    lines = ["| searcher | cost model | final best (GFLOP/s, mean of seeds) | trials to 95% of own final | "
             "vs random's own 95% | at most half of it? | random's trials to that same level | at most half of it? | "
             "trials to 95% of random's final | vs random | mean of all measured candidates (GFLOP/s) | "
             "transferred seeds per run |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, v, rt = r["trials_to_random_bar"], r["vs_random_bar"], r["random_trials_to_level"]
        lines.append(f"| {r['searcher']} | {r['model']} | {r['final_gflops']:.1f} | {r['trials_to_95pct']} | "
                     f"{r['vs_random_trials']:.2f} | {'yes' if r['met_half_of_random_own'] else 'no'} | "
                     f"{'> ' + str(r['random_budget']) if rt is None else rt} | "
                     f"{'yes' if r['met_half_of_random'] else 'no'} | {'never' if t is None else t} | "
                     f"{'—' if v is None else f'{v:.2f}'} | {r['mean_candidate_gflops']:.1f} | "
                     f"{'/'.join(str(n) for n in r['transfer_seeds'])} |")
    return lines


def print_rows(tag: str, rows: list[dict]) -> None:
    for r in rows:
        print(f"{tag}{r['label']:14s} final {r['final_gflops']:7.1f} GFLOP/s  95% at trial {r['trials_to_95pct']}  "
              f"random to that level {r['random_trials_to_level']}  random's final at {r['trials_to_random_bar']}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", default="matmul")
    ap.add_argument("--args", nargs="+", type=int, default=[256, 256, 256])
    ap.add_argument("--transfer-op", default="dense_bias_relu")
    ap.add_argument("--transfer-args", nargs="+", type=int, default=[256, 256, 256])
    ap.add_argument("--trials", type=int, default=96)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--searchers", nargs="*", default=list(SEARCHERS))
    ap.add_argument("--warm", nargs="*", default=[], metavar="OP:A,B,C",
                    help="other workloads tuned into the database first (warm start for the model)")
    ap.add_argument("--warm-trials", type=int, default=64)
    ap.add_argument("--random-trials", type=int, default=None,
                    help="budget of random search without the model (default: --trials); a longer one measures "
                         "how many trials it needs to reach the guided runs' levels")
    ap.add_argument("--ablate", nargs="*", default=[], metavar="SEARCHER",
                    help="also run these searchers guided without the transferred schedules (xgb-notransfer)")
    ap.add_argument("--unguided", nargs="*", default=None, metavar="SEARCHER",
                    help="searchers that also run without the model (default: all; random always does)")
    ap.add_argument("--remeasure-top", type=int, default=8,
                    help="after the runs, time each run's top N schedules again and report curves on medians (0: off)")
    ap.add_argument("--remeasure-rounds", type=int, default=3)
    from autosched.cost_model.xgb_model import OBJECTIVES

    ap.add_argument("--objective", default=None, choices=OBJECTIVES, help="also run every searcher guided by a "
                    "model with this XGBoost objective, side by side")
    ap.add_argument("--target", default="cpu", help="where the runs measure: cpu, cuda or triton (a GPU for the "
                    "last two)")
    ap.add_argument("--out", default="search_efficiency",
                    help="results stem under benchmarks/results/ (.md, .json, .png)")
    a = ap.parse_args()

    from common import command_line, machine, write_results

    import autosched as asc
    from autosched.target.key import Target
    from autosched.tuning.api import open_db, plot_curves
    from autosched.workload import Workload

    tgt = Target.parse(a.target)  # a bad name is refused before any tuning
    if a.random_trials is not None and a.random_trials < a.trials:
        ap.error(f"--random-trials ({a.random_trials}) must be at least --trials ({a.trials})")
    w = Workload.create(a.op, *a.args)
    other = Workload.create(a.transfer_op, *a.transfer_args) if a.transfer_op else None
    t_start = time.perf_counter()
    tmp = tempfile.mkdtemp()
    db_url = f"sqlite:///{tmp}/eff.db"
    curves, rows = {}, []
    warm = []
    for spec in a.warm:
        op, _, args = spec.partition(":")
        ww = Workload.create(op, *[int(v) for v in args.split(",")])
        r = asc.tune(ww, a.target, a.warm_trials, db=db_url, progress=False)
        warm.append({"workload": ww.name, "key": ww.key, "trials": a.warm_trials, "best_gflops": r.best_gflops})
        print(f"warm: {ww.name} {a.warm_trials} trials, best {r.best_gflops:.1f} GFLOP/s "
              f"({time.perf_counter() - t_start:.0f} s since start)", flush=True)
    random_trials = a.trials if a.random_trials is None else a.random_trials
    labels, tasks = lockstep_tasks(w, db_url, a.searchers, a.seeds, a.trials, tuple(a.ablate), a.objective,
                                   None if a.unguided is None else tuple(a.unguided), a.target, random_trials)
    run_lockstep(tasks)
    print(f"runs done ({time.perf_counter() - t_start:.0f} s since start)", flush=True)
    for label in labels:
        runs = []
        for t in tasks[label]:
            n = t.options.trials
            c = [g for _, g in t.curve]
            c += [c[-1]] * (n - len(c)) if c else [0.0] * n
            runs.append(c[:n])
        curves[label] = mean_curve(runs)
    random_long = cut_random(curves, a.trials)
    rows = summarize(labels, tasks, curves, a.trials, random_long)
    print_rows("", rows)  # before the re-measurement: a run cut short there still shows its raw figures
    remeasured_rows, remeasured = [], {}
    if a.remeasure_top > 0:
        flat = [t for label in labels for t in tasks[label]]
        samples = remeasure_tops(flat, a.remeasure_top, a.remeasure_rounds)
        for label in labels:
            remeasured[label] = mean_curve([remeasured_curve(t.trace, samples, w.flops, t.options.trials)
                                            for t in tasks[label]])
        remeasured_rows = summarize(labels, tasks, remeasured, a.trials, cut_random(remeasured, a.trials))
        print(f"re-measured {sum(len(v) > 1 for v in samples.values())} schedules "
              f"{a.remeasure_rounds}x (each run's top {a.remeasure_top})", flush=True)
    print_rows("re-measured ", remeasured_rows)
    if other is not None:
        asc.tune(other, a.target, a.trials, db=db_url, progress=False)
    db = open_db(db_url)
    quality = model_quality(db, w, other, tgt.key)
    if warm:
        quality.update(warm_model_accuracy(db, w, tgt))
    plotted = {k: list(enumerate(v, 1)) for k, v in curves.items()}
    if random_trials > a.trials:
        plotted[f"random ({random_trials} trials)"] = list(enumerate(random_long, 1))
    plot_curves(plotted, HERE / "results" /
                f"{a.out}.png", title=f"{a.op}{tuple(a.args)}: mean of {a.seeds} seeds")
    payload = {"machine": machine(), "target": tgt.key, "workload": [a.op, a.args], "trials": a.trials,
               "seeds": a.seeds, "random_trials": random_trials, "random_long_curve": random_long,
               "warm": warm, "rows": rows, "curves": curves, "cost_model": quality,
               "remeasure": {"top": a.remeasure_top, "rounds": a.remeasure_rounds},
               "remeasured_rows": remeasured_rows, "remeasured_curves": remeasured}
    lines = table_lines(rows)
    if remeasured_rows:
        lines += ["", f"The same runs with each run's top {a.remeasure_top} schedules timed {a.remeasure_rounds} more "
                  "times (all runs' together, rotated rounds) and every schedule valued by the upper median of its "
                  "measurements (`benchmarks/remeasure.py`):", ""] + table_lines(remeasured_rows)
    if warm:
        lines += ["", "Database before the runs (warm start for the model-guided runs): " + "; ".join(
            f"{x['workload']} ({x['trials']} trials, best {x['best_gflops']:.0f} GFLOP/s)" for x in warm) + "."]
    q = quality
    lines += ["", f"Cost model on held-out records of {a.op}: pairwise accuracy {q['pairwise_accuracy']:.3f} "
              f"(random scores: {q['random_pairwise_accuracy']:.3f}), top-5 recall {q['top5_recall']:.2f} "
              f"({q['held_out']} held out of {q['records']})."]
    if "warm_pairwise_accuracy" in q:
        lines.append(f"Warm-start model (trained on the other workloads' {q['warm_records']} records only) ranking "
                     f"{a.op}'s {q['warm_ranked']} records: pairwise accuracy {q['warm_pairwise_accuracy']:.3f}, "
                     f"top-5 recall {q['warm_top5_recall']:.2f}.")
    if "transfer_to" in q:
        lines.append(f"Trained on {a.op}, ranking {q['transfer_to']}'s records: pairwise accuracy "
                     f"{q['transfer_pairwise_accuracy']:.3f}, top-5 recall {q['transfer_top5_recall']:.2f}.")
    command = command_line("bench_search_efficiency.py")
    write_results(a.out, payload, "\n".join(lines) + f"\n\n![curves]({a.out}.png)",
                  "Search efficiency of the searchers, with and without the cost model",
                  method=(f"Command: `{command}`. "
                          f"Workload {a.op}{tuple(a.args)} on target `{tgt.key}`, {a.trials} trials per run, "
                          + (f"random search without the model run on to {random_trials} trials (all comparisons "
                             f"at {a.trials} trials but how many trials it needs to reach each run's level), "
                             if random_trials > a.trials else "") +
                          f"{a.seeds} seeds per "
                          "(searcher, model); runs share one database, so a schedule is measured once and looked "
                          "up by the others. Model-guided runs start as `asc.tune` does: the model warm-started "
                          "from the other workloads' records, and the best stored schedules of the same operator "
                          "at other shapes moved onto this workload's knobs and measured first (transferred seeds, "
                          "`autosched/tuning/transfer.py`); runs without a model use their own measurements "
                          "alone. All runs advance in lockstep (batch k of every run before batch k+1 "
                          "of any): the machine's drift over the run is shared by all. Curves are means over seeds."))


if __name__ == "__main__":
    main()
