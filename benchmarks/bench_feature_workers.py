"""What the feature workers save: seconds a model-guided batch spends proposing, serial vs workers.

Each guided searcher tunes matmul (default 512^3) with the XGBoost model against a synthetic
measurer (a cost derived from the schedule's steps, the same for the same schedule), so the time
of a batch is the searcher's own: sampling, mutating, making candidates (apply, lower, features;
on cuda also render) and predicting. Serial runs and runs with workers alternate, round by round,
and every pair must produce the same tuning curve (the workers change the speed, never the
search). No GPU needed: the cuda target's candidates are lowered and rendered on the CPU.

    .venv/bin/python benchmarks/bench_feature_workers.py --kinds cpu cuda --out bench_feature_workers
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


class SyntheticMeasurer:
    """Cost from a hash of the steps: repeatable, no device, no build."""

    def measure(self, inputs):
        from autosched.compile.types import ErrorCode
        from autosched.measure.types import MeasureResult

        return [MeasureResult((1e-4 * (1 + int(hashlib.sha1(i.steps_json.encode()).hexdigest()[:6], 16) % 997 / 100),),
                              ErrorCode.NO_ERROR) for i in inputs]


def one_run(op: str, args: list[int], kind: str, searcher: str, steps: int, workers: int):
    from autosched.target.key import Target
    from autosched.tuning.tuner import TaskTuner, TuneOptions
    from autosched.workload import Workload

    os.environ["AUTOSCHED_FEATURE_WORKERS"] = str(workers)
    w = Workload.create(op, *args)
    t = TaskTuner(w, Target.parse(kind), SyntheticMeasurer(), TuneOptions(16 * steps, 16, searcher, "xgb", 0))
    seconds = []
    while not t.done:
        t0 = time.perf_counter()
        t.step()
        seconds.append(time.perf_counter() - t0)
    return seconds, t.curve, t.cands.made_by_workers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", default="matmul")
    ap.add_argument("--args", nargs="+", type=int, default=[512, 512, 512])
    ap.add_argument("--kinds", nargs="+", default=["cpu", "cuda"])
    ap.add_argument("--searchers", nargs="+", default=["random", "annealing", "genetic", "rl"])
    ap.add_argument("--steps", type=int, default=2, help="batches of 16 per run")
    ap.add_argument("--rounds", type=int, default=2, help="serial/worker pairs per (kind, searcher)")
    ap.add_argument("--workers", type=int, default=0, help="0: the pool's default (CPU count, at most 8)")
    ap.add_argument("--out", default="bench_feature_workers")
    a = ap.parse_args()

    from common import command_line, machine, write_results

    from autosched.tuning import feature_pool

    workers = a.workers or min(8, os.cpu_count() or 1)
    if workers < 2:
        raise SystemExit("the feature workers need at least 2 CPUs to compare (this machine has 1)")
    t0 = time.perf_counter()
    # start the pool (spawned workers import autosched) before anything is timed, and time that once
    _, _, started = one_run("matmul", [64, 64, 64], "cpu", "random", 1, workers)
    if not started:
        raise SystemExit(f"the feature workers did not start: {feature_pool._disabled_reason or 'unknown'}")
    startup_s = time.perf_counter() - t0
    print(f"pool of {workers} workers started and warmed in {startup_s:.1f} s", flush=True)
    rows = []
    for kind in a.kinds:
        for searcher in a.searchers:
            serial_s, worker_s, made = [], [], 0
            for r in range(a.rounds):
                order = [1, workers] if r % 2 == 0 else [workers, 1]
                curves = {}
                for n in order:
                    secs, curve, by_workers = one_run(a.op, a.args, kind, searcher, a.steps, n)
                    (serial_s if n == 1 else worker_s).extend(secs)
                    curves[n] = curve
                    made += by_workers if n > 1 else 0
                if curves[1] != curves[workers]:
                    raise SystemExit(f"{kind} {searcher}: the run with workers took another path than the serial run")
            row = {"kind": kind, "searcher": searcher, "serial_median_s": float(np.median(serial_s)),
                   "workers_median_s": float(np.median(worker_s)), "batches": len(serial_s),
                   "made_by_workers": made, "serial_s": serial_s, "workers_s": worker_s}
            row["speedup"] = row["serial_median_s"] / row["workers_median_s"]
            rows.append(row)
            print(f"{kind:6s} {searcher:10s} serial {row['serial_median_s']:6.1f} s/batch  "
                  f"{workers} workers {row['workers_median_s']:6.1f} s/batch  {row['speedup']:.2f}x  "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    lines = [f"| target | searcher (guided by xgb) | serial: s per batch | {workers} workers: s per batch | "
             "speed-up | batches timed each | candidates made by workers |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['searcher']} | {r['serial_median_s']:.1f} | {r['workers_median_s']:.1f} | "
                     f"{r['speedup']:.2f}x | {r['batches']} | {r['made_by_workers']} |")
    command = command_line("bench_feature_workers.py")
    write_results(a.out, {"machine": machine(), "workload": [a.op, a.args], "workers": workers,
                                    "startup_s": startup_s, "rows": rows},
                  "\n".join(lines) + f"\n\nPool start and a first guided batch of matmul 64³: {startup_s:.1f} s.",
                  "Model-guided proposal time, serial vs feature workers",
                  method=(f"Command: `{command}`. {a.op}{tuple(a.args)}, XGBoost-guided searchers with their "
                          "default options, a synthetic measurer (cost from a hash of the steps), so a batch's "
                          f"time is the search's own. Runs of {16 * a.steps} trials (guided batches ramp up from 8); "
                          f"medians over {a.rounds} rounds of every batch; serial "
                          "and worker runs alternate, and each pair's tuning curves were checked equal."))


if __name__ == "__main__":
    main()
