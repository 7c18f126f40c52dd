"""Tuning curves rebuilt from re-measured schedules, for the search-efficiency benchmark.

Why: a curve point is the best *single* measurement so far, and on a shared 2-core VM one
measurement of a schedule can be 10-20% lucky. A run that measures many near-equal good schedules
(a model-guided one) keeps drawing from that noise, so its final best creeps up by luck alone, and
"95% of its own final" becomes a bar set by its luckiest draw. The tuner answers the same problem
for its result by timing its top schedules again (`TaskTuner.verify`); here the top schedules of
every run are timed again the same way, all runs' together in rotated rounds, and each schedule is
then judged by the upper median of all its measurements (`tuning_db.ranking.upper_median`, as the
database judges it). Schedules no run ranks near its top keep their single measurement.
"""

from __future__ import annotations

import math

import numpy as np


class TrialTrace:
    """on_batch callback: each trial's schedule (steps hash, None when it failed) and the mean
    throughput of the candidates the run measured (failures count 0)."""

    def __init__(self) -> None:
        self.n, self.sum = 0, 0.0
        self.hashes: list[str | None] = []
        self.costs: list[float] = []
        self.steps: dict[str, str] = {}
        self.mean_proposal_gflops = 0.0

    def __call__(self, task) -> None:
        new = task.searcher.history[self.n:]
        for cfg, cost in new:
            ok = math.isfinite(cost)
            c = task.cands.get(cfg) if ok else None
            self.hashes.append(c.steps_hash if ok else None)
            self.costs.append(cost)
            if ok:
                self.steps[c.steps_hash] = c.steps_json
                self.sum += task.workload.flops / cost / 1e9
        self.n += len(new)
        self.mean_proposal_gflops = self.sum / max(1, self.n)


def remeasure_tops(tasks: list, top: int = 8, rounds: int = 3, passes: int = 3) -> dict[str, list[float]]:
    """Time each run's `top` best schedules again `rounds` times; repeat while a run's top holds a
    schedule timed once (a lucky single measurement that now ranks above re-measured ones).
    Returns every schedule's measurements (seconds): its first one, plus the re-measurements."""
    from autosched.compile.types import MeasureInput
    from tuning_db.ranking import upper_median

    first = tasks[0]
    w, target_key, measurer = first.workload, first.target.key, first.measurer
    samples: dict[str, list[float]] = {}
    steps: dict[str, str] = {}
    for t in tasks:
        for h, c in zip(t.trace.hashes, t.trace.costs):
            if h is not None and h not in samples:
                samples[h] = [c]
        steps.update(t.trace.steps)
    timed_again: set[str] = set()
    for _ in range(passes):
        value = {h: upper_median(v) for h, v in samples.items()}
        todo: list[str] = []
        for t in tasks:
            ranked = sorted({h for h in t.trace.hashes if h is not None}, key=lambda h: (value[h], h))
            todo += [h for h in ranked[:top] if h not in timed_again and h not in todo]
        if not todo:
            break
        for r in range(rounds):
            order = todo[r % len(todo):] + todo[: r % len(todo)]  # rotate: none is always timed first
            inputs = [MeasureInput(w.key, w.to_json(), target_key, steps[h]) for h in order]
            for h, res in zip(order, measurer.measure(inputs)):
                if res.ok:
                    samples[h].append(res.median)
        timed_again.update(todo)
    return samples


def remeasured_curve(trace: TrialTrace, samples: dict[str, list[float]], flops: float, trials: int) -> list[float]:
    """Best GFLOP/s so far per trial, each schedule valued by the upper median of its measurements."""
    from tuning_db.ranking import upper_median

    best, out = math.inf, []
    for h in trace.hashes[:trials]:
        if h is not None:
            best = min(best, upper_median(samples[h]))
        out.append(flops / best / 1e9 if math.isfinite(best) else 0.0)
    out += [out[-1] if out else 0.0] * (trials - len(out))
    return out


def mean_curve(runs: list[list[float]]) -> list[float]:
    return [float(v) for v in np.mean(np.array(runs), axis=0)]
